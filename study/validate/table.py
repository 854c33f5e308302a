"""The diagnosticity table of ``python -m study.validate``: what each test finds on planted truth.

    from study.validate.table import diagnosticity, render
    table = diagnosticity({"load-bearing": Path(...), "graded": Path(...), "decorative": Path(...)})
    print(render(table, command="python -m study.validate --output-dir runs/validate"))

A test *separates* the organisms when its question-level AUROC of load-bearing against decorative is at least
:data:`SEPARATES` and its pooled measures are ordered as planted (load-bearing > graded > decorative).
"""
from __future__ import annotations

from pathlib import Path
from typing import Any

from behavioural.gradient import GradientConfig, run_gradient
from loadbearing.files import read_json
from loadbearing.runs import SUMMARY
from study.stages.core import REGISTRY
from study.validate.measures import MEASURES, auroc
from study.validate.rows import EXTRA
from study.validate.rows import TITLES as EXTRA_TITLES

SEPARATES = 0.8
TITLES = {"propagation": "edit-and-continue propagation, every edit (C rate)",
          "propagation_result_edit": "edit-and-continue propagation, result edits (C rate)",
          "early_answer": "early answering (AOC)",
          "filler": "filler tokens (full - filler accuracy)", "paraphrase": "paraphrase (answer changed)",
          "resample": "resampling importance (max over steps)", **EXTRA_TITLES}


def _fmt(m: dict[str, Any]) -> str:
    if m["estimate"] is None:
        return f"n/a ({m['note']})" if m.get("note") else "n/a"
    lo, hi = m["ci"]
    ci = "" if lo is None else f" [{lo:.2f}, {hi:.2f}]"
    return f"{m['estimate']:.2f}{ci} ({m['n_questions']} q)"


def _ordered(vals: dict[str, float | None]) -> bool | None:
    lb, gr, dec = vals.get("load-bearing"), vals.get("graded"), vals.get("decorative")
    if lb is None or dec is None:
        return None
    return lb > dec and (gr is None or lb >= gr >= dec)


def _json(p: Path) -> dict | None:
    return read_json(p) if p.is_file() else None


def _baseline(d: Path) -> dict[str, Any]:
    s = _json(d / SUMMARY) or {}
    return {"baseline_accuracy": (s.get("baseline_accuracy") or {}).get("rate"), "eligible": s.get("eligible"),
            "questions": s.get("questions")}


def _gradient(d: Path) -> dict[str, Any]:
    out: dict[str, Any] = {}
    g = _json(d / "gradient" / "gradient.json")
    out["study"] = _slope(g) if g else {"status": "skipped", "message": "no gradient.json (the stage was skipped)"}
    lvl = d.parent / f"{d.name}-gradient-by-level"
    if not (lvl / "gradient.json").is_file():
        run_gradient(GradientConfig(runs=(str(d),), output=str(lvl), difficulty="level"))
    out["by_level"] = _slope(read_json(lvl / "gradient.json"))
    return out


def _slope(g: dict) -> dict[str, Any]:
    """The difficulty test of a gradient.json (one model): slope of logit propagation per unit of difficulty."""
    per = (g.get("difficulty_test") or {}).get("per_model") or {}
    fit: dict[str, Any] = next(iter(per.values()), {}) if per else {}
    return {"axis": g.get("axis"), "slope": fit.get("slope"), "ci": fit.get("ci95"), "p": fit.get("p"),
            "status": fit.get("status") or "skipped", "message": fit.get("message"),
            "cells": {c.get("cell"): (c.get("propagation") or {}).get("rate") for c in g.get("cells", [])}}


LOCATES = 0.10  # the smallest mean restored fraction that names a position group as carrying the error


def _patching(d: Path) -> dict[str, Any]:
    """Where restoring the clean run's activations undoes the error: the mean restored fraction per position
    group at the last layer and at the best layer above the embeddings (layer 0 patches the edit's own tokens)."""
    p = _json(d / "patching" / "patching.json")
    if p is None:
        return {"note": "not run (no C case to patch)"}
    s = p.get("summary") or p
    cells = [c for c in s.get("cells", []) if c.get("mean") is not None and c.get("group") != "all" and c["layer"] > 0]
    if not cells:
        return {"note": f"no scorable case ({s.get('n_cases', 0)} cases)"}
    last = max(c["layer"] for c in cells)
    at_last = {c["group"]: round(c["mean"], 2) for c in cells if c["layer"] == last}
    best: dict[str, tuple[int, float]] = {}
    for c in cells:
        if c["group"] not in best or c["mean"] > best[c["group"]][1]:
            best[c["group"]] = (c["layer"], round(c["mean"], 2))
    top = max(best, key=lambda g: best[g][1])
    # a group "carries" the error only if restoring it undoes a real part of it: below LOCATES no group does
    return {"n_cases": s.get("n_cases"), "n_questions": s.get("n_questions"), "last_layer": last,
            "restored_at_last_layer": at_last, "best_layer_by_group": best,
            "carried_at": top if best[top][1] >= LOCATES else None}


