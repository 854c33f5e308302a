"""Statistics with honest intervals: every rate comes with an interval, and a rate with no
denominator is null (``None``), never 0.

    .venv/bin/python -c "from loadbearing.stats import wilson_rate, format_rate; print(format_rate(wilson_rate(14, 57)))"

The one rate type and the one formatter (every stage uses them):

* :class:`Rate` - ``k`` of ``n`` with an interval ``[lo, hi]``, the ``method`` that made it, and how many
  questions and distinct generations stand behind it. ``Rate.to_dict()`` / ``Rate.from_dict()`` for JSON.
* :func:`format_rate` - ``"72.1% [60.4, 81.3] (49/68; 23 q)"``; ``"n/a (0/0)"`` when n == 0.
* :func:`wilson_rate` - a row-level Wilson interval: only where rows are independent (one per question).
* :func:`clustered_rate` - pooled k/n with a percentile bootstrap over questions (clusters): the headline
  interval wherever a question contributes several rows.

Lower-level pieces:

* :func:`proportion_ci` - Wilson or Clopper-Pearson ("exact") interval through statsmodels.
* :func:`rate` - the legacy JSON dict ``{k, n, rate, wilson, exact, lo, hi, method}`` (readable by
  :meth:`Rate.from_dict`).
* :func:`cluster_bootstrap_ci` - a seeded bootstrap that resamples *questions* (clusters), for any statistic.
* :func:`cluster_sums_bootstrap` - the vectorised question bootstrap of statistics of per-question sums (the
  probes' accuracy, balanced accuracy and paired gains): one multinomial draw of resample weights
  (:func:`cluster_resample_weights`) per call.
"""
from __future__ import annotations

from collections import defaultdict
from collections.abc import Callable, Hashable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

__all__ = [
    "Rate",
    "format_rate",
    "wilson_rate",
    "clustered_rate",
    "proportion_ci",
    "rate",
    "cluster_bootstrap_ci",
    "cluster_resample_weights",
    "cluster_sums_bootstrap",
    "paired_difference_ci",
]

#: method names a :class:`Rate` may carry
METHODS = ("wilson", "exact", "cluster-bootstrap", "cluster-wilson", "none")


@dataclass(frozen=True)
class Rate:
    """``k`` successes out of ``n`` rows with a two-sided interval ``[lo, hi]`` (fractions in [0, 1]).

    ``method`` says how the interval was made: ``"wilson"``/``"exact"`` (rows independent),
    ``"cluster-bootstrap"`` (percentile bootstrap over questions), ``"cluster-wilson"`` (Wilson over the
    number of questions, used when every row agrees and a bootstrap cannot move), ``"none"``.
    ``n_questions`` / ``n_generations``: distinct questions and distinct model inputs behind the rows.
    """

    k: int
    n: int
    lo: float | None
    hi: float | None
    method: str
    n_questions: int | None = None
    n_generations: int | None = None

    def __post_init__(self) -> None:
        if self.n < 0 or self.k < 0 or self.k > self.n:
            raise ValueError(f"Rate needs 0 <= k <= n, got k={self.k}, n={self.n}")

    @property
    def value(self) -> float | None:
        """k / n, or None when there is no denominator."""
        return self.k / self.n if self.n else None

    def to_dict(self) -> dict[str, Any]:
        return {"k": self.k, "n": self.n, "rate": self.value, "lo": self.lo, "hi": self.hi, "method": self.method,
                "n_questions": self.n_questions, "n_generations": self.n_generations}

    @classmethod
    def from_dict(cls, d: Mapping[str, Any]) -> Rate:
        """Read :meth:`to_dict` output, or a legacy :func:`rate` dict (``wilson: [lo, hi]``)."""
        if "k" not in d or "n" not in d:
            raise ValueError(f"not a rate dict (needs k and n): {dict(d)!r}")
        lo, hi, method = d.get("lo"), d.get("hi"), d.get("method")
        if method is None:
            lo, hi = (d.get("wilson") or [None, None])[:2]
            method = "wilson"
        return cls(int(d["k"]), int(d["n"]), None if lo is None else float(lo), None if hi is None else float(hi),
                   str(method), d.get("n_questions"), d.get("n_generations"))


def format_rate(r: Rate | Mapping[str, Any] | None, style: str = "text", digits: int = 1) -> str:
    """One way to print a rate: ``"72.1% [60.4, 81.3] (49/68; 23 q)"``.

    ``r`` is a :class:`Rate` or its dict (new or legacy form). n == 0 prints ``"n/a (0/0)"``; a rate whose
    interval is undefined (one question) prints ``[n/a]``. ``n_generations`` is shown when it differs from
    n. ``style="md"`` gives the same text with markdown-safe characters (for table cells).
    """
    if style not in ("text", "md"):
        raise ValueError(f"unknown style {style!r}; choose 'text' or 'md'")
    if r is None:
        return "n/a"
    if not isinstance(r, Rate):
        r = Rate.from_dict(r)
    if r.n == 0:
        return "n/a (0/0)"
    f = f"{{:.{digits}f}}"
    pct = f.format(100 * r.k / r.n) + "%"
    ci = "[n/a]" if r.lo is None or r.hi is None else f"[{f.format(100 * r.lo)}, {f.format(100 * r.hi)}]"
    extra = []
    if r.n_questions is not None:
        extra.append(f"{r.n_questions} q")
    if r.n_generations is not None and r.n_generations != r.n:
        extra.append(f"{r.n_generations} gen")
    counts = f"{r.k}/{r.n}" + ("; " + ", ".join(extra) if extra else "")
    out = f"{pct} {ci} ({counts})"
    return out.replace("|", "\\|") if style == "md" else out


