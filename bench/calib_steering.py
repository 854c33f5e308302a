"""python bench/calib_steering.py [--fast] [--json F]   (the steering entries of bench/calibration.py)

Simulations of the steering stage's inference at the case counts real runs have (24: the demo's
``--max-cases``, 57: the paper's C cases, 100), each printed beside its nominal level:

* ``exact.size``: the exact randomisation test of one setting (:mod:`steering.sweep.exact`) when the probe is a
  random direction in distribution (effect 0): empirical size of p_two < 0.05 (and of each direction,
  nominal 0.025), beside ``attainable``, the size the discrete test can actually reach at 0.05 on such data
  (the mean over simulated data sets of the conditional null probability of p_two <= 0.05);
* ``rule.size``: the all-settings rule (Holm over K = 4 or 12 settings) at effect 0: how often the verdict
  is effect or harm (nominal 0.05);
* ``exact.power`` / ``rule.power``: power at effects of 10-40 points (one setting carries it);
* ``mde``: the simulated minimum detectable effect (80% power) and the power of the normal-formula MDE the
  sweep printed before (``1.96+0.84`` over the per-case spread at the Holm-worst level);
* ``null.size``: how often the verdict is ``null`` when one setting's true effect is +SESOI or -SESOI (where
  the base rate allows it; nominal <= 0.025: each equivalence bound is one side of a 95% interval) and
  ``null.power`` when every effect is 0;
* ``interval.coverage``: coverage of the difference's pseudo-question 95% interval at 5, 7, 16, 24, 57 and 100
  questions (nominal 0.95).

Cases are one per question and independent; random generations move at ``base_rate`` (5% and 25%), m = 2.
Seeded and deterministic. ``run(fast)`` returns ``{name: entry}``, each entry with ``nominal``, ``n_sims``
and ``size`` / ``power`` / ``coverage`` (and ``attainable`` for exact tests).
"""
from __future__ import annotations

import argparse
import json
import math
import sys
from pathlib import Path
from typing import Any

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

CASES = (24, 57, 100)
BASES = (0.05, 0.25)
M = 2
LEVEL = 0.05
SESOI = 0.10


def _conditional_size(a: np.ndarray, b: np.ndarray, alpha: float = LEVEL) -> np.ndarray:
    """Per data set [S], the null probability that the exact test gives p_two <= alpha (its attainable size)."""
    from scipy.stats import binom

    m = b.shape[-1]
    tot = a + b.sum(-1)
    info = (tot > 0) & (tot < m + 1)
    counts = np.stack([np.sum(info & (tot == s), axis=1) for s in range(1, m + 1)], axis=1)
    keys, inv = np.unique(counts, axis=0, return_inverse=True)
    out = np.empty(len(keys))
    for i, row in enumerate(keys):
        pmf = np.ones(1)
        for s, c in enumerate(row, start=1):
            if c:
                pmf = np.convolve(pmf, binom.pmf(np.arange(c + 1), c, s / (m + 1)))
        ge = np.cumsum(pmf[::-1])[::-1]
        le = np.cumsum(pmf)
        p_two = np.minimum(1.0, 2 * np.minimum(ge, le))
        out[i] = float(pmf[p_two <= alpha + 1e-12].sum())
    return out[np.asarray(inv).reshape(-1)]


def _data(rng: np.random.Generator, n_sims: int, n: int, base: float, effect: float) -> tuple[np.ndarray, np.ndarray]:
    a = (rng.random((n_sims, n)) < min(1.0, max(0.0, base + effect))).astype(np.int64)
    b = (rng.random((n_sims, n, M)) < base).astype(np.int64)
    return a, b


