"""The exact randomisation test of a steering setting against its random-direction controls.

    from steering.sweep.exact import randomisation_test
    t = randomisation_test([[1, 0, 0], [0, 0, 1], [1, 1, 0]])   # per case: [probe, random_1..random_m]
    t["p_two"], t["p_greater"], t["p_less"], t["min_p_two"]

Per case ``i`` a setting has ``m_i + 1`` generations: the probe direction's (``x_i0``) and ``m_i`` fresh random
directions' (``x_i1..x_im``), each scored 1 (moved: the C case now answers correctly) or 0. The statistic is

    T = mean_i ( x_i0 - mean_{j >= 1} x_ij )       (probe moved minus random moved, averaged over cases)

Null hypothesis: within each case the probe's generation is exchangeable with the random ones (the probe
direction acts like one more random direction), so which of the ``m_i + 1`` generations is the probe's is a
uniform draw, independently per case. The null distribution of ``T`` is over all ``prod_i (m_i + 1)`` equally
likely assignments:

* **exactly** when the scores lie on an integer lattice (always, for 0/1 moved): ``T`` is an affine function
  of ``sum_i w_i x_{i,pi_i}`` with ``w_i = (m_i + 1) / m_i``, whose distribution is the convolution of the
  cases' uniform distributions over their ``m_i + 1`` values - every assignment counted, in O(n^2);
* by full enumeration for other scores when ``prod (m_i + 1) <= MAX_ENUMERATE``;
* else by Monte Carlo with ``n_draws`` (default 20,000) seeded draws and the +1 correction
  (``(1 + #{T* >= T}) / (n_draws + 1)``), stated in ``method``.

Cases whose generations all agree carry no information (their contribution is the same under every
assignment); ``n_informative`` counts the others. One-sided p-values: ``p_greater = P(T* >= T)`` (probe beats
random), ``p_less = P(T* <= T)`` (probe worse). The null distribution is skewed, so the two-sided p-value
doubles the smaller tail, ``p_two = min(1, 2 min(p_greater, p_less))``: each direction is then tested at
half the level (the sign-flip test this replaces put almost all its size in the "probe worse" tail).
``min_p_two`` (``min_p_greater``) is the smallest p-value these cases could give under any assignment, the
test's attainable level: with 5 informative cases of one moved generation each and ``m = 1`` it is
``2 * 2^-5 = 0.0625``, so such a setting can never reach p < 0.05.
"""
from __future__ import annotations

import functools
import itertools
import math
from collections import Counter
from collections.abc import Sequence
from typing import Any

import numpy as np

N_DRAWS = 20_000
MAX_ENUMERATE = 1 << 16
MAX_LATTICE = 2_000_000  # largest lattice span convolved exactly
_TOL = 1e-9


def _lcm(vals: Sequence[int]) -> int:
    out = 1
    for v in vals:
        out = out * v // math.gcd(out, v)
    return out


@functools.lru_cache(maxsize=4096)
def _pmf(cases: tuple[tuple[tuple[int, ...], int], ...]) -> tuple[int, np.ndarray]:
    """(offset, pmf) of the sum of independent uniform draws, one per case, over each case's integer values;
    ``cases`` holds (sorted values, how many cases have them)."""
    offset = 0
    pmf = np.ones(1)
    for vals, count in cases:
        lo = min(vals)
        one = np.zeros(max(vals) - lo + 1)
        for v in vals:
            one[v - lo] += 1.0 / len(vals)
        offset += lo * count
        for _ in range(count):
            pmf = np.convolve(pmf, one)
    return offset, pmf


def tails(cases: dict[tuple[int, ...], int], u_obs: int) -> tuple[float, float, float, float]:
    """``(P(U >= u_obs), P(U <= u_obs), P(U = max), P(U = min))`` of the null sum ``U`` of integer cases
    (a multiset: sorted per-case values -> count)."""
    key = tuple(sorted(cases.items()))
    offset, pmf = _pmf(key)
    i = u_obs - offset
    ge = float(pmf[max(i, 0):].sum()) if i < len(pmf) else 0.0
    le = float(pmf[: min(i, len(pmf) - 1) + 1].sum()) if i >= 0 else 0.0
    return min(ge, 1.0), min(le, 1.0), float(pmf[-1]), float(pmf[0])


def _as_cases(cases: Sequence[Sequence[float]]) -> list[np.ndarray]:
    out = []
    for c in cases:
        a = np.asarray(c, dtype=np.float64)
        if a.ndim != 1 or a.size < 2:
            raise ValueError(f"each case needs [probe, random_1, ..., random_m] with m >= 1, got {list(c)!r}")
        out.append(a)
    return out


