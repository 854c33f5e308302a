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

from probes.fit.fast import _compute_masks, mass_mean_fits, predict_logits
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


def _logistic_many(X: np.ndarray, Y: np.ndarray, fold_ids: np.ndarray, splits: list, *, Cs: Sequence[float],
                   device: str, tol: float, max_iter: int) -> dict[str, Any]:
    P, n = Y.shape
    F = int(fold_ids.max()) + 1
    Cs = sorted(float(c) for c in np.atleast_1d(Cs))
    K = int(Y.max()) + 1
    live = _live(Y, fold_ids)
    trains = [fold_ids != k for k in range(F)]
    masks, stats = list(trains), list(trains)  # mask index k < F: outer split k
    # problems: (label row, mask index, role, owner (p, k), inner test mask or None)
    prob_y, prob_m, prob_role, prob_owner, prob_test = [], [], [], [], []
    for p in range(P):
        for k in range(F):
            if not live[p, k]:
                continue
            for a, b in splits[p][k]:
                masks.append(a)
                stats.append(trains[k])
                prob_y.append(p)
                prob_m.append(len(masks) - 1)
                prob_role.append(0)
                prob_owner.append((p, k))
                prob_test.append(b)
            prob_y.append(p)
            prob_m.append(k)
            prob_role.append(1)
            prob_owner.append((p, k))
            prob_test.append(None)
    pred = np.full((P, n), -1, dtype=np.int64)
    inner = np.full((P, F), np.nan)
    C_out = np.full((P, F), np.nan)
    if not prob_y:
        return {"pred": pred, "inner": inner, "C": C_out}
    D = Design.build(X, np.stack(masks), stat_masks=np.stack(stats), device=device)
    B = len(prob_y)
    acc = np.full((B, len(Cs)), np.nan)  # inner problems: held-out inner accuracy per C
    outer_pred: dict[int, np.ndarray] = {}  # outer problems: [len(Cs), n_te] predictions
    for s in range(0, B, CHUNK):
        idx = np.arange(s, min(B, s + CHUNK))
        midx = np.asarray(prob_m)[idx]
        targets = Y[np.asarray(prob_y)[idx]]
        # the inner problems' held-out rows and labels, as [n, b] columns: every accuracy from one comparison
        inner_i = [i for i, b in enumerate(idx) if prob_role[b] == 0]
        te_cols = torch.as_tensor(np.stack([prob_test[idx[i]] for i in inner_i], axis=1)) if inner_i else None
        y_cols = torch.as_tensor(targets[inner_i].T) if inner_i else None
        theta, state = None, None
        for j, C in enumerate(Cs):
            # the solution's state (kept from the evaluation that accepted its last step): the held-out
            # predictions, and the next C's start
            theta, _, state = solve_with_state(D, targets, midx, np.full(len(idx), C), n_classes=K, theta0=theta,
                                               tol=tol, max_iter=max_iter, start=state)
            Z = state.logits.detach().cpu()  # [n, b, K]
            if te_cols is not None:
                zi = Z[:, inner_i, :]
                cls = (zi[:, :, 0] > 0).long() if zi.shape[2] == 1 else zi.argmax(2)  # predict_logits, per column
                hit = ((cls == y_cols) & te_cols).sum(0).double() / te_cols.sum(0).double()
                acc[idx[inner_i], j] = hit.numpy()
            z = Z.numpy()
            for i, b in enumerate(idx):
                if prob_role[b] == 1:
                    te = fold_ids == prob_owner[b][1]
                    outer_pred.setdefault(int(b), np.empty((len(Cs), int(te.sum())), dtype=np.int64))[j] = \
                        predict_logits(z[te, i, :])
    by_owner: dict[tuple[int, int], list[int]] = {}
    outer_of: dict[tuple[int, int], int] = {}
    for b, o in enumerate(prob_owner):
        if prob_role[b] == 0:
            by_owner.setdefault(o, []).append(b)
        else:
            outer_of[o] = b
    extra = []
    for (p, k), ob in outer_of.items():
        rows = by_owner.get((p, k), [])
        te = fold_ids == k
        if rows:
            mean = acc[rows].mean(axis=0)
            best = int(np.flatnonzero(mean >= mean.max() - 1e-12)[0])  # ties -> stronger regularisation
            inner[p, k], C_out[p, k] = float(mean[best]), Cs[best]
            pred[p, te] = outer_pred[ob][best]
            continue
        C_ = DEFAULT_C if len(Cs) != 1 else Cs[0]
        C_out[p, k] = C_
        if C_ in Cs:
            pred[p, te] = outer_pred[ob][Cs.index(C_)]
        else:
            extra.append((p, k))
    if extra:  # no inner split possible and the default C off the path: one more solve
        midx = np.array([k for _, k in extra])
        th, _ = solve(D, Y[[p for p, _ in extra]], midx, np.full(len(extra), DEFAULT_C), n_classes=K, tol=tol,
                      max_iter=max_iter)
        z = D.logits(th, torch.as_tensor(midx, device=D.X.device)).detach().cpu().numpy()
        for i, (p, k) in enumerate(extra):
            te = fold_ids == k
            pred[p, te] = predict_logits(z[te, i, :])
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
