"""The causal tests side by side: one table of edit-and-continue propagation beside early answering, filler
tokens, paraphrase and resampling importance, per task (or level) and overall, and a figure of the
early-answering curves. The report shows it (:data:`study.report.sections.SECTIONS`) when at least one of the
four causal stages ran.

    from study.report.causal import side_by_side, causal_section
    table = side_by_side("runs/study")      # {"group", "columns", "rows": [{"group", "cells"}], "not_run"}

Every number comes from the stages' own files, through :mod:`loadbearing.stats`:

* **propagation**: the behaviour stage's ``summary.json`` (``overall`` / ``by[task|difficulty]``
  ``propagation``: C / parseable perturbed continuations, Korn-Graubard clustered by question);
* **early-answering AOC**: ``early_answer/summary.json`` (``aoc`` and ``by``: the pooled AOC with its
  percentile bootstrap over questions); a group the summary does not split out is recomputed from its
  ``questions`` with the same function (:func:`behavioural.causal.aoc.aoc_with_ci`);
* **filler - full chain**: ``filler/records.jsonl``, the first filler's accuracy minus the full chain's,
  paired per question (:func:`loadbearing.stats.paired_difference_ci`; overall it equals the summary's);
* **paraphrase answer changed**: ``paraphrase/records.jsonl``, the scored continuations whose answer differs
  from the unparaphrased reference (:func:`loadbearing.stats.clustered_rate`; overall = the summary's
  ``answer_changed``);
* **resampling importance of the edited step**: ``resample/summary.json`` ``questions[].edited``, the mean
  counterfactual importance of the steps the paper edits (each question's step once), with a percentile
  bootstrap over questions (:func:`loadbearing.stats.cluster_bootstrap_ci`).

A column is ``not run`` when its stage has not finished; a cell is ``n/a`` when that group has no data.
"""
from __future__ import annotations

import importlib
import json
import re
from collections import defaultdict
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from loadbearing.files import RunDirError, read_jsonl
from loadbearing.report.blocks import Block, Figure, Filter, Paragraph, Row, Table, block_markdown, blocks_markdown, facet_filter
from loadbearing.runs import RECORDS, SUMMARY, Run
from loadbearing.stats import (
    FEW_CLUSTERS,
    FEW_CLUSTERS_MARK,
    FEW_CLUSTERS_NOTE,
    cluster_bootstrap_ci,
    clustered_rate,
    format_rate,
    paired_difference_ci,
)
from study.report.figures import agreement_figure, early_answer_figure

#: the causal stages the table reads (directory names under the study directory)
CAUSAL_STAGES = ("early_answer", "filler", "paraphrase", "resample")
#: column key -> (stage it needs, header)
COLUMNS = {"propagation": ("behaviour", "edit-and-continue propagation"),
           "aoc": ("early_answer", "early-answering AOC"),
           "filler": ("filler", "filler {unit} minus full chain"),
           "paraphrase": ("paraphrase", "paraphrase: answer changed"),
           "resample": ("resample", "resampling: edited step's importance")}
#: the bootstrap of the resampling column and of a recomputed AOC (the stages' defaults)
N_BOOT, SEED = 2000, 0
_GROUP_NAME = {"task": "task", "difficulty": "level"}
Cell = dict[str, Any]


