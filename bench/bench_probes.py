"""Probe sweep cost: the full all-layer study vs a single scikit-learn fit per layer-fold, its growth with
rows and d_model, and a projection to the paper's scale.

    python bench/bench_probes.py --quick          # ~1 min on 2 busy cores
    python bench/bench_probes.py                  # larger grid, ~10 min on 2 busy cores

Synthetic data (Gaussian features, a planted linear signal at one layer, questions of 5 rows each), held
in memory (no HDF5 reads: the store's per-layer read is measured separately by the activations bench).
For each (rows, d_model) it times

* sweep: :func:`probes.train.train_probes` over all layers with the defaults (both probes, grouped 5-fold
  CV, logistic C grid by inner grouped 3-fold CV, the shuffled-label control, nested layer selection,
  directions, transfer checks at one layer);
* baseline: one ``Pipeline(StandardScaler, LogisticRegression(C=1))`` fit per layer and outer fold on the
  same folds (what a minimal, un-tuned, control-free study costs);

and prints the overhead ratio. It fits ``log t = a + b log(rows) + c log(d_model)`` to the per-layer
times and projects the paper's scale (28,584 rows, 42 layers, d_model 3584). The projection extrapolates
far beyond the measured grid (lbfgs iteration counts and BLAS threading change with size): treat it as an
order of magnitude.
"""
from __future__ import annotations

import argparse
import os
import sys
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

PAPER = {"rows": 28584, "layers": 42, "d_model": 3584}


class _MemStore:
    def __init__(self, acts):
        self.acts = acts  # [n, L, d]

    def read(self, layer, position="prefix_last"):
        return self.acts[:, layer, :]


