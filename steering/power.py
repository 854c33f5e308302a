"""Power, minimum detectable effect and the sample a verdict needs, by simulating the sweep's own test and rule.

    from steering.power import simulate, mde, n_for_effect, n_for_null
    simulate(n_cases=24, m=2, n_settings=4, base_rate=0.05, effect=0.30)["power"]
    mde(24, 2, 4, 0.05)            # smallest effect with power >= 0.8 (on a 1-point grid, by bisection)
    n_for_null(2, 4, 0.05, sesoi=0.10)

The model of a sweep: K probe settings, each over the same number of C cases (one case per question, cases
independent); each case has m random generations that move with probability ``base_rate`` and one probe
generation that moves with probability ``base_rate + effect`` in the first ``n_effect`` settings (default 1:
one setting carries the effect, the others are null - the hardest case for Holm) and ``base_rate`` in the
rest. Every simulated sweep is judged exactly as a real one: the exact randomisation test of each setting
(:mod:`steering.exact`; the same cached null distributions), the pseudo-question 95% interval
(:func:`steering.analysis.adjusted_interval`'s formula, vectorised) and the all-settings rule of
:mod:`steering.verdict` (Holm). ``power`` is the fraction of sweeps whose verdict is ``effect``;
``p_null``, ``p_harm`` and ``p_inconclusive`` the other outcomes. Simulations are seeded (common random
numbers across effects, so power rises with the effect draw by draw) and deterministic.
"""
from __future__ import annotations

import functools
import math
from typing import Any

import numpy as np

from steering.exact import tails
from steering.verdict import CODES, decide

POWER = 0.8
N_SIMS = 500
N_MAX = 2000


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
        ms = {(0,) * (m + 1 - s) + (m + 1,) * s: int(c) for s, c in enumerate(row[:m], start=1) if c}
        if not ms:
            ge[i] = le[i] = 1.0
            continue
        ge[i], le[i], _, _ = tails(ms, int(row[m]) * (m + 1))
    inv = np.asarray(inv).reshape(-1)
    p_g, p_l = ge[inv], le[inv]
    stat = (a - b.mean(-1)).mean(-1)
    return np.minimum(1.0, 2 * np.minimum(p_g, p_l)), p_g, p_l, stat


@functools.lru_cache(maxsize=256)
def _tq(df: int, level: float = 0.95) -> float:
    from scipy.stats import t as t_dist

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


def simulate(n_cases: int, m: int, n_settings: int, base_rate: float, effect: float, *, n_effect: int = 1,
             n_sims: int = N_SIMS, level: float = 0.05, sesoi: float = 0.10, seed: int = 0) -> dict[str, Any]:
    """Simulate ``n_sims`` sweeps (see the module docstring); the outcome fractions and the inputs."""
    if n_cases < 1 or m < 1 or n_settings < 1:
        raise ValueError(f"need n_cases, m and n_settings >= 1, got {n_cases}, {m}, {n_settings}")
    if not 0 <= base_rate <= 1:
        raise ValueError(f"base_rate must be in [0, 1], got {base_rate}")
    rng = np.random.default_rng(seed)
    p2 = np.empty((n_sims, n_settings))
    st = np.empty_like(p2)
    lo = np.empty_like(p2)
    hi = np.empty_like(p2)
    for k in range(n_settings):
        u_a = rng.random((n_sims, n_cases))
        u_b = rng.random((n_sims, n_cases, m))
        rate = min(1.0, max(0.0, base_rate + (effect if k < n_effect else 0.0)))
        a = (u_a < rate).astype(np.int64)
        b = (u_b < base_rate).astype(np.int64)
        p2[:, k], _, _, st[:, k] = exact_p_binary(a, b)
        lo[:, k], hi[:, k] = interval_binary(a - b.mean(-1))
    codes = decide(p2, st, lo, hi, level=level, sesoi=sesoi)
    frac = {c: float(np.mean(codes == i)) for i, c in enumerate(CODES)}
    return {"power": frac["effect"], "p_harm": frac["harm"], "p_null": frac["null"],
            "p_inconclusive": frac["inconclusive"], "size_any_rejection": frac["effect"] + frac["harm"],
            "n_cases": n_cases, "m": m, "n_settings": n_settings, "base_rate": base_rate, "effect": effect,
            "n_effect": n_effect, "n_sims": n_sims, "level": level, "sesoi": sesoi, "seed": seed}


def _first(ok, lo: int, hi: int) -> int | None:
    """The smallest i in [lo, hi] with ok(i) (assumed monotone), by bisection; None when ok(hi) fails."""
    if not ok(hi):
        return None
    while lo < hi:
        mid = (lo + hi) // 2
        if ok(mid):
            hi = mid
        else:
            lo = mid + 1
    return lo


@functools.lru_cache(maxsize=512)
def mde(n_cases: int, m: int, n_settings: int, base_rate: float, *, level: float = 0.05, power: float = POWER,
        n_sims: int = N_SIMS, seed: int = 0, step: float = 0.01) -> float | None:
    """The smallest effect (a fraction, on a ``step`` grid) whose simulated power is at least ``power``;
    None when even the largest possible effect (``1 - base_rate``) falls short."""
    n_grid = int(math.floor((1.0 - base_rate) / step + 1e-9))
    if n_grid < 1:
        return None
    ok = lambda i: simulate(n_cases, m, n_settings, base_rate, i * step, n_sims=n_sims, level=level,  # noqa: E731
                            seed=seed)["power"] >= power
    i = _first(ok, 1, n_grid)
    return None if i is None else round(i * step, 10)


@functools.lru_cache(maxsize=512)
def n_for_effect(effect: float, m: int, n_settings: int, base_rate: float, *, level: float = 0.05,
                 power: float = POWER, n_sims: int = N_SIMS, seed: int = 0, n_max: int = N_MAX) -> int | None:
    """The fewest cases (one per question) whose simulated power at ``effect`` is at least ``power``."""
    ok = lambda n: simulate(n, m, n_settings, base_rate, effect, n_sims=n_sims, level=level,  # noqa: E731
                            seed=seed)["power"] >= power
    return _first(ok, 2, n_max)


@functools.lru_cache(maxsize=512)
def n_for_null(m: int, n_settings: int, base_rate: float, *, sesoi: float = 0.10, level: float = 0.05,
               power: float = POWER, n_sims: int = N_SIMS, seed: int = 0, n_max: int = N_MAX) -> int | None:
    """The fewest cases (one per question) for which, when the probe is no better than random (effect 0),
    the verdict is ``null`` (every interval within +/- ``sesoi``) with probability at least ``power``."""
    ok = lambda n: simulate(n, m, n_settings, base_rate, 0.0, n_sims=n_sims, level=level, sesoi=sesoi,  # noqa: E731
                            seed=seed)["p_null"] >= power
    return _first(ok, 2, n_max)


def half_width(n_cases: int, m: int, base_rate: float) -> float:
    """The expected 95% half-width of the pseudo-question interval at effect 0 (normal approximation)."""
    var = base_rate * (1 - base_rate) * (1 + 1 / m)
    var_aug = (n_cases * var + 2.0) / (n_cases + 1)  # the two pseudo-questions at +1 and -1
    return _tq(n_cases + 1) * math.sqrt(var_aug / (n_cases + 2))


__all__ = ["N_MAX", "N_SIMS", "POWER", "exact_p_binary", "half_width", "interval_binary", "mde", "n_for_effect",
           "n_for_null", "simulate"]
