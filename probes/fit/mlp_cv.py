"""The MLP probe inside the probe study: every MLP fit of one layer in one batched torch loop
(:func:`probes.fit.mlp_train.fit_on_masks`), behind the interface of :class:`probes.fit.backend.Backend`.

    from probes.fit.backend import Backend
    be = MLPBackend(Backend("torch", "cpu", inner_folds=3, seed=0), permutations=20)
    run = be.cv("mlp", X, y, groups, fold_ids)       # what probes.fit.cv.cross_val_predict_grouped returns

The MLP sees exactly the linear probes' outer folds (the study hands every probe the same ``fold_ids``), the
same grouped inner splits (:func:`probes.fit.estimators.inner_splits`) for its hyperparameters, and it is scored
by the same code (metadata baseline, clustered intervals, nested layer selection). Its shuffled-label control
refits each permutation on every outer training split at the hyperparameters the real labels chose for that
fold (as the logistic control keeps the fold's C); each refit is a full MLP training, so by default only the
first ``permutations`` (20) of the study's permutations are run for it, recorded as its ``n_permutations``.
Every other probe goes to the wrapped backend unchanged.
"""
from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np

from probes.fit.backend import Backend
from probes.fit.mlp_train import (
    HIDDEN_SIZES,
    VALIDATION_FRACTION,
    WEIGHT_DECAYS,
    early_stopping_split,
    fit_on_masks,
    mlp_logits,
    run_problems,
)

MLP_PERMUTATIONS = 20


def _logits(X: np.ndarray, fit: dict) -> np.ndarray:
    return mlp_logits(X, *fit["weights"])


def cv_predict(X, y, groups, fold_ids, *, inner_folds: int = 3, seed: int = 0, device: str = "cpu",
               max_iter: int = 300, **mlp_kw) -> dict:
    """Held-out MLP predictions over the outer folds, every fold's fit batched.

    Returns the keys of :func:`probes.fit.cv.cross_val_predict_grouped`: ``pred`` (-1 where unscored),
    ``decision`` ([n]: logit difference for two classes; [n, K] logits), ``inner_score`` per fold (the inner
    grouped-CV accuracy at the chosen hyperparameters: nested layer selection reads it), ``C_per_fold`` (for
    the MLP: the chosen ``{"hidden", "weight_decay"}`` per fold), ``n_convergence_warnings`` (fits that ran
    all ``max_iter`` epochs without stopping early), ``skipped_folds``; and ``n_iter_per_fold``."""
    X = np.asarray(X)
    y = np.asarray(y, dtype=np.int64)
    K = int(y.max()) + 1
    F = int(fold_ids.max()) + 1
    pred = np.full(len(y), -1, dtype=np.int64)
    dec = np.full(len(y) if K <= 2 else (len(y), K), np.nan)
    live = [k for k in range(F) if (fold_ids == k).any() and len(np.unique(y[fold_ids != k])) >= 2]
    fits = fit_on_masks(X, y, groups, [fold_ids != k for k in live], n_classes=K, inner_folds=inner_folds,
                        seed=seed, device=device, max_iter=max_iter, **mlp_kw)
    by_fold = dict(zip(live, fits))
    inner: list[float] = []
    params: list[dict[str, Any] | None] = []
    n_iter: list[int | None] = []
    skipped: list[int] = []
    for k in range(F):
        f = by_fold.get(k)
        if f is None:
            inner.append(float("nan"))
            params.append(None)
            n_iter.append(None)
            skipped.append(k)
            continue
        te = fold_ids == k
        z = _logits(X[te], f)
        pred[te] = np.argmax(z, axis=1)
        dec[te] = z[:, 1] - z[:, 0] if K <= 2 else z
        inner.append(float(f["inner_score"]))
        params.append({"hidden": int(f["hidden"]), "weight_decay": float(f["weight_decay"])})
        n_iter.append(int(f["n_iter"]))
    nwarn = sum(1 for f in fits if f is not None and not f["early_stopping"] and f["n_iter"] >= max_iter)
    return {"pred": pred, "decision": dec, "inner_score": inner, "C": [], "C_per_fold": params,
            "n_convergence_warnings": int(nwarn), "skipped_folds": skipped, "n_iter_per_fold": n_iter}


def permutation_correct(X, y_perms, fold_ids, params_per_fold: Sequence[dict | None], groups=None, *,
                        seed: int = 0, device: str = "cpu", validation_fraction: float = VALIDATION_FRACTION,
                        **train_kw) -> np.ndarray:
    """Correct held-out counts ``[P, F]`` of MLPs refitted on each permuted training split at that fold's
    chosen hyperparameters (-1 where skipped: no hyperparameters, or one class); all refits in one batch."""
    X = np.asarray(X)
    Yp = np.atleast_2d(np.asarray(y_perms, dtype=np.int64))
    F = int(fold_ids.max()) + 1
    n = X.shape[0]
    K = int(Yp.max()) + 1
    out = np.full((len(Yp), F), -1, dtype=np.int64)
    problems, where = [], []
    for k in range(F):
        prm = params_per_fold[k] if k < len(params_per_fold) else None
        tr_mask = fold_ids != k
        rows = np.flatnonzero(tr_mask)
        if prm is None or not (fold_ids == k).any():
            continue
        for p, yp in enumerate(Yp):
            if len(np.unique(yp[rows])) < 2:
                continue
            va_local = early_stopping_split(yp[rows], None if groups is None else np.asarray(groups)[rows],
                                            validation_fraction, seed)
            tr, va = np.zeros(n, bool), np.zeros(n, bool)
            tr[rows[~va_local]], va[rows[va_local]] = True, True
            problems.append({"hidden": int(prm["hidden"]), "wd": float(prm["weight_decay"]), "targets": yp,
                             "train": tr, "val": va, "stats": tr_mask})
            where.append((p, k))
    if not problems:
        return out
    fits = run_problems(X, problems, n_classes=max(K, 2), device=device, seed=seed, **train_kw)
    for (p, k), f in zip(where, fits):
        te = fold_ids == k
        out[p, k] = int(np.sum(np.argmax(mlp_logits(X[te], f["W1"], f["b1"], f["W2"], f["b2"]), axis=1) == Yp[p, te]))
    return out


