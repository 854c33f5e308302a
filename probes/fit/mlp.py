"""The MLP probe as a scikit-learn estimator: one hidden ReLU layer in torch, its hidden size and weight decay
chosen by an inner grouped CV on the rows it is fitted on, every fit stopped early on an inner grouped split.

    from probes.fit.mlp import MLPProbe
    MLPProbe(hidden_sizes=(16, 64), weight_decays=(1e-3, 1e-1)).fit(X, y, groups=questions).predict(X)

The arithmetic lives in :mod:`probes.fit.mlp_train` (many fits batched in one torch loop); this estimator calls it
with one training mask, and the probe study (:mod:`probes.fit.mlp_cv`) calls it with every outer training fold at
once, so the two agree. Groups (question ids) go in as ``fit(X, y, groups=...)`` (in a Pipeline:
``pipe.fit(X, y, probe__groups=groups)``); without them the inner CV and the early-stopping split are
stratified row-level splits.
"""
from __future__ import annotations

import numpy as np
from sklearn.base import BaseEstimator, ClassifierMixin
from sklearn.utils.validation import check_is_fitted, validate_data

from probes.fit.estimators import checked_fit_input
from probes.fit.mlp_train import (
    HIDDEN_SIZES,
    VALIDATION_FRACTION,
    WEIGHT_DECAYS,
    early_stopping_split,
    fit_on_masks,
    grid_order,
    mlp_logits,
    run_problems,
    train_mlps,
)


class MLPProbe(ClassifierMixin, BaseEstimator):
    """One-hidden-layer ReLU MLP probe (softmax over the classes), trained by full-batch Adam in torch.

    Parameters: ``hidden_sizes`` and ``weight_decays`` (the grid searched by ``inner_folds`` grouped inner
    folds; fewer folds when a class is in too few groups; with < 2 possible the simplest grid point is used and
    ``inner_score_`` is NaN), ``validation_fraction`` (early-stopping rows, one grouped fold of the training
    rows; 0 = no early stopping, train until the training loss stalls), ``n_components`` (the first layer acts
    on this many principal axes of the standardised training rows, fitted inside the fit, as the paper's PCA-128;
    None = all features), ``max_iter`` (epochs), ``patience``,
    ``learning_rate``, ``tol``, ``device`` (torch device of the training loop), ``random_state``.

    Learned: ``classes_``, ``n_features_in_``, ``coefs_`` ([W1 [d, h], W2 [h, K]], raw input coordinates),
    ``intercepts_`` ([b1 [h], b2 [K]]), ``hidden_size_``, ``weight_decay_``, ``cv_scores_`` (mean inner
    accuracy per grid point), ``inner_score_`` (at the chosen point), ``n_inner_folds_``, ``n_iter_`` (epochs
    behind the kept weights), ``early_stopping_`` (whether a validation split was possible).
    """

    def __init__(self, hidden_sizes=HIDDEN_SIZES, weight_decays=WEIGHT_DECAYS, inner_folds: int = 3,
                 validation_fraction: float = VALIDATION_FRACTION, n_components: int | None = 128, max_iter: int = 300,
                 patience: int = 10, learning_rate: float = 3e-2, tol: float = 1e-3, device: str = "cpu",
                 random_state: int = 0):
        self.hidden_sizes = hidden_sizes
        self.weight_decays = weight_decays
        self.inner_folds = inner_folds
        self.validation_fraction = validation_fraction
        self.n_components = n_components
        self.max_iter = max_iter
        self.patience = patience
        self.learning_rate = learning_rate
        self.tol = tol
        self.device = device
        self.random_state = random_state

    def fit(self, X, y, groups=None):
        X, y = checked_fit_input(self, X, y, groups)
        groups = None if groups is None else np.asarray(groups)
        self.classes_, y_enc = np.unique(y, return_inverse=True)
        if len(self.classes_) < 2:
            raise ValueError(f"MLPProbe needs at least two classes; got one class {list(self.classes_)}")
        fit = fit_on_masks(X, y_enc, groups, [np.ones(len(y), dtype=bool)], hidden_sizes=self.hidden_sizes,
                           weight_decays=self.weight_decays, inner_folds=self.inner_folds,
                           seed=self._seed(), validation_fraction=self.validation_fraction,
                           n_classes=len(self.classes_), device=self.device, max_iter=self.max_iter,
                           patience=self.patience, lr=self.learning_rate, tol=self.tol,
                           n_components=self.n_components)[0]
        assert fit is not None  # two classes, checked above
        W1, b1, W2, b2 = fit["weights"]
        self.coefs_, self.intercepts_ = [W1, W2], [b1, b2]
        self.hidden_size_, self.weight_decay_ = int(fit["hidden"]), float(fit["weight_decay"])
        self.cv_scores_ = fit["cv_scores"]
        self.inner_score_ = float(fit["inner_score"])
        self.n_inner_folds_ = int(fit["n_inner_folds"])
        self.n_iter_ = int(fit["n_iter"])
        self.early_stopping_ = bool(fit["early_stopping"])
        return self

    def _seed(self) -> int:
        return 0 if self.random_state is None else int(self.random_state)

    def _logits(self, X) -> np.ndarray:
        check_is_fitted(self, "coefs_")
        X = validate_data(self, X, reset=False, dtype=np.float64)
        return mlp_logits(X, self.coefs_[0], self.intercepts_[0], self.coefs_[1], self.intercepts_[1])

    def decision_function(self, X):
        """[n] (two classes: logit of ``classes_[1]`` minus that of ``classes_[0]``) or [n, K] logits."""
        z = self._logits(X)
        return z[:, 1] - z[:, 0] if z.shape[1] == 2 else z

    def predict_proba(self, X):
        z = self._logits(X)
        z = z - z.max(axis=1, keepdims=True)
        e = np.exp(z)
        return e / e.sum(axis=1, keepdims=True)

    def predict(self, X):
        z = self._logits(X)
        return self.classes_[np.argmax(z, axis=1)]


__all__ = ["MLPProbe", "train_mlps", "fit_on_masks", "run_problems", "early_stopping_split", "mlp_logits",
           "grid_order", "HIDDEN_SIZES", "WEIGHT_DECAYS", "VALIDATION_FRACTION"]