def exact_entries(n_sims: int, seed: int) -> dict[str, dict[str, Any]]:
    from steering.planning.power import exact_p_binary

    out = {}
    rng = np.random.default_rng(seed)
    for n in CASES:
        for base in BASES:
            a, b = _data(rng, n_sims, n, base, 0.0)
            p2, _, _, st = exact_p_binary(a, b)
            rej = p2 < LEVEL
            out[f"steering.exact.size.n{n}.base{base:g}"] = {
                "test": "exact randomisation test, one setting, effect 0", "n_cases": n, "m": M, "base_rate": base,
                "size": float(rej.mean()), "size_greater": float((rej & (st > 0)).mean()),
                "size_less": float((rej & (st < 0)).mean()), "nominal": LEVEL, "nominal_per_direction": LEVEL / 2,
                "attainable": float(_conditional_size(a, b).mean()), "n_sims": n_sims}
            for eff in (0.1, 0.2, 0.3, 0.4):
                a, b = _data(rng, n_sims, n, base, eff)
                p2, _, _, st = exact_p_binary(a, b)
                out[f"steering.exact.power.n{n}.base{base:g}.effect{eff:g}"] = {
                    "test": "exact randomisation test, one setting", "n_cases": n, "m": M, "base_rate": base,
                    "effect": eff, "power": float(((p2 < LEVEL) & (st > 0)).mean()), "nominal": LEVEL,
                    "n_sims": n_sims}
    return out


def rule_entries(n_sims: int, seed: int, settings: tuple[int, ...]) -> dict[str, dict[str, Any]]:
    from steering.planning.power import simulate

    out = {}
    for n in CASES:
        for base in BASES:
            for K in settings:
                kw = dict(n_sims=n_sims, level=LEVEL, sesoi=SESOI, seed=seed)
                z = simulate(n, M, K, base, 0.0, **kw)
                out[f"steering.rule.size.n{n}.base{base:g}.K{K}"] = {
                    "test": f"verdict rule (exact test + Holm over {K} settings), effect 0: effect or harm",
                    "n_cases": n, "m": M, "base_rate": base, "n_settings": K, "size": z["size_any_rejection"],
                    "nominal": LEVEL, "n_sims": n_sims}
                out[f"steering.null.power.n{n}.base{base:g}.K{K}"] = {
                    "test": f"verdict null (every 95% CI within +/-{SESOI:g}) when every effect is 0",
                    "n_cases": n, "m": M, "base_rate": base, "n_settings": K, "power": z["p_null"],
                    "nominal": None, "n_sims": n_sims}
                for sign in (1, -1):
                    if not 0 <= base + sign * SESOI <= 1:  # the probe's rate would be clipped: not a +/-SESOI effect
                        continue
                    e = simulate(n, M, K, base, sign * SESOI, **kw)
                    out[f"steering.null.size.n{n}.base{base:g}.K{K}.effect{sign * SESOI:+g}"] = {
                        "test": f"verdict null when one setting's true effect is {sign * SESOI:+g} (= +/- SESOI)",
                        "n_cases": n, "m": M, "base_rate": base, "n_settings": K, "size": e["p_null"],
                        "nominal": LEVEL / 2, "n_sims": n_sims}
                for eff in (0.2, 0.3, 0.4):
                    p = simulate(n, M, K, base, eff, **kw)
                    out[f"steering.rule.power.n{n}.base{base:g}.K{K}.effect{eff:g}"] = {
                        "test": f"verdict effect (exact test + Holm over {K} settings), one setting at +{eff:g}",
                        "n_cases": n, "m": M, "base_rate": base, "n_settings": K, "effect": eff, "power": p["power"],
                        "nominal": None, "n_sims": n_sims}
    return out


