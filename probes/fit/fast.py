"""The torch path of the probe study: every logistic fit of one layer in a few batched solves, mass-mean in
closed form, and batched shuffled-label controls.

    from probes.fit.fast import cv_predict, permutation_correct
    run = cv_predict("logistic", X, y, groups, fold_ids, Cs=(0.01, 1, 100), inner_folds=3, device="cpu")

:func:`cv_predict` returns what :func:`probes.fit.cv.cross_val_predict_grouped` returns, for the same folds, the
same inner splits (:func:`probes.fit.estimators.inner_splits`) and the same C rule (best mean inner accuracy, ties
-> stronger regularisation), so the two paths agree up to solver tolerance. The inner fits of all outer folds
run as one batch along the C path (ascending C, each C warm-started from the previous solution); each outer
training split is then refitted once, at the C its inner CV chose, warm-started from the mean of its inner
solutions at that C (the optimum does not depend on the start; the shuffled-label refits follow the same rule,
:func:`probes.fit.permuted.cv_many`).
"""
from __future__ import annotations

import hashlib
from collections.abc import Sequence
from typing import overload

import numpy as np
import torch

from probes.fit.estimators import best_threshold, inner_splits
from probes.fit.solver import Design, solve, solve_with_state, thread_limit, unique_rows

DEFAULT_C = 1.0
CHUNK = 512  # problems per solve: bounds the [n, B*K] logit buffers


def _masks_for(y: np.ndarray, groups: np.ndarray, train_masks: Sequence[np.ndarray], inner_folds: int,
               seed: int) -> tuple[list[np.ndarray], list[list[tuple[np.ndarray, np.ndarray]]]]:
    """Per outer training mask: its inner (train, test) row masks over all rows, from ``inner_splits``
    (memoised: every layer of a study asks for the same splits)."""
    h = hashlib.blake2b(digest_size=16)
    for a in (np.asarray(y), np.asarray(groups), *[np.asarray(m, dtype=bool) for m in train_masks]):
        h.update(np.ascontiguousarray(a).tobytes())
    key = (h.hexdigest(), len(train_masks), int(inner_folds), int(seed))
    if key not in _SPLITS:
        if len(_SPLITS) > 64:
            _SPLITS.clear()
        _SPLITS[key] = _compute_masks(y, groups, train_masks, inner_folds, seed)
    return list(train_masks), _SPLITS[key]


_SPLITS: dict = {}


def _compute_masks(y: np.ndarray, groups: np.ndarray, train_masks: Sequence[np.ndarray], inner_folds: int,
                   seed: int) -> list[list[tuple[np.ndarray, np.ndarray]]]:
    n = len(y)
    inner = []
    for tr in train_masks:
        rows = np.flatnonzero(tr)
        sp = inner_splits(y[rows], groups[rows], inner_folds, seed) if inner_folds >= 2 and len(rows) else []
        out = []
        for a, b in sp:
            ma, mb = np.zeros(n, bool), np.zeros(n, bool)
            ma[rows[a]], mb[rows[b]] = True, True
            out.append((ma, mb))
        inner.append(out)
    return inner


def choose_C(acc: np.ndarray) -> tuple[int, np.ndarray]:
    """The C rule of the inner CV: ``acc`` [inner splits, Cs] held-out accuracies (Cs ascending) -> (index of the
    best mean accuracy, ties -> the smaller C, i.e. stronger regularisation; the mean accuracy per C)."""
    mean = acc.mean(axis=0)
    return int(np.flatnonzero(mean >= mean.max() - 1e-12)[0]), mean


@overload
def predict_logits(z: torch.Tensor) -> torch.Tensor: ...
@overload
def predict_logits(z: np.ndarray) -> np.ndarray: ...
def predict_logits(z: np.ndarray | torch.Tensor) -> np.ndarray | torch.Tensor:
    """Class index from logits ``[..., K]`` (the class axis last, any leading axes; K = 1: binary, z > 0 -> class
    1), a numpy array or a torch tensor (int64 either way)."""
    if isinstance(z, torch.Tensor):
        return (z[..., 0] > 0).long() if z.shape[-1] == 1 else z.argmax(-1)
    return (z[..., 0] > 0).astype(np.int64) if z.shape[-1] == 1 else np.argmax(z, axis=-1)


