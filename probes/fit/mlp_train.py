"""The MLP probe's training (one hidden ReLU layer, torch): many fits trained at once.

    from probes.fit.mlp_train import fit_on_masks
    fits = fit_on_masks(X, y, groups, [fold_ids != k for k in range(5)], inner_folds=3, device="cpu")

* :func:`train_mlps` - B independent MLPs on one feature matrix, trained together by full-batch Adam: one
  ``X @ W`` product ([n, d] x [d, B*h]) per step, each problem with its own training rows, early-stopping rows,
  standardisation rows, labels and weight decay. Adam is elementwise, so batching couples nothing.
* :func:`fit_on_masks` - the whole :class:`MLPProbe` fit on each of several training masks, batched: the hidden
  size and weight decay chosen by an inner *grouped* CV on the mask's rows (the same
  :func:`probes.fit.estimators.inner_splits` as the linear probes), then a refit on all of them; every fit stops
  early on an inner grouped split (:func:`early_stopping_split`). The probe study calls it once per layer
  (:mod:`probes.fit.mlp_cv`); :class:`MLPProbe` calls it with one mask, so both run the same arithmetic.
The estimator, :class:`probes.fit.mlp.MLPProbe`, is a thin scikit-learn face over :func:`fit_on_masks`.

Features are standardised inside every fit (mean and standard deviation of its standardisation rows, a zero
deviation read as 1), and the fitted weights are folded back to raw input coordinates, so predictions are one
numpy float64 pass: ``relu(X @ W1 + b1) @ W2 + b2`` -> K logits.
"""
from __future__ import annotations

import warnings
from collections.abc import Sequence
from typing import Any

import numpy as np

from probes.fit.estimators import blas_limit, inner_splits

HIDDEN_SIZES = (16, 64)
WEIGHT_DECAYS = (1e-3, 1e-1)
VALIDATION_FRACTION = 0.2


def early_stopping_split(y, groups, fraction: float = VALIDATION_FRACTION, seed: int = 0) -> np.ndarray:
    """Validation rows (bool mask over ``y``) for early stopping: one fold of ``StratifiedGroupKFold`` by
    ``groups`` (a stratified ``StratifiedKFold`` fold when ``groups`` is None), about ``fraction`` of the rows.
    All False (no early stopping) when no such split leaves at least two classes to train on."""
    from sklearn.model_selection import StratifiedGroupKFold, StratifiedKFold  # deferred: sklearn is heavy to import

    y = np.asarray(y)
    mask = np.zeros(len(y), dtype=bool)
    if not fraction or len(y) < 4:
        return mask
    k = max(2, int(round(1.0 / float(fraction))))
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", UserWarning)  # "the least populated class has only N members"
        try:
            if groups is None:
                k = min(k, int(np.bincount(np.unique(y, return_inverse=True)[1]).max()))
                cv: Any = StratifiedKFold(n_splits=k, shuffle=True, random_state=seed)
            else:
                k = min(k, len(np.unique(np.asarray(groups))))
                cv = StratifiedGroupKFold(n_splits=k, shuffle=True, random_state=seed)
            if k < 2:
                return mask
            _, va = next(cv.split(np.zeros(len(y)), y, groups))
        except ValueError:
            return mask
    mask[va] = True
    return mask if len(np.unique(y[~mask])) >= 2 else np.zeros(len(y), dtype=bool)


def _init(d: int, h: int, k: int, seed: int):
    """Glorot-uniform weights (zero biases) from a generator seeded by ``seed`` alone, so a problem's start does
    not depend on the batch it is trained in."""
    import torch  # deferred: torch is heavy to import

    g = torch.Generator().manual_seed(int(seed))
    a1, a2 = (6.0 / (d + h)) ** 0.5, (6.0 / (h + k)) ** 0.5
    return (torch.rand(d, h, generator=g, dtype=torch.float32) * 2 - 1) * a1, \
        (torch.rand(h, k, generator=g, dtype=torch.float32) * 2 - 1) * a2