def _lattice(cases: list[np.ndarray]) -> tuple[list[np.ndarray], int] | None:
    """Integer contributions ``x * (m + 1) * L / m`` (``L`` = lcm of the m's) when the scores are integers."""
    if not all(np.allclose(c, np.round(c)) for c in cases):
        return None
    scale = _lcm([c.size - 1 for c in cases])
    ints = [np.round(c).astype(np.int64) * (c.size * scale // (c.size - 1)) for c in cases]
    span = sum(int(z.max() - z.min()) for z in ints)
    return (ints, scale) if span <= MAX_LATTICE else None


def randomisation_test(cases: Sequence[Sequence[float]], *, n_draws: int = N_DRAWS, seed: int = 0) -> dict[str, Any]:
    """The exact randomisation test (see the module docstring) of per-case ``[probe, random_1..random_m]``."""
    cs = _as_cases(cases)
    n = len(cs)
    res: dict[str, Any] = {"n_cases": n, "m": sorted({c.size - 1 for c in cs}), "stat": None, "p_two": None,
                           "p_greater": None, "p_less": None, "min_p_two": None, "min_p_greater": None,
                           "n_informative": 0, "n_assignments": None, "method": ""}
    if n == 0:
        res["method"] = "no case"
        return res
    stat = float(np.mean([c[0] - c[1:].mean() for c in cs]))
    info = [c for c in cs if np.ptp(c) > _TOL]
    n_assign = math.prod(c.size for c in info) if info else 1
    res.update(stat=stat, n_informative=len(info), n_assignments=float(n_assign) if n_assign > 1e15 else n_assign)
    if not info:
        res.update(p_two=1.0, p_greater=1.0, p_less=1.0, min_p_two=1.0, min_p_greater=1.0,
                   method="exact randomisation test: no informative case (every case's generations agree)")
        return res
    lat = _lattice(info)
    if lat is not None:
        ints, _ = lat
        multiset = Counter(tuple(sorted(int(v) for v in z)) for z in ints)
        ge, le, pmax, pmin = tails(multiset, int(sum(int(z[0]) for z in ints)))
        method = ("exact randomisation test (which of each case's m+1 generations is the probe's, permuted; "
                  f"all {n_assign:.4g} assignments, by convolution)")
    else:
        ge, le, pmax, pmin, method = _enumerate_or_draw(info, n_assign, n_draws, seed)
    res.update(p_greater=ge, p_less=le, p_two=min(1.0, 2 * min(ge, le)), min_p_greater=pmax,
               min_p_two=min(1.0, 2 * min(pmax, pmin)), method=method)
    return res


def _enumerate_or_draw(info: list[np.ndarray], n_assign: int, n_draws: int,
                       seed: int) -> tuple[float, float, float, float, str]:
    """Tails of ``sum_i w_i x_{i,pi_i}`` for non-integer scores: enumeration, else Monte Carlo (+1)."""
    w = [c * c.size / (c.size - 1) for c in info]
    obs = float(sum(z[0] for z in w))
    hi, lo = float(sum(z.max() for z in w)), float(sum(z.min() for z in w))
    if n_assign <= MAX_ENUMERATE:
        sums = np.array([sum(t) for t in itertools.product(*[z.tolist() for z in w])])
        ge, le = float(np.mean(sums >= obs - _TOL)), float(np.mean(sums <= obs + _TOL))
        pmax, pmin = float(np.mean(sums >= hi - _TOL)), float(np.mean(sums <= lo + _TOL))
        return ge, le, pmax, pmin, f"exact randomisation test (all {n_assign} assignments enumerated)"
    rng = np.random.default_rng(seed)
    sums = np.zeros(n_draws)
    for z in w:
        sums += z[rng.integers(0, z.size, size=n_draws)]
    ge = float((np.sum(sums >= obs - _TOL) + 1) / (n_draws + 1))
    le = float((np.sum(sums <= obs + _TOL) + 1) / (n_draws + 1))
    pmax = float(np.prod([np.mean(np.isclose(z, z.max())) for z in w]))
    pmin = float(np.prod([np.mean(np.isclose(z, z.min())) for z in w]))
    return ge, le, max(pmax, 1 / (n_draws + 1)), max(pmin, 1 / (n_draws + 1)), (
        f"randomisation test by Monte Carlo ({n_draws} seeded draws of the {n_assign:.3g} assignments, "
        "+1 correction)")


__all__ = ["MAX_ENUMERATE", "N_DRAWS", "randomisation_test", "tails"]