def mde_entries(n_sims: int, seed: int) -> dict[str, dict[str, Any]]:
    from scipy.stats import norm

    from steering.planning.power import mde, simulate

    out = {}
    for n in CASES:
        for base in BASES:
            K = 4
            sim = mde(n, M, K, base, level=LEVEL, n_sims=n_sims, seed=seed)
            sd = math.sqrt(base * (1 - base) * (1 + 1 / M))  # the per-case spread of probe - mean(random)
            old = min(1.0, (norm.ppf(1 - LEVEL / K / 2) + norm.ppf(0.8)) * sd / math.sqrt(n))
            p_old = simulate(n, M, K, base, round(old, 2), n_sims=n_sims, level=LEVEL, seed=seed + 1)["power"]
            p_sim = (simulate(n, M, K, base, sim, n_sims=n_sims, level=LEVEL, seed=seed + 1)["power"]
                     if sim is not None else None)
            out[f"steering.mde.n{n}.base{base:g}.K{K}"] = {
                "test": f"MDE (80% power, exact test + Holm over {K} settings): simulated vs the old normal formula",
                "n_cases": n, "m": M, "base_rate": base, "n_settings": K, "mde_simulated": sim,
                "power": p_sim, "mde_normal_formula": old, "power_at_normal_mde": p_old, "nominal": 0.8,
                "n_sims": n_sims}
    return out


def coverage_entries(n_sims: int, seed: int) -> dict[str, dict[str, Any]]:
    from steering.planning.power import interval_binary

    out = {}
    rng = np.random.default_rng(seed)
    for n in (5, 7, 16) + CASES:
        for base in BASES:
            for eff in (0.0, 0.2):
                a, b = _data(rng, n_sims, n, base, eff)
                lo, hi = interval_binary(a - b.mean(-1))
                cov = float(np.mean((lo <= eff + 1e-12) & (eff - 1e-12 <= hi)))
                out[f"steering.interval.coverage.n{n}.base{base:g}.effect{eff:g}"] = {
                    "test": "difference's pseudo-question 95% t-interval", "n_clusters": n, "n_cases": n, "m": M,
                    "base_rate": base, "effect": eff, "coverage": cov, "nominal": 0.95,
                    "mean_width": float(np.mean(hi - lo)), "n_sims": n_sims}
    return out


def run(fast: bool = True, seed: int = 0) -> dict[str, dict[str, Any]]:
    """Every steering calibration entry (``fast``: fewer simulations and only the study's 4-setting grid)."""
    n = 1000 if fast else 5000
    out: dict[str, dict[str, Any]] = {}
    out.update(exact_entries(n, seed))
    out.update(rule_entries(n // 2 if fast else n, seed, (4,) if fast else (4, 12)))
    out.update(mde_entries(400 if fast else 1000, seed))
    out.update(coverage_entries(n, seed))
    return out


def _fmt(x: Any) -> str:
    return "" if x is None else (f"{x:.3f}" if isinstance(x, float) else str(x))


def table(res: dict[str, dict[str, Any]]) -> str:
    from loadbearing.tables import render_table

    rows = []
    for name, e in res.items():
        val = next((k for k in ("size", "coverage", "power") if e.get(k) is not None), None)
        extra = []
        if "attainable" in e:
            extra.append(f"attainable {e['attainable']:.3f}; greater {e['size_greater']:.3f}, less {e['size_less']:.3f}")
        if "mde_simulated" in e:
            extra.append(f"MDE sim {_fmt(e['mde_simulated'])} vs normal {e['mde_normal_formula']:.3f} (power there "
                         f"{e['power_at_normal_mde']:.3f})")
        if "mean_width" in e:
            extra.append(f"width {e['mean_width']:.3f}")
        rows.append([name, val or "", _fmt(e.get(val)) if val else "", _fmt(e.get("nominal")), str(e["n_sims"]),
                     "; ".join(extra)])
    return render_table(["entry", "kind", "value", "nominal", "n_sims", "notes"], rows, style="text")


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[1])
    p.add_argument("--fast", action="store_true", help="fewer simulations (about a minute)")
    p.add_argument("--seed", type=int, default=0, help="simulation seed (default %(default)s)")
    p.add_argument("--json", default=None, metavar="F", help="also write the entries as JSON to F")
    args = p.parse_args(argv)
    res = run(args.fast, args.seed)
    print(table(res))
    if args.json:
        Path(args.json).write_text(json.dumps(res, indent=1, sort_keys=True) + "\n", encoding="utf-8")
    return 0


if __name__ == "__main__":
    sys.exit(main())
