"""python bench/calibration.py --only compare [--fast] [--json F]

Size, coverage and power of ``python -m study.compare``'s paired tests (:mod:`study.compare.stats`; issue #36):

* ``compare.signflip.size.q{K}``: K questions, 3 paired rows each; a question's rate p_q ~ 0.7 Beta(2, 3), both
  runs' rows Bernoulli(p_q) (the null: the runs exchangeable within a question, rows correlated through p_q);
  the sign-flip test over questions at 5%;
* ``compare.signflip.power_at_mdd.q{K}`` (power, reported): the same with run A's rate p_q + MDD, the MDD the
  median one the null simulations reported at this K: about 0.8 if the MDD means what it says;
* ``compare.mcnemar.size.q{K}``: one pair per question, McNemar exact (discrete: upper bound checked);
* ``compare.paired_rows.coverage.q{K}``: the paired interval (``paired_difference_ci``) under an alternative
  (A's rate p_q + 0.1), covering the true pooled difference;
* ``compare.continuous.size.q{K}`` / ``compare.continuous.coverage.q{K}``: one number per question (an AOC-like
  share, Beta(2, 5) for both runs; then A shifted by +0.05): the sign-flip test's size and the t interval's
  coverage of the true mean difference.

Seeded and deterministic. ``run(fast)`` returns ``{name: entry}`` (``size`` / ``coverage`` / ``power``,
``nominal``, ``n_sims``).
"""
from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

ROWS = 3
DRAWS = 2000  # random sign flips beyond 16 questions (the command uses 20,000; 2,000 resolve 5% well enough here)


def _binary(rng: np.random.Generator, k: int, rows: int, shift: float) -> list[tuple[int, int, int]]:
    p = 0.7 * rng.beta(2, 3, size=k)
    a = rng.random((k, rows)) < np.minimum(p + shift, 1.0)[:, None]
    b = rng.random((k, rows)) < p[:, None]
    return [(q, int(a[q, j]), int(b[q, j])) for q in range(k) for j in range(rows)]


def binary_entries(n: int, seed: int, ks: tuple[int, ...]) -> dict[str, dict[str, Any]]:
    from study.compare.stats import paired_binary

    out: dict[str, dict[str, Any]] = {}
    for k in ks:
        rng = np.random.default_rng([seed, k])
        rej, mdds = 0, []
        for i in range(n):
            r = paired_binary(_binary(rng, k, ROWS, 0.0), seed=i)
            rej += r["p_value"] <= 0.05
            mdds.append(r["mdd"])
        m = float(np.median(mdds))
        out[f"compare.signflip.size.q{k}"] = {"size": rej / n, "nominal": 0.05, "n_sims": n, "median_mdd": m}
        pw = sum(paired_binary(_binary(rng, k, ROWS, m), seed=i)["p_value"] <= 0.05 for i in range(n))
        out[f"compare.signflip.power_at_mdd.q{k}"] = {"power": pw / n, "nominal": 0.8, "n_sims": n, "shift": m}
        cov = 0
        for i in range(n):
            p = 0.7 * rng.beta(2, 3, size=k)
            a = rng.random((k, ROWS)) < (p + 0.1)[:, None]
            b = rng.random((k, ROWS)) < p[:, None]
            rows = [(q, int(a[q, j]), int(b[q, j])) for q in range(k) for j in range(ROWS)]
            lo, hi = paired_binary(rows, seed=i)["ci"]
            cov += lo <= 0.1 <= hi  # the true pooled difference: every question has room for + 0.1
        out[f"compare.paired_rows.coverage.q{k}"] = {"coverage": cov / n, "nominal": 0.95, "n_sims": n}
        mc = sum(paired_binary(_binary(rng, k, 1, 0.0))["p_value"] <= 0.05 for _ in range(n))
        out[f"compare.mcnemar.size.q{k}"] = {"size": mc / n, "nominal": 0.05, "n_sims": n}
    return out


def continuous_entries(n: int, seed: int, ks: tuple[int, ...]) -> dict[str, dict[str, Any]]:
    from study.compare.stats import paired_continuous

    out: dict[str, dict[str, Any]] = {}
    for k in ks:
        rng = np.random.default_rng([seed, k, 1])
        rej = cov = 0
        for i in range(n):
            a, b = rng.beta(2, 5, size=k), rng.beta(2, 5, size=k)
            rej += paired_continuous([(q, a[q], b[q]) for q in range(k)], seed=i)["p_value"] <= 0.05
            lo, hi = paired_continuous([(q, a[q] + 0.05, b[q]) for q in range(k)], seed=i)["ci"]
            cov += lo <= 0.05 <= hi
        out[f"compare.continuous.size.q{k}"] = {"size": rej / n, "nominal": 0.05, "n_sims": n}
        out[f"compare.continuous.coverage.q{k}"] = {"coverage": cov / n, "nominal": 0.95, "n_sims": n}
    return out


def run(fast: bool = True, seed: int = 0) -> dict[str, dict[str, Any]]:
    """Every entry (``fast``: 300 simulations at 8 and 20 questions; else 2,000 at 8, 20 and 60)."""
    import study.compare.stats as cs

    n, ks = (300, (8, 20)) if fast else (2000, (8, 20, 60))
    old = cs.MC_DRAWS
    cs.MC_DRAWS = DRAWS
    try:
        return binary_entries(n, seed, ks) | continuous_entries(n, seed, ks)
    finally:
        cs.MC_DRAWS = old