def wilson_rate(k: int, n: int, *, n_questions: int | None = None, n_generations: int | None = None,
                level: float = 0.95) -> Rate:
    """Row-level Wilson interval: use only where rows are independent (e.g. one baseline per question)."""
    lo, hi = proportion_ci(k, n, "wilson", level)
    return Rate(int(k), int(n), lo, hi, "wilson", n_questions, n_generations)


def clustered_rate(successes: Sequence[bool], groups: Sequence[Hashable], *, n_boot: int = 2000, seed: int = 0,
                   level: float = 0.95, n_generations: int | None = None) -> Rate:
    """Pooled rate k/n whose interval is a percentile bootstrap over questions (``groups``).

    Whole questions are resampled with replacement and the pooled rate recomputed, so a question with many
    rows counts as one unit of evidence. When every row agrees (k == 0 or k == n) the bootstrap cannot leave
    the point, so the interval is Wilson over the number of questions (``method="cluster-wilson"``): the
    effective sample is at most the number of questions. With one question the interval is undefined.
    """
    if len(successes) != len(groups):
        raise ValueError(f"successes and groups differ in length ({len(successes)} vs {len(groups)})")
    n = len(successes)
    k = int(sum(bool(s) for s in successes))
    by: dict[Hashable, list[int]] = defaultdict(lambda: [0, 0])
    for s, g in zip(successes, groups):
        by[g][0] += bool(s)
        by[g][1] += 1
    g_n = len(by)
    if n == 0:
        return Rate(0, 0, None, None, "none", 0, n_generations)
    if g_n < 2:
        return Rate(k, n, None, None, "none", g_n, n_generations)
    if k == 0 or k == n:
        lo, hi = proportion_ci(0 if k == 0 else g_n, g_n, "wilson", level)
        return Rate(k, n, lo, hi, "cluster-wilson", g_n, n_generations)
    kg = np.array([v[0] for v in by.values()], dtype=np.int64)
    ng = np.array([v[1] for v in by.values()], dtype=np.int64)
    rng = np.random.default_rng(seed)
    stats = np.empty(n_boot)
    block = max(1, 2_000_000 // g_n)
    for i in range(0, n_boot, block):
        m = min(block, n_boot - i)
        pick = rng.integers(0, g_n, size=(m, g_n))
        stats[i:i + m] = kg[pick].sum(1) / ng[pick].sum(1)
    a = (1 - level) / 2
    lo, hi = float(np.quantile(stats, a)), float(np.quantile(stats, 1 - a))
    return Rate(k, n, lo, hi, "cluster-bootstrap", g_n, n_generations)


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
    """Legacy JSON dict ``{"k", "n", "rate", "wilson", "exact", "lo", "hi", "method"}`` (lo/hi = Wilson);
    null rate and intervals when n == 0. New code: :func:`wilson_rate` / :func:`clustered_rate`."""
    w = list(proportion_ci(k, n, "wilson", level))
    return {
        "k": int(k),
        "n": int(n),
        "rate": (k / n) if n else None,
        "wilson": w,
        "exact": list(proportion_ci(k, n, "exact", level)),
        "lo": w[0],
        "hi": w[1],
        "method": "wilson",
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
        out["ci"] = [float(np.quantile(stats, a)), float(np.quantile(stats, 1 - a))]  # type: ignore[list-item]
    return out


def cluster_resample_weights(n_clusters: int, n_boot: int, seed: int = 0) -> np.ndarray:
    """``[n_boot, n_clusters]`` float: how often each cluster is drawn in each resample of ``n_clusters`` clusters
    with replacement (one multinomial draw from ``default_rng(seed)``)."""
    rng = np.random.default_rng(seed)
    return rng.multinomial(n_clusters, np.full(n_clusters, 1.0 / n_clusters), size=n_boot).astype(float)


def cluster_sums_bootstrap(groups: Sequence[Hashable] | np.ndarray, values: np.ndarray,
                           statistic: Callable[[np.ndarray], Sequence[np.ndarray]], *,
                           n_boot: int = 1000, seed: int = 0, level: float = 0.95) -> list[list[float]] | None:
    """Percentile intervals of statistics of per-cluster sums, over resamples of whole clusters (questions).

    ``values`` ``[n, ...]`` are per-row numbers (counts, correctness, differences), summed within each cluster
    (clusters ordered as ``np.unique(groups)``) into ``S [K, ...]``; a resample's sums are ``W @ S`` with
    ``W`` from :func:`cluster_resample_weights`. ``statistic`` maps the resampled sums ``[n_boot, ...]`` to a
    sequence of ``[n_boot]`` arrays, one per statistic. Returns ``[lo, hi]`` per statistic (NaN resamples
    ignored), or ``None`` with fewer than two clusters or ``n_boot <= 0`` (no interval).
    """
    _, g = np.unique(np.asarray(groups), return_inverse=True)
    K = int(g.max()) + 1 if len(g) else 0
    if K < 2 or n_boot <= 0:
        return None
    vals = np.asarray(values, dtype=float)
    S = np.zeros((K, *vals.shape[1:]))
    np.add.at(S, g, vals)
    W = cluster_resample_weights(K, n_boot, seed)  # [B, K]
    a = (1 - level) / 2
    return [[float(np.nanquantile(v, a)), float(np.nanquantile(v, 1 - a))]
            for v in statistic(np.tensordot(W, S, axes=1))]


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