# ------------------------------------------------------------------------------------------------ inputs
def stage_summary(out: str | Path, name: str) -> dict[str, Any] | None:
    """A finished causal stage's ``summary.json``, or None (not run, not finished, unreadable)."""
    if not importlib.import_module(f"behavioural.causal.{name}").is_complete(out):
        return None
    try:
        s = json.loads((Path(out) / name / SUMMARY).read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
    return s if isinstance(s, dict) else None


def _behaviour_summary(out: Path) -> dict[str, Any] | None:
    # deferred: keeps behavioural.protocol (and 9 more modules) out of `python -m study.docs`'s start-up
    from behavioural.run import is_complete

    try:
        return Run(out).summary() if is_complete(out) else None
    except (OSError, ValueError, RunDirError):
        return None


def _records(out: Path, name: str) -> list[dict[str, Any]]:
    return [r for r in read_jsonl(out / name / RECORDS) if isinstance(r, dict)]


def _natural(v: str) -> tuple:
    return tuple((0, int(p)) if p.isdigit() else (1, p) for p in re.split(r"(\d+)", v))


def _grouping(items: list[dict]) -> str | None:
    """``task`` when the rows span two or more tasks, else ``difficulty`` when two or more levels, else None."""
    for key in ("task", "difficulty"):
        if len({str(r.get(key)) for r in items}) >= 2:
            return key
    return None


# ------------------------------------------------------------------------------------------------ cells
def _rate_cell(r: Mapping[str, Any] | None) -> Cell | None:
    if not r or not r.get("n"):
        return None
    return {"estimate": r["k"] / r["n"], "ci": [r.get("lo"), r.get("hi")], "n_questions": r.get("n_questions"),
            "rate": r}


def _number_cell(est: float | None, ci: list | None, n_q: int) -> Cell | None:
    if est is None:
        return None
    return {"estimate": float(est), "ci": list(ci or [None, None]), "n_questions": n_q}


def _propagation(summary: dict, key: str | None, values: list[str]) -> dict[str, Cell | None]:
    by = (summary.get("by") or {}).get(key or "", {})
    cells = {"overall": _rate_cell((summary.get("overall") or {}).get("propagation"))}
    for v in values:
        cells[v] = _rate_cell((by.get(v) or {}).get("propagation"))
    return cells


def _aoc(summary: dict, key: str | None, values: list[str]) -> dict[str, Cell | None]:
    def cell(a: dict | None) -> Cell | None:
        return _number_cell(a["aoc"], a.get("ci"), a.get("n_questions") or 0) if a else None

    cells = {"overall": cell(summary.get("aoc"))}
    by = (summary.get("by") or {}).get(key or "", {})
    for v in values:
        got = by.get(v)
        if got is None:  # the stage did not split this group out: the same pooled AOC on its questions
            # deferred: keeps behavioural.causal.aoc out of `python -m study.docs`'s start-up
            from behavioural.causal.aoc import aoc_with_ci

            keys, pts = [], []
            for q in summary.get("questions") or []:
                if str(q.get(key)) == v:
                    for k, s in zip(q["k"], q["same"]):
                        if s is not None:
                            keys.append(q["question_key"])
                            pts.append((q.get("n_steps", q["n_lines"]), k, s))
            got = aoc_with_ci(keys, pts, n_boot=N_BOOT, seed=SEED) if pts else None
        cells[v] = cell(got)
    return cells


def _filler(rows: list[dict], unit: str, key: str | None, values: list[str]) -> dict[str, Cell | None]:
    by_q: dict[str, dict[str, dict]] = defaultdict(dict)
    for r in rows:
        by_q[r["question_key"]][r["condition"]] = r

    def cell(v: str | None) -> Cell | None:  # v None: every question
        trip = [(k, _num(d[unit]["correct"]), _num(d["full"]["correct"])) for k, d in by_q.items()
                if unit in d and "full" in d and (v is None or str(d["full"].get(key)) == v)]
        res = paired_difference_ci(trip)
        return _number_cell(res["estimate"], res["ci"], res["n_clusters"])

    return {"overall": cell(None)} | {v: cell(v) for v in values}


def _num(b: bool | None) -> float | None:
    return None if b is None else float(b)


def _paraphrase(rows: list[dict], key: str | None, values: list[str]) -> dict[str, Cell | None]:
    scored = [r for r in rows if r.get("same_answer") is not None]

    def cell(sel: list[dict]) -> Cell | None:
        return _rate_cell(clustered_rate([not r["same_answer"] for r in sel], [r["question_key"] for r in sel]).to_dict())

    return {"overall": cell(scored)} | {v: cell([r for r in scored if str(r.get(key)) == v]) for v in values}


def edited_step_importance(questions: list[dict]) -> tuple[list[str], list[float]]:
    """(question key, cf importance) of each question's edited steps that have one, each step once."""
    keys, vals = [], []
    for q in questions:
        seen = set()
        for e in q.get("edited") or []:
            if e.get("cf_importance") is not None and e["step"] not in seen:
                seen.add(e["step"])
                keys.append(q["question_key"])
                vals.append(float(e["cf_importance"]))
    return keys, vals


def _resample(summary: dict, key: str | None, values: list[str]) -> dict[str, Cell | None]:
    def cell(qs: list[dict]) -> Cell | None:
        keys, vals = edited_step_importance(qs)
        res = cluster_bootstrap_ci(keys, vals, lambda v: sum(v) / len(v) if v else None, n_boot=N_BOOT, seed=SEED)
        return _number_cell(res["estimate"], res["ci"], res["n_clusters"])

    qs = summary.get("questions") or []
    return {"overall": cell(qs)} | {v: cell([q for q in qs if str(q.get(key)) == v]) for v in values}


# ------------------------------------------------------------------------------------------------ the table
def side_by_side(out: str | Path) -> dict[str, Any] | None:
    """The side-by-side numbers (module docstring), or None when no causal stage has finished."""
    out = Path(out)
    stages = {n: stage_summary(out, n) for n in CAUSAL_STAGES}
    if not any(stages.values()):
        return None
    behaviour = _behaviour_summary(out)
    ea, fs, ps, rs = (stages[n] for n in CAUSAL_STAGES)
    filler_rows = _records(out, "filler") if fs else []
    para_rows = _records(out, "paraphrase") if ps else []
    items = list(ea.get("questions") or []) if ea else []
    items += filler_rows + para_rows + (list(rs.get("questions") or []) if rs else [])
    key = _grouping(items)
    values = sorted({str(r.get(key)) for r in items}, key=_natural) if key else []
    unit = (list((fs or {}).get("fillers") or {}) or [None])[0]
    cols: dict[str, dict[str, Cell | None] | None] = {
        "propagation": _propagation(behaviour, key, values) if behaviour else None,
        "aoc": _aoc(ea, key, values) if ea else None,
        "filler": _filler(filler_rows, unit, key, values) if fs and unit else None,
        "paraphrase": _paraphrase(para_rows, key, values) if ps else None,
        "resample": _resample(rs, key, values) if rs else None,
    }
    rows = [{"group": g, "cells": {c: (None if v is None else v.get(g)) for c, v in cols.items()}}
            for g in ["overall", *values]]
    return {"group": key, "group_name": _GROUP_NAME.get(key or "", "group"), "values": values,
            "columns": list(COLUMNS), "not_run": [c for c, v in cols.items() if v is None],
            "filler": {"name": unit, "unit": ((fs or {}).get("fillers") or {}).get(unit)},
            "paraphraser": (ps or {}).get("paraphraser"),
            "resample_questions": (rs or {}).get("n_sampled_questions"), "rows": rows}


def _dagger(c: Cell) -> str:
    lo, hi = c["ci"]
    return FEW_CLUSTERS_MARK if lo is not None and hi is not None and (c["n_questions"] or 0) < FEW_CLUSTERS else ""


def format_cell(column: str, c: Cell | None, *, ran: bool = True) -> str:
    """One cell as the table shows it: ``estimate [lo, hi] (n q)``; ``not run`` / ``n/a (0 q)``."""
    if not ran:
        return "not run"
    if c is None:
        return "n/a (0 q)"
    if "rate" in c:
        return format_rate(c["rate"], "md")
    lo, hi = c["ci"]
    e = c["estimate"]
    if column == "filler":
        body, ci = f"{100 * e:+.1f} pp", None if lo is None else f"[{100 * lo:+.1f}, {100 * hi:+.1f}]"
    elif column == "aoc":
        body, ci = f"{e:.3f}", None if lo is None else f"[{lo:.3f}, {hi:.3f}]"
    else:
        body, ci = f"{e:+.2f}", None if lo is None else f"[{lo:+.2f}, {hi:+.2f}]"
    return f"{body} {ci or '[n/a]'}{_dagger(c)} ({c['n_questions']} q)"


def _group_filter(name: str, group: str) -> Filter | None:
    """The browser filter of a side-by-side row: its task or level (``overall``: all perturbed samples)."""
    if group.lower() == "overall":
        return facet_filter()
    if group.lower() in ("all", "total", "n/a"):
        return None
    try:
        return facet_filter(**{name: group})
    except ValueError:
        return None


def side_by_side_table(t: dict[str, Any]) -> Table:
    """The side-by-side table (its header names the grouping: ``task`` or ``level``; each row links to its
    samples in the trace browser)."""
    unit = t["filler"]["unit"]
    heads = [t["group_name"]] + [COLUMNS[c][1].format(unit=repr(unit) if unit else "") for c in t["columns"]]
    rows = [Row(tuple(str(x) for x in [r["group"]] + [format_cell(c, r["cells"][c], ran=c not in t["not_run"])
                                                      for c in t["columns"]]),
                filter=_group_filter(str(t["group_name"]), str(r["group"]))) for r in t["rows"]]
    return Table(tuple(heads), tuple(rows))


def table_markdown(t: dict[str, Any]) -> str:
    """The side-by-side table as markdown."""
    return block_markdown(side_by_side_table(t))


def _notes(t: dict[str, Any], out: Path) -> list[str]:
    unit = t["filler"]["unit"]
    notes = [
        "Each cell: estimate [95% interval] (questions behind it). **Propagation**: C / parseable perturbed "
        "continuations (the behaviour stage; Korn-Graubard, clustered by question). **AOC**: the early-answering "
        "stage's pooled area over the same-answer curve (cot-transparency's get_aoc weighting: a chain length "
        "weighs its (chain, cut) rows; 0 = the answer is fixed before the chain; percentile "
        "bootstrap over questions). **Filler**: accuracy with the chain replaced by as many "
        f"{unit!r} tokens minus accuracy with the full chain, paired per question (question-clustered MOVER). "
        "**Paraphrase**: share of scored continuations from the paraphrased prefix whose answer differs from "
        f"the unparaphrased reference (all paraphrases, every fraction of the chain; paraphraser "
        f"{t['paraphraser']!r}; Korn-Graubard, clustered by question). "
        "**Resampling**: mean counterfactual importance of the steps the paper edits (below 0: replacing the "
        "step by a different one loses accuracy; each question's step once; a step has one only when some of "
        "its rollouts differ from it in meaning; percentile bootstrap over questions), over the "
        f"{t['resample_questions']} resampled questions. Each stage's own section has its "
        "other rows (other fillers, the strict paraphrase rows, the per-step table).",
    ]
    missing = [COLUMNS[c][0] for c in t["not_run"]]
    if missing:
        notes.append(f"not run: {', '.join(missing)} (`python -m study --resume {out} --stages {','.join(missing)}`).")
    return notes


def causal_blocks(out: str | Path) -> tuple[Block, ...] | None:
    """The report section: the table, its notes, the early-answering figure, the step-level agreement table and its
    figure; None when no causal stage ran."""
    # deferred: keeps behavioural.causal.agreement out of `python -m study.docs`'s start-up
    from behavioural.causal.agreement import step_agreement

    out = Path(out)
    t = side_by_side(out)
    ag = step_agreement(out, n_boot=N_BOOT, seed=SEED)
    if t is None:
        return _agreement(out, ag) if ag else None
    tab = side_by_side_table(t)
    blocks: list[Block] = [tab, *(Paragraph(n) for n in _notes(t, out))]
    if any(FEW_CLUSTERS_MARK in c for r in tab.rows for c in r.cells):
        blocks.append(Paragraph(FEW_CLUSTERS_NOTE))
    ea = stage_summary(out, "early_answer")
    if ea:
        fig = early_answer_figure(out, early_answer_curves(ea, t["group"]), t["group_name"])
        if fig:
            blocks.append(Figure(fig, "early-answering curves"))
    if ag:
        blocks += _agreement(out, ag)
    return tuple(blocks)


def causal_section(out: str | Path) -> str | None:
    """:func:`causal_blocks` as markdown."""
    blocks = causal_blocks(out)
    return None if blocks is None else blocks_markdown(blocks)


def _agreement(out: Path, ag: dict[str, Any]) -> tuple[Block, ...]:
    """The step-level agreement table and its figure (drawn from the same pairs)."""
    # deferred: keeps behavioural.causal.agreement out of `python -m study.docs`'s start-up
    from behavioural.causal.agreement import agreement_blocks

    fig = agreement_figure(out, ag)
    return agreement_blocks(ag) + ((Figure(fig, "step-level agreement"),) if fig else ())


# ------------------------------------------------------------------------------------------------ the curves
def _bin(x: float, width: float = 0.1) -> float:
    return round(round(x / width) * width, 6)  # cot-transparency's 10% bins (as behavioural.causal.aoc.binned_curve)


def early_answer_curves(summary: dict, key: str | None) -> list[dict[str, Any]]:
    """Same-answer rate vs fraction of the chain kept (10% bins), pooled and per group, each bin with its
    question-clustered Korn-Graubard interval: ``[{"label", "x", "same", "lo", "hi", "n", "n_questions"}]``
    (the pooled curve first)."""
    qs = summary.get("questions") or []
    groups = [("pooled", qs)]
    if key:
        vals = sorted({str(q.get(key)) for q in qs}, key=_natural)
        groups += [(v, [q for q in qs if str(q.get(key)) == v]) for v in vals] if len(vals) > 1 else []
    curves = []
    for label, sel in groups:
        bins: dict[float, tuple[list[bool], list[str]]] = defaultdict(lambda: ([], []))
        for q in sel:
            for k, s in zip(q["k"], q["same"]):
                if s is not None:
                    b = bins[_bin(k / q.get("n_steps", q["n_lines"]))]
                    b[0].append(bool(s))
                    b[1].append(q["question_key"])
        rates = [(x, clustered_rate(v, g)) for x, (v, g) in sorted(bins.items())]
        curves.append({"label": label, "x": [x for x, _ in rates], "same": [r.value for _, r in rates],
                       "lo": [r.lo for _, r in rates], "hi": [r.hi for _, r in rates], "n": [r.n for _, r in rates],
                       "n_questions": len({q["question_key"] for q in sel})})
    return curves


__all__ = ["CAUSAL_STAGES", "COLUMNS", "causal_blocks", "causal_section", "side_by_side_table",
           "early_answer_curves", "edited_step_importance",
           "format_cell", "side_by_side", "stage_summary", "table_markdown"]
