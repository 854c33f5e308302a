"""What resampling adds beside per-step importance: each question's resample accuracy, the accuracy band, and
the step-to-step matrix.

* **resample accuracy** of a question: the share of its rollouts sampled from the question alone (``k = 0``)
  whose answer is right, an unparsed answer counted as not right (thought-anchors' problem accuracy,
  ``misc-experiments/generate_cots.py`` l. 407-413: ``correct / total_runs``).
* **the band**: thought-anchors keeps the problems whose accuracy is 25-75% (``README.md`` l. 24,
  ``selected_problems.json``); :func:`select_band` keeps those with ``lo <= accuracy <= hi``, and refuses a band
  that keeps none. Outside it importance is pinned near 0: on a question the model always solves, every
  rollout is right (the ceiling), on one it never solves, every rollout is wrong.
* **the step-to-step matrix** (``step_attribution.py:process_chunk_pair`` l. 155-212, the loop of
  ``compute_step_importance_matrix`` l. 321-376): for steps ``i < j`` of the original chain,
  ``M[i][j] = match(R(i+1), L[j]) - match(R(i), L[j])``, where ``match(R, s)`` is the share of the rollouts
  in ``R`` that hold some step (a non-blank line of the rollout) with similarity >= the threshold to ``s``
  (their ``find_best_matches_fully_batched``: a best match is kept only at or above the threshold). Positive:
  keeping step i makes step j's content come back more often. Their matrix uses ``-st 0.8`` (``main``,
  l. 948); the similarity is the stage's (:mod:`behavioural.causal.resample_similarity`). Where either
  rollout set is empty they write 0.0 and this toolkit None.
"""
from __future__ import annotations

from collections import defaultdict
from collections.abc import Callable, Sequence
from typing import Any

from behavioural.causal.common import CausalError
from loadbearing.cli import UsageError


def resample_accuracy(rows: Sequence[dict]) -> float | None:
    """Right answers among a question's ``k = 0`` rollouts, unparsed counted as not right; None without any."""
    r0 = [r for r in rows if r["kind"] == "rollout" and r["k"] == 0]
    return sum(bool(r["correct"]) for r in r0) / len(r0) if r0 else None


def parse_band(text: str | None) -> tuple[float, float] | None:
    """``"0.25,0.75"`` -> (0.25, 0.75); refuses anything else with the fix named."""
    if text is None:
        return None
    try:
        lo, hi = (float(x) for x in text.split(","))
    except ValueError:
        raise UsageError(f"--accuracy-band {text!r}: give LO,HI, two numbers in [0, 1] (thought-anchors keeps "
                         "0.25,0.75)") from None
    if not 0 <= lo <= hi <= 1:
        raise UsageError(f"--accuracy-band {text!r}: need 0 <= LO <= HI <= 1 (thought-anchors keeps 0.25,0.75)")
    return lo, hi


def select_band(questions: list[dict], band: tuple[float, float] | None) -> list[dict[str, Any]]:
    """The questions whose ``resample_accuracy`` lies in ``band`` (all without a band); refuses an empty selection."""
    if band is None:
        return questions
    lo, hi = band
    kept = [q for q in questions if q["resample_accuracy"] is not None and lo <= q["resample_accuracy"] <= hi]
    if not kept:
        accs = ", ".join("n/a" if q["resample_accuracy"] is None else f"{q['resample_accuracy']:.2f}"
                         for q in questions[:12])
        raise CausalError(f"--accuracy-band {lo:g},{hi:g} selects no question (resample accuracies: {accs or 'none'}); "
                          "widen the band, use harder questions (an easier model ceiling leaves every rollout right), "
                          "or omit --accuracy-band; the rollouts are kept: rerun with --resume")
    return kept


def ceiling(questions: list[dict]) -> dict[str, Any]:
    """How many questions sit at the ceiling (every k = 0 rollout right) or the floor (none right)."""
    accs = [q["resample_accuracy"] for q in questions if q["resample_accuracy"] is not None]
    return {"n_questions": len(accs), "at_ceiling": sum(a == 1.0 for a in accs), "at_floor": sum(a == 0.0 for a in accs),
            "mean_resample_accuracy": sum(accs) / len(accs) if accs else None}


def rollout_steps(text: str) -> list[str]:
    """A rollout's steps: its non-blank lines, stripped."""
    return [s.strip() for s in text.split("\n") if s.strip()]


def step_matrix(rows: Sequence[dict], lines: Sequence[str], sim: Callable[[Sequence[str], str, str], float],
                threshold: float) -> list[list[float | None]]:
    """``M[i][j]`` for ``i < j < n`` (see the module docstring); None on and below the diagonal and without data."""
    n = len(lines)
    by_k: dict[int, list[list[str]]] = defaultdict(list)
    for r in rows:
        if r["kind"] == "rollout" and r.get("generation"):
            by_k[r["k"]].append(rollout_steps(r["generation"]))
    cache: dict[tuple[int, str], bool] = {}

    def matches(j: int, step: str) -> bool:
        if (j, step) not in cache:
            cache[(j, step)] = sim(lines, lines[j], step) >= threshold
        return cache[(j, step)]

    def rate(k: int, j: int) -> float | None:
        got = by_k.get(k, [])
        return sum(any(matches(j, s) for s in steps) for steps in got) / len(got) if got else None

    out: list[list[float | None]] = [[None] * n for _ in range(n)]
    for i in range(n - 1):
        for j in range(i + 1, n):
            kept, removed = rate(i + 1, j), rate(i, j)
            out[i][j] = None if kept is None or removed is None else kept - removed
    return out
