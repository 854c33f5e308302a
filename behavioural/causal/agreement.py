"""Do the step-level measures agree? Edit-and-continue propagation, resampling importance, the receiver-head score
and attention suppression, side by side on each question's steps.

    from behavioural.causal.agreement import step_agreement
    table = step_agreement("runs/demo")   # None when fewer than two of the measures have run

Per question and step (each read from its stage's files, nothing recomputed):

* ``propagation``: the share of the run's parseable perturbed continuations at that edited line that end
  wrong (C); defined only at the lines the run edits;
* ``resampling``: ``|cf importance|`` (``resample/summary.json``; thought-anchors' counterfactual importance);
* ``receiver``: the receiver-head score (``receiver_heads/summary.json``);
* ``suppression``: the step's effect when masked (``suppression/summary.json``: the mean log KL of the later
  steps).

For each pair of measures, over the questions where both are defined on at least 3 common steps: each
question's Spearman rank correlation across those steps, their mean with a percentile bootstrap over questions;
and over the questions with at least 2 common steps, how often both pick the same top step (Wilson interval;
one row per question) beside the chance of that, the mean of ``1 / common steps``.
"""
from __future__ import annotations

import json
from collections import defaultdict
from itertools import combinations
from pathlib import Path
from typing import Any

from loadbearing.report.blocks import Block, Paragraph, blocks_markdown, table
from loadbearing.runs import SUMMARY, Run, question_key_of
from loadbearing.tables import render_table

MEASURES = ("propagation", "resampling", "receiver", "suppression")


def _summary(run: Path, name: str) -> dict[str, Any] | None:
    p = run / name / SUMMARY
    try:
        return json.loads(p.read_text(encoding="utf-8")) if p.is_file() else None
    except (OSError, ValueError):
        return None


def step_values(run_dir: str | Path) -> dict[str, dict[str, dict[int, float]]]:
    """question key -> measure -> step -> value (only where the measure is defined)."""
    run = Path(run_dir)
    out: dict[str, dict[str, dict[int, float]]] = defaultdict(lambda: defaultdict(dict))
    rs = _summary(run, "resample")
    for q in (rs or {}).get("questions") or []:
        for st in q.get("steps") or []:
            if st.get("cf_importance") is not None:
                out[q["question_key"]]["resampling"][int(st["step"])] = abs(float(st["cf_importance"]))
    rh = _summary(run, "receiver_heads")
    for q in (rh or {}).get("questions") or []:
        for i, v in enumerate(q.get("receiver_score") or []):
            if v is not None:
                out[q["question_key"]]["receiver"][i] = float(v)
    sp = _summary(run, "suppression")
    for q in (sp or {}).get("questions") or []:
        for i, v in enumerate(q.get("step_effect") or []):
            if v is not None:
                out[q["question_key"]]["suppression"][i] = float(v)
    if out:
        cells: dict[tuple[str, int], list[int]] = defaultdict(lambda: [0, 0])
        for c in Run(run).continuations("perturbed"):
            if c.label is not None:
                cell = cells[(question_key_of(c), int(c.line_index))]
                cell[0] += c.label == "C"
                cell[1] += 1
        for (k, i), (nc, n) in cells.items():
            if k in out and n:
                out[k]["propagation"][i] = nc / n
    return {k: dict(v) for k, v in out.items()}


def _spearman(a: list[float], b: list[float]) -> float | None:
    from scipy.stats import spearmanr  # deferred: scipy is heavy to import

    if len(a) < 3 or len(set(a)) < 2 or len(set(b)) < 2:
        return None
    return float(spearmanr(a, b).statistic)


def top_step(vals: dict[int, float], steps: list[int]) -> int:
    return max(steps, key=lambda i: (vals[i], -i))  # ties: the earlier step


def pair_agreement(values: dict[str, dict[str, dict[int, float]]], a: str, b: str, *, n_boot: int = 2000,
                   seed: int = 0) -> dict[str, Any]:
    """The two agreement numbers of measures ``a`` and ``b`` (module docstring)."""
    from loadbearing.stats import cluster_bootstrap_ci, wilson_rate  # deferred: loadbearing.stats loads numpy

    rhos: list[tuple[str, float]] = []
    same: list[tuple[bool, float]] = []
    for k, m in values.items():
        if a not in m or b not in m:
            continue
        common = sorted(set(m[a]) & set(m[b]))
        r = _spearman([m[a][i] for i in common], [m[b][i] for i in common])
        if r is not None:
            rhos.append((k, r))
        if len(common) >= 2:
            same.append((top_step(m[a], common) == top_step(m[b], common), 1 / len(common)))
    res = cluster_bootstrap_ci([k for k, _ in rhos], [r for _, r in rhos], lambda v: sum(v) / len(v) if v else None,
                               n_boot=n_boot, seed=seed)
    return {"a": a, "b": b, "n_questions_rho": len(rhos), "mean_spearman": res["estimate"], "ci": res["ci"],
            "same_top_step": wilson_rate(sum(s for s, _ in same), len(same), n_questions=len(same)).to_dict(),
            "chance_same_top": sum(c for _, c in same) / len(same) if same else None}


def step_agreement(run_dir: str | Path, *, n_boot: int = 2000, seed: int = 0) -> dict[str, Any] | None:
    """Every pair of the measures that ran, with the per-question step values; None with fewer than two."""
    values = step_values(run_dir)
    have = [m for m in MEASURES if any(m in v for v in values.values())]
    if len(have) < 2:
        return None
    return {"measures": have, "pairs": [pair_agreement(values, a, b, n_boot=n_boot, seed=seed)
                                         for a, b in combinations(have, 2)],
            "questions": {k: {m: {str(i): x for i, x in v.items()} for m, v in ms.items()} for k, ms in values.items()}}


_AGREEMENT_INTRO = ("Agreement between the step-level measures (propagation at the edited lines, |resampling importance|, "
                    "receiver-head score, suppression effect): mean per-question Spearman rho across common steps (>= 3) "
                    "with a bootstrap over questions, and how often both pick the same top step (>= 2 common steps)")
_AGREEMENT_HEAD = ["measures", "mean Spearman rho [95% CI]", "questions", "same top step", "chance"]


def _agreement_rows(t: dict[str, Any], style: str) -> list[list[str | int | None]]:
    from loadbearing.stats import format_rate  # deferred: loadbearing.stats loads numpy

    rows = []
    for p in t["pairs"]:
        rho = "n/a" if p["mean_spearman"] is None else f"{p['mean_spearman']:+.2f}" + (
            f" [{p['ci'][0]:+.2f}, {p['ci'][1]:+.2f}]" if p["ci"][0] is not None else "")
        rows.append([f"{p['a']} vs {p['b']}", rho, p["n_questions_rho"], format_rate(p["same_top_step"], style),
                     "n/a" if p["chance_same_top"] is None else f"{100 * p['chance_same_top']:.0f}%"])
    return rows


def agreement_blocks(t: dict[str, Any]) -> tuple[Block, ...]:
    """The agreement table as report blocks: what it measures, then one row per pair of measures."""
    return Paragraph(_AGREEMENT_INTRO), table(_AGREEMENT_HEAD, _agreement_rows(t, "md"))


def format_agreement(t: dict[str, Any], style: str = "md") -> str:
    if style == "md":
        return blocks_markdown(agreement_blocks(t))
    return _AGREEMENT_INTRO + "\n\n" + render_table(_AGREEMENT_HEAD, _agreement_rows(t, style), style)