def _logistic_fits(X: np.ndarray, y: np.ndarray, groups: np.ndarray, train_masks: Sequence[np.ndarray], *,
                  Cs: Sequence[float], inner_folds: int = 3, seed: int = 0, device: str = "cpu",
                  tol: float = 1e-4, max_iter: int = 500) -> list[dict | None]:
    """``LogisticProbe`` (inner grouped CV over ``Cs``, refit at the chosen C) on each training mask, batched.

    Returns per mask ``{"C", "inner_score", "cv_scores", "coef" [K, d], "intercept" [K], "n_inner_folds",
    "converged"}`` (raw coordinates: ``z = x @ coef.T + intercept``), or ``None`` where the mask holds one
    class. ``y`` holds class indices 0..K-1; every mask must hold all K classes when K > 2.
    """
    y = np.asarray(y)
    groups = np.asarray(groups)
    n_classes = int(y.max()) + 1
    Cs = sorted(float(c) for c in np.atleast_1d(Cs))
    outer, inner = _masks_for(y, groups, train_masks, inner_folds, seed)
    live = [i for i, tr in enumerate(outer) if len(np.unique(y[tr])) >= 2]
    if n_classes > 2 and any(len(np.unique(y[outer[i]])) < n_classes for i in live):
        raise ValueError("a training split lacks a class: use the sklearn solver")
    # problems: every live outer mask's inner training masks (the C path), then the outer masks themselves, each
    # refitted once at the C its inner CV chose, warm-started from the mean of its inner solutions at that C
    masks, stats, owner = [], [], []
    for i in live:
        for a, _ in inner[i]:
            masks.append(a)
            stats.append(outer[i])
            owner.append(i)
    nI = len(masks)
    masks += [outer[i] for i in live]
    stats += [outer[i] for i in live]
    out: list[dict | None] = [None] * len(outer)
    if not live:
        return out
    D = Design.build(X, np.stack(masks), stat_masks=np.stack(stats), device=device)
    targets = np.repeat(y[None], nI, axis=0)
    acc = np.full((nI, len(Cs)), np.nan)
    path_theta = []
    if nI:
        midx = np.arange(nI)
        theta, state = None, None
        for j, C in enumerate(Cs):
            # the solution's state (kept from the evaluation that accepted its last step): its logits give the
            # held-out predictions, and it is the next C's start
            theta, _, state = solve_with_state(D, targets, midx, np.full(nI, C), n_classes=n_classes, theta0=theta,
                                               tol=tol, max_iter=max_iter, start=state)
            z = state.logits.detach().cpu().numpy()  # [n, nI, K]
            b = 0
            for i in live:
                for _, te in inner[i]:
                    acc[b, j] = float(np.mean(predict_logits(z[te, b, :]) == y[te]))
                    b += 1
            path_theta.append(theta.detach())
    owner_a = np.asarray(owner, dtype=np.int64)
    K = 1 if n_classes == 2 else n_classes
    theta0 = torch.zeros(len(live), K, D.d + 1, device=D.X.device, dtype=D.X.dtype)
    refit_C, choice = [], []
    for o, i in enumerate(live):
        rows = np.flatnonzero(owner_a == i)
        if len(rows):
            best, mean = choose_C(acc[rows])
            theta0[o] = path_theta[best][torch.as_tensor(rows, device=D.X.device)].mean(0)
            choice.append((Cs[best], float(mean[best]), {str(c): float(v) for c, v in zip(Cs, mean)}, len(rows)))
        else:
            C_ = DEFAULT_C if len(Cs) != 1 else Cs[0]
            choice.append((C_, float("nan"), {}, 0))
        refit_C.append(choice[-1][0])
    omidx = np.arange(nI, nI + len(live))
    th, info = solve(D, np.repeat(y[None], len(live), axis=0), omidx, refit_C,
                     n_classes=n_classes, theta0=theta0, tol=tol, max_iter=max_iter)
    W, b0 = D.raw_coef(th, torch.as_tensor(omidx, device=D.X.device))
    for o, i in enumerate(live):
        C_, inner_score, cv, n_in = choice[o]
        out[i] = {"C": float(C_), "inner_score": inner_score, "cv_scores": cv, "coef": W[o], "intercept": b0[o],
                  "n_inner_folds": n_in, "converged": bool(info.converged[o])}
    return out


