"""python bench/calib_intervals.py [--fast] [--json F]   (the interval entries of bench/calibration.py)

Coverage of the toolkit's question-clustered intervals, simulated with the very functions the stages call
(:func:`loadbearing.stats.design_effect_interval` behind ``clustered_rate``, and
:func:`loadbearing.stats.paired_interval` behind ``paired_difference_ci``), at the question counts real runs
have: 5, 7 and 16 (the ladder's hard levels) and 66 (a medium run), with questions of unequal size (3-11 rows,
mean about 7, as strategies x positions give), plus rare events (66 questions x 2 rows, p = 2.5%); and the
hard designs (``hard_entries``): lognormal sizes (1-40 rows), one question holding half the rows, sizes that
inform the rate, each at 5, 16 and 66 questions with ICC up to 0.9, and rare events at 5 and 16 questions,
each beside the K - 1 degrees of freedom the interval used before (``*.df_k_minus_1``, informational);
``rate.coverage.informative.q66.recheck`` reruns that entry's worst cell at its sizes with 16 times the
simulations (informational: with K_eff - 1 degrees of freedom from the sizes alone, 0.941 at 4,000 and 0.945 at
64,000 was a real under-coverage; with the Satterthwaite degrees of freedom of ``cluster_df``, 0.951 and 0.954).

Data: each question draws its own rate from a beta distribution with mean ``p`` and intra-question
correlation ``rho`` (0 = independent rows, 0.6 = most questions all-or-none), its rows are Bernoulli draws.

* ``rate.coverage.q{K}``: the worst coverage over the grid p in {5, 10, 30, 50}% x rho in {0, 0.1, 0.3, 0.6,
  0.9} (``by_scenario`` lists every cell, ``mean_width`` the mean width; ``coverage_df_k_minus_1`` and
  ``mean_width_df_k_minus_1`` the same with the K - 1 degrees of freedom used before), nominal 0.95;
* ``rate.coverage.rare``: 66 q x 2 rows, p = 2.5%, worst over rho in {0, 0.3, 0.6};
* ``rate.bootstrap_coverage.*`` (the interval this replaced: the percentile bootstrap over questions) at
  p = 30%, rho = 0.3 and for the rare events, for comparison;
* ``paired.coverage.q{K}``: the paired difference of two binary outcomes per row (a question effect on the
  logit, SD 0-2.5, shared by both members), worst over six (a, b) logit pairs x three SDs.

Seeded and deterministic. ``run(fast)`` returns ``{name: entry}`` with ``coverage``, ``nominal``, ``n_sims``.
"""
from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import Any

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

CLUSTERS = (5, 7, 16, 66)
PS = (0.05, 0.1, 0.3, 0.5)
RHOS = (0.0, 0.1, 0.3, 0.6, 0.9)
NOMINAL = 0.95


def _sizes(rng: np.random.Generator, K: int) -> np.ndarray:
    return rng.integers(3, 12, size=K)  # rows per question: 3..11


def _draw(rng: np.random.Generator, n_sims: int, ng: np.ndarray, p: float, rho: float) -> np.ndarray:
    """Successes per question ``[S, K]``: question rates ~ Beta(mean p, ICC rho), rows Bernoulli."""
    K = len(ng)
    if rho > 0:
        s = (1 - rho) / rho
        pg = rng.beta(p * s, (1 - p) * s, size=(n_sims, K))
    else:
        pg = np.full((n_sims, K), p)
    return rng.binomial(ng, pg)


def _bootstrap_ci(kg: np.ndarray, ng: np.ndarray, n_boot: int, rng: np.random.Generator) -> tuple[np.ndarray, ...]:
    """The old interval: percentile bootstrap over questions (Wilson over questions when every row agrees)."""
    from loadbearing.stats import proportion_ci

    S, K = kg.shape
    lo, hi = np.empty(S), np.empty(S)
    for s in range(S):
        k, n = kg[s].sum(), ng.sum()
        if k == 0 or k == n:
            lo[s], hi[s] = proportion_ci(0 if k == 0 else K, K, "wilson")  # type: ignore[misc]
            continue
        pick = rng.integers(0, K, size=(n_boot, K))
        st = kg[s][pick].sum(1) / ng[pick].sum(1)
        lo[s], hi[s] = np.quantile(st, 0.025), np.quantile(st, 0.975)
    return lo, hi


