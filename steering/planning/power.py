"""Power, minimum detectable effect and the sample a verdict needs, by simulating the sweep's own test and rule.

    from steering.planning.power import simulate, mde, n_for_effect, n_for_null
    simulate(n_cases=24, m=2, n_settings=4, base_rate=0.05, effect=0.30)["power"]
    mde(24, 2, 4, 0.05)            # smallest effect with power >= 0.8 (on a 1-point grid, by bisection)
    n_for_null(2, 4, 0.05, sesoi=0.10)

The model of a sweep: K probe settings, each over the same number of C cases (one case per question, cases
independent); each case has m random generations that move with probability ``base_rate`` and one probe
generation that moves with probability ``base_rate + effect`` in the first ``n_effect`` settings (default 1:
one setting carries the effect, the others are null - the hardest case for Holm) and ``base_rate`` in the
rest. Every simulated sweep is judged exactly as a real one: the exact randomisation test of each setting
(:mod:`steering.sweep.exact`; the same cached null distributions), the pseudo-question 95% interval
(:func:`steering.sweep.analysis.adjusted_interval`'s formula, vectorised) and the all-settings rule of
:mod:`steering.sweep.verdict` (Holm). ``power`` is the fraction of sweeps whose verdict is ``effect``;
``p_null``, ``p_harm`` and ``p_inconclusive`` the other outcomes. Simulations are seeded (common random
numbers across effects, so power rises with the effect draw by draw) and deterministic.
"""
from __future__ import annotations

import functools
import math
from typing import Any

import numpy as np

from steering.sweep.exact import tails
from steering.sweep.verdict import CODES, PARSE_MARGIN, decide, flags

POWER = 0.8
N_SIMS = 500
N_MAX = 2000
EXACT_UP_TO = 120  # informative cases up to which the simulation convolves case by case


def _binom_tails(cats: tuple[tuple[int, int, int, int], ...], u_obs: int) -> tuple[float, float]:
    """``(P(U >= u_obs), P(U <= u_obs))`` of ``U = sum_c w_c B_c`` with independent ``B_c ~ Binomial(count_c,
    t_c / size_c)``, ``cats`` = (w_c, t_c, size_c, count_c) flattened as (w, t, size, count) tuples: the null sum
    of the exact test (:func:`steering.sweep.exact.tails`) with each category of identical cases collapsed into one
    binomial (a case whose ``size`` generations hold ``t`` at value ``w``, the rest at 0, contributes ``w`` with
    probability ``t / size``). Up to ``EXACT_UP_TO`` informative cases, by :func:`steering.sweep.exact.tails` (exact);
    beyond, binomial by binomial, by FFT once the lattice is long (absolute error ~1e-15, clipped)."""
    from scipy.signal import fftconvolve  # deferred: scipy is heavy to import
    from scipy.special import gammaln  # deferred: scipy is heavy to import

    if sum(c[3] for c in cats) <= EXACT_UP_TO:  # short: the exact convolution of steering.sweep.exact (cached)
        ms = {(0,) * (size - t) + (w,) * t: count for w, t, size, count in cats}
        ge, le, _, _ = tails(ms, u_obs)
        return ge, le
    pmf = np.ones(1)
    for w, t, size, count in cats:
        j = np.arange(count + 1)
        b = np.exp(gammaln(count + 1) - gammaln(j + 1) - gammaln(count - j + 1) + j * math.log(t / size)
                   + (count - j) * math.log1p(-t / size))
        arr = np.zeros(count * w + 1)
        arr[::w] = b
        pmf = np.convolve(pmf, arr) if min(pmf.size, arr.size) < 64 else np.clip(fftconvolve(pmf, arr), 0.0, None)
    ge = float(pmf[max(u_obs, 0):].sum()) if u_obs < pmf.size else 0.0
    le = float(pmf[: min(u_obs, pmf.size - 1) + 1].sum()) if u_obs >= 0 else 0.0
    return min(ge, 1.0), min(le, 1.0)


