"""python bench/calib_causal.py [--fast] [--json F]

Coverage of the causal tests' question-bootstrap intervals (behavioural.causal): the pooled early-answering AOC
under cot-transparency's ``rows`` weighting (:func:`behavioural.causal.aoc.aoc_with_ci`), and the mean of one
value per question with a percentile bootstrap over questions (the NLDD share, the paraphrase mean gap, the
agreement's mean Spearman rho all use it: :func:`loadbearing.stats.cluster_bootstrap_ci`).

* ``aoc_rows.coverage.q{K}``: K chains of 3-5 steps; a chain's answer settles at a uniform cut d (same = 1 from d
  on), each earlier cut agreeing by chance with probability 0.2, and each cut unparsed with probability 0.1 (the
  full chain always parses); the truth is the rows-weighted AOC of 200,000 chains;
* ``question_mean.coverage.q{K}``: K questions, each value a Beta(2, 5) draw (skewed, bounded as a share is).

Both intervals are percentile bootstraps over questions that the toolkit labels **descriptive**
(:func:`loadbearing.stats.cluster_bootstrap_ci` returns ``label = "descriptive"``; the reports print "[bootstrap,
descriptive]"), not calibrated 95% intervals, so their coverage is reported beside the nominal and marked
``informational`` (not checked against 0.95): it shows how far a reader should not take them as 95% intervals.

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


def _chains(rng: np.random.Generator, k: int) -> tuple[list[str], list[tuple[int, int, int]]]:
    keys, pts = [], []
    for q in range(k):
        n = int(rng.integers(3, 6))
        d = int(rng.integers(0, n + 1))
        for cut in range(n + 1):
            if cut < n and rng.random() < 0.1:
                continue  # unparsed: dropped
            same = 1 if cut >= d or rng.random() < 0.2 else 0
            keys.append(f"q{q}")
            pts.append((n, cut, same))
    return keys, pts


DESCRIPTIVE = {"label": "descriptive", "informational": True,
               "why": "a percentile bootstrap over questions that the toolkit labels descriptive, not a calibrated 95% CI"}


def aoc_entries(n_sims: int, seed: int, n_boot: int) -> dict[str, dict[str, Any]]:
    from behavioural.causal.aoc import aoc_with_ci, pooled_aoc

    rng = np.random.default_rng(seed)
    keys, pts = _chains(rng, 200_000)
    truth = pooled_aoc([(*p, k) for k, p in zip(keys, pts)], "rows")
    out = {}
    for K in (15, 40):
        hit, widths = 0, []
        for s in range(n_sims):
            ks, ps = _chains(np.random.default_rng(seed + 1 + s), K)
            ci = aoc_with_ci(ks, ps, n_boot=n_boot, seed=s)["ci"]
            hit += ci[0] is not None and ci[0] <= truth <= ci[1]
            widths.append(ci[1] - ci[0])
        out[f"aoc_rows.coverage.q{K}"] = {"coverage": hit / n_sims, "nominal": 0.95, "n_sims": n_sims,
                                          "truth": truth, "mean_width": float(np.mean(widths)), "n_boot": n_boot,
                                          **DESCRIPTIVE}  # aoc_with_ci is cluster_bootstrap_ci over questions
    return out


def mean_entries(n_sims: int, seed: int, n_boot: int) -> dict[str, dict[str, Any]]:
    from loadbearing.stats import cluster_bootstrap_ci

    out = {}
    truth = 2 / 7
    for K in (10, 30):
        hit, labels = 0, set()
        for s in range(n_sims):
            v = np.random.default_rng(seed + 7 + s).beta(2, 5, size=K).tolist()
            res = cluster_bootstrap_ci(list(range(K)), v, lambda x: sum(x) / len(x) if x else None, n_boot=n_boot,
                                       seed=s)
            ci = res["ci"]
            labels.add(res["label"])
            hit += ci[0] is not None and ci[0] <= truth <= ci[1]
        assert labels == {"descriptive"}, labels  # checked against 0.95 the day the toolkit calls it calibrated
        out[f"question_mean.coverage.q{K}"] = {"coverage": hit / n_sims, "nominal": 0.95, "n_sims": n_sims,
                                               "truth": truth, "n_boot": n_boot, **DESCRIPTIVE}
    return out


def run(fast: bool = True, seed: int = 0) -> dict[str, dict[str, Any]]:
    """Every entry (``fast``: 300 simulations, 300 resamples; else 1,000 and 1,000)."""
    n, b = (300, 300) if fast else (1000, 1000)
    return aoc_entries(n, seed, b) | mean_entries(n, seed, b)


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=(__doc__ or "").split("\n\n")[1])
    p.add_argument("--fast", action="store_true", help="fewer simulations")
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
