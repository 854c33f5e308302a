"""The newer causal stages' data for the trace browser's "Causal tests" panel (:mod:`study.browse.causal`): the
filler sweep, the step-level measures the agreement table ranks, and each run's stage summaries.

    from study.browse.stages import filler_rows, run_summaries, step_measures
    filler_rows(run, qindex)     # question row -> {"c": [[condition, fraction, filler tokens, answer, correct]]}
    step_measures(run, qindex)   # question row -> {"n", "lines", "m": {measure: [value per step]}, "top"}
    run_summaries(run)           # {"stages", "ea", "fl", "pp", "rh", "sp", "ag"}: what each stage's summary.json says

Every number is read from the stages' own files; nothing is recomputed except the agreement pairs, which are
:func:`behavioural.causal.agreement.step_agreement` with the report's bootstrap settings
(:data:`study.report.causal.N_BOOT`, :data:`study.report.causal.SEED`), so the page shows the report's numbers.
"""
from __future__ import annotations

import json
from collections import defaultdict
from collections.abc import Mapping
from typing import Any

from loadbearing.files import read_jsonl
from loadbearing.runs import RECORDS, SUMMARY, Run

#: the top receiver heads listed in the panel (the summary keeps more)
HEADS_SHOWN = 8


def _summary(run: Run, name: str) -> dict[str, Any] | None:
    """A finished stage's ``summary.json`` (the white-box stages live in one module, ``attention``)."""
    from study.report.causal import stage_summary  # deferred: study.report.causal loads numpy

    if name not in ("receiver_heads", "suppression"):
        return stage_summary(run.path, name)

    # deferred: keeps behavioural (and 2 more modules) out of `python -m study.browse`'s start-up
    from behavioural.causal.common import is_stage_complete

    try:
        s = json.loads((run.path / name / SUMMARY).read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
    return s if isinstance(s, dict) and is_stage_complete(run.path, name) else None


def _r(x: Any, digits: int = 4) -> Any:
    return round(float(x), digits) if isinstance(x, (int, float)) and not isinstance(x, bool) else x


def _rate(r: dict | None) -> dict[str, Any] | None:
    """A rate (``loadbearing.stats`` ``to_dict``) as the page shows it: k, n, value, interval."""
    if not r:
        return None
    return {"k": r.get("k"), "n": r.get("n"), "v": _r(r.get("rate")), "lo": _r(r.get("lo")), "hi": _r(r.get("hi"))}


def _ci(d: dict | None, est: str) -> dict[str, Any] | None:
    if not d:
        return None
    ci = d.get("ci") or [None, None]
    return {"v": _r(d.get(est)), "lo": _r(ci[0]), "hi": _r(ci[1]), "nq": d.get("n_questions", d.get("n_clusters"))}


def filler_rows(run: Run, qindex: Mapping[str, int]) -> dict[str, dict[str, Any]]:
    """Each question's filler conditions in sweep order: no chain, each filler by fraction, the full chain."""
    s = _summary(run, "filler")
    if s is None:
        return {}
    order = {c: i for i, c in enumerate(s.get("conditions") or [])}
    out: dict[str, list] = defaultdict(list)
    for r in read_jsonl(run.path / "filler" / RECORDS):
        if not isinstance(r, dict):
            continue
        qi = qindex.get(str(r.get("question_id")))
        if qi is None:
            continue
        ok = r.get("correct")
        out[str(qi)].append([r.get("condition"), r.get("fraction"), r.get("filler_tokens"), r.get("parsed_answer"),
                             None if ok is None else int(bool(ok))])
    return {k: {"c": sorted(v, key=lambda x: order.get(x[0], len(order)))} for k, v in out.items()}


def step_measures(run: Run, qindex: Mapping[str, int]) -> dict[str, dict[str, Any]]:
    """Per question (row), the step-level measures of :func:`behavioural.causal.agreement.step_values`."""
    # deferred: keeps behavioural (and 2 more modules) out of `python -m study.browse`'s start-up
    from behavioural.causal.agreement import MEASURES, step_values, top_step

    ids: dict[str, str] = {}  # question key -> question id, from the stages' summaries
    lines: dict[str, int] = {}  # question key -> steps of its chain
    for name in ("resample", "receiver_heads", "suppression"):
        for q in (_summary(run, name) or {}).get("questions") or []:
            key = str(q.get("question_key"))
            ids.setdefault(key, str(q.get("question_id")))
            n = q.get("n_steps", q.get("n_lines"))
            if isinstance(n, int):
                lines[key] = max(lines.get(key, 0), n)
    out = {}
    for key, ms in step_values(run.path).items():
        qi = qindex.get(ids.get(key, key))
        if qi is None or not any(m in ms for m in MEASURES if m != "propagation"):
            continue
        n = max([lines.get(key, 0)] + [1 + i for v in ms.values() for i in v])
        out[str(qi)] = {"n": n, "m": {m: [_r(ms[m].get(i)) for i in range(n)] for m in MEASURES if m in ms},
                        "top": {m: top_step(ms[m], sorted(ms[m])) for m in MEASURES if ms.get(m)}}
    return out


def _early_answer(s: dict) -> dict[str, Any]:
    d = s.get("decision_point") or {}
    aoc = s.get("aoc") or {}
    return {"aoc": _ci(aoc, "aoc"), "nldd": _ci(d.get("overall"), "mean_nldd_share"),
            "dfrac": _r((d.get("overall") or {}).get("mean_decision_fraction")),
            "by_level": {v: _ci(x, "mean_nldd_share") for v, x in (d.get("by_level") or {}).items()}}


def _filler(s: dict) -> dict[str, Any]:
    return {"fillers": s.get("fillers") or {},
            "sweep": {f: [{"x": p.get("fraction"), "cond": p.get("condition"), "acc": _rate(p.get("accuracy")),
                           "same": _rate(p.get("same_as_full_chain")), "tok": _r(p.get("mean_filler_tokens"), 1)}
                          for p in pts] for f, pts in (s.get("sweep") or {}).items()},
            "full": _rate(s.get("full_accuracy"))}


def _paraphrase(s: dict) -> dict[str, Any]:
    mg = s.get("mean_gap") or {}
    return {"by": s.get("paraphraser"), "same_model": bool(s.get("same_as_run_model")),
            "curve": [{"x": p.get("fraction"), "ret": _rate(p.get("retention")), "acc": _rate(p.get("paraphrased_accuracy")),
                       "gap": _ci(p.get("gap"), "estimate")} for p in s.get("curve") or []],
            "mean_gap": _ci(mg, "estimate")}


def _receiver(s: dict) -> dict[str, Any]:
    return {"n": s.get("n_sampled_questions"), "pi": s.get("proximity_ignore"), "top_k": s.get("top_k"),
            "heads": [[h["layer"], h["head"], _r(h.get("mean_kurtosis"))] for h in (s.get("top_heads") or [])[:HEADS_SHOWN]]}


def _agreement(run: Run) -> list[dict[str, Any]] | None:
    # deferred: keeps behavioural (and 2 more modules) out of `python -m study.browse`'s start-up
    from behavioural.causal.agreement import step_agreement
    from study.report.causal import N_BOOT, SEED  # deferred: study.report.causal loads numpy

    ag = step_agreement(run.path, n_boot=N_BOOT, seed=SEED)
    if not ag:
        return None
    return [{"a": p["a"], "b": p["b"], "rho": _r(p["mean_spearman"]), "lo": _r(p["ci"][0]), "hi": _r(p["ci"][1]),
             "nq": p["n_questions_rho"], "top": _rate(p["same_top_step"]), "chance": _r(p["chance_same_top"])}
            for p in ag["pairs"]]


def run_summaries(run: Run) -> dict[str, Any]:
    """The run's stage summaries as the panel shows them (module docstring); a stage absent is None."""
    got = {n: _summary(run, n) for n in ("early_answer", "filler", "paraphrase", "receiver_heads", "suppression")}
    sp = got["suppression"]
    out: dict[str, Any] = {
        "stages": sorted(n for n, v in got.items() if v is not None),
        "ea": _early_answer(got["early_answer"]) if got["early_answer"] else None,
        "fl": _filler(got["filler"]) if got["filler"] else None,
        "pp": _paraphrase(got["paraphrase"]) if got["paraphrase"] else None,
        "rh": _receiver(got["receiver_heads"]) if got["receiver_heads"] else None,
        "sp": {"n": sp.get("n_sampled_questions"), "t": sp.get("temperature")} if sp else None,
        "ag": _agreement(run),
    }
    return out


__all__ = ["HEADS_SHOWN", "filler_rows", "run_summaries", "step_measures"]