def rate_entries(n_sims: int, seed: int, n_boot: int) -> dict[str, dict[str, Any]]:
    from loadbearing.stats import design_effect_interval

    rng = np.random.default_rng(seed)
    out: dict[str, dict[str, Any]] = {}
    for K in CLUSTERS:
        ng = _sizes(rng, K)
        cells, widths, old, widths0 = {}, [], {}, []
        for p in PS:
            for rho in RHOS:
                kg = _draw(rng, n_sims, ng, p, rho)
                lo, hi = design_effect_interval(kg, ng)
                cells[f"p{p:g}.rho{rho:g}"] = float(np.mean((lo <= p) & (p <= hi)))
                widths.append(float(np.mean(hi - lo)))
                lo0, hi0 = design_effect_interval(kg, ng, df="clusters")
                old[f"p{p:g}.rho{rho:g}"] = float(np.mean((lo0 <= p) & (p <= hi0)))
                widths0.append(float(np.mean(hi0 - lo0)))
        worst = min(cells, key=cells.__getitem__)
        out[f"rate.coverage.q{K}"] = {
            "test": "clustered_rate (Korn-Graubard), worst over p x rho", "n_clusters": K,
            "rows_per_question": ng.tolist(), "coverage": cells[worst], "worst_scenario": worst,
            "mean_coverage": float(np.mean(list(cells.values()))), "mean_width": float(np.mean(widths)),
            "coverage_df_k_minus_1": min(old.values()), "mean_width_df_k_minus_1": float(np.mean(widths0)),
            "by_scenario": cells, "nominal": NOMINAL, "n_sims": n_sims}
        kg = _draw(rng, min(n_sims, 1000), ng, 0.3, 0.3)
        blo, bhi = _bootstrap_ci(kg, ng, n_boot, rng)
        out[f"rate.bootstrap_coverage.q{K}"] = {
            "test": "the replaced percentile bootstrap over questions, p = 0.3, rho = 0.3", "n_clusters": K,
            "coverage": float(np.mean((blo <= 0.3) & (0.3 <= bhi))), "nominal": NOMINAL, "n_sims": len(kg),
            "informational": True, "mean_width": float(np.mean(bhi - blo))}
    ng = np.full(66, 2)
    cells, widths = {}, []
    for rho in (0.0, 0.3, 0.6):
        kg = _draw(rng, n_sims, ng, 0.025, rho)
        lo, hi = design_effect_interval(kg, ng)
        cells[f"p0.025.rho{rho:g}"] = float(np.mean((lo <= 0.025) & (0.025 <= hi)))
        widths.append(float(np.mean(hi - lo)))
        if rho == 0.0:
            kb = kg[: min(n_sims, 1000)]
            blo, bhi = _bootstrap_ci(kb, ng, n_boot, rng)
            out["rate.bootstrap_coverage.rare"] = {
                "test": "the replaced percentile bootstrap, 66 q x 2 rows, p = 0.025", "n_clusters": 66,
                "coverage": float(np.mean((blo <= 0.025) & (0.025 <= bhi))), "nominal": NOMINAL,
                "n_sims": len(kb), "informational": True, "mean_width": float(np.mean(bhi - blo))}
    worst = min(cells, key=cells.__getitem__)
    out["rate.coverage.rare"] = {"test": "clustered_rate (Korn-Graubard), 66 q x 2 rows, p = 0.025", "n_clusters": 66,
                                 "coverage": cells[worst], "worst_scenario": worst, "by_scenario": cells,
                                 "mean_width": float(np.mean(widths)), "nominal": NOMINAL, "n_sims": n_sims}
    return out