def exact_p_binary(a: np.ndarray, b: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """The exact randomisation test of many sweeps at once: ``a`` [S, n] probe moved (0/1), ``b`` [S, n, m]
    random moved. Returns ``(p_two, p_greater, p_less, stat)``, each [S]."""
    a = np.asarray(a, dtype=np.int64)
    b = np.asarray(b, dtype=np.int64)
    m = b.shape[-1]
    tot = a + b.sum(-1)  # [S, n]
    info = (tot > 0) & (tot < m + 1)
    counts = np.stack([np.sum(info & (tot == s), axis=1) for s in range(1, m + 1)], axis=1)  # [S, m]
    v_obs = np.sum(info & (a == 1), axis=1)  # [S]
    keys, inv = np.unique(np.concatenate([counts, v_obs[:, None]], axis=1), axis=0, return_inverse=True)
    ge = np.empty(len(keys))
    le = np.empty(len(keys))
    for i, row in enumerate(keys):
        cats = tuple((1, s, m + 1, int(c)) for s, c in enumerate(row[:m], start=1) if c)
        if not cats:
            ge[i] = le[i] = 1.0
            continue
        ge[i], le[i] = _binom_tails(cats, int(row[m]))
    inv = np.asarray(inv).reshape(-1)
    p_g, p_l = ge[inv], le[inv]
    stat = (a - b.mean(-1)).mean(-1)
    return np.minimum(1.0, 2 * np.minimum(p_g, p_l)), p_g, p_l, stat


@functools.lru_cache(maxsize=256)
def _tq(df: int, level: float = 0.95) -> float:
    from scipy.stats import t as t_dist  # deferred: scipy is heavy to import

    return float(t_dist.ppf(1 - (1 - level) / 2, df))


def interval_binary(d: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """The pseudo-question 95% interval (one question at +1 and one at -1 added) of per-question differences
    ``d`` [S, n], vectorised: ``(lo, hi)``, each [S]."""
    n = d.shape[-1]
    aug = np.concatenate([d, np.ones(d.shape[:-1] + (1,)), -np.ones(d.shape[:-1] + (1,))], axis=-1)
    mu = aug.mean(-1)
    se = aug.std(-1, ddof=1) / math.sqrt(n + 2)
    q = _tq(n + 1)
    return np.maximum(-1.0, mu - q * se), np.minimum(1.0, mu + q * se)


def exact_p_parsed(a: np.ndarray, b: np.ndarray, pa: np.ndarray,
                   pb: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """The exact moved-among-parsed test (:mod:`steering.sweep.outcomes`) of many sweeps at once: ``a`` [S, n] probe
    moved, ``b`` [S, n, m] random moved, ``pa`` / ``pb`` whether each parsed (0/1). A case counts when its
    probe and at least one control parsed; its controls are its parsed ones. Returns ``(p_two, stat, used)``:
    ``stat`` the mean over used cases of (probe - mean parsed control), NaN (and p NaN) when none is used."""
    a, b = np.asarray(a, dtype=np.int64), np.asarray(b, dtype=np.int64)
    pa, pb = np.asarray(pa, dtype=np.int64), np.asarray(pb, dtype=np.int64)
    S, n, m = b.shape
    mp = pb.sum(-1)  # parsed controls per case
    used = (pa == 1) & (mp >= 1)
    bm = (b * pb).sum(-1)
    tot = np.where(used, a + bm, 0)
    info = used & (tot > 0) & (tot < mp + 1)
    L = math.lcm(*range(1, m + 1))
    w = np.where(mp >= 1, (mp + 1) * L // np.maximum(mp, 1), 0)
    cat = np.where(info, (mp - 1) * (m + 1) + tot, -1)  # category (mp, tot), tot in 1..mp
    n_cat = m * (m + 1)
    counts = np.stack([np.sum(cat == c, axis=1) for c in range(n_cat)], axis=1)  # [S, n_cat]
    u_obs = np.sum(np.where(info & (a == 1), w, 0), axis=1)
    keys, inv = np.unique(np.concatenate([counts, u_obs[:, None]], axis=1), axis=0, return_inverse=True)
    ge, le = np.ones(len(keys)), np.ones(len(keys))
    for i, row in enumerate(keys):
        cats = []
        for c in np.nonzero(row[:n_cat])[0]:
            q, t = divmod(int(c), m + 1)
            cats.append(((q + 2) * L // (q + 1), t, q + 2, int(row[c])))
        if cats:
            g = math.gcd(*(c[0] for c in cats))
            ge[i], le[i] = _binom_tails(tuple((w // g, t, sz, n) for w, t, sz, n in cats), int(row[n_cat]) // g)
    inv = np.asarray(inv).reshape(-1)
    n_used = used.sum(-1)
    d = np.where(used, a - bm / np.maximum(mp, 1), 0.0)
    with np.errstate(invalid="ignore", divide="ignore"):
        stat = np.where(n_used > 0, d.sum(-1) / np.maximum(n_used, 1), np.nan)
    p2 = np.where(n_used > 0, np.minimum(1.0, 2 * np.minimum(ge[inv], le[inv])), np.nan)
    return p2, stat, used


def interval_masked(d: np.ndarray, mask: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """:func:`interval_binary` over the cases ``mask`` keeps (a different number per sweep); NaN when none."""
    from scipy.stats import t as t_dist  # deferred: scipy is heavy to import

    mask = np.asarray(mask, dtype=bool)
    k = mask.sum(-1)
    sx = np.where(mask, d, 0.0).sum(-1)
    sxx = np.where(mask, d * d, 0.0).sum(-1) + 2.0
    mu = sx / (k + 2)
    var = np.maximum(sxx - (k + 2) * mu * mu, 0.0) / (k + 1)
    q = t_dist.ppf(0.975, k + 1)
    hw = q * np.sqrt(var / (k + 2))
    lo, hi = np.maximum(-1.0, mu - hw), np.minimum(1.0, mu + hw)
    return np.where(k > 0, lo, np.nan), np.where(k > 0, hi, np.nan)


def simulate(n_cases: int, m: int, n_settings: int, base_rate: float, effect: float, *, n_effect: int = 1,
             n_sims: int = N_SIMS, level: float = 0.05, sesoi: float = 0.10, seed: int = 0,
             parse_rate: float = 1.0, probe_parse_rate: float | None = None,
             parse_margin: float = PARSE_MARGIN) -> dict[str, Any]:
    """Simulate ``n_sims`` sweeps (see the module docstring); the outcome fractions and the inputs.

    Every generation parses with probability ``parse_rate`` (the probe's, in the settings carrying the
    effect: ``probe_parse_rate``, default the same); ``base_rate`` and ``base_rate + effect`` are moved rates
    among parsed generations."""
    if n_cases < 1 or m < 1 or n_settings < 1:
        raise ValueError(f"need n_cases, m and n_settings >= 1, got {n_cases}, {m}, {n_settings}")
    if not 0 <= base_rate <= 1:
        raise ValueError(f"base_rate must be in [0, 1], got {base_rate}")
    if not 0 < parse_rate <= 1:
        raise ValueError(f"parse_rate must be in (0, 1], got {parse_rate}")
    q_probe = parse_rate if probe_parse_rate is None else probe_parse_rate
    rng = np.random.default_rng(seed)
    shape = (n_sims, n_settings)
    p2, st, lo, hi = (np.empty(shape) for _ in range(4))
    pp, pe, plo, phi = (np.empty(shape) for _ in range(4))
    for k in range(n_settings):
        u_a = rng.random((n_sims, n_cases))
        u_b = rng.random((n_sims, n_cases, m))
        rate = min(1.0, max(0.0, base_rate + (effect if k < n_effect else 0.0)))
        a = (u_a < rate).astype(np.int64)
        b = (u_b < base_rate).astype(np.int64)
        if parse_rate >= 1.0 and (q_probe >= 1.0 or k >= n_effect):
            pa, pb = np.ones_like(a), np.ones_like(b)
        else:
            pa = (rng.random((n_sims, n_cases)) < (q_probe if k < n_effect else parse_rate)).astype(np.int64)
            pb = (rng.random((n_sims, n_cases, m)) < parse_rate).astype(np.int64)
        p2[:, k], st[:, k], used = exact_p_parsed(a, b, pa, pb)
        mp = np.maximum(pb.sum(-1), 1)
        lo[:, k], hi[:, k] = interval_masked(a - (b * pb).sum(-1) / mp, used)
        pp[:, k], _, _, _ = exact_p_binary(pa, pb)
        dp = pa - pb.mean(-1)
        pe[:, k] = dp.mean(-1)
        plo[:, k], phi[:, k] = interval_binary(dp)
    parse = {"p": pp, "est": pe, "lo": plo, "hi": phi}
    codes = decide(p2, st, lo, hi, level=level, sesoi=sesoi, parse=parse, parse_margin=parse_margin)
    frac = {c: float(np.mean(codes == i)) for i, c in enumerate(CODES)}
    f = flags(p2, st, lo, hi, level=level, sesoi=sesoi, parse=parse, parse_margin=parse_margin)
    any_broken = float(f["broken"].any(-1).mean())
    excluded = float(f["equivalent"].all(-1).mean())  # every setting's intervals within the margins
    return {"power": frac["effect"], "p_harm": frac["harm"], "p_null": frac["null"],
            "p_inconclusive": frac["inconclusive"], "p_uninformative": frac["uninformative"],
            "p_any_uninformative": any_broken, "p_sesoi_excluded": excluded,
            "size_any_rejection": frac["effect"] + frac["harm"],
            "n_cases": n_cases, "m": m, "n_settings": n_settings, "base_rate": base_rate, "effect": effect,
            "parse_rate": parse_rate, "probe_parse_rate": q_probe, "parse_margin": parse_margin,
            "n_effect": n_effect, "n_sims": n_sims, "level": level, "sesoi": sesoi, "seed": seed}


def _first(ok, lo: int, hi: int) -> int | None:
    """The smallest i in [lo, hi] with ok(i) (assumed monotone): doubling from lo, then bisection; None when
    ok(hi) fails. Doubling first keeps the simulations small when the answer is (they cost more with n)."""
    prev, cur = lo - 1, lo
    while not ok(cur):
        if cur >= hi:
            return None
        prev, cur = cur, min(hi, 2 * cur)
    lo, hi = prev + 1, cur
    while lo < hi:
        mid = (lo + hi) // 2
        if ok(mid):
            hi = mid
        else:
            lo = mid + 1
    return lo


@functools.lru_cache(maxsize=512)
def mde(n_cases: int, m: int, n_settings: int, base_rate: float, *, level: float = 0.05, power: float = POWER,
        n_sims: int = N_SIMS, seed: int = 0, step: float = 0.01, parse_rate: float = 1.0,
        parse_margin: float = PARSE_MARGIN) -> float | None:
    """The smallest effect (a fraction, on a ``step`` grid) whose simulated power is at least ``power``;
    None when even the largest possible effect (``1 - base_rate``) falls short."""
    n_grid = int(math.floor((1.0 - base_rate) / step + 1e-9))
    if n_grid < 1:
        return None
    ok = lambda i: simulate(n_cases, m, n_settings, base_rate, i * step, n_sims=n_sims, level=level,  # noqa: E731
                            seed=seed, parse_rate=parse_rate, parse_margin=parse_margin)["power"] >= power
    i = _first(ok, 1, n_grid)
    return None if i is None else round(i * step, 10)


@functools.lru_cache(maxsize=512)
def n_for_effect(effect: float, m: int, n_settings: int, base_rate: float, *, level: float = 0.05,
                 power: float = POWER, n_sims: int = N_SIMS, seed: int = 0, n_max: int = N_MAX,
                 parse_rate: float = 1.0, parse_margin: float = PARSE_MARGIN) -> int | None:
    """The fewest cases (one per question) whose simulated power at ``effect`` is at least ``power``."""
    ok = lambda n: simulate(n, m, n_settings, base_rate, effect, n_sims=n_sims, level=level,  # noqa: E731
                            seed=seed, parse_rate=parse_rate, parse_margin=parse_margin)["power"] >= power
    return _first(ok, 2, n_max)


@functools.lru_cache(maxsize=512)
def n_for_null(m: int, n_settings: int, base_rate: float, *, sesoi: float = 0.10, level: float = 0.05,
               power: float = POWER, n_sims: int = N_SIMS, seed: int = 0, n_max: int = N_MAX,
               parse_rate: float = 1.0, parse_margin: float = PARSE_MARGIN, effects: tuple[float, ...] = (0.0,),
               base_rates: tuple[float, ...] | None = None) -> int | None:
    """The fewest cases (one per question) for which, with probability at least ``power``, the verdict is
    ``null`` at effect 0 and every interval excludes the SESOI (null, or an effect below the SESOI) at every
    other true effect in ``effects`` (default: effect 0 alone), at every random moved rate in ``base_rates``
    (default: ``base_rate`` alone): the worst case over that range."""
    bases = base_rates or (base_rate,)

    def ok(n: int) -> bool:
        for b in sorted(bases, key=lambda x: -x * (1 - x)):  # the likeliest to fail first
            for e in sorted(effects, reverse=True):
                r = simulate(n, m, n_settings, b, e, n_sims=n_sims, level=level, sesoi=sesoi, seed=seed,
                             parse_rate=parse_rate, parse_margin=parse_margin)
                # at effect 0 the verdict must be null; at a true effect below the SESOI, a null or an effect
                # whose every interval excludes the SESOI (a large n detects a real 3-point effect, rightly)
                if (r["p_null"] if e == 0 else r["p_sesoi_excluded"]) < power:
                    return False
        return True

    return _first(ok, 2, n_max)


def half_width(n_cases: int, m: int, base_rate: float) -> float:
    """The expected 95% half-width of the pseudo-question interval at effect 0 (normal approximation)."""
    var = base_rate * (1 - base_rate) * (1 + 1 / m)
    var_aug = (n_cases * var + 2.0) / (n_cases + 1)  # the two pseudo-questions at +1 and -1
    return _tq(n_cases + 1) * math.sqrt(var_aug / (n_cases + 2))


__all__ = ["N_MAX", "N_SIMS", "POWER", "exact_p_binary", "exact_p_parsed", "half_width", "interval_binary",
           "interval_masked", "mde", "n_for_effect", "n_for_null", "simulate"]