def _projection(X64: np.ndarray, rows: np.ndarray, n_components: int | None):
    """Standardisation (mean, sd; zero sd -> 1) of ``rows`` and the top principal axes ``V`` [d, k] of the
    standardised rows (k = min(n_components, rows, d); identity when ``n_components`` is None)."""
    Xr = X64[rows]
    mu = Xr.mean(axis=0)
    sd = Xr.std(axis=0)
    sd[sd <= 1e-12 * np.maximum(1.0, np.abs(mu))] = 1.0
    d = X64.shape[1]
    if n_components is None or n_components >= d:
        return mu, sd, None
    Z = (Xr - mu) / sd
    with blas_limit(Z):  # a multi-threaded LAPACK call spins under load on a small matrix
        _, _, vt = np.linalg.svd(Z, full_matrices=False)
    k = int(min(n_components, len(vt)))
    V = vt[:k].T
    V = V * np.where(V[np.argmax(np.abs(V), axis=0), np.arange(k)] < 0, -1.0, 1.0)  # sign-fixed
    return mu, sd, V


def _compact(params: list, opt: Any, act: list[int], live: list[np.ndarray], keep: np.ndarray, lr: float):
    """Keep only the problems marked in ``keep`` (active order): sliced parameters and their Adam state (Adam
    is elementwise, so the problems that go on training follow the same path as without the others)."""
    import torch  # deferred: torch is heavy to import

    n_u = len(act)
    idx, off = [], 0
    for g in act:
        m = len(live[g])
        idx.append(np.flatnonzero(keep[off:off + m]))
        off += m
    rows = np.flatnonzero(keep)
    new_params, states = [], []
    for i, p in enumerate(params):
        k = idx[i] if i < n_u else rows
        if i < n_u and not len(k):
            continue
        kt = torch.as_tensor(k, device=p.device)
        q = p.detach()[kt].clone().requires_grad_(True)
        st = opt.state.get(p, {})
        states.append({key: (v.clone() if key == "step" else v[kt].clone()) for key, v in st.items()})
        new_params.append(q)
    new_live = list(live)
    new_act = []
    for g, k in zip(act, idx):
        new_live[g] = live[g][k]
        if len(k):
            new_act.append(g)
    new_opt = torch.optim.Adam(new_params, lr=lr)
    for q, st in zip(new_params, states):
        if st:
            new_opt.state[q] = st
    return new_params, new_opt, new_act, new_live


