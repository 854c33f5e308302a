"""Cross-validation of many label vectors at once (the shuffled-label control's refits), choosing C inside
every refit exactly as the real fit does.

    from probes.fit.permuted import inner_masks, cv_many
    splits = inner_masks(Yp, groups, fold_ids, inner_folds=3, seed=0)     # once per study (label-dependent)
    run = cv_many("logistic", X, Yp, fold_ids, splits, Cs=(0.01, 1, 100))  # per layer
    run["pred"]  # [P, n] held-out predictions (-1 unscored), run["inner"] [P, F] inner scores, run["C"] [P, F]

For each label vector and outer fold the rule is that of :func:`probes.fit.fast.cv_predict`: the inner grouped,
stratified splits of the training split (:func:`probes.fit.estimators.inner_splits` on *that* label vector), the
logistic fits of every inner split along the ascending C path (warm-started), C by the best mean inner
accuracy (ties -> stronger regularisation), the refit on the training split at that C; mass-mean in closed
form with the mean inner accuracy as its inner score (nested layer selection reads it). All problems of a
layer go through the batched solver in chunks. A training split with one class is skipped (its rows stay
unscored); a multiclass split that lacks a class is fitted as it is (the absent class is never learned).
"""
from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np
import torch

from probes.fit.fast import _compute_masks, choose_C, mass_mean_fits, predict_logits
from probes.fit.solver import Design, solve, solve_with_state, thread_limit

DEFAULT_C = 1.0
CHUNK = 512  # problems per batched solve


def inner_masks(Y: np.ndarray, groups: np.ndarray, fold_ids: np.ndarray, inner_folds: int, seed: int
                ) -> list[list[list[tuple[np.ndarray, np.ndarray]]]]:
    """``[P][F]`` lists of inner (train, test) row masks over all rows, for every label vector and outer fold."""
    Y = np.atleast_2d(np.asarray(Y))
    groups = np.asarray(groups)
    F = int(fold_ids.max()) + 1
    train_masks = [fold_ids != k for k in range(F)]
    return [_compute_masks(y, groups, train_masks, inner_folds, seed) for y in Y]


def _live(Y: np.ndarray, fold_ids: np.ndarray) -> np.ndarray:
    """``[P, F]`` bool: the fold has held-out rows and its training split holds two classes or more."""
    F = int(fold_ids.max()) + 1
    live = np.zeros((len(Y), F), bool)
    for k in range(F):
        tr, te = fold_ids != k, fold_ids == k
        if te.any():
            live[:, k] = [len(np.unique(y[tr])) >= 2 for y in Y]
    return live


def cv_many(kind: str, X: np.ndarray, Y: np.ndarray, fold_ids: np.ndarray,
            splits: list[list[list[tuple[np.ndarray, np.ndarray]]]], *, Cs: Sequence[float] = (DEFAULT_C,),
            device: str = "cpu", tol: float = 1e-4, max_iter: int = 500) -> dict[str, Any]:
    """Held-out predictions ``pred`` [P, n] (-1 unscored), inner scores ``inner`` [P, F] (NaN where none) and
    chosen ``C`` [P, F] (NaN for mass-mean or skipped folds) of probe ``kind`` for every label vector ``Y[p]``."""
    X = np.asarray(X)
    Y = np.atleast_2d(np.asarray(Y))
    if kind == "mass_mean":
        return _mass_mean_many(np.asarray(X, dtype=np.float64), Y, fold_ids, splits)
    if kind != "logistic":
        raise ValueError(f"cv_many fits logistic or mass_mean, not {kind!r}")
    with thread_limit(int(X.shape[0]), int(X.shape[1]), device):
        return _logistic_many(X, Y, fold_ids, splits, Cs=Cs, device=device, tol=tol, max_iter=max_iter)


def _fold_design(D: Design, rows: np.ndarray, masks: np.ndarray, stat_idx: np.ndarray) -> Design:
    """``D``'s features on ``rows`` only (bool [n]), for problems that train on those rows alone: training masks
    ``masks`` [M, n] (only ``rows`` set), standardised by ``D``'s mask ``stat_idx[i]`` (its scaler moments), with
    ``D``'s global shift and eigenbasis (the preconditioner steers the steps only: the optimum is the same)."""
    r = torch.as_tensor(np.flatnonzero(np.asarray(rows, dtype=bool)), device=D.X.device)
    M = np.asarray(masks, dtype=bool)
    if (M & ~np.asarray(rows, dtype=bool)[None]).any() or not M.any(axis=1).all():
        raise ValueError("a training mask selects no rows, or rows outside the subset")
    Mr = torch.as_tensor(M).to(D.X.device)[:, r].to(D.X.dtype)
    si = torch.as_tensor(np.asarray(stat_idx), device=D.X.device).long()
    return Design(D.X[r].contiguous(), Mr, D.mu[si], D.sigma[si], Mr.sum(1), D.shift, D.evecs, D.evals)