def hard_sizes(kind: str, rng: np.random.Generator, K: int) -> np.ndarray:
    """Rows per question of the hard designs: ``lognormal`` (median 5, sigma 1, clipped to 1-40) or
    ``dominant`` (one question holds half the rows, the others 2-6 each)."""
    if kind == "lognormal":
        return np.clip(np.round(rng.lognormal(np.log(5.0), 1.0, size=K)), 1, 40).astype(int)
    rest = rng.integers(2, 7, size=K - 1)
    return np.concatenate([[int(rest.sum())], rest]).astype(int)


def _draw_informative(rng: np.random.Generator, n_sims: int, ng: np.ndarray, p: float, rho: float
                      ) -> tuple[np.ndarray, float]:
    """As :func:`_draw`, but a question's rate rises with its size (logit + 0.5 log(n_g / median)), so the
    pooled rate (the estimand) is a row-weighted mean the questions' own rates do not share."""
    from scipy.special import expit, logit

    shift = 0.5 * np.log(ng / np.median(ng))
    base = expit(logit(p) + shift)
    if rho > 0:
        s = (1 - rho) / rho
        pg = rng.beta(base * s, (1 - base) * s, size=(n_sims, len(ng)))
    else:
        pg = np.broadcast_to(base, (n_sims, len(ng)))
    return rng.binomial(ng, pg), float((base * ng).sum() / ng.sum())


HARD_RHOS = (0.0, 0.3, 0.6, 0.9)


def hard_entries(n_sims: int, seed: int) -> dict[str, dict[str, Any]]:
    """Korn-Graubard at very unequal and informative question sizes, ICC up to 0.9, and rare events at 5, 16
    and 66 questions; each beside the K - 1 degrees of freedom it replaced (informational)."""
    from loadbearing.stats import design_effect_interval

    rng = np.random.default_rng(seed + 7)
    out: dict[str, dict[str, Any]] = {}
    for design in ("lognormal", "dominant", "informative"):
        for K in (5, 16, 66):
            ng = hard_sizes("lognormal" if design == "informative" else design, rng, K)
            cells: dict[str, dict[str, float]] = {"effective": {}, "clusters": {}}
            for p in PS:
                for rho in HARD_RHOS:
                    if design == "informative":
                        kg, true = _draw_informative(rng, n_sims, ng, p, rho)
                    else:
                        kg, true = _draw(rng, n_sims, ng, p, rho), p
                    for df in cells:
                        lo, hi = design_effect_interval(kg, ng, df=df)
                        cells[df][f"p{p:g}.rho{rho:g}"] = float(np.mean((lo <= true) & (true <= hi)))
            for df, c in cells.items():
                worst = min(c, key=c.__getitem__)
                name = f"rate.coverage.{design}.q{K}" + ("" if df == "effective" else ".df_k_minus_1")
                label = "Satterthwaite, exchangeable" if df == "effective" else "K - 1"
                out[name] = {"test": f"clustered_rate (Korn-Graubard, df {label})"
                             f", {design} sizes, worst over p x rho (rho up to 0.9)", "n_clusters": K,
                             "rows_per_question": ng.tolist(), "k_eff": float(ng.sum() ** 2 / (ng ** 2).sum()),  # sizes alone
                             "coverage": c[worst], "worst_scenario": worst, "by_scenario": c,
                             "mean_coverage": float(np.mean(list(c.values()))), "nominal": NOMINAL, "n_sims": n_sims,
                             **({"informational": True} if df == "clusters" else {})}
    e = out["rate.coverage.informative.q66"]  # its worst cell again, same sizes, 16x the simulations
    p_s, rho_s = e["worst_scenario"].split(".rho")
    ng = np.array(e["rows_per_question"])
    kg, true = _draw_informative(np.random.default_rng(seed + 99), 16 * n_sims, ng, float(p_s[1:]), float(rho_s))
    lo, hi = design_effect_interval(kg, ng)
    out["rate.coverage.informative.q66.recheck"] = {
        "test": f"the worst cell of rate.coverage.informative.q66 ({e['worst_scenario']}) at its sizes, "
                f"{16 * n_sims} simulations: Monte Carlo noise or a real under-coverage",
        "coverage": float(np.mean((lo <= true) & (true <= hi))), "miss_above": float(np.mean(hi < true)),
        "miss_below": float(np.mean(lo > true)), "nominal": NOMINAL, "n_sims": 16 * n_sims, "informational": True}
    for K in (5, 16):
        ng = np.full(K, 2)
        c = {}
        for p in (0.025, 0.05):
            for rho in (0.0, 0.3, 0.6, 0.9):
                kg = _draw(rng, n_sims, ng, p, rho)
                lo, hi = design_effect_interval(kg, ng)
                c[f"p{p:g}.rho{rho:g}"] = float(np.mean((lo <= p) & (p <= hi)))
        worst = min(c, key=c.__getitem__)
        out[f"rate.coverage.rare.q{K}"] = {"test": f"clustered_rate (Korn-Graubard), {K} q x 2 rows, rare events",
                                          "n_clusters": K, "coverage": c[worst], "worst_scenario": worst,
                                          "by_scenario": c, "nominal": NOMINAL, "n_sims": n_sims}
    return out


