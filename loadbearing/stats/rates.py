"""Rates with honest intervals: the one rate type, its formatter, the row-level Wilson and the question-clustered
Korn-Graubard intervals, and the paired MOVER interval built on them (see :mod:`loadbearing.stats`)."""
from __future__ import annotations

from collections import defaultdict
from collections.abc import Hashable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from loadbearing.results.check import RateJSON

#: method names a :class:`Rate` may carry
METHODS = ("wilson", "exact", "korn-graubard", "cluster-bootstrap", "cluster-wilson", "none")
#: intervals resting on fewer questions than this are flagged (``Rate.few_clusters``, a dagger in format_rate)
FEW_CLUSTERS = 20
FEW_CLUSTERS_MARK = "\u2020"
FEW_CLUSTERS_NOTE = f"{FEW_CLUSTERS_MARK} the interval rests on fewer than {FEW_CLUSTERS} questions: read it as rough"


@dataclass(frozen=True)
class Rate:
    """``k`` successes out of ``n`` rows with a two-sided interval ``[lo, hi]`` (fractions in [0, 1]).

    ``method`` says how the interval was made: ``"wilson"``/``"exact"`` (rows independent),
    ``"korn-graubard"`` (clustered by question, :func:`design_effect_interval`), ``"none"``; files written
    before the Korn-Graubard interval may carry ``"cluster-bootstrap"`` / ``"cluster-wilson"``.
    ``n_questions`` / ``n_generations``: distinct questions and distinct model inputs behind the rows.
    :attr:`few_clusters` flags an interval resting on fewer than :data:`FEW_CLUSTERS` questions.
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

    @property
    def few_clusters(self) -> bool:
        """True when the interval exists and rests on fewer than :data:`FEW_CLUSTERS` questions (the row count
        stands in for the questions when ``n_questions`` is unknown: rows are then taken as independent)."""
        if self.lo is None or self.hi is None or self.n == 0:
            return False
        q = self.n_questions if self.n_questions is not None else self.n
        return q < FEW_CLUSTERS

    def to_dict(self) -> RateJSON:
        return {"k": self.k, "n": self.n, "rate": self.value, "lo": self.lo, "hi": self.hi, "method": self.method,
                "n_questions": self.n_questions, "n_generations": self.n_generations,
                "few_clusters": self.few_clusters}

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
    interval is undefined (one question) prints ``[n/a]``; an interval resting on fewer than 20 questions is
    marked with a dagger (``[8.1, 52.4]†``, :data:`FEW_CLUSTERS_NOTE`). ``n_generations`` is shown when it
    differs from n. ``style="md"`` gives the same text with markdown-safe characters (for table cells).
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
    if r.few_clusters:
        ci += FEW_CLUSTERS_MARK
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
    """Pooled rate k/n with a question-clustered Korn-Graubard interval (:func:`design_effect_interval`).

    Rows of one question (``groups``) are not independent: the interval is Clopper-Pearson on the effective
    number of rows n / deff, the design effect estimated from the spread of the questions' counts, with
    Satterthwaite degrees of freedom under an exchangeable working model (:func:`cluster_df`). It is continuous and
    monotone in k (0/132 and 1/132 sit side by side), and holds its coverage at 5 questions and with rare
    events (``bench/calib_intervals.py``). With one question the interval is undefined. ``n_boot`` and
    ``seed`` are accepted for old callers and unused.
    """
    del n_boot, seed
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
    kg = np.array([v[0] for v in by.values()], dtype=float)
    ng = np.array([v[1] for v in by.values()], dtype=float)
    lo, hi = design_effect_interval(kg, ng, level)
    return Rate(k, n, float(lo[0]), float(hi[0]), "korn-graubard", g_n, n_generations)


def cluster_df(n_g: np.ndarray, rho: np.ndarray | float) -> np.ndarray:
    """Degrees of freedom of a question-clustered interval, per dataset (rows of ``n_g`` ``[B, K]``; ``rho`` a
    scalar or ``[B]``): the Satterthwaite / Bell-McCaffrey degrees of freedom of the linearised cluster variance
    of the pooled rate under an exchangeable working model, rows correlated ``rho`` within a question
    (:func:`anova_rho`), floored at 1.

    The variance of :func:`design_effect_interval` is ``v = c sum_g (a_g' M y)^2`` (``a_g`` the indicator of
    question g's rows, ``M = I - 1 1' / n`` the residual maker of the intercept, ``c`` a constant). With ``y``
    normal of covariance ``Omega = (1 - rho) I + rho sum_g a_g a_g'``, ``v`` is a weighted sum of chi-squares,
    and matching its first two moments to a scaled chi-square gives ``df = 2 E[v]^2 / Var[v] = tr(W)^2 /
    tr(W^2)``, ``W = G' Omega G``, ``G = M [a_1 ... a_K]``: Bell and McCaffrey (2002), "Bias reduction in
    standard errors for linear regression with multi-stage samples", Survey Methodology 28(2), 169-181; the
    ``K_IK`` of Imbens and Kolesar (2016), "Robust standard errors in small samples: some practical advice",
    Review of Economics and Statistics 98(4), 701-712, with their random-effects (exchangeable) working model for
    clusters, here without the CR2 adjustment, which this variance does not use. In closed form, with ``s_g =
    n_g / n``, ``q_g = n_g (1 - rho + rho n_g)`` (``Omega a_g = (1 - rho + rho n_g) a_g``), ``Q = sum q_g``, so
    that ``W = diag(q) - q s' - s q' + Q s s'``:

    * ``tr W = Q - 2 q.s + Q s.s``;
    * ``tr W^2 = q.q - 4 sum q_g^2 s_g + 2 Q sum q_g s_g^2 + 2 (q.s)^2 + 2 (q.q)(s.s) - 4 Q (q.s)(s.s) +
      Q^2 (s.s)^2``.

    At equal sizes it is ``K - 1`` whatever ``rho``; it never exceeds ``K - 1`` (``W`` has rank ``K - 1``). At
    ``rho = 0`` it is close to ``K_eff - 1``, ``K_eff = n^2 / sum_g n_g^2``, at the usual sizes (higher when one
    question holds half the rows, whose total the many small ones then pin down); as ``rho`` grows the large
    questions weigh more (``q_g ~ n_g^2``), and at ``rho = 1`` it is close to ``(sum n_g^2)^2 / sum n_g^4 - 1``.
    The degrees of freedom used before, ``K_eff - 1`` from the sizes alone, left informative sizes (a question's
    rate rising with its size) at 66 questions covering 0.945 at 64,000 simulations: with lognormal sizes and
    ICC 0.3 the large questions carry most of the variance, which the sizes alone do not see
    (``bench/calib_intervals.py``, ``rate.coverage.informative.q66``)."""
    ng = np.atleast_2d(np.asarray(n_g, dtype=float))
    r = np.broadcast_to(np.asarray(rho, dtype=float), ng.shape[:1])[:, None]
    n = ng.sum(1, keepdims=True)
    s = ng / n
    q = ng * (1.0 - r + r * ng) / n  # the scale cancels; / n keeps the sums small
    Q, qs, ss, qq = q.sum(1), (q * s).sum(1), (s * s).sum(1), (q * q).sum(1)
    tr = Q - 2 * qs + Q * ss
    tr2 = (qq - 4 * (q * q * s).sum(1) + 2 * Q * (q * s * s).sum(1) + 2 * qs ** 2 + 2 * qq * ss
           - 4 * Q * qs * ss + Q ** 2 * ss ** 2)
    with np.errstate(invalid="ignore", divide="ignore"):
        df = np.where(tr2 > 0, tr ** 2 / np.where(tr2 > 0, tr2, 1.0), 1.0)
    return np.maximum(df, 1.0)


def anova_rho(kg: np.ndarray, ng: np.ndarray) -> np.ndarray:
    """One-way ANOVA intra-question correlation of the binary rows per dataset (rows of ``kg`` / ``ng``
    ``[B, K]``): ``(MSB - MSW) / (MSB + (n_0 - 1) MSW)``, ``n_0 = (n - sum n_g^2 / n) / (K - 1)``, clipped to
    [0, 1]; 0 when MSB = MSW = 0 (no events, or every row an event: no spread to estimate it from). The
    correlation of :func:`anova_deff` and of the degrees of freedom (:func:`cluster_df`)."""
    K = kg.shape[1]
    n = ng.sum(1)
    pg = kg / ng
    p = kg.sum(1) / n
    msb = (ng * (pg - p[:, None]) ** 2).sum(1) / (K - 1)
    msw = (kg * (1 - pg)).sum(1) / np.maximum(n - K, 1)
    n0 = (n - (ng ** 2).sum(1) / n) / (K - 1)
    den = msb + (n0 - 1) * msw
    return np.clip((msb - msw) / np.where(den > 0, den, 1.0), 0.0, 1.0)


def anova_deff(kg: np.ndarray, ng: np.ndarray, rho: np.ndarray | None = None) -> np.ndarray:
    """``1 + (m_w - 1) rho`` per dataset (rows of ``kg`` / ``ng`` ``[B, K]``): Kish's design effect at the
    size-weighted mean question size ``m_w = sum n_g^2 / n``, with ``rho`` the ANOVA intra-question correlation
    (:func:`anova_rho`, computed when not given); 1 when MSB = MSW = 0."""
    if rho is None:
        rho = anova_rho(kg, ng)
    return 1.0 + ((ng ** 2).sum(1) / ng.sum(1) - 1.0) * rho


def design_effect_interval(k_g: np.ndarray, n_g: np.ndarray, level: float = 0.95, *,
                           df: str = "effective") -> tuple[np.ndarray, np.ndarray]:
    """Korn-Graubard interval for a pooled proportion of clustered rows, vectorised over datasets.

    ``k_g`` ``[B, K]`` (or ``[K]``) successes per cluster, ``n_g`` ``[K]`` or ``[B, K]`` rows per cluster
    (every cluster with >= 1 row, K >= 2). Returns ``(lo, hi)`` ``[B]``. With ``p = k / n``:

    * ``deff = var_cluster(p) / (p (1 - p) / n)``, the linearised cluster variance
      ``K / (K - 1) * sum_g (k_g - p n_g)^2 / n^2`` over the binomial one;
    * floored at ``1 + (m_w - 1) / (1 + min(k, n - k))`` (``m_w = sum n_g^2 / n``) and at 1: with no or few
      events the spread of the questions cannot show the clustering, so the design effect starts at its
      ceiling (every question all-or-none: the questions are the sample) and falls as events accumulate;
    * and at the ANOVA design effect ``1 + (m_w - 1) rho`` (:func:`anova_deff`): the linearised one is tied to
      the sizes of the few questions that happen to carry the events (small ones give a small rate *and* a small
      design effect together), which left 66 questions at ICC 0.6-0.9 and p = 5% covering 0.87-0.93;
    * ``n* = n / deff * (t_{n-1} / t_{df})^2``, ``x* = p n*``, with ``df`` the Satterthwaite (Bell-McCaffrey)
      degrees of freedom of the cluster variance under an exchangeable working model at the same ``rho``
      (:func:`cluster_df`; ``K - 1`` when questions are of equal size, at most ``K - 1``);
    * Clopper-Pearson on ``(x*, n*)`` through the beta quantiles (continuous in x*).

    ``df="clusters"`` uses ``K - 1`` instead (the interval before :func:`cluster_df`; the calibration bench
    shows both). The degrees of freedom before this one, ``K_eff - 1`` from the sizes alone (``K_eff = n^2 /
    sum_g n_g^2``), covered 0.945 at informative sizes and 66 questions; this one 0.95 or more.
    """
    from scipy import stats  # deferred: scipy is heavy to import

    kg = np.atleast_2d(np.asarray(k_g, dtype=float))
    ng = np.broadcast_to(np.asarray(n_g, dtype=float), kg.shape)
    K = kg.shape[1]
    if K < 2:
        raise ValueError("design_effect_interval needs at least two clusters")
    n = ng.sum(1)
    k = kg.sum(1)
    p = k / n
    a = 1 - level
    var_c = K / (K - 1) * ((kg - p[:, None] * ng) ** 2).sum(1) / n ** 2
    var_b = p * (1 - p) / n
    with np.errstate(invalid="ignore", divide="ignore"):
        deff = np.where(var_b > 0, var_c / np.where(var_b > 0, var_b, 1.0), 1.0)
    m_w = (ng ** 2).sum(1) / n
    deff = np.maximum(np.maximum(deff, 1.0), 1.0 + (m_w - 1.0) / (1.0 + np.minimum(k, n - k)))
    rho = anova_rho(kg, ng)
    deff = np.maximum(deff, anova_deff(kg, ng, rho))
    if df not in ("effective", "clusters"):
        raise ValueError(f"df must be 'effective' or 'clusters', got {df!r}")
    dof = cluster_df(ng, rho) if df == "effective" else np.full(n.shape, K - 1.0)
    n_star = n / deff * (stats.t.ppf(1 - a / 2, np.maximum(n - 1, 1)) / stats.t.ppf(1 - a / 2, dof)) ** 2
    x = p * n_star
    with np.errstate(invalid="ignore", divide="ignore"):
        lo = np.where(x > 0, stats.beta.ppf(a / 2, np.maximum(x, 1e-12), n_star - x + 1), 0.0)
        hi = np.where(x < n_star, stats.beta.ppf(1 - a / 2, x + 1, np.maximum(n_star - x, 1e-12)), 1.0)
    return np.clip(np.minimum(lo, p), 0.0, 1.0), np.clip(np.maximum(hi, p), 0.0, 1.0)


def paired_interval(a_g: np.ndarray, b_g: np.ndarray, n_g: np.ndarray, disc_g: np.ndarray, level: float = 0.95
                    ) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Question-clustered interval for a paired difference of two binary outcomes (rate a - rate b), vectorised.

    ``a_g`` / ``b_g`` ``[B, K]`` successes of each member per cluster, ``n_g`` ``[K]`` pairs per cluster,
    ``disc_g`` ``[B, K]`` discordant pairs. Returns ``(estimate, lo, hi)`` ``[B]``: MOVER (Newcombe / Zou-Donner)
    on the two :func:`design_effect_interval` intervals, with the correlation of the two rates from the
    questions' linearised residuals (which carries the pairing):
    ``lo = d - sqrt((p_a - l_a)^2 + (u_b - p_b)^2 - 2 r (p_a - l_a)(u_b - p_b))`` and symmetrically for ``hi``.
    It inherits the rates' behaviour at few questions and near 0 or 1, where a t interval on the differences
    under-covers (skewed per-question differences). With no discordant pair at all the interval is +/- the
    Clopper-Pearson bound for 0 discordant pairs among n / m_w effective pairs (``m_w = sum n_g^2 / n``), with
    the degrees of freedom of :func:`cluster_df` at ``rho = 1`` (the correlation that sample size assumes).
    """
    from scipy import stats  # deferred: scipy is heavy to import

    A = np.atleast_2d(np.asarray(a_g, dtype=float))
    Bm = np.atleast_2d(np.asarray(b_g, dtype=float))
    R = np.atleast_2d(np.asarray(disc_g, dtype=float))
    N = np.broadcast_to(np.asarray(n_g, dtype=float), A.shape)
    K = A.shape[1]
    if K < 2:
        raise ValueError("paired_interval needs at least two clusters")
    n = N.sum(1)
    pa, pb = A.sum(1) / n, Bm.sum(1) / n
    d = pa - pb
    la, ua = design_effect_interval(A, N, level)
    lb, ub = design_effect_interval(Bm, N, level)
    ea, eb = A - pa[:, None] * N, Bm - pb[:, None] * N
    den = np.sqrt((ea ** 2).sum(1) * (eb ** 2).sum(1))
    r = np.where(den > 0, (ea * eb).sum(1) / np.where(den > 0, den, 1.0), 0.0)
    lo = d - np.sqrt(np.maximum((pa - la) ** 2 + (ub - pb) ** 2 - 2 * r * (pa - la) * (ub - pb), 0.0))
    hi = d + np.sqrt(np.maximum((ua - pa) ** 2 + (pb - lb) ** 2 - 2 * r * (ua - pa) * (pb - lb), 0.0))
    a = 1 - level
    m_w = (N ** 2).sum(1) / n
    dof = cluster_df(N, 1.0)  # n / m_w effective pairs is the all-or-none (rho = 1) sample size: df at rho = 1
    n_eff = n / m_w * (stats.t.ppf(1 - a / 2, np.maximum(n - 1, 1)) / stats.t.ppf(1 - a / 2, dof)) ** 2
    u0 = 1.0 - (a / 2) ** (1.0 / n_eff)
    none = R.sum(1) == 0
    lo, hi = np.where(none, d - u0, lo), np.where(none, d + u0, hi)
    return d, np.maximum(-1.0, np.minimum(lo, d)), np.minimum(1.0, np.maximum(hi, d))


def proportion_ci(k: int, n: int, method: str = "wilson", level: float = 0.95) -> tuple[float | None, float | None]:
    """Two-sided interval for k successes out of n; ``(None, None)`` when n == 0."""
    if method not in ("wilson", "exact"):
        raise ValueError(f"unknown interval method {method!r}; choose 'wilson' or 'exact'")
    if n < 0 or k < 0 or k > n:
        raise ValueError(f"need 0 <= k <= n, got k={k}, n={n}")
    if n == 0:
        return (None, None)
    from statsmodels.stats.proportion import proportion_confint  # deferred: statsmodels is heavy to import

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


__all__ = [
    "FEW_CLUSTERS", "FEW_CLUSTERS_MARK", "FEW_CLUSTERS_NOTE", "METHODS", "Rate", "anova_deff", "anova_rho", "cluster_df",
    "clustered_rate", "design_effect_interval", "format_rate", "paired_interval", "proportion_ci", "rate",
    "wilson_rate",
]
