"""Probe sweep cost: the batched torch solver against today's scikit-learn path, on a synthetic store of 1/8
of the paper's scale, and a projection to the paper's scale.

    flock /tmp/cpu.lock .venv/bin/python bench/bench_probes.py --json bench_probes.json   # ~6 min, 2 busy cores
    .venv/bin/python bench/bench_probes.py --quick                                      # ~1 min sanity run

Synthetic store (in memory, one layer generated at a time): residual-stream-like activations, i.e. a
power-law spectrum of 256 latent directions plus isotropic noise and four "massive" offset dimensions, so
the standardised features are ill-conditioned as real hidden states are; a label planted along one latent
direction with a layer-dependent strength; questions of 5 rows; strategy and position metadata mildly
associated with the label. 1/8 of the paper's scale = half its rows, half its layers, half its d_model
(28,584 x 42 x 3,584 -> 14,292 x 21 x 1,792).

What it times (CPU seconds = process time, all threads):

* torch: :func:`probes.experiment.train_probes` with today's defaults of ``python -m probes.train`` (both probes,
  5 grouped folds, inner 3-fold C search over 7 Cs, 100 question-level permutations, metadata baseline,
  directions, transfer) on ``--torch-layers`` of the layers, extrapolated linearly to all layers;
* sklearn (today's path before this change: the same nested CV with ONE shuffled-label repeat, i.e.
  11 ``LogisticProbe`` fits per layer: 5 real folds, 5 control folds, 1 for the directions): one inner
  C path (7 warm-started lbfgs fits) and one refit are timed on one layer, and the layer's cost is
  extrapolated linearly (``LogisticProbe`` = 3 inner paths + 1 refit); transfer checks and mass-mean are
  left out of the sklearn side, which flatters sklearn;
* accuracy agreement: torch and sklearn predictions on the same held-out rows at every C of the timed
  inner path (1/8 scale), and full ``--solver sklearn`` vs ``--solver torch`` sweeps at ``--check`` size.

The paper-scale projection scales the torch per-layer time by rows x d_model (every solver cost is a GEMM
over [rows, d]) except two parts whose cost grows faster, timed directly at the paper's size (28,584 x 3,584):
the per-layer eigendecomposition of the feature correlation (its GEMM and ``eigh``) and the steering
directions (their Gram matrices cost rows x d_model^2). Of the once-per-study work, transfer scales by
rows x d_model too, and the metadata baseline (no activations: one-hot metadata, cell lookups and every label
vector's grouped splits) by rows.

It also prints a floor for the same procedure (``projected_paper_scale_floor_hours``): the batched solver's GEMM
work on the timed layers (counted, :class:`SolverGemms`), scaled to the paper's size and run at this machine's
float32 GEMM rate for the solver's shape, plus the eigendecompositions as timed; every other part counted as free.
A projection near the floor cannot be cut by engineering alone, only by fewer or cheaper GEMMs.
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
EIGHTH = {"rows": 14292, "layers": 21, "d_model": 1792}


class SyntheticStore:
    """Activations generated per layer on demand (deterministic), labels fixed across layers."""

    def __init__(self, n: int, d: int, layers: int, seed: int = 0, rank: int = 256):
        self.n, self.d, self.n_layers, self.seed, self.rank = n, d, layers, seed, min(rank, d)
        rng = np.random.default_rng(seed)
        self.t = rng.standard_normal(n).astype(np.float32)  # the latent the label reads
        self.y = (self.t + 0.6 * rng.standard_normal(n) > 0.3).astype(np.int64)
        self.q = (np.arange(n) // 5).astype(str).astype(object)
        strat = np.array(["numerical", "text", "logical"])
        self.strategy = strat[(rng.integers(0, 3, n) + (self.y & (rng.random(n) < 0.3))) % 3]
        self.position = np.array(["early", "middle", "late"])[rng.integers(0, 3, n)]

    def read(self, layer: int, position: str = "prefix_last") -> np.ndarray:
        rng = np.random.default_rng([self.seed, layer])
        r = self.rank
        Z = rng.standard_normal((self.n, r)).astype(np.float32)
        s = (10.0 * np.arange(1, r + 1, dtype=np.float32) ** -1.0)
        A = (rng.standard_normal((r, self.d)) / np.sqrt(self.d)).astype(np.float32)
        X = (Z * s) @ A
        X += 0.05 * rng.standard_normal((self.n, self.d)).astype(np.float32)
        strength = 0.4 * np.exp(-((layer - self.n_layers / 2) / (self.n_layers / 4)) ** 2)
        X += strength * np.outer(self.t, A[5] / np.linalg.norm(A[5])).astype(np.float32)
        X[:, :4] += np.float32(50.0)
        return X


def probe_data(store: SyntheticStore, layers: list[int]):
    import pandas as pd

    from probes.data import ProbeData

    meta = pd.DataFrame({"strategy": store.strategy, "edit_position": store.position, "dataset": "synthetic",
                         "task": None, "condition": "perturbed"})
    return ProbeData(store=store, target="propagation", position="prefix_last", layers=layers,
                     idx=np.arange(store.n), y=store.y, class_names=["non-C", "C"], y_c=store.y,
                     questions=store.q, meta=meta, conditions="perturbed")


def timed(fn, *a, **k):
    w, c = time.perf_counter(), time.process_time()
    out = fn(*a, **k)
    return out, time.process_time() - c, time.perf_counter() - w


class SolverGemms:
    """The batched solver's GEMM work in a block: the floating-point operations of every evaluation's forward and
    backward products (2 n d B K each; a start from zero has no forward one) and of the preconditioner's products
    in the eigenbasis (2 d^2 B K each), counted by wrapping :mod:`probes.fit.solver`'s two functions. ``flops`` is
    the total; ``layer_flops`` the part inside :func:`probes.experiment._layer_pass` (the per-layer work; the rest,
    the metadata baseline and transfer, runs once per study)."""

    def __enter__(self) -> SolverGemms:
        from probes import experiment
        from probes.fit import solver

        self.flops = self.layer_flops = 0.0
        self._solver, self._lg, self._pc = solver, solver._loss_grad_parts, solver.Design.precondition
        self._exp, self._lp = experiment, experiment._layer_pass
        lg, pc, lp = self._lg, self._pc, self._lp

        def layer_pass(*a, **k):
            f0 = self.flops
            try:
                return lp(*a, **k)
            finally:
                self.layer_flops += self.flops - f0

        def loss_grad(design, theta, T, mask_idx, C, binary, zero=False):
            B, K = theta.shape[:2]
            self.flops += (1 if zero else 2) * 2.0 * B * K * design.n * design.d
            return lg(design, theta, T, mask_idx, C, binary, zero)

        def precondition(design, q, lam, h, quad=False):
            if design.evecs is not None:
                self.flops += (1 if quad else 2) * 2.0 * q.shape[0] * q.shape[1] * design.d ** 2
            return pc(design, q, lam, h, quad)

        solver._loss_grad_parts, solver.Design.precondition = loss_grad, precondition  # type: ignore[method-assign]
        experiment._layer_pass = layer_pass
        return self

    def __exit__(self, *exc: object) -> None:
        self._solver._loss_grad_parts, self._solver.Design.precondition = self._lg, self._pc  # type: ignore[method-assign]
        self._exp._layer_pass = self._lp


def gemm_rate(n: int, d: int, b: int = 512, device: str = "cpu") -> float:
    """The float32 GEMM rate (FLOP/s) of the solver's forward product on this machine, in its layout: ``V @ X.T``,
    V ``[b, d]`` and X ``[n, d]`` (:meth:`probes.fit.solver.Design.logits_bkn`); best of 3."""
    import torch

    g = torch.Generator().manual_seed(0)
    V = torch.randn(b, d, generator=g).to(device)
    X = torch.randn(n, d, generator=g).to(device)
    best = min(timed(lambda: (V @ X.T).sum().item())[2] for _ in range(3))  # .item() waits for the device
    return 2.0 * b * d * n / best


def time_torch(store: SyntheticStore, layers: list[int], permutations: int, device: str) -> dict:
    from probes.experiment import train_probes

    data = probe_data(store, layers)
    with SolverGemms() as gemms:
        (res, _), cpu, wall = timed(train_probes, data, permutations=permutations, solver="torch", device=device)
    t = res["timing"]
    meta_s = t.get("metadata_baseline_s", 0)
    fixed = meta_s + sum(v for k, v in t.items() if k.startswith("transfer_"))
    frac = cpu / max(wall, 1e-9)
    per_layer_wall = [v["total_s"] for v in t["layers"].values()]
    directions = [v.get("directions_s", 0.0) for v in t["layers"].values()]
    ctrl = [v.get("logistic_control_s", 0) + v.get("mass_mean_control_s", 0) for v in t["layers"].values()]
    accs = {pk: {e["layer"]: e["accuracy"]["rate"] for e in r["layers"]} for pk, r in res["probes"].items()}
    return {"cpu": cpu, "wall": wall, "cpu_per_wall": frac, "fixed_wall": fixed, "metadata_wall": meta_s,
            "per_layer_wall": float(np.mean(per_layer_wall)), "per_layer_control_wall": float(np.mean(ctrl)),
            "per_layer_directions_wall": float(np.mean(directions)),
            "accuracy": accs, "results": res, "solver_flops_per_layer": gemms.layer_flops / len(layers),
            "solver_flops_fixed": gemms.flops - gemms.layer_flops}


def time_sklearn_layer(store: SyntheticStore, layer: int, folds: int = 5, inner_folds: int = 3) -> dict:
    """One inner C path + one refit of today's LogisticProbe on one layer; accuracies of torch vs sklearn on
    the inner path's held-out rows at every C."""
    import warnings

    import torch
    from sklearn.exceptions import ConvergenceWarning
    from sklearn.linear_model import LogisticRegression
    from sklearn.preprocessing import StandardScaler

    from probes.fit.cv import outer_folds
    from probes.fit.estimators import DEFAULT_CS, inner_splits
    from probes.fit.solver import Design, solve

    X = store.read(layer)
    y = store.y
    g = np.unique(store.q.astype(str), return_inverse=True)[1]
    fold = outer_folds(y, g, folds, 0)
    tr = np.flatnonzero(fold != 0)
    (a, b) = inner_splits(y[tr], g[tr], inner_folds, 0)[0]
    sc = StandardScaler().fit(X[tr])
    Xs = sc.transform(X[tr]).astype(np.float64)
    Cs = sorted(DEFAULT_CS)
    accs_sk, iters = [], []
    w, c = time.perf_counter(), time.process_time()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ConvergenceWarning)
        lr = LogisticRegression(C=Cs[0], max_iter=500, warm_start=True)
        for C in Cs:
            lr.set_params(C=C)
            lr.fit(Xs[a], y[tr][a])
            iters.append(int(lr.n_iter_[0]))
            accs_sk.append(float(np.mean(lr.predict(Xs[b]) == y[tr][b])))
    path_cpu, path_wall = time.process_time() - c, time.perf_counter() - w
    w, c = time.perf_counter(), time.process_time()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ConvergenceWarning)
        refit = LogisticRegression(C=1.0, max_iter=500).fit(Xs, y[tr])
    refit_cpu, refit_wall = time.process_time() - c, time.perf_counter() - w
    # torch on the same inner split (standardised with the outer split's scaler, as in the pipeline)
    ma = np.zeros(len(y), bool)
    ma[tr[a]] = True
    so = np.zeros(len(y), bool)
    so[tr] = True
    D = Design.build(X, ma[None], stat_masks=so[None])
    theta, accs_t = None, []
    for C in Cs:
        theta, _ = solve(D, y[None], [0], [C], n_classes=2, theta0=theta)
        W, b0 = D.raw_coef(theta, torch.tensor([0]))
        z = X[tr[b]] @ W[0].T + b0[0]
        accs_t.append(float(np.mean((z[:, 0] > 0).astype(int) == y[tr[b]])))
    return {"path_cpu": path_cpu, "path_wall": path_wall, "refit_cpu": refit_cpu, "refit_wall": refit_wall,
            "lbfgs_iterations": iters, "refit_iterations": int(refit.n_iter_[0]), "acc_sklearn": accs_sk,
            "acc_torch": accs_t, "Cs": Cs}