def _logistic_many(X: np.ndarray, Y: np.ndarray, fold_ids: np.ndarray, splits: list, *, Cs: Sequence[float],
                   device: str, tol: float, max_iter: int) -> dict[str, Any]:
    """One outer fold at a time: every label vector's inner problems along the C path, on a design restricted to
    the fold's training rows (their GEMMs run over those rows only), then each outer refit once, at the C its inner
    CV chose, warm-started from the mean of its inner solutions at that C (the rule of
    :func:`probes.fit.fast.logistic_fits`; the optimum does not depend on the start)."""
    P, n = Y.shape
    F = int(fold_ids.max()) + 1
    Cs = sorted(float(c) for c in np.atleast_1d(Cs))
    K = int(Y.max()) + 1
    Kt = 1 if K <= 2 else K  # weight vectors per problem (binary: one)
    live = _live(Y, fold_ids)
    trains = [fold_ids != k for k in range(F)]
    pred = np.full((P, n), -1, dtype=np.int64)
    inner = np.full((P, F), np.nan)
    C_out = np.full((P, F), np.nan)
    if not live.any():
        return {"pred": pred, "inner": inner, "C": C_out}
    D = Design.build(X, np.stack(trains), device=device)  # the outer folds' scalers, the eigenbasis
    dev = D.X.device
    for k in range(F):
        owners = np.flatnonzero(live[:, k])
        if not len(owners):
            continue
        rows = trains[k]
        ridx = np.flatnonzero(rows)
        te = np.flatnonzero(fold_ids == k)
        pos = {int(p): i for i, p in enumerate(owners)}
        i_owner, i_train, i_test = [], [], []
        for p in owners:
            for a, b in splits[p][k]:
                i_owner.append(int(p))
                i_train.append(a)
                i_test.append(b[ridx])
        nI = len(i_owner)
        Dk = _fold_design(D, rows, np.stack(i_train + [rows]), np.full(nI + 1, k))  # last mask: the outer split
        acc = np.full((nI, len(Cs)), np.nan)
        th_sum = [torch.zeros(len(owners), Kt, D.d + 1, device=dev, dtype=D.X.dtype) for _ in Cs]
        own_a = np.asarray(i_owner, dtype=np.int64)
        for s in range(0, nI, CHUNK):
            idx = np.arange(s, min(nI, s + CHUNK))
            targets = Y[own_a[idx]][:, ridx]
            te_cols = torch.as_tensor(np.stack([i_test[i] for i in idx], axis=1))  # [n_k, b]
            y_cols = torch.as_tensor(targets.T)
            where = torch.as_tensor([pos[int(p)] for p in own_a[idx]], device=dev)
            theta, state = None, None
            for j, C in enumerate(Cs):
                # the solution's state (kept from the evaluation that accepted its last step): the inner
                # held-out predictions, and the next C's start
                theta, _, state = solve_with_state(Dk, targets, idx, np.full(len(idx), C), n_classes=K, theta0=theta,
                                                   tol=tol, max_iter=max_iter, start=state)
                Z = state.logits.detach().cpu()  # [n_k, b, K]
                cls = predict_logits(Z)  # [n_k, b]
                hit = ((cls == y_cols) & te_cols).sum(0).double() / te_cols.sum(0).double()
                acc[idx, j] = hit.numpy()
                th_sum[j].index_add_(0, where, theta.detach())
        by_owner: dict[int, list[int]] = {}
        for i, q in enumerate(i_owner):
            by_owner.setdefault(q, []).append(i)
        C_refit = np.empty(len(owners))
        theta0 = torch.zeros(len(owners), Kt, D.d + 1, device=dev, dtype=D.X.dtype)
        for j_o, p in enumerate(owners):
            ii = by_owner.get(int(p), [])
            if ii:
                best, mean = choose_C(acc[ii])
                inner[p, k], C_refit[j_o] = float(mean[best]), Cs[best]
                theta0[j_o] = th_sum[best][j_o] / len(ii)
            else:  # no inner split possible: the default C, from zero
                C_refit[j_o] = DEFAULT_C if len(Cs) != 1 else Cs[0]
        C_out[owners, k] = C_refit
        Xte = np.asarray(X[te], dtype=np.float64)  # the held-out rows once a fold, as cv_predict reads them
        for s in range(0, len(owners), CHUNK):
            o = np.arange(s, min(len(owners), s + CHUNK))
            midx = np.full(len(o), nI)
            th, _ = solve(Dk, Y[owners[o]][:, ridx], midx, C_refit[o], n_classes=K, theta0=theta0[o], tol=tol,
                          max_iter=max_iter)
            W, b0 = Dk.raw_coef(th, torch.as_tensor(midx, device=dev))  # raw coordinates, as cv_predict predicts
            # every refit's held-out logits from one GEMM ([n_te, d] x [d, o K]) instead of a copy of the rows each
            Z = (Xte @ W.reshape(-1, W.shape[2]).T).reshape(len(te), len(o), -1) + b0[None]
            pred[owners[o][:, None], te[None, :]] = predict_logits(Z).T
    return {"pred": pred, "inner": inner, "C": C_out}