def _mass_mean_problem(mu: np.ndarray, sig: np.ndarray, sums: np.ndarray, counts: np.ndarray,
                       classes: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """``MassMeanProbe`` fitted after a StandardScaler, from per-class row sums; returns raw ``(coef [K', d],
    intercept [K'])`` with ``z = x @ coef.T + intercept`` (K' = 1 for two classes: before its threshold)."""
    means = {c: (sums[c] / counts[c] - mu) / sig for c in classes}  # standardised class means
    if len(classes) == 2:
        d = means[classes[1]] - means[classes[0]]
        nrm = np.linalg.norm(d)
        d = d / nrm if nrm > 0 else d
        v = d / sig
        return v[None, :], np.array([-(mu @ v)])  # the training-accuracy threshold is subtracted by the caller
    tot, ntot = sum(sums[c] for c in classes), sum(counts[c] for c in classes)
    V, b = [], []
    for c in classes:
        m_in = means[c]
        m_out = ((tot - sums[c]) / (ntot - counts[c]) - mu) / sig
        d = m_in - m_out
        nrm = np.linalg.norm(d)
        d = d / nrm if nrm > 0 else d
        v = d / sig
        V.append(v)
        b.append(-(mu @ v) - float((m_in @ d + m_out @ d) / 2.0))
    return np.stack(V), np.asarray(b)


def mass_mean_fits(X: np.ndarray, Y: np.ndarray, train_masks: np.ndarray, stat_masks: np.ndarray | None = None,
                   decisions: dict[int, np.ndarray] | None = None
                   ) -> list[tuple[np.ndarray, np.ndarray, np.ndarray] | None]:
    """Closed-form ``StandardScaler + MassMeanProbe`` for each (labels ``Y[b]``, mask ``train_masks[b]``):
    class sums and scaler moments are two GEMMs over all problems. Returns ``(classes, coef, intercept)`` per
    problem (raw coordinates), ``None`` where the mask holds one class. ``stat_masks[b]`` (default the
    training mask) are the rows the scaler was fitted on. ``decisions``, when given, receives each two-class
    problem's decision values on every row (``x @ coef.T + intercept``, from the threshold's own GEMM on the
    centred rows: the same values up to rounding, without a second GEMM)."""
    X = np.asarray(X, dtype=np.float64)
    Y = np.atleast_2d(np.asarray(Y))
    Mk = np.atleast_2d(np.asarray(train_masks, dtype=bool))
    K = int(Y.max()) + 1
    shift = X.mean(0)
    Xc = X - shift
    SM = Mk if stat_masks is None else np.atleast_2d(np.asarray(stat_masks, dtype=bool))
    uS, inv = unique_rows(SM)  # scaler moments once per distinct stat mask
    Sf = uS.astype(np.float64)
    ns = Sf.sum(1)
    mu_u = (Sf @ Xc) / ns[:, None]
    var = (Sf @ (Xc * Xc)) / ns[:, None] - mu_u * mu_u
    sig_u = np.sqrt(np.clip(var, 0, None))
    sig_u = np.where(sig_u < 10 * np.finfo(np.float64).eps * (1 + np.abs(mu_u)), 1.0, sig_u)
    inv = np.asarray(inv).reshape(-1)
    mu, sig = mu_u[inv], sig_u[inv]
    oh = np.stack([(Y == c) & Mk for c in range(K)], axis=1).astype(np.float32)  # [B, K, n]
    # class sums in one float32 GEMM (the data are centred, so float32 sums lose nothing that matters)
    sums = (oh.reshape(-1, X.shape[0]) @ Xc.astype(np.float32)).reshape(len(Y), K, -1).astype(np.float64)
    counts = oh.sum(2, dtype=np.float64)  # [B, K]
    out: list = []
    binary = []
    for b in range(len(Y)):
        classes = np.flatnonzero(counts[b] > 0)
        if len(classes) < 2:
            out.append(None)
            continue
        W, c0 = _mass_mean_problem(mu[b], sig[b], sums[b], counts[b], classes)
        out.append([classes, W, c0])
        if len(classes) == 2:
            binary.append(b)
    if binary:  # thresholds: all training projections from one GEMM, then a sort per problem
        S = Xc @ np.concatenate([out[b][1] for b in binary]).T  # [n, nb]
        for j, b in enumerate(binary):
            classes, W, c0 = out[b]
            tr = Mk[b]
            t = best_threshold(S[tr, j] + c0[0], (Y[b][tr] == classes[1]).astype(np.int8))
            out[b][2] = c0 - t
            if decisions is not None:
                decisions[b] = S[:, j] + out[b][2][0]
    return [None if r is None else (r[0], r[1], r[2] - r[1] @ shift) for r in out]


def mass_mean_predict(X: np.ndarray, classes: np.ndarray, W: np.ndarray, b: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Classes and decision values of a fitted mass-mean probe ``(classes, W, b)`` (a :func:`mass_mean_fits` result)."""
    z = X @ W.T + b
    if W.shape[0] == 1:
        return classes[(z[:, 0] > 0).astype(int)], z[:, 0]
    return classes[np.argmax(z, axis=1)], z


def cv_predict(kind: str, X: np.ndarray, y: np.ndarray, groups: np.ndarray, fold_ids: np.ndarray, *,
               Cs: Sequence[float], inner_folds: int = 3, seed: int = 0, device: str = "cpu", tol: float = 1e-4,
               max_iter: int = 500) -> dict:
    """Torch/closed-form twin of :func:`probes.fit.cv.cross_val_predict_grouped` (same return keys, plus
    ``"fits"``: the per-fold fit records)."""
    X = np.asarray(X)
    y = np.asarray(y)
    groups = np.asarray(groups)
    F = int(fold_ids.max()) + 1
    n_classes = len(np.unique(y))
    pred = np.full(len(y), -1, dtype=np.int64)
    dec = np.full(len(y) if n_classes <= 2 else (len(y), n_classes), np.nan)
    trains = [fold_ids != k for k in range(F)]
    inner_sc, Cs_out, nwarn, skipped = [], [], 0, []
    if kind == "logistic":
        fits = logistic_fits(X, y, groups, trains, Cs=Cs, inner_folds=inner_folds, seed=seed, device=device,
                             tol=tol, max_iter=max_iter)
        for k in range(F):
            te = fold_ids == k
            r = fits[k]
            if r is None or not te.any():
                inner_sc.append(float("nan"))
                skipped.append(k)
                continue
            z = X[te] @ r["coef"].T + r["intercept"]
            pred[te] = predict_logits(z)
            dec[te] = z[:, 0] if z.shape[1] == 1 else z
            inner_sc.append(r["inner_score"])
            Cs_out.append(r["C"])
            nwarn += int(not r["converged"])
        return {"pred": pred, "decision": dec, "inner_score": inner_sc, "C": Cs_out, "n_convergence_warnings": nwarn,
                "skipped_folds": skipped, "fits": fits,
                "C_per_fold": [None if (r is None or k in skipped) else r["C"] for k, r in enumerate(fits)]}
    if kind != "mass_mean":
        raise ValueError(f"unknown probe {kind!r}; choose 'logistic' or 'mass_mean'")
    # one batch: each outer training split, then every inner training split (inner score for layer selection)
    _, inner = _masks_for(y, groups, trains, inner_folds, seed)
    masks = list(trains) + [a for sp in inner for a, _ in sp]
    stats = list(trains) + [trains[k] for k, sp in enumerate(inner) for _ in sp]
    res = mass_mean_fits(X, np.broadcast_to(y, (len(masks), len(y))), np.stack(masks), np.stack(stats))
    j = F
    for k in range(F):
        te = fold_ids == k
        scores = []
        for _, te_in in inner[k]:
            mm = res[j]
            j += 1
            if mm is not None:
                scores.append(float(np.mean(mass_mean_predict(X[te_in], *mm)[0] == y[te_in])))
        if res[k] is None or not te.any():
            inner_sc.append(float("nan"))
            skipped.append(k)
            continue
        p, z = mass_mean_predict(X[te], *res[k])  # type: ignore[misc]
        pred[te] = p
        if dec.ndim == 1 and z.ndim == 1:
            dec[te] = z
        elif dec.ndim == 2 and z.ndim == 2 and z.shape[1] == n_classes:
            dec[te] = z
        inner_sc.append(float(np.mean(scores)) if scores else float("nan"))
    return {"pred": pred, "decision": dec, "inner_score": inner_sc, "C": [], "n_convergence_warnings": 0,
            "skipped_folds": skipped, "C_per_fold": [None] * F}


def _permutation_correct(kind: str, X: np.ndarray, y_perms: np.ndarray, fold_ids: np.ndarray,
                        C_per_fold: Sequence[float | None], *, device: str = "cpu", tol: float = 1e-4,
                        max_iter: int = 500) -> np.ndarray:
    """Shuffled-label controls, batched: for each permuted label vector and outer fold, fit the probe on the
    training split and count correct held-out predictions. Returns int ``[P, F]`` (-1 where a fold is skipped).

    The logistic control uses, per fold, the C the real labels chose (``C_per_fold``), instead of repeating
    the inner C search for every permutation (see :mod:`probes.controls`)."""
    X = np.asarray(X)
    Yp = np.atleast_2d(np.asarray(y_perms))
    P, n = Yp.shape
    F = int(fold_ids.max()) + 1
    out = np.full((P, F), -1, dtype=np.int64)
    trains = np.stack([fold_ids != k for k in range(F)])
    if kind == "mass_mean":
        Xf = np.asarray(X, dtype=np.float64)
        for s in range(0, P, max(1, CHUNK // F)):
            Ys = Yp[s: s + max(1, CHUNK // F)]
            res = mass_mean_fits(Xf, np.repeat(Ys, F, axis=0), np.tile(trains, (len(Ys), 1)))
            live = [i for i, r in enumerate(res) if r is not None]
            if not live:
                continue
            Z = Xf @ np.concatenate([res[i][1] for i in live]).T  # type: ignore[index]  # one GEMM
            col = 0
            for i in live:
                classes, W, b = res[i]  # type: ignore[misc]
                p, k = s + i // F, i % F
                z = Z[:, col: col + len(W)] + b
                col += len(W)
                pr = classes[(z[:, 0] > 0).astype(int)] if len(W) == 1 else classes[np.argmax(z, axis=1)]
                te = ~trains[k]
                out[p, k] = int(np.sum(pr[te] == Yp[p, te]))
        return out
    live = [k for k in range(F) if C_per_fold[k] is not None]
    if not live:
        return out
    D = Design.build(X, trains, device=device)
    n_classes = int(Yp.max()) + 1
    probs = [(p, k) for p in range(P) for k in live if len(np.unique(Yp[p, trains[k]])) >= 2]
    step = max(1, CHUNK)
    for s in range(0, len(probs), step):
        chunk = probs[s: s + step]
        midx = np.array([k for _, k in chunk])
        th, _ = solve(D, Yp[[p for p, _ in chunk]], midx, [C_per_fold[k] for k in midx], n_classes=n_classes,
                      tol=tol, max_iter=max_iter)
        z = D.logits(th, torch.as_tensor(midx, device=D.X.device)).detach().cpu().numpy()  # [n, b, K]
        for i, (p, k) in enumerate(chunk):
            te = ~trains[k]
            out[p, k] = int(np.sum(predict_logits(z[te, i, :]) == Yp[p, te]))
    return out


def logistic_fits(X: np.ndarray, y: np.ndarray, groups: np.ndarray, train_masks: Sequence[np.ndarray], *,
                  Cs: Sequence[float], inner_folds: int = 3, seed: int = 0, device: str = "cpu",
                  tol: float = 1e-4, max_iter: int = 500) -> list[dict | None]:
    """``LogisticProbe`` (inner grouped CV over ``Cs``, refit at the chosen C) on each training mask, batched.

    Returns per mask ``{"C", "inner_score", "cv_scores", "coef" [K, d], "intercept" [K], "n_inner_folds",
    "converged"}`` (raw coordinates: ``z = x @ coef.T + intercept``), or ``None`` where the mask holds one
    class. ``y`` holds class indices 0..K-1; with K > 2 every mask must hold all K classes (else ValueError).
    """
    with thread_limit(int(np.shape(X)[0]), int(np.shape(X)[1]), device):
        return _logistic_fits(X, y, groups, train_masks, Cs=Cs, inner_folds=inner_folds, seed=seed, device=device,
                              tol=tol, max_iter=max_iter)


def permutation_correct(kind: str, X: np.ndarray, y_perms: np.ndarray, fold_ids: np.ndarray,
                        C_per_fold: Sequence[float | None], *, device: str = "cpu", tol: float = 1e-4,
                        max_iter: int = 500) -> np.ndarray:
    """Shuffled-label controls, batched: for each permuted label vector and outer fold, fit the probe on the
    training split and count correct held-out predictions. Returns int ``[P, F]`` (-1 where a fold is skipped).

    The logistic control uses, per fold, the C the real labels chose (``C_per_fold``) instead of repeating
    the inner C search for every permutation; mass-mean has no hyperparameter and is refitted exactly."""
    with thread_limit(int(np.shape(X)[0]), int(np.shape(X)[1]), device):
        return _permutation_correct(kind, X, y_perms, fold_ids, C_per_fold, device=device, tol=tol,
                                    max_iter=max_iter)