class MLPBackend(Backend):
    """``base`` (a :class:`probes.fit.backend.Backend`) with the ``mlp`` probe added: ``mlp`` fits run here (batched
    torch, on the base's device, with its ``inner_folds`` and ``seed``); every other probe is the base's,
    unchanged. ``permutations``: how many of the study's permutations the MLP control refits."""

    def __init__(self, base: Backend, *, permutations: int = MLP_PERMUTATIONS,
                 hidden_sizes: Sequence[int] = HIDDEN_SIZES, weight_decays: Sequence[float] = WEIGHT_DECAYS,
                 **train_kw: Any):
        self.__dict__.update(vars(base))  # the same solver, device, pca, inner_folds, Cs and seed
        self.n_permutations = int(permutations)
        self.mlp_kw = {"hidden_sizes": tuple(int(h) for h in hidden_sizes),
                       "weight_decays": tuple(float(w) for w in weight_decays), **train_kw}
        self._groups: np.ndarray | None = None
        self.requested_permutations: int | None = None

    def describe(self, requested: int) -> str:
        """One line for the log: the MLP grid and the size of its control."""
        m = min(self.n_permutations, int(requested))
        ctl = (f"its shuffled-label control refits {m} of the {requested} permutations (each a full MLP training "
               f"per outer fold)" if m < requested else f"its shuffled-label control refits all {requested} permutations")
        return (f"mlp probe: hidden {list(self.mlp_kw['hidden_sizes'])} x weight decay "
                f"{list(self.mlp_kw['weight_decays'])} by inner grouped CV; {ctl}")

    def _train_kw(self) -> dict[str, Any]:
        return {k: v for k, v in self.mlp_kw.items() if k not in ("hidden_sizes", "weight_decays", "inner_folds")}

    def cv(self, kind: str, X: np.ndarray, y: np.ndarray, groups: np.ndarray, fold_ids: np.ndarray) -> dict:
        if kind != "mlp":
            return super().cv(kind, X, y, groups, fold_ids)
        self._groups = np.asarray(groups)  # the study's CV groups: the control's early-stopping splits use them
        return cv_predict(X, y, groups, fold_ids, inner_folds=self.inner_folds, seed=self.seed,
                          device=self.device, **self.mlp_kw)

    def permutations(self, kind: str, X: np.ndarray, Yp: np.ndarray, fold_ids: np.ndarray,
                     C_per_fold: list[Any]) -> np.ndarray:
        if kind != "mlp":
            return super().permutations(kind, X, Yp, fold_ids, C_per_fold)
        self.requested_permutations = int(len(Yp))
        Yp = np.asarray(Yp)[:self.n_permutations]
        if not len(Yp):
            return np.zeros((0, int(fold_ids.max()) + 1), dtype=np.int64)
        return permutation_correct(X, Yp, fold_ids, C_per_fold, self._groups, seed=self.seed,
                                   device=self.device, **self._train_kw())

    def fit_predict(self, kind: str, X: np.ndarray, y: np.ndarray, groups: np.ndarray) -> Any:
        """A ``fit_predict(train_masks, test_masks)`` for :func:`probes.validity.transfer` (all fits batched)."""
        if kind != "mlp":
            return super().fit_predict(kind, X, y, groups)
        K = int(np.asarray(y).max()) + 1

        def run(trains: list[np.ndarray], tests: list[np.ndarray]) -> list[np.ndarray | None]:
            out: list[np.ndarray | None] = [None] * len(trains)
            live = [i for i, tr in enumerate(trains) if len(np.unique(y[tr])) >= 2 and tests[i].any()]
            fits = fit_on_masks(X, y, groups, [trains[i] for i in live], n_classes=K,
                                inner_folds=self.inner_folds, seed=self.seed, device=self.device,
                                **self.mlp_kw)
            for i, f in zip(live, fits):
                if f is not None:
                    out[i] = np.argmax(_logits(X[tests[i]], f), axis=1)
            return out

        return run

    def settings(self) -> dict[str, Any]:
        """The MLP's settings and the size of its control, for results.json."""
        req = self.requested_permutations
        used = min(self.n_permutations, req) if req is not None else self.n_permutations
        note = (f"the mlp shuffled-label control refits {used} of the study's {req} permutations (each is a full "
                f"MLP training on every outer fold); its p-values have a floor of 1/{used + 1}"
                if req is not None and used < req else "")
        return {**{k: (list(v) if isinstance(v, tuple) else v) for k, v in self.mlp_kw.items()},
                "permutations": used, "requested_permutations": req, "note": note}


__all__ = ["MLPBackend", "cv_predict", "permutation_correct", "MLP_PERMUTATIONS"]