def synthetic(n: int, d: int, layers: int, seed: int = 0):
    import pandas as pd

    from probes.data import ProbeData

    rng = np.random.default_rng(seed)
    acts = rng.normal(size=(n, layers, d)).astype(np.float32)
    u = rng.normal(size=d)
    s = acts[:, layers // 2, :] @ u
    y = (s + 0.5 * s.std() * rng.normal(size=n) > np.quantile(s, 0.6)).astype(np.int64)
    q = (np.arange(n) // 5).astype(str).astype(object)
    meta = pd.DataFrame({"strategy": np.array(["arithmetic", "contradiction"])[np.arange(n) % 2],
                         "edit_position": np.array(["early", "middle", "late"])[np.arange(n) % 3],
                         "dataset": "synthetic", "task": None, "condition": "perturbed"})
    return ProbeData(store=_MemStore(acts), target="propagation", position="prefix_last", layers=list(range(layers)),
                     idx=np.arange(n), y=y, class_names=["non-C", "C"], y_c=y, questions=q, meta=meta,
                     conditions="perturbed")


def time_sweep(data, folds: int) -> tuple[float, float]:
    from probes.train import train_probes

    w, c = time.perf_counter(), time.process_time()
    train_probes(data, folds=folds)
    return time.perf_counter() - w, time.process_time() - c


def time_baseline(data, folds: int) -> tuple[float, float]:
    from sklearn.linear_model import LogisticRegression
    from sklearn.pipeline import make_pipeline
    from sklearn.preprocessing import StandardScaler

    from probes.cv import outer_folds
    from probes.estimators import blas_limit

    g = data.groups("question")
    fold = outer_folds(data.y, g, folds, 0)
    w, c = time.perf_counter(), time.process_time()
    for L in data.layers:
        X = data.X(L)
        for k in range(folds):
            tr = fold != k
            with blas_limit(X[tr]):  # same threading policy as the probes
                make_pipeline(StandardScaler(), LogisticRegression(C=1.0, max_iter=500)).fit(X[tr], data.y[tr])
    return time.perf_counter() - w, time.process_time() - c


def time_one_fit(n: int, d: int, seed: int = 0) -> float:
    from sklearn.linear_model import LogisticRegression
    from sklearn.pipeline import make_pipeline
    from sklearn.preprocessing import StandardScaler

    rng = np.random.default_rng(seed)
    X = rng.normal(size=(n, d)).astype(np.float32)
    y = (X @ rng.normal(size=d) + 3 * rng.normal(size=n) > 0).astype(int)
    c = time.process_time()
    make_pipeline(StandardScaler(), LogisticRegression(C=1.0, max_iter=500)).fit(X, y)
    return time.process_time() - c


def fit_growth(ns, ds, ts):
    A = np.column_stack([np.ones(len(ns)), np.log(ns), np.log(ds)])
    coef, *_ = np.linalg.lstsq(A, np.log(ts), rcond=None)
    return coef


def project(coef, n, d):
    return float(np.exp(coef[0] + coef[1] * np.log(n) + coef[2] * np.log(d)))


def main(argv=None) -> int:
    p = argparse.ArgumentParser(prog="python bench/bench_probes.py", description=__doc__.split("\n\n")[0])
    p.add_argument("--quick", action="store_true", help="small grid (about a minute)")
    p.add_argument("--layers", type=int, default=None, help="layers per synthetic store (default 2 quick, 3 full)")
    p.add_argument("--folds", type=int, default=5, help="outer folds")
    args = p.parse_args(argv)
    if args.quick:
        grid = [(200, 16), (400, 16), (200, 64), (400, 64)]
        layers = args.layers or 2
    else:
        grid = [(500, 64), (1000, 64), (2000, 64), (1000, 256), (2000, 256), (2000, 512)]
        layers = args.layers or 2
    print(f"cpus={os.cpu_count()} load={os.getloadavg()[0]:.1f}  layers={layers} folds={args.folds}")
    print(f"{'rows':>6} {'d':>5}  {'sweep wall':>10} {'cpu':>7}  {'baseline wall':>13} {'cpu':>7}  {'ratio(wall)':>11} "
          f"{'ratio(cpu)':>10}  {'sweep s/layer':>13}")
    ns, ds, tsw, tbw = [], [], [], []
    for n, d in grid:
        data = synthetic(n, d, layers)
        sw, sc = time_sweep(data, args.folds)
        bw, bc = time_baseline(data, args.folds)
        ns.append(n), ds.append(d), tsw.append(sc / layers), tbw.append(bc / layers)
        print(f"{n:>6} {d:>5}  {sw:>9.2f}s {sc:>6.2f}s  {bw:>12.2f}s {bc:>6.2f}s  {sw / bw:>11.1f} {sc / bc:>10.1f}"
              f"  {sc / layers:>12.2f}s", flush=True)
    cs, cb = fit_growth(ns, ds, tsw), fit_growth(ns, ds, tbw)
    print(f"\ngrowth on this grid (cpu s per layer): sweep ~ rows^{cs[1]:.2f} d^{cs[2]:.2f}; baseline ~ rows^{cb[1]:.2f} "
          f"d^{cb[2]:.2f}  (small exponents = per-call overhead dominates at these sizes)")
    # The grid is overhead-dominated, so its exponents cannot be extrapolated. Project instead from the cost
    # of one logistic fit measured where compute dominates (lbfgs work ~ rows x d per iteration), times the
    # measured sweep/baseline ratio (both are sums of logistic fits of the same size).
    fit_grid = [(1000, 256), (2000, 256), (2000, 512)] if args.quick else [(2000, 512), (4000, 512), (4000, 1024)]
    fs, ft = [], []
    for n, d in fit_grid:
        t = time_one_fit(n, d)
        fs.append(n * d), ft.append(t)
        print(f"one StandardScaler+LogisticRegression fit, {n} x {d}: {t:.2f} cpu s")
    b = float(np.polyfit(np.log(fs), np.log(ft), 1)[0])
    n_train = PAPER["rows"] * (args.folds - 1) / args.folds
    t_fit = ft[-1] * (n_train * PAPER["d_model"] / fs[-1]) ** b
    base = t_fit * PAPER["layers"] * args.folds
    ratio = tsw[-1] / tbw[-1]
    print(f"fit cost ~ (rows*d)^{b:.2f}; projected one fit at the paper's scale ({n_train:.0f} x {PAPER['d_model']}): "
          f"{t_fit:.0f} cpu s")
    print(f"projected paper scale ({PAPER['rows']} rows, {PAPER['layers']} layers, d={PAPER['d_model']}, "
          f"{args.folds} folds): baseline {base / 3600:.1f} cpu h; full sweep (x{ratio:.0f}, the ratio measured at "
          f"{ns[-1]}x{ds[-1]}) {base * ratio / 3600:.0f} cpu h. With --pca 128 the fits shrink to d=128: ~"
          f"{base * ratio * (128 / PAPER['d_model']) ** b / 3600:.1f} cpu h plus the per-fold PCAs. "
          f"Order of magnitude only.")
    return 0


if __name__ == "__main__":
    sys.exit(main())