def _mass_mean_many(X: np.ndarray, Y: np.ndarray, fold_ids: np.ndarray, splits: list) -> dict[str, Any]:
    P, n = Y.shape
    F = int(fold_ids.max()) + 1
    live = _live(Y, fold_ids)
    trains = [fold_ids != k for k in range(F)]
    jobs = []  # (p, k, train mask, stat mask, test mask or None)
    for p in range(P):
        for k in range(F):
            if not live[p, k]:
                continue
            jobs.append((p, k, trains[k], trains[k], None))
            jobs += [(p, k, a, trains[k], b) for a, b in splits[p][k]]
    pred = np.full((P, n), -1, dtype=np.int64)
    scores: dict[tuple[int, int], list[float]] = {}
    for s in range(0, len(jobs), CHUNK):
        chunk = jobs[s: s + CHUNK]
        dec: dict[int, np.ndarray] = {}  # two-class problems: decision values from the fit's own GEMM
        res = mass_mean_fits(X, np.stack([Y[j[0]] for j in chunk]), np.stack([j[2] for j in chunk]),
                             np.stack([j[3] for j in chunk]), decisions=dec)
        fitted = [(i, j, r) for i, (j, r) in enumerate(zip(chunk, res)) if r is not None]
        if not fitted:
            continue
        # the other fitted problems' decision values on every row from one GEMM ([n, sum of K_b]), instead of a
        # copy of the held-out rows per problem; the same rule as mass_mean_predict
        rest = [r for i, _, r in fitted if i not in dec]
        Z = X @ np.concatenate([r[1] for r in rest]).T if rest else np.zeros((len(X), 0))
        col = 0
        for i, (p, k, _, _, te_in), (classes, W, b) in fitted:
            if i in dec:
                z = dec[i][:, None]
            else:
                z = Z[:, col: col + W.shape[0]] + b
                col += W.shape[0]
            te = (fold_ids == k) if te_in is None else te_in
            zt = z[te]
            cls = classes[(zt[:, 0] > 0).astype(int)] if W.shape[0] == 1 else classes[np.argmax(zt, axis=1)]
            if te_in is None:
                pred[p, te] = cls
            else:
                scores.setdefault((p, k), []).append(float(np.mean(cls == Y[p, te_in])))
    inner = np.full((P, F), np.nan)
    for (p, k), v in scores.items():
        if live[p, k]:
            inner[p, k] = float(np.mean(v))
    return {"pred": pred, "inner": inner, "C": np.full((P, F), np.nan)}


def fold_correct(pred: np.ndarray, Y: np.ndarray, fold_ids: np.ndarray) -> np.ndarray:
    """``[P, F]`` correct held-out counts, -1 where the fold is unscored (skipped)."""
    F = int(fold_ids.max()) + 1
    out = np.full((len(Y), F), -1, dtype=np.int64)
    for k in range(F):
        te = fold_ids == k
        scored = (pred[:, te] >= 0).all(axis=1) & te.any()
        out[scored, k] = (pred[scored][:, te] == Y[scored][:, te]).sum(1)
    return out


__all__ = ["inner_masks", "cv_many", "fold_correct"]