def paired_entries(n_sims: int, seed: int) -> dict[str, dict[str, Any]]:
    from scipy.special import expit

    from loadbearing.stats import paired_interval

    rng = np.random.default_rng(seed + 1)
    out: dict[str, dict[str, Any]] = {}
    for K in CLUSTERS:
        ng = _sizes(rng, K)
        M = int(ng.max())
        mask = np.arange(M)[None, None, :] < ng[None, :, None]
        cells, widths = {}, []
        for a, b in ((0, 0), (1, 0), (-2, -3), (-3, -3), (2, 0), (-1, 1)):
            for sd in (0.0, 1.0, 2.5):
                uu = rng.normal(0, sd, size=200_000)
                true = float(np.mean(expit(a + uu) - expit(b + uu)))
                u = rng.normal(0, sd, size=(n_sims, K, 1))
                A = rng.random((n_sims, K, M)) < expit(a + u)
                B = rng.random((n_sims, K, M)) < expit(b + u)
                A, B = A & mask, B & mask
                _, lo, hi = paired_interval(A.sum(2), B.sum(2), ng, (A != B).sum(2))
                cells[f"a{a:g}.b{b:g}.sd{sd:g}"] = float(np.mean((lo <= true + 1e-12) & (true - 1e-12 <= hi)))
                widths.append(float(np.mean(hi - lo)))
        worst = min(cells, key=cells.__getitem__)
        out[f"paired.coverage.q{K}"] = {
            "test": "paired_difference_ci (clustered MOVER on Korn-Graubard), worst over logit pairs x SDs",
            "n_clusters": K, "coverage": cells[worst], "worst_scenario": worst,
            "mean_coverage": float(np.mean(list(cells.values()))), "mean_width": float(np.mean(widths)),
            "by_scenario": cells, "nominal": NOMINAL, "n_sims": n_sims}
    return out


def run(fast: bool = True, seed: int = 0) -> dict[str, dict[str, Any]]:
    """Every interval calibration entry (``fast``: 1,000 simulations per scenario, else 4,000)."""
    n = 1000 if fast else 4000
    out = rate_entries(n, seed, n_boot=300 if fast else 1000)
    out.update(hard_entries(n, seed))
    out.update(paired_entries(n, seed))
    return out


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[1])
    p.add_argument("--fast", action="store_true", help="fewer simulations (seconds)")
    p.add_argument("--seed", type=int, default=0, help="simulation seed (default %(default)s)")
    p.add_argument("--json", default=None, metavar="F", help="also write the entries as JSON to F")
    args = p.parse_args(argv)
    res = run(args.fast, args.seed)
    for k, e in res.items():
        print(f"{k:32s} coverage {e['coverage']:.3f} (nominal {e['nominal']}; {e['n_sims']} sims)")
    if args.json:
        Path(args.json).write_text(json.dumps(res, indent=1, sort_keys=True) + "\n", encoding="utf-8")
    return 0


if __name__ == "__main__":
    sys.exit(main())
