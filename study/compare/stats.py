"""The paired tests behind ``python -m study.compare`` (issue #36): one comparison of two runs on one measure.

    from study.compare.stats import paired_binary, paired_continuous, unpaired_rates, holm
    r = paired_binary([(q, a, b), ...])            # rows paired across the runs, clustered by question q
    r["estimate"], r["ci"], r["p_value"], r["test"], r["mdd"]

Which interval and which test (the choice is stated in each result's ``interval`` and ``test``):

* **Binary rows paired across the runs** (:func:`paired_binary`: the same question and cell in both runs):
  the estimate is the pooled difference ``rate_a - rate_b``; the interval is
  :func:`loadbearing.stats.paired_difference_ci` (question-clustered MOVER on Korn-Graubard intervals). The
  exact test is McNemar's (two-sided binomial on the discordant pairs) where every question contributes one
  pair, and otherwise the **sign-flip permutation test over questions**: the statistic is the sum over
  questions of each question's ``sum(a - b)``; under the null the two runs are exchangeable within a question,
  so each question's sum flips sign with probability 1/2. All ``2^m`` flips of the ``m`` questions with a
  non-zero sum are enumerated when ``m <= EXACT_MAX`` (exact), else ``MC_DRAWS`` seeded random flips
  (``p = (1 + #{|T*| >= |T|}) / (1 + draws)``). With one pair per question the two tests coincide.
* **One number per question** (:func:`paired_continuous`: a question's AOC, or a question's rate where the
  runs' rows do not pair, e.g. two different edit strategies): the estimate is the mean over questions of
  the per-question difference (question-weighted, named so); the interval is a t interval on those
  differences (questions are the independent units); the test is the same sign-flip over questions.
* **No per-question data** (:func:`unpaired_rates`: a probe's cross-validated accuracy; the probes stage
  keeps no per-row predictions): the difference of the two stored estimates with MOVER on their stored
  intervals taken as independent (``r = 0``); no exact test (``p_value`` None, left out of Holm).

``mdd``, the minimum detectable difference at this sample's size: ``(z_0.975 + z_0.80) / z_0.975`` times the
interval's half-width, i.e. the true difference a two-sided 5% test would detect with 80% power if the
standard error were what the interval implies (``bench/calib_compare.py`` checks the tests' size, the
intervals' coverage and the power at the MDD by simulation). :func:`holm` adjusts a family of p-values.
"""
from __future__ import annotations

import math
from collections import defaultdict
from collections.abc import Hashable, Sequence
from typing import Any

import numpy as np

from loadbearing.stats import paired_difference_ci

#: enumerate every sign flip up to this many questions with a non-zero difference (2^16 = 65,536 flips)
EXACT_MAX = 16
#: random sign flips beyond EXACT_MAX
MC_DRAWS = 20_000
#: (z_0.975 + z_0.80) / z_0.975: the MDD's multiple of an interval's half-width (80% power, 5% two-sided)
MDD_FACTOR = (1.959963984540054 + 0.8416212335729143) / 1.959963984540054


def mcnemar_exact(b10: int, b01: int) -> float:
    """Two-sided exact McNemar p-value: a binomial(b10 + b01, 1/2) test of the discordant pairs (1.0 with none)."""
    from scipy.stats import binomtest  # deferred: scipy is heavy to import

    n = int(b10) + int(b01)
    return 1.0 if n == 0 else float(binomtest(int(b10), n, 0.5).pvalue)


def sign_flip_p(d: Sequence[float] | np.ndarray, *, seed: int = 0, exact_max: int = EXACT_MAX,
                draws: int | None = None) -> tuple[float, str]:
    """Two-sided sign-flip permutation p-value of ``sum(d)`` over independent units (questions), and whether it
    was ``"exact"`` (every flip enumerated) or ``"monte carlo"``. 1.0 when every difference is 0."""
    v = np.asarray(d, dtype=float)
    v = v[np.abs(v) > 1e-12]
    m = len(v)
    if m == 0:
        return 1.0, "exact"
    t = abs(v.sum())
    if m <= exact_max:
        signs = 1 - 2 * ((np.arange(2 ** m)[:, None] >> np.arange(m)) & 1)  # [2^m, m]
        stats = np.abs(signs @ v)
        return float(np.mean(stats >= t - 1e-9)), "exact"
    draws = MC_DRAWS if draws is None else draws
    rng = np.random.default_rng(seed)
    signs = rng.choice((-1.0, 1.0), size=(draws, m))
    stats = np.abs(signs @ v)
    return float((1 + np.sum(stats >= t - 1e-9)) / (1 + draws)), "monte carlo"


def mdd(lo: float | None, hi: float | None) -> float | None:
    """The minimum detectable difference from a 95% interval: :data:`MDD_FACTOR` times its half-width."""
    if lo is None or hi is None:
        return None
    return MDD_FACTOR * (hi - lo) / 2