def train_mlps(X, targets, train, val, stats, weight_decay, *, hidden: int, n_classes: int, max_iter: int = 300,
               patience: int = 10, lr: float = 3e-2, tol: float = 1e-3, seed: int = 0, n_components: int | None = 128,
               device: str = "cpu") -> dict[str, np.ndarray]:
    """Train B one-hidden-layer MLPs (``hidden`` ReLU units, ``n_classes`` softmax outputs) on ``X`` [n, d].

    ``targets`` int [B, n] class indices; ``train``, ``val``, ``stats`` bool [B, n]: the rows each problem
    learns from, stops early on (none: it monitors its training objective instead) and is standardised by.
    Problems with the same ``stats`` rows share one standardisation and one projection on the top
    ``n_components`` principal axes of those rows (the paper's probes used PCA-128; fitted here on the
    standardisation rows only; None = no projection): the first layer acts on that projection, so one fit costs
    ``O(n * k * h)`` per epoch, not ``O(n * d * h)``. ``weight_decay`` [B]: L2 penalty ``wd / 2 * (|W1|^2 +
    |W2|^2)`` (standardised coordinates), added to the mean training cross-entropy. Each problem keeps the
    weights of its epoch with the lowest monitored loss; training ends when every problem has gone
    ``patience`` epochs without improving it by ``tol`` (or after ``max_iter`` epochs).

    Returns numpy float64 weights in raw input coordinates, ``W1`` [B, d, h], ``b1`` [B, h], ``W2`` [B, h, K],
    ``b2`` [B, K], and ``n_iter`` [B] (the kept epoch, >= 1), ``monitor`` [B] (its loss), ``early_stopping``
    [B] (whether the problem had validation rows).
    """
    import torch  # deferred: torch is heavy to import

    X64 = np.asarray(X, dtype=np.float64)
    n, d = X64.shape
    B = len(targets)
    stats = np.asarray(stats, dtype=bool)
    keys, gid = np.unique(np.packbits(stats, axis=1), axis=0, return_inverse=True)
    gid = np.asarray(gid).reshape(-1)
    order = np.argsort(gid, kind="stable")  # problems sorted by standardisation group
    dev = torch.device(device)
    f32: dict[str, Any] = {"dtype": torch.float32, "device": dev}
    proj, feats, U, spans = [], [], [], []
    w1_cache: dict[int, Any] = {}
    for g in range(len(keys)):
        members = order[gid[order] == g]
        mu, sd, V = _projection(X64, np.flatnonzero(stats[members[0]]), n_components)
        P = (X64 - mu) / sd if V is None else ((X64 - mu) / sd) @ V  # [n, k]
        k = P.shape[1]
        if k not in w1_cache:
            w1_cache[k] = _init(k, hidden, n_classes, seed)[0]
        proj.append((mu, sd, V))
        feats.append(torch.as_tensor(P, **f32))
        U.append(w1_cache[k].to(dev).expand(len(members), k, hidden).clone().requires_grad_(True))
        spans.append(members)
    perm = np.concatenate(spans)  # problem order inside the loop
    T = torch.as_tensor(np.asarray(targets, dtype=np.int64)[perm].T, dtype=torch.int64, device=dev)  # [n, B]
    TR = torch.as_tensor(np.asarray(train)[perm].T, **f32)  # [n, B]
    VA = torch.as_tensor(np.asarray(val)[perm].T, **f32)
    ntr = TR.sum(0).clamp(min=1.0)
    nva = VA.sum(0)
    has_val = nva > 0
    wd = torch.as_tensor(np.asarray(weight_decay, dtype=np.float64)[perm], **f32)
    W2 = _init(1, hidden, n_classes, seed)[1].to(dev).expand(B, hidden, n_classes).clone().requires_grad_(True)
    b1 = torch.zeros(B, hidden, **f32, requires_grad=True)
    b2 = torch.zeros(B, n_classes, **f32, requires_grad=True)
    best_U = [u.detach().clone() for u in U]  # every problem's kept weights, loop order
    best_b1, best_W2, best_b2 = b1.detach().clone(), W2.detach().clone(), b2.detach().clone()
    best_loss = torch.full((B,), float("inf"), **f32)
    ref_loss = best_loss.clone()
    stall = torch.zeros(B, dtype=torch.int64, device=dev)
    best_epoch = torch.ones(B, dtype=torch.int64, device=dev)
    bounds = np.cumsum([0] + [len(m) for m in spans])
    live = [np.arange(len(m)) for m in spans]  # per group: its problems still training (local indices)
    act = list(range(len(spans)))  # groups with a problem still training
    params = [*U, b1, W2, b2]
    opt = torch.optim.Adam(params, lr=lr)
    threads = torch.get_num_threads()
    if dev.type == "cpu" and n * max(f.shape[1] for f in feats) * B * hidden < 20_000_000:
        torch.set_num_threads(1)  # thread hand-offs dominate small products
    compacted = True
    try:
        for t in range(max_iter + 1):
            alive = torch.as_tensor(np.concatenate([bounds[g] + live[g] for g in act]), device=dev)
            if compacted:
                Ta, TRa, VAa = T[:, alive], TR[:, alive], VA[:, alive]
                ntra, nvaa, hva, wda = ntr[alive], nva[alive], has_val[alive], wd[alive]
            compacted = False
            Ua, (b1a, W2a, b2a) = params[:len(act)], params[len(act):]
            z1 = torch.cat([(feats[g] @ u.permute(1, 0, 2).reshape(feats[g].shape[1], -1)).reshape(n, len(u), hidden)
                            for g, u in zip(act, Ua)], dim=1) + b1a[None]  # [n, A, h]
            z2 = torch.einsum("nbh,bhk->nbk", torch.relu(z1), W2a) + b2a[None]  # [n, A, K]
            nll = -torch.log_softmax(z2, dim=-1).gather(-1, Ta[..., None])[..., 0]  # [n, A]
            pen = torch.cat([(u * u).sum((1, 2)) for u in Ua]) + (W2a * W2a).sum((1, 2))
            obj = (nll * TRa).sum(0) / ntra + 0.5 * wda * pen
            done = None
            if t >= 1:  # the weights after t updates
                with torch.no_grad():
                    mon = torch.where(hva, (nll * VAa).sum(0) / nvaa.clamp(min=1.0), obj)
                    better = mon < best_loss[alive]
                    if bool(better.any()):
                        bi = alive[better]
                        best_b1[bi], best_W2[bi], best_b2[bi] = b1a[better], W2a[better], b2a[better]
                        off = 0
                        for g, u in zip(act, Ua):
                            sel = better[off:off + len(u)]
                            best_U[g][torch.as_tensor(live[g], device=dev)[sel]] = u[sel]
                            off += len(u)
                        best_epoch[bi] = t
                        best_loss[bi] = mon[better]
                    gain = mon < ref_loss[alive] - tol
                    ref_loss[alive] = torch.where(gain, mon, ref_loss[alive])
                    stall[alive] = torch.where(gain, 0, stall[alive] + 1)
                    done = (stall[alive] > patience).cpu().numpy()
                if t == max_iter or bool(done.all()):
                    break
            opt.zero_grad(set_to_none=True)
            obj.sum().backward()
            opt.step()
            if done is not None and done.sum() >= max(1, len(done) // 4):  # drop the stopped problems
                params, opt, act, live = _compact(params, opt, act, live, ~done, lr)
                compacted = True
    finally:
        torch.set_num_threads(threads)
    best = [*best_U, best_b1, best_W2, best_b2]
    inv = np.empty(B, dtype=np.int64)
    inv[perm] = np.arange(B)  # loop position of each input problem
    Ub = [u.cpu().numpy().astype(np.float64) for u in best[:len(U)]]
    b1b, W2b, b2b = (p.detach().cpu().numpy().astype(np.float64) for p in best[len(U):])
    W1raw = np.empty((B, d, hidden))
    b1raw = np.empty((B, hidden))
    for g, (mu, sd, V) in enumerate(proj):
        Wstd = Ub[g] if V is None else np.einsum("dk,bkh->bdh", V, Ub[g])  # standardised coordinates
        loop = np.arange(bounds[g], bounds[g + 1])
        W1raw[perm[loop]] = Wstd / sd[None, :, None]
        b1raw[perm[loop]] = b1b[loop] - np.einsum("d,bdh->bh", mu / sd, Wstd)
    return {"W1": W1raw, "b1": b1raw, "W2": W2b[inv], "b2": b2b[inv], "n_iter": best_epoch.cpu().numpy()[inv],
            "monitor": best_loss.cpu().numpy().astype(np.float64)[inv], "early_stopping": has_val.cpu().numpy()[inv]}


def mlp_logits(X, W1, b1, W2, b2) -> np.ndarray:
    """[n, K] logits of one fitted MLP (raw-coordinate weights) in float64."""
    return np.maximum(np.asarray(X, dtype=np.float64) @ W1 + b1, 0.0) @ W2 + b2


def grid_order(hidden_sizes: Sequence[int], weight_decays: Sequence[float]) -> list[tuple[int, float]]:
    """The hyperparameter grid, simplest first (fewest units, strongest decay): ties in inner CV go to it."""
    return [(int(h), float(w)) for h in sorted(set(int(x) for x in hidden_sizes))
            for w in sorted(set(float(x) for x in weight_decays), reverse=True)]


def _problem(n: int, rows: np.ndarray, y: np.ndarray, groups, stat_mask: np.ndarray, fraction: float, seed: int):
    """(train mask, val mask, stats mask) over all n rows for a fit on ``rows`` with early stopping."""
    va_local = early_stopping_split(y[rows], None if groups is None else groups[rows], fraction, seed)
    tr, va = np.zeros(n, bool), np.zeros(n, bool)
    tr[rows[~va_local]], va[rows[va_local]] = True, True
    return tr, va, stat_mask


def run_problems(X, problems: list[dict], *, n_classes: int, device: str = "cpu", seed: int = 0,
                 **train_kw) -> list[dict]:
    """Train ``problems`` (dicts with ``hidden``, ``wd``, ``targets`` [n], ``train``, ``val``, ``stats`` [n])
    grouped by hidden size, one :func:`train_mlps` call per size; returns per problem its weights and stats."""
    out: list[dict] = [{} for _ in problems]
    for h in sorted({p["hidden"] for p in problems}):
        ids = [i for i, p in enumerate(problems) if p["hidden"] == h]
        for s in range(0, len(ids), 256):  # bounds the [n, B*h] activations
            chunk = ids[s:s + 256]
            ps = [problems[i] for i in chunk]
            r = train_mlps(X, np.stack([p["targets"] for p in ps]), np.stack([p["train"] for p in ps]),
                           np.stack([p["val"] for p in ps]), np.stack([p["stats"] for p in ps]),
                           np.array([p["wd"] for p in ps]), hidden=h, n_classes=n_classes, seed=seed,
                           device=device, **train_kw)
            for j, i in enumerate(chunk):
                out[i] = {k: v[j] for k, v in r.items()}
    return out


def fit_on_masks(X, y, groups, train_masks: Sequence[np.ndarray], *, hidden_sizes=HIDDEN_SIZES,
                 weight_decays=WEIGHT_DECAYS, inner_folds: int = 3, seed: int = 0,
                 validation_fraction: float = VALIDATION_FRACTION, n_classes: int | None = None,
                 device: str = "cpu", **train_kw) -> list[dict | None]:
    """The :class:`MLPProbe` fit on each training mask of ``X`` [n, d] (``y`` class indices 0..K-1), batched.

    Per mask: inner grouped splits of its rows (:func:`probes.fit.estimators.inner_splits`); every grid point
    (:func:`grid_order`) trained on each inner training split and scored (accuracy) on its inner test split,
    and trained on the whole mask; the grid point with the best mean inner accuracy (ties -> simplest) is kept.
    Standardisation statistics come from the mask's rows for every fit of that mask (as a scaler fitted on
    the outer training split would). Returns per mask ``{"hidden", "weight_decay", "inner_score",
    "cv_scores", "n_inner_folds", "weights": (W1, b1, W2, b2), "n_iter", "early_stopping"}``, or None where
    the mask holds fewer than two classes."""
    X = np.asarray(X)
    y = np.asarray(y, dtype=np.int64)
    n = len(y)
    groups = None if groups is None else np.asarray(groups)
    K = int(n_classes if n_classes is not None else y.max() + 1)
    grid = grid_order(hidden_sizes, weight_decays)
    problems: list[dict] = []
    plan: list[dict | None] = []
    for mask in train_masks:
        mask = np.asarray(mask, dtype=bool)
        rows = np.flatnonzero(mask)
        if len(np.unique(y[rows])) < 2:
            plan.append(None)
            continue
        sp = inner_splits(y[rows], None if groups is None else groups[rows], inner_folds, seed) \
            if inner_folds >= 2 and len(grid) > 1 else []
        inner = [(_problem(n, rows[a], y, groups, mask, validation_fraction, seed), rows[b]) for a, b in sp]
        outer = _problem(n, rows, y, groups, mask, validation_fraction, seed)
        entry: dict = {"grid": {}}
        for h, w in grid:
            ids = []
            for (tr, va, st), _ in inner:
                ids.append(len(problems))
                problems.append({"hidden": h, "wd": w, "targets": y, "train": tr, "val": va, "stats": st})
            entry["grid"][(h, w)] = (ids, len(problems))
            problems.append({"hidden": h, "wd": w, "targets": y, "train": outer[0], "val": outer[1], "stats": outer[2]})
        entry["tests"] = [te for _, te in inner]
        plan.append(entry)
    fits = run_problems(X, problems, n_classes=K, device=device, seed=seed, **train_kw) if problems else []
    out: list[dict | None] = []
    for planned in plan:
        if planned is None:
            out.append(None)
            continue
        entry = planned
        scores = {}
        for (h, w), (ids, _) in entry["grid"].items():
            accs = [float(np.mean(np.argmax(mlp_logits(X[te], *_weights(fits[i])), axis=1) == y[te]))
                    for i, te in zip(ids, entry["tests"])]
            scores[(h, w)] = float(np.mean(accs)) if accs else float("nan")
        vals = np.array(list(scores.values()))
        if np.all(np.isnan(vals)):
            h, w = grid[0]
            inner_score = float("nan")
        else:
            h, w = list(scores)[int(np.flatnonzero(vals >= np.nanmax(vals) - 1e-12)[0])]
            inner_score = scores[(h, w)]
        f = fits[entry["grid"][(h, w)][1]]
        out.append({"hidden": h, "weight_decay": w, "inner_score": inner_score,
                    "cv_scores": {f"hidden={a},weight_decay={b:g}": s for (a, b), s in scores.items()},
                    "n_inner_folds": len(entry["tests"]), "weights": _weights(f), "n_iter": int(f["n_iter"]),
                    "early_stopping": bool(f["early_stopping"])})
    return out


def _weights(f: dict) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    return f["W1"], f["b1"], f["W2"], f["b2"]


__all__ = ["train_mlps", "fit_on_masks", "run_problems", "early_stopping_split", "mlp_logits",
           "grid_order", "HIDDEN_SIZES", "WEIGHT_DECAYS", "VALIDATION_FRACTION"]