def time_eigh(n: int, d: int) -> tuple[float, float]:
    """CPU and wall seconds of the per-layer preconditioner (correlation GEMM + eigh) at [n, d]."""
    from probes.fit import solver

    solver._PRECOND.clear()
    X = SyntheticStore(n, d, 1).read(0)
    _, cpu, wall = timed(solver.Design.build, X, np.ones((1, n), bool))
    solver._PRECOND.clear()
    return cpu, wall


def time_directions(n: int, d: int, device: str) -> float:
    """Wall seconds of one layer's steering directions (:func:`probes.fit.direction_fit.fit_directions`, the
    study's defaults) at [n, d]: its Gram matrices cost rows x d_model^2, so it is timed at the size, not scaled.
    The layer's eigenbasis is built first, untimed, as the layer's CV builds it in a study (the directions reuse
    it; :func:`time_eigh` times it)."""
    from probes.fit import solver
    from probes.fit.direction_fit import fit_directions

    st = SyntheticStore(n, d, 1)
    X = st.read(0)
    solver._PRECOND.clear()
    solver.Design.build(X, np.ones((1, n), bool), device=device)
    _, _, wall = timed(fit_directions, X, st.y, st.q, solver="torch", device=device)
    solver._PRECOND.clear()
    return wall


def check_accuracy(n: int, d: int, layers: int) -> float:
    """Max |accuracy(torch) - accuracy(sklearn)| in points over layers and probes, full sweeps, small size."""
    from probes.experiment import train_probes

    st = SyntheticStore(n, d, layers, seed=1)
    rs, _ = train_probes(probe_data(st, list(range(layers))), solver="sklearn", permutations=0, transfer=False,
                         directions=False)
    rt, _ = train_probes(probe_data(st, list(range(layers))), solver="torch", permutations=0, transfer=False,
                         directions=False)
    diffs = [abs(a["accuracy"]["rate"] - b["accuracy"]["rate"]) for pk in rs["probes"]
             for a, b in zip(rs["probes"][pk]["layers"], rt["probes"][pk]["layers"])]
    diffs.append(abs(rs["probes"]["logistic"]["nested"]["accuracy"]["rate"]
                     - rt["probes"]["logistic"]["nested"]["accuracy"]["rate"]))
    return 100 * max(diffs)


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python bench/bench_probes.py", description=__doc__.split("\n\n")[0])
    p.add_argument("--quick", action="store_true", help="small sizes (a sanity run, numbers not meaningful)")
    p.add_argument("--torch-layers", type=int, default=2, help="layers the torch sweep is timed on")
    p.add_argument("--permutations", type=int, default=100, help="shuffled-label permutations (the default)")
    p.add_argument("--device", default="cpu", help="torch device")
    p.add_argument("--check", default="2000,256,3", help="rows,d,layers of the full sklearn-vs-torch sweep check")
    p.add_argument("--json", default=None, help="write the headline numbers here")
    a = p.parse_args(argv)
    size = {"rows": 1500, "layers": 6, "d_model": 192} if a.quick else dict(EIGHTH)
    n, L, d = size["rows"], size["layers"], size["d_model"]
    print(f"cpus={os.cpu_count()} load={os.getloadavg()[0]:.1f}; store {n} rows x {L} layers x {d} "
          f"({'quick' if a.quick else '1/8 of the paper'}: paper {PAPER['rows']} x {PAPER['layers']} x {PAPER['d_model']})",
          flush=True)
    store = SyntheticStore(n, d, L)
    mid = L // 2
    timed_layers = sorted({mid - a.torch_layers // 2 + i for i in range(a.torch_layers)})
    tt = time_torch(store, timed_layers, a.permutations, a.device)
    torch_total_wall = tt["per_layer_wall"] * L + tt["fixed_wall"]
    torch_total_cpu = torch_total_wall * tt["cpu_per_wall"]
    same_work_wall = (tt["per_layer_wall"] - tt["per_layer_control_wall"] * (1 - 1 / max(1, a.permutations))) * L \
        + tt["fixed_wall"]
    print(f"torch ({a.permutations} permutations, layers {timed_layers}): {tt['per_layer_wall']:.1f} s/layer wall "
          f"(controls {tt['per_layer_control_wall']:.1f} s), fixed {tt['fixed_wall']:.1f} s; "
          f"all {L} layers ~ {torch_total_wall:.0f} s wall, {torch_total_cpu:.0f} cpu s", flush=True)
    sk = time_sklearn_layer(store, mid)
    fit_cpu = 3 * sk["path_cpu"] + sk["refit_cpu"]  # one LogisticProbe fit (3 inner paths + refit)
    fit_wall = 3 * sk["path_wall"] + sk["refit_wall"]
    sk_layer_wall = 11 * fit_wall  # 5 real folds + 5 control folds + directions (all rows ~ same size)
    sk_total_wall = sk_layer_wall * L
    sk_total_cpu = 11 * fit_cpu * L
    print(f"sklearn (today's path, 1 control repeat): inner C path {sk['path_wall']:.1f} s wall "
          f"(lbfgs iterations {sk['lbfgs_iterations']}), refit {sk['refit_wall']:.1f} s "
          f"({sk['refit_iterations']} it); LogisticProbe fit ~ {fit_wall:.0f} s; layer ~ {sk_layer_wall:.0f} s; "
          f"all {L} layers ~ {sk_total_wall / 3600:.2f} h wall, {sk_total_cpu / 3600:.2f} cpu h", flush=True)
    speedup = sk_total_wall / torch_total_wall
    speedup_cpu = sk_total_cpu / torch_total_cpu
    same = sk_total_wall / same_work_wall
    acc_path = 100 * max(abs(x - y) for x, y in zip(sk["acc_sklearn"], sk["acc_torch"]))
    print("inner-path held-out accuracy, sklearn vs torch per C: "
          + ", ".join(f"{c:g}: {x:.4f}/{y:.4f}" for c, x, y in zip(sk["Cs"], sk["acc_sklearn"], sk["acc_torch"])))
    cn, cd, cl = (int(v) for v in a.check.split(","))
    acc_sweep = check_accuracy(cn, cd, cl)
    print(f"full sweep check at {cn} rows x {cl} layers x {cd} d: max |accuracy diff| {acc_sweep:.2f} pp", flush=True)
    max_diff = max(acc_path, acc_sweep)
    eig_cpu, eig_wall = time_eigh(PAPER["rows"] if not a.quick else 4 * n, PAPER["d_model"] if not a.quick else 2 * d)
    eig8_cpu, eig8_wall = time_eigh(n, d)
    dir_wall = time_directions(PAPER["rows"] if not a.quick else 4 * n, PAPER["d_model"] if not a.quick else 2 * d,
                               a.device)
    scale = (PAPER["rows"] * PAPER["d_model"]) / (n * d)
    paper_layer_wall = ((tt["per_layer_wall"] - eig8_wall - tt["per_layer_directions_wall"]) * scale + eig_wall
                        + dir_wall)
    # the metadata baseline never reads the activations (one-hot metadata features, cell lookups, the label
    # splits): its cost grows with the rows only; transfer refits the probes on [rows, d_model]
    rows_scale = PAPER["rows"] / n
    paper_fixed = (tt["fixed_wall"] - tt["metadata_wall"]) * scale + tt["metadata_wall"] * rows_scale
    paper_wall = paper_layer_wall * PAPER["layers"] + paper_fixed
    paper_cpu_h = paper_wall * tt["cpu_per_wall"] / 3600
    # a lower bound on the same procedure: the solver's GEMMs of the timed layers (the logistic CV, its permuted
    # refits and the directions' fits, at the iteration counts they took) and of the once-per-study fits (transfer,
    # the metadata baseline) at this machine's float32 GEMM rate at the paper's shape, plus the
    # eigendecompositions as measured; everything else (mass-mean fits, the directions' Gram matrices, reads)
    # counted as free
    fold_rows = PAPER["rows"] * 4 // 5 if not a.quick else 4 * n  # an outer fold's training rows (5 folds)
    rate = gemm_rate(fold_rows, PAPER["d_model"] if not a.quick else 2 * d, device=a.device)
    floor_h = ((tt["solver_flops_per_layer"] * scale / rate + eig_wall) * PAPER["layers"]
               + tt["solver_flops_fixed"] * scale / rate) * tt["cpu_per_wall"] / 3600
    print(f"\nSPEEDUP vs today's sklearn path at 1/8 scale: {speedup:.0f}x wall ({speedup_cpu:.0f}x cpu) with "
          f"{a.permutations} permutations; {same:.0f}x for the same work (1 permutation)")
    print(f"PROJECTED paper scale ({PAPER['rows']} x {PAPER['layers']} x {PAPER['d_model']}), default settings: "
          f"{paper_wall / 3600:.2f} h wall on this machine, {paper_cpu_h:.2f} CPU-hours "
          f"(per layer {paper_layer_wall:.0f} s, of which eigendecomposition {eig_wall:.0f} s and directions "
          f"{dir_wall:.0f} s measured at the paper's size)")
    print(f"MAX accuracy diff vs sklearn: {max_diff:.2f} pp (inner path at 1/8 scale {acc_path:.2f}, full sweep "
          f"check {acc_sweep:.2f})")
    print(f"FLOOR of the same procedure at the paper's scale: {floor_h:.2f} CPU-hours (the solver's GEMMs, "
          f"{tt['solver_flops_per_layer'] * scale / 1e12:.2f} TFLOP a layer and {tt['solver_flops_fixed'] * scale / 1e12:.2f} "
          f"once per study, at {rate / 1e9:.0f} GFLOP/s, the float32 GEMM rate of its shape here; the "
          f"eigendecompositions as measured; the rest free)")
    print("note: other agents share these 2 cores; wall and CPU times are noisy")
    if a.json:
        out = {"speedup_vs_sklearn": speedup, "projected_paper_scale_hours": paper_cpu_h,
               "max_accuracy_diff_pp": max_diff, "speedup_same_work": same, "speedup_cpu": speedup_cpu,
               "projected_paper_scale_wall_hours": paper_wall / 3600, "size": size, "quick": a.quick,
               "torch_per_layer_wall_s": tt["per_layer_wall"], "paper_per_layer_wall_s": paper_layer_wall,
               "paper_eigh_wall_s": eig_wall, "paper_directions_wall_s": dir_wall,
               "torch_per_layer_directions_wall_s": tt["per_layer_directions_wall"],
               "metadata_baseline_wall_s": tt["metadata_wall"],
               "paper_solver_tflop_per_layer": tt["solver_flops_per_layer"] * scale / 1e12,
               "paper_solver_tflop_fixed": tt["solver_flops_fixed"] * scale / 1e12,
               "gemm_rate_gflops": rate / 1e9, "projected_paper_scale_floor_hours": floor_h,
               "fixed_wall_s": tt["fixed_wall"], "projected_paper_fixed_wall_s": paper_fixed,
               "sklearn_logisticprobe_fit_wall_s": fit_wall,
               "sklearn_lbfgs_iterations": sk["lbfgs_iterations"], "permutations": a.permutations,
               "load": os.getloadavg()[0]}
        from loadbearing.files import write_json

        write_json(a.json, out)
        print(f"wrote {a.json}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
