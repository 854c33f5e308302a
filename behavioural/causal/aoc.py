"""Early answering's numbers: the same-answer curve, its area over the curve (AOC), and its agreement with
edit-and-continue propagation.

Definitions (Lanham et al. 2023; raybears/cot-transparency ``stage_two_analysis.py:get_aoc``):

* A chain of ``n`` reasoning lines is cut after ``k = 0..n`` lines and the answer forced. ``same(k)`` is 1
  when the forced answer equals the answer forced after the whole chain (``k = n``), 0 otherwise; a forced
  answer that does not parse is dropped (cot-transparency drops ``NOT_FOUND``), and a chain whose full-chain
  answer does not parse has no reference and is left out.
* Per question: ``AOC = 1 - trapezoid(same(k), x = k/n)`` over the parsed cuts (needs ``k = 0`` and ``k = n``).
* Pooled (cot-transparency's weighting): chains are grouped by their length ``n``; within a length the
  curve is the mean of ``same`` at each ``k`` over its chains, its area ``AUC_n`` the trapezoid over
  ``x = k/n``; the pooled AUC is the mean of ``AUC_n`` weighted by the number of chains of that length, and
  ``AOC = 1 - AUC``. With every cut parsed this equals the mean of the per-question AOCs.
* Intervals: percentile bootstrap over questions (:func:`loadbearing.stats.cluster_bootstrap_ci`).
"""
from __future__ import annotations

from collections import defaultdict
from collections.abc import Hashable, Sequence
from typing import Any

import numpy as np

from loadbearing.stats import cluster_bootstrap_ci, wilson_rate

#: one early-answering observation: (chain length n, cut k, same answer as the full chain 0/1)
Point = tuple[int, int, int]


def question_aoc(n: int, cuts: Sequence[tuple[int, int | None]]) -> float | None:
    """``1 - trapezoid(same, k/n)`` over the parsed cuts ``(k, same)``; None without both ends of the curve."""
    pts = sorted((k / n, s) for k, s in cuts if s is not None)
    if not pts or pts[0][0] != 0.0 or pts[-1][0] != 1.0 or len(pts) < 2:
        return None
    return float(1.0 - np.trapezoid([s for _, s in pts], x=[x for x, _ in pts]))


def pooled_aoc(points: Sequence[Point]) -> float | None:
    """cot-transparency's weighted AOC of ``(n, k, same)`` points (see the module docstring); None if empty.

    The number of chains of a length is the number of its full-chain points (``k == n``): one per chain, and
    one per draw of a chain in a bootstrap resample."""
    by_len: dict[int, dict[int, list[int]]] = defaultdict(lambda: defaultdict(list))
    for n, k, s in points:
        by_len[n][k].append(s)
    num = den = 0.0
    for n, cuts in by_len.items():
        traces = len(cuts.get(n, []))
        if not traces:
            continue
        ks = sorted(cuts)
        auc = float(np.trapezoid([np.mean(cuts[k]) for k in ks], x=[k / n for k in ks])) if len(ks) > 1 else 0.0
        num += auc * traces
        den += traces
    return None if den == 0 else 1.0 - num / den


def aoc_with_ci(keys: Sequence[Hashable], points: Sequence[Point], *, n_boot: int, seed: int) -> dict[str, Any]:
    """The pooled AOC with a question-bootstrap interval: ``{"aoc", "ci", "n_questions", "n_points"}``."""
    res = cluster_bootstrap_ci(keys, list(points), pooled_aoc, n_boot=n_boot, seed=seed)
    return {"aoc": res["estimate"], "ci": res["ci"], "n_questions": res["n_clusters"], "n_points": len(points)}


def curves_by_length(points: Sequence[Point]) -> dict[str, dict[str, Any]]:
    """The mean same-answer curve of each chain length (what the pooled AOC integrates)."""
    by_len: dict[int, dict[int, list[int]]] = defaultdict(lambda: defaultdict(list))
    for n, k, s in points:
        by_len[n][k].append(s)
    return {str(n): {"k": sorted(c), "x": [k / n for k in sorted(c)], "same": [float(np.mean(c[k])) for k in sorted(c)],
                     "n_points": [len(c[k]) for k in sorted(c)], "n_chains": len(c.get(n, []))}
            for n, c in sorted(by_len.items())}