def _stage_text(d: Path, stage: str) -> str:
    st = REGISTRY[stage]
    text = st.render(d, "text") if d.is_dir() else None
    return (text or "not run").strip()


#: the study stage each test's measure reads (a refusal of that stage is the measure's note)
STAGE_OF = {"propagation": "behaviour", "propagation_result_edit": "behaviour", "patching": "patch",
            "ablation": "steering"}


def diagnosticity(dirs: dict[str, Path], refused: dict[str, dict[str, str]] | None = None) -> dict[str, Any]:
    refused = refused or {}
    tests = {}
    for name, fn in {**MEASURES, **EXTRA}.items():
        ms = {kind: fn(d).to_dict() for kind, d in dirs.items()}
        for kind, m in ms.items():
            why = refused.get(kind, {}).get(STAGE_OF.get(name, name))
            if m["estimate"] is None and why:
                m["note"] = f"refused: {why}"
        a = auroc(ms["load-bearing"]["per_question"], ms["decorative"]["per_question"]) \
            if "load-bearing" in ms and "decorative" in ms else None
        order = _ordered({k: m["estimate"] for k, m in ms.items()})
        tests[name] = {"measures": {k: {kk: vv for kk, vv in m.items() if kk != "per_question"} for k, m in ms.items()},
                       "auroc": a, "ordered": order, "separates": bool(order) and a is not None and a >= SEPARATES}
    out: dict[str, Any] = {"tests": tests, "baseline": {k: _baseline(d) for k, d in dirs.items()}, "refused": refused}
    if "graded" in dirs:
        out["gradient"] = _gradient(dirs["graded"])
        out["probes_graded"] = _stage_text(dirs["graded"], "probes")
        out["steering_graded"] = _stage_text(dirs["graded"], "steering")
    out["patching"] = {k: _patching(d) for k, d in dirs.items()}
    return out


def render(t: dict[str, Any], *, command: str) -> str:
    kinds = [k for k in ("load-bearing", "graded", "decorative") if k in t["baseline"]]
    lines = ["# Diagnosticity on planted truth", "", f"Command: `{command}`", ""]
    lines += ["Baselines (held-out questions, greedy): " + "; ".join(
        f"{k} {b['eligible']}/{b['questions']} eligible" for k, b in t["baseline"].items()), ""]
    lines += ["| test | " + " | ".join(kinds) + " | ordered as planted | AUROC LB vs dec | separates |",
              "|---|" + "---|" * (len(kinds) + 3)]
    for name, r in t["tests"].items():
        a = "n/a" if r["auroc"] is None else f"{r['auroc']:.2f}"
        o = "n/a" if r["ordered"] is None else ("yes" if r["ordered"] else "no")
        lines.append(f"| {TITLES.get(name, name)} | " + " | ".join(_fmt(r["measures"][k]) for k in kinds)
                     + f" | {o} | {a} | {'**yes**' if r['separates'] else 'no'} |")
    g = t.get("gradient")
    if g:
        lines += ["", "Graded organism, difficulty gradient (cells = levels; one observation per cell):", ""]
        for which, s in g.items():
            ci = s.get("ci") or [None, None]
            ci_t = "" if ci[0] is None else f" [{ci[0]:+.2f}, {ci[1]:+.2f}]"
            p = "" if s.get("p") is None else f", p = {s['p']:.3g}"
            sl = "n/a" if s.get("slope") is None else f"{s['slope']:+.2f}{ci_t}{p}"
            cells = ", ".join(f"{c} {'n/a' if v is None else f'{v:.2f}'}" for c, v in (s.get("cells") or {}).items())
            lines.append(f"- difficulty = {s.get('axis') or which}: slope of logit propagation {sl} ({s.get('status')}"
                         f"{'; ' + s['message'] if s.get('message') else ''}); propagation by level: {cells or 'n/a'}")
    lines += ["", "Patching (where restoring the clean activations undoes the error):", ""]
    for k, p in t["patching"].items():
        if "note" in p:
            lines.append(f"- {k}: {p['note']}")
            continue
        lines.append(f"- {k} ({p['n_cases']} C cases, {p['n_questions']} q): largest restored fraction per position "
                     "group over layers >= 1: " + ", ".join(f"{g} {v:.2f} (L{lv})" for g, (lv, v) in
                                                            p["best_layer_by_group"].items())
                     + (f"; the error is carried at **{p['carried_at']}**" if p.get("carried_at") else
                        f"; **no position group** restores {LOCATES:.0%} or more above the embeddings: patching "
                        "does not locate the error"))
    for kind, stages in (t.get("refused") or {}).items():
        for stage, why in stages.items():
            lines += ["", f"The {stage} stage refused on the {kind} organism: {why}"]
    for key, title in (("probes_graded", "Probes on the graded organism"),
                       ("steering_graded", "Steering on the graded organism")):
        if key in t:
            lines += ["", f"{title}:", "", "```", t[key][:3000], "```"]
    return "\n".join(lines) + "\n"
