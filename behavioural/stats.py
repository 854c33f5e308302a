"""Statistics with honest intervals: every rate comes with an interval, and a rate with no
denominator is null (``None``), never 0.

* :func:`proportion_ci` - Wilson or Clopper-Pearson ("exact") interval through statsmodels.
* :func:`rate` - a JSON-ready dict ``{k, n, rate, wilson, exact}``.
* :func:`cluster_bootstrap_ci` - a seeded bootstrap that resamples *questions* (clusters), for rates
  and differences whose rows share questions.
"""
from __future__ import annotations

from collections import defaultdict
from typing import Callable, Hashable, Sequence

import numpy as np


def proportion_ci(k: int, n: int, method: str = "wilson", level: float = 0.95) -> tuple[float | None, float | None]:
    """Two-sided interval for k successes out of n; ``(None, None)`` when n == 0."""
    if method not in ("wilson", "exact"):
        raise ValueError(f"unknown interval method {method!r}; choose 'wilson' or 'exact'")
    if n < 0 or k < 0 or k > n:
        raise ValueError(f"need 0 <= k <= n, got k={k}, n={n}")
    if n == 0:
        return (None, None)
    from statsmodels.stats.proportion import proportion_confint

    lo, hi = proportion_confint(k, n, alpha=1 - level, method="wilson" if method == "wilson" else "beta")
    return (float(max(0.0, lo)), float(min(1.0, hi)))


def rate(k: int, n: int, level: float = 0.95) -> dict:
    """``{"k", "n", "rate", "wilson", "exact"}`` with null rate and intervals when n == 0."""
    return {
        "k": int(k),
        "n": int(n),
        "rate": (k / n) if n else None,
        "wilson": list(proportion_ci(k, n, "wilson", level)),
        "exact": list(proportion_ci(k, n, "exact", level)),
    }


def cluster_bootstrap_ci(
    groups: Sequence[Hashable],
    values: Sequence,
    statistic: Callable[[list], float | None],
    *,
    n_boot: int = 2000,
    level: float = 0.95,
    seed: int = 0,
) -> dict:
    """Percentile bootstrap that resamples whole clusters (questions) with replacement.

    ``values[i]`` belongs to cluster ``groups[i]``; ``statistic`` maps a list of values to a number (or
    ``None`` when undefined). Returns ``{"estimate", "ci": [lo, hi], "n_clusters", "n_boot", "seed"}`` with
    nulls when the statistic is undefined on the full data.
    """
    by: dict[Hashable, list] = defaultdict(list)
    for g, v in zip(groups, values):
        by[g].append(v)
    keys = list(by)
    est = statistic(list(values)) if len(values) else None
    out = {"estimate": est, "ci": [None, None], "n_clusters": len(keys), "n_boot": n_boot, "seed": seed, "level": level}
    if est is None or len(keys) < 2:
        return out
    rng = np.random.default_rng(seed)
    stats = []
    for _ in range(n_boot):
        pick = rng.integers(0, len(keys), size=len(keys))
        sample = [v for i in pick for v in by[keys[i]]]
        s = statistic(sample)
        if s is not None:
            stats.append(s)
    if stats:
        a = (1 - level) / 2
        out["ci"] = [float(np.quantile(stats, a)), float(np.quantile(stats, 1 - a))]
    return out


def paired_difference_ci(rows: Sequence[tuple[Hashable, float | None, float | None]], **kw) -> dict:
    """Mean paired difference (a - b) over pairs whose both members are defined, clustered by group.

    ``rows`` are ``(group, a, b)`` with a/b in {0, 1, None}; pairs with a None are dropped (unscored).
    """
    kept = [(g, a - b) for g, a, b in rows if a is not None and b is not None]

    def mean(vals):
        return float(np.mean(vals)) if vals else None

    res = cluster_bootstrap_ci([g for g, _ in kept], [d for _, d in kept], mean, **kw)
    res["n_pairs"] = len(kept)
    return res
