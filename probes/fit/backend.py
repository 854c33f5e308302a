"""The solver behind every probe fit of a layer: batched torch (:mod:`probes.fit.fast`, the default) or the
scikit-learn reference (:mod:`probes.fit.cv`, :mod:`probes.controls`), behind one interface.

    be = Backend("torch", device="cpu", inner_folds=3, Cs=(0.01, 1, 100), seed=0)
    run = be.cv("logistic", X, y, groups, fold_ids)        # what probes.fit.cv.cross_val_predict_grouped returns

Where the torch solver cannot fit a problem (a multiclass training split that lacks a class), the scikit-learn
reference fits it instead, so both solvers score the same rows.
"""
from __future__ import annotations

import numpy as np

from probes.controls import permutation_correct_sklearn
from probes.fit.cv import cross_val_predict_grouped, pipeline_for
from probes.fit.estimators import DEFAULT_CS
from probes.validity import FitPredict


def lacks_class(y: np.ndarray, fold_ids: np.ndarray) -> bool:
    """True when some outer training split misses one of ``y``'s classes."""
    K = len(np.unique(y))
    return any(len(np.unique(y[fold_ids != k])) < K for k in range(int(fold_ids.max()) + 1))


class Backend:
    """The solver behind every fit of a layer: batched torch (default) or the scikit-learn reference."""

    def __init__(self, solver: str = "torch", device: str = "cpu", pca: int | None = None, inner_folds: int = 3,
                 Cs: tuple[float, ...] = DEFAULT_CS, seed: int = 0):
        self.solver, self.pca, self.inner_folds, self.Cs, self.seed = solver, pca, inner_folds, tuple(Cs), seed
        if solver == "torch":
            from probes.fit.solver import resolve_device  # deferred: probes.fit.solver loads torch

            self.device = str(resolve_device(device))
        else:
            self.device = "cpu"

    def cv(self, kind: str, X: np.ndarray, y: np.ndarray, groups: np.ndarray, fold_ids: np.ndarray) -> dict:
        """Held-out predictions of ``kind`` over the outer folds (:func:`probes.fit.cv.cross_val_predict_grouped`)."""
        if self.solver == "torch" and not (kind == "logistic" and len(np.unique(y)) > 2 and lacks_class(y, fold_ids)):
            from probes.fit.fast import cv_predict  # deferred: probes.fit.fast loads torch

            return cv_predict(kind, X, y, groups, fold_ids, Cs=self.Cs, inner_folds=self.inner_folds, seed=self.seed,
                              device=self.device)

        return cross_val_predict_grouped(kind, X, y, groups, fold_ids, seed=self.seed, pca=self.pca,
                                         inner_folds=self.inner_folds, Cs=self.Cs)

    def permutations(self, kind: str, X: np.ndarray, Yp: np.ndarray, fold_ids: np.ndarray,
                     C_per_fold: list[float | None]) -> np.ndarray:
        """Correct held-out counts ``[P, F]`` of the shuffled-label refits (-1 where skipped)."""
        if self.solver == "torch":
            from probes.fit.fast import permutation_correct  # deferred: probes.fit.fast loads torch

            try:
                return permutation_correct(kind, X, Yp, fold_ids, C_per_fold, device=self.device)
            except ValueError:
                pass

        return permutation_correct_sklearn(kind, X, Yp, fold_ids, C_per_fold, pca=self.pca, seed=self.seed)

    def fit_predict(self, kind: str, X: np.ndarray, y: np.ndarray, groups: np.ndarray) -> FitPredict:
        """A ``fit_predict(train_masks, test_masks)`` for :func:`probes.validity.transfer`."""

        def run(trains: list[np.ndarray], tests: list[np.ndarray]) -> list[np.ndarray | None]:
            out: list[np.ndarray | None] = [None] * len(trains)
            live = [i for i, tr in enumerate(trains) if len(np.unique(y[tr])) >= 2 and tests[i].any()]
            if not live:
                return out
            if self.solver == "torch" and not (len(np.unique(y)) > 2 and
                                               any(len(np.unique(y[trains[i]])) < len(np.unique(y)) for i in live)):
                self._torch_fit_predict(kind, X, y, groups, trains, tests, live, out)
            else:
                self._sklearn_fit_predict(kind, X, y, groups, trains, tests, live, out)
            return out

        return run

    def _torch_fit_predict(self, kind: str, X: np.ndarray, y: np.ndarray, groups: np.ndarray,
                           trains: list[np.ndarray], tests: list[np.ndarray], live: list[int],
                           out: list[np.ndarray | None]) -> None:
        if kind == "logistic":
            from probes.fit.fast import logistic_fits, predict_logits  # deferred: probes.fit.fast loads torch

            fits = logistic_fits(X, y, groups, [trains[i] for i in live], Cs=self.Cs, inner_folds=self.inner_folds,
                                 seed=self.seed, device=self.device)
            for i, fit in zip(live, fits):
                if fit is not None:
                    out[i] = predict_logits(X[tests[i]] @ fit["coef"].T + fit["intercept"])
            return
        from probes.fit.fast import mass_mean_fits, mass_mean_predict  # deferred: probes.fit.fast loads torch

        res = mass_mean_fits(X, np.broadcast_to(y, (len(live), len(y))), np.stack([trains[i] for i in live]))
        for i, r in zip(live, res):
            if r is not None:
                out[i] = mass_mean_predict(X[tests[i]], *r)[0]

    def _sklearn_fit_predict(self, kind: str, X: np.ndarray, y: np.ndarray, groups: np.ndarray,
                             trains: list[np.ndarray], tests: list[np.ndarray], live: list[int],
                             out: list[np.ndarray | None]) -> None:
        for i in live:
            tr = trains[i]
            pipe = pipeline_for(kind, int(tr.sum()), X.shape[1], pca=self.pca, seed=self.seed,
                                inner_folds=self.inner_folds, Cs=self.Cs)
            pipe.fit(X[tr], y[tr], probe__groups=groups[tr])
            out[i] = pipe.predict(X[tests[i]])


__all__ = ["Backend", "lacks_class"]