def paired_binary(rows: Sequence[tuple[Hashable, float | None, float | None]], *, seed: int = 0) -> dict[str, Any]:
    """Rows ``(question, a, b)`` with a/b in {0, 1, None}, paired across the runs (module docstring)."""
    res = paired_difference_ci(rows)
    kept = [(q, int(a), int(b)) for q, a, b in rows if a is not None and b is not None]
    by: dict[Hashable, list[int]] = defaultdict(list)
    for q, a, b in kept:
        by[q].append(a - b)
    one_each = all(len(v) == 1 for v in by.values())
    if one_each:
        b10 = sum(1 for _, a, b in kept if a > b)
        b01 = sum(1 for _, a, b in kept if b > a)
        p, test = mcnemar_exact(b10, b01), "McNemar exact (one pair per question)"
    else:
        p, how = sign_flip_p([sum(v) for v in by.values()], seed=seed)
        test = f"sign-flip over questions ({how})"
    lo, hi = res["ci"]
    n = len(kept)
    return {"estimate": res["estimate"], "ci": [lo, hi], "p_value": p if kept else None, "test": test,
            "interval": "question-clustered MOVER on Korn-Graubard (loadbearing.stats.paired_difference_ci)",
            "rate_a": (sum(a for _, a, _ in kept) / n) if n else None,
            "rate_b": (sum(b for _, _, b in kept) / n) if n else None,
            "n_questions": len(by), "n_pairs": n, "n_dropped": res["n_dropped"], "mdd": mdd(lo, hi),
            "pairing": "rows"}


def paired_continuous(rows: Sequence[tuple[Hashable, float, float]], *, seed: int = 0) -> dict[str, Any]:
    """One ``(question, a, b)`` per question (numbers); the question-weighted mean difference (module docstring)."""
    from scipy import stats  # deferred: scipy is heavy to import

    a = np.array([r[1] for r in rows], dtype=float)
    b = np.array([r[2] for r in rows], dtype=float)
    d = a - b
    K = len(d)
    lo = hi = None
    if K >= 2:
        half = float(stats.t.ppf(0.975, K - 1) * d.std(ddof=1) / math.sqrt(K))
        lo, hi = float(d.mean() - half), float(d.mean() + half)
    p, how = sign_flip_p(d, seed=seed) if K else (None, "exact")
    return {"estimate": float(d.mean()) if K else None, "ci": [lo, hi], "p_value": p,
            "test": f"sign-flip over questions ({how})", "interval": "t interval on per-question differences",
            "rate_a": float(a.mean()) if K else None, "rate_b": float(b.mean()) if K else None,
            "n_questions": K, "n_pairs": K, "n_dropped": 0, "mdd": mdd(lo, hi), "pairing": "questions"}


def unpaired_rates(a: dict[str, Any], b: dict[str, Any]) -> dict[str, Any]:
    """Two stored estimates ``{"estimate", "lo", "hi", "n_questions"}``: their difference with MOVER (r = 0)."""
    pa, pb = a.get("estimate"), b.get("estimate")
    lo = hi = None
    if pa is not None and pb is not None and None not in (a.get("lo"), a.get("hi"), b.get("lo"), b.get("hi")):
        d = pa - pb
        lo = d - math.hypot(pa - a["lo"], b["hi"] - pb)
        hi = d + math.hypot(a["hi"] - pa, pb - b["lo"])
    est = None if pa is None or pb is None else pa - pb
    return {"estimate": est, "ci": [lo, hi], "p_value": None,
            "test": "none: unpaired (the probes stage keeps no per-question predictions)",
            "interval": "MOVER on the two stored intervals, taken as independent", "rate_a": pa, "rate_b": pb,
            "n_questions": min(a.get("n_questions") or 0, b.get("n_questions") or 0), "n_pairs": None,
            "n_dropped": 0, "mdd": mdd(lo, hi), "pairing": "unpaired"}


def holm(pvalues: Sequence[float | None]) -> list[float | None]:
    """Holm's step-down adjusted p-values over the non-None entries (None stays None)."""
    idx = [i for i, p in enumerate(pvalues) if p is not None]
    order = sorted(idx, key=lambda i: pvalues[i])  # type: ignore[arg-type, return-value]
    m = len(order)
    out: list[float | None] = [None] * len(pvalues)
    running = 0.0
    for rank, i in enumerate(order):
        running = max(running, min(1.0, (m - rank) * float(pvalues[i])))  # type: ignore[arg-type]
        out[i] = running
    return out


__all__ = ["EXACT_MAX", "MC_DRAWS", "MDD_FACTOR", "holm", "mcnemar_exact", "mdd", "paired_binary", "paired_continuous",
           "sign_flip_p", "unpaired_rates"]