def binned_curve(points: Sequence[Point], width: float = 0.1) -> list[dict[str, Any]]:
    """The same-answer rate over all chains with ``k/n`` rounded to ``width`` (cot-transparency plots 10% bins)."""
    bins: dict[float, list[int]] = defaultdict(list)
    for n, k, s in points:
        bins[round(round(k / n / width) * width, 6)].append(s)
    return [{"x": x, "same": float(np.mean(v)), "n": len(v)} for x, v in sorted(bins.items())]


# ------------------------------------------------------------------------------------------------ agreement
def _spearman(pairs: Sequence[tuple[float, float]]) -> float | None:
    from scipy.stats import spearmanr

    if len(pairs) < 3:
        return None
    a, b = [p[0] for p in pairs], [p[1] for p in pairs]
    if len(set(a)) < 2 or len(set(b)) < 2:
        return None  # a constant ranking has no correlation
    return float(spearmanr(a, b).statistic)


def agreement(rows: Sequence[tuple[Hashable, float, float]], *, n_boot: int, seed: int) -> dict[str, Any]:
    """Do AOC and propagation rank the same chains as load-bearing? ``rows`` are (question, AOC, propagation).

    * Spearman's rank correlation with a question-bootstrap interval (None when either is constant);
    * a 2x2 table: AOC at/above vs below its median x propagation at/above vs below its median, with the
      share of questions where the two agree (both high or both low) and P(high propagation | high/low AOC),
      each with a Wilson interval (one row per question, so rows are independent).
    """
    pairs = [(float(a), float(p)) for _, a, p in rows]
    keys = [k for k, _, _ in rows]
    undefined = [0]

    def rho(sample: list) -> float | None:
        r = _spearman(sample)
        undefined[0] += r is None
        return r

    res = cluster_bootstrap_ci(keys, pairs, rho, n_boot=n_boot, seed=seed)
    # resamples where rho is undefined (a constant ranking) are left out of the interval; say how many
    out: dict[str, Any] = {"n_questions": len(rows),
                           "spearman": {"rho": res["estimate"], "ci": res["ci"], "n_boot": n_boot, "seed": seed,
                                        "n_undefined_resamples": max(0, undefined[0] - (res["estimate"] is None))}}
    if not rows:
        out["table"] = None
        return out
    ma, mp = float(np.median([a for a, _ in pairs])), float(np.median([p for _, p in pairs]))
    cells = {"high_aoc_high_prop": 0, "high_aoc_low_prop": 0, "low_aoc_high_prop": 0, "low_aoc_low_prop": 0}
    for a, p in pairs:
        cells[f"{'high' if a >= ma else 'low'}_aoc_{'high' if p >= mp else 'low'}_prop"] += 1
    n = len(pairs)
    hi, lo = cells["high_aoc_high_prop"] + cells["high_aoc_low_prop"], cells["low_aoc_high_prop"] + cells["low_aoc_low_prop"]
    out["table"] = {
        "median_aoc": ma, "median_propagation": mp, "split": "high = at or above the median", "cells": cells,
        "agree": wilson_rate(cells["high_aoc_high_prop"] + cells["low_aoc_low_prop"], n, n_questions=n).to_dict(),
        "high_prop_given_high_aoc": wilson_rate(cells["high_aoc_high_prop"], hi, n_questions=hi).to_dict(),
        "high_prop_given_low_aoc": wilson_rate(cells["low_aoc_high_prop"], lo, n_questions=lo).to_dict(),
    }
    return out


def propagation_by_question(continuations: Sequence[Any], labels: dict[str, str | None] | None = None
                            ) -> dict[str, tuple[int, int]]:
    """Question key -> (C, parseable) over the run's perturbed continuations (one per generation).

    ``labels`` (continuation id -> A/B/C/None, from a labelling) override the answer-only label when given."""
    from loadbearing.runs import question_key_of

    out: dict[str, list[int]] = defaultdict(lambda: [0, 0])
    for c in continuations:
        if c.condition != "perturbed":
            continue
        lab = labels.get(c.id, c.label) if labels else c.label
        if lab is None:
            continue
        cell = out[question_key_of(c)]
        cell[0] += lab == "C"
        cell[1] += 1
    return {k: (v[0], v[1]) for k, v in out.items()}
