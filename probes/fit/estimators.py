"""Linear probes as scikit-learn estimators, and the pipeline each one is fitted in.

* :class:`LogisticProbe` - L2 logistic regression whose ``C`` is chosen by an inner *grouped* CV on the
  data it is fitted on (``fit(X, y, groups=...)``), warm-started along the ``Cs`` path; records the inner
  CV score of the chosen ``C`` (``inner_score_``), which nested layer selection uses.
* :class:`MassMeanProbe` - difference of class means. Binary: one direction (``mean(classes_[1]) -
  mean(classes_[0])``) and a threshold on the projection fitted on the training data. K classes: one
  direction per class (class mean minus the mean of the rest), each with its midpoint offset; predicts the
  arg-max. Also records an inner grouped CV score.
* :func:`make_probe_pipeline` - ``Pipeline([scale, (pca), probe])``: every fitted step lives in the
  pipeline, so cross-validation fits it on the training fold only. Groups go to the probe as
  ``pipe.fit(X, y, probe__groups=groups)``.
* :func:`raw_direction` - the fitted probe normal mapped back to raw residual coordinates
  (``w_raw = PCA^T w / scale``).

The non-linear probe, :class:`probes.fit.mlp.MLPProbe`, follows the same API. All three validate their input the
scikit-learn way (``validate_data``: finite, dense, 2-D ``X`` with as many rows as ``y``, a classification
target, the fitted number of features at predict) and pass scikit-learn's estimator checks
(``tests/test_probe_estimators.py``).

Inner CV grouping: the inner folds are ``StratifiedGroupKFold`` splits (:mod:`probes.fit.splits`, the same splits
faster) of the *training* rows by the groups passed in (question ids), so no question is in both an inner
training and an inner validation fold. The
scaler/PCA in front of the probe are fitted once on the whole (outer) training split, so inner validation
rows contribute to those unsupervised statistics: this only affects the choice of ``C`` and the inner score
used for layer selection, never the outer held-out fold.
"""
from __future__ import annotations

import warnings
from contextlib import nullcontext

import numpy as np
from sklearn.base import BaseEstimator, ClassifierMixin
from sklearn.decomposition import PCA
from sklearn.exceptions import ConvergenceWarning
from sklearn.linear_model import LogisticRegression
from sklearn.pipeline import Pipeline
from sklearn.preprocessing import StandardScaler
from sklearn.utils.multiclass import check_classification_targets, unique_labels
from sklearn.utils.validation import check_is_fitted, validate_data

from probes.fit.splits import stratified_group_kfold

DEFAULT_CS = tuple(float(c) for c in np.logspace(-4, 2, 7))
SMALL_PROBLEM = 4_000_000  # X.size below which BLAS runs single-threaded (threads only add contention)


def blas_limit(X):
    """Single-threaded BLAS for small problems: lbfgs on a few hundred rows spends its time in thread
    hand-offs (10x slower on a loaded 2-core machine); large problems keep the default thread pool."""
    if np.asarray(X).size >= SMALL_PROBLEM:
        return nullcontext()
    from threadpoolctl import threadpool_limits  # deferred: only where threads are limited

    return threadpool_limits(limits=1, user_api="blas")


def max_group_folds(y, groups) -> int:
    """Most stratified-group folds possible: the smallest number of distinct groups holding a class."""
    y = np.asarray(y)
    groups = np.asarray(groups)
    return int(min(len(np.unique(groups[y == c])) for c in np.unique(y)))


def inner_splits(y, groups, n_splits: int, seed: int = 0) -> list[tuple[np.ndarray, np.ndarray]]:
    """Grouped, stratified inner splits; fewer folds when a class is in too few groups; [] when < 2."""
    if groups is None:
        groups = np.arange(len(y))
    k = min(int(n_splits), max_group_folds(y, groups))
    if k < 2:
        return []

    y = np.asarray(y)
    return [(tr, te) for tr, te in stratified_group_kfold(y, groups, k, seed) if len(np.unique(y[tr])) > 1]


def checked_fit_input(est, X, y, groups):
    """``(X float64 [n, d], y [n])`` validated the scikit-learn way (finite, dense, 2-D X, 1-D y of the same
    length, a classification target; sets ``n_features_in_``); ``groups``, when given, one per row."""
    X, y = validate_data(est, X, y, dtype=np.float64)
    check_classification_targets(y)
    if groups is not None and len(np.asarray(groups)) != len(y):
        raise ValueError(f"groups has {len(np.asarray(groups))} entries but X has {len(y)} rows")
    return X, y


class LogisticProbe(ClassifierMixin, BaseEstimator):
    """L2 logistic regression with ``C`` chosen by inner grouped CV (accuracy), then refitted on all rows.

    Parameters: ``Cs`` (grid of inverse regularisation strengths), ``inner_folds`` (grouped inner folds;
    fewer when a class is in too few groups; with < 2 possible, ``default_C`` is used and ``inner_score_``
    is NaN), ``class_weight``, ``max_iter``, ``tol``, ``random_state``.

    Learned: ``classes_``, ``coef_`` [n_classes or 1, n_features], ``intercept_``, ``C_``,
    ``cv_scores_`` (mean inner accuracy per C), ``inner_score_`` (at ``C_``), ``n_inner_folds_``,
    ``n_convergence_warnings_``, ``estimator_`` (the refitted ``LogisticRegression``).
    """

    def __init__(self, Cs=DEFAULT_CS, inner_folds: int = 3, default_C: float = 1.0, class_weight=None,
                 max_iter: int = 500, tol: float = 1e-4, random_state: int = 0):
        self.Cs = Cs
        self.inner_folds = inner_folds
        self.default_C = default_C
        self.class_weight = class_weight
        self.max_iter = max_iter
        self.tol = tol
        self.random_state = random_state

    def _lr(self, C: float, warm: bool = False) -> LogisticRegression:
        return LogisticRegression(C=C, class_weight=self.class_weight, max_iter=self.max_iter, tol=self.tol,
                                  warm_start=warm, random_state=self.random_state)

    def fit(self, X, y, groups=None):
        X, y = checked_fit_input(self, X, y, groups)
        self.classes_ = unique_labels(y)
        if len(self.classes_) < 2:
            raise ValueError(f"LogisticProbe needs at least two classes; got one class {list(self.classes_)}")
        Cs = sorted(float(c) for c in np.atleast_1d(self.Cs))
        nwarn = 0
        splits = inner_splits(y, groups, self.inner_folds, self.random_state) if self.inner_folds >= 2 else []
        scores = np.full((len(splits), len(Cs)), np.nan)
        with warnings.catch_warnings(record=True) as caught, blas_limit(X):
            warnings.simplefilter("always", ConvergenceWarning)
            for i, (tr, te) in enumerate(splits):
                lr = self._lr(Cs[0], warm=True)
                for j, C in enumerate(Cs):  # strong -> weak regularisation, warm-started
                    lr.set_params(C=C)
                    lr.fit(X[tr], y[tr])
                    scores[i, j] = float(np.mean(lr.predict(X[te]) == y[te]))
            if splits:
                mean = scores.mean(axis=0)
                best = int(np.flatnonzero(mean >= mean.max() - 1e-12)[0])  # ties -> stronger regularisation
                self.C_ = Cs[best]
                self.cv_scores_ = {str(c): float(s) for c, s in zip(Cs, mean)}
                self.inner_score_ = float(mean[best])
            else:
                self.C_ = float(self.default_C) if len(Cs) != 1 else Cs[0]
                self.cv_scores_ = {}
                self.inner_score_ = float("nan")
            self.estimator_ = self._lr(self.C_).fit(X, y)
            nwarn = sum(issubclass(w.category, ConvergenceWarning) for w in caught)
        self.n_inner_folds_ = len(splits)
        self.n_convergence_warnings_ = int(nwarn)
        self.coef_ = self.estimator_.coef_
        self.intercept_ = self.estimator_.intercept_
        self.n_iter_ = self.estimator_.n_iter_
        return self

    def _checked(self, X):
        check_is_fitted(self, "estimator_")
        return validate_data(self, X, reset=False, dtype=np.float64)

    def decision_function(self, X):
        X = self._checked(X)
        return self.estimator_.decision_function(X)

    def predict_proba(self, X):
        X = self._checked(X)
        return self.estimator_.predict_proba(X)

    def predict(self, X):
        X = self._checked(X)
        return self.estimator_.predict(X)


def best_threshold(s: np.ndarray, y01: np.ndarray) -> float:
    """Threshold t on projections s maximising training accuracy of ``s > t -> 1`` (ties -> nearest the
    midpoint of the projected class means)."""
    order = np.argsort(s, kind="stable")
    ss, yy = s[order], y01[order]
    n = len(ss)
    # predicting 1 for indices >= i: correct = (#0 below i) + (#1 at/above i)
    zeros_below = np.concatenate([[0], np.cumsum(yy == 0)])
    ones_above = np.concatenate([np.cumsum((yy == 1)[::-1])[::-1], [0]])
    correct = zeros_below + ones_above  # length n + 1, cut before index i
    cuts = np.concatenate([[ss[0] - 1.0], (ss[:-1] + ss[1:]) / 2.0, [ss[-1] + 1.0]])
    # only cut between distinct values
    valid = np.ones(n + 1, bool)
    valid[1:n] = ss[1:] > ss[:-1]
    mid = (s[y01 == 1].mean() + s[y01 == 0].mean()) / 2.0
    cand = np.flatnonzero(valid & (correct == correct[valid].max()))
    return float(cuts[cand[np.argmin(np.abs(cuts[cand] - mid))]])


class MassMeanProbe(ClassifierMixin, BaseEstimator):
    """Difference-of-class-means probe.

    Binary: ``direction_ = mean(X | classes_[1]) - mean(X | classes_[0])`` (unit norm), projection
    ``X @ direction_`` and ``threshold_`` chosen on the training data (``threshold="accuracy"``: the cut
    maximising training accuracy; ``"midpoint"``: halfway between the projected class means).
    K > 2 classes: ``directions_[c] = mean(X | c) - mean(X | not c)`` (unit), offsets at the midpoints,
    prediction = arg-max over classes of ``X @ directions_[c] - offsets_[c]``.

    ``fit(X, y, groups=None)``: with groups, an inner grouped CV accuracy is recorded as ``inner_score_``
    (used by nested layer selection); otherwise NaN.
    """

    def __init__(self, threshold: str = "accuracy", inner_folds: int = 3, random_state: int = 0):
        self.threshold = threshold
        self.inner_folds = inner_folds
        self.random_state = random_state

    def _fit_core(self, X, y):
        classes = unique_labels(y)
        if len(classes) < 2:
            raise ValueError(f"MassMeanProbe needs at least two classes; got one class {list(classes)}")
        if len(classes) == 2:
            y01 = (y == classes[1]).astype(np.int8)
            d = X[y01 == 1].mean(axis=0) - X[y01 == 0].mean(axis=0)
            nrm = np.linalg.norm(d)
            d = d / nrm if nrm > 0 else d
            s = X @ d
            if self.threshold == "midpoint":
                t = float((s[y01 == 1].mean() + s[y01 == 0].mean()) / 2.0)
            elif self.threshold == "accuracy":
                t = best_threshold(s, y01)
            else:
                raise ValueError(f"threshold must be 'accuracy' or 'midpoint', got {self.threshold!r}")
            return classes, d[None, :], np.array([t])
        dirs, offs = [], []
        for c in classes:
            m_in, m_out = X[y == c].mean(axis=0), X[y != c].mean(axis=0)
            d = m_in - m_out
            nrm = np.linalg.norm(d)
            d = d / nrm if nrm > 0 else d
            dirs.append(d)
            offs.append(float((m_in @ d + m_out @ d) / 2.0))
        return classes, np.stack(dirs), np.asarray(offs)

    @staticmethod
    def _scores(X, dirs, offs):
        return X @ dirs.T - offs  # [n, 1] binary, [n, K] multi-class

    def _predict_with(self, X, classes, dirs, offs):
        s = self._scores(X, dirs, offs)
        if len(classes) == 2:
            return classes[(s[:, 0] > 0).astype(int)]
        return classes[np.argmax(s, axis=1)]

    def fit(self, X, y, groups=None):
        X, y = checked_fit_input(self, X, y, groups)
        self.classes_, self.directions_, self.offsets_ = self._fit_core(X, y)
        scores = []
        if groups is not None:
            for tr, te in inner_splits(y, groups, self.inner_folds, self.random_state):
                c, d, o = self._fit_core(X[tr], y[tr])
                scores.append(float(np.mean(self._predict_with(X[te], c, d, o) == y[te])))
        self.n_inner_folds_ = len(scores)
        self.inner_score_ = float(np.mean(scores)) if scores else float("nan")
        if len(self.classes_) == 2:
            self.direction_ = self.directions_[0]
            self.threshold_ = float(self.offsets_[0])
        # a linear-model view, so raw_direction() treats both probes alike
        self.coef_ = self.directions_
        self.intercept_ = -self.offsets_
        return self

    def _checked(self, X):
        check_is_fitted(self, "directions_")
        return validate_data(self, X, reset=False, dtype=np.float64)

    def decision_function(self, X):
        s = self._scores(self._checked(X), self.directions_, self.offsets_)
        return s[:, 0] if len(self.classes_) == 2 else s

    def predict(self, X):
        return self._predict_with(self._checked(X), self.classes_, self.directions_, self.offsets_)


def make_probe_pipeline(kind: str, *, pca: int | None = None, seed: int = 0, inner_folds: int = 3,
                        Cs=DEFAULT_CS, class_weight=None) -> Pipeline:
    """``Pipeline([("scale", StandardScaler()), ("pca", PCA(pca)) if pca, ("probe", probe)])``; ``kind`` is
    ``logistic``, ``mass_mean`` or ``mlp`` (:class:`probes.fit.mlp.MLPProbe`; ``Cs``/``class_weight`` unused).

    ``pca`` must not exceed min(training rows, features); :func:`probes.fit.cv.pipeline_for` caps it per fold."""
    probe: BaseEstimator
    if kind == "logistic":
        probe = LogisticProbe(Cs=Cs, inner_folds=inner_folds, class_weight=class_weight, random_state=seed)
    elif kind == "mass_mean":
        probe = MassMeanProbe(inner_folds=inner_folds, random_state=seed)
    elif kind == "mlp":
        from probes.fit.mlp import MLPProbe  # deferred: import cycle probes.fit.mlp -> probes.fit.estimators

        probe = MLPProbe(inner_folds=inner_folds, random_state=seed)
    else:
        raise ValueError(f"unknown probe {kind!r}; choose 'logistic', 'mass_mean' or 'mlp'")
    steps = [("scale", StandardScaler())]
    if pca:
        steps.append(("pca", PCA(n_components=int(pca), random_state=seed)))
    steps.append(("probe", probe))
    return Pipeline(steps)


def raw_direction(pipe: Pipeline, row: int = 0) -> np.ndarray:
    """Probe normal ``coef_[row]`` of a fitted pipeline in raw (unscaled, un-PCA'd) input coordinates:
    the gradient of the decision function w.r.t. the raw input, ``w_raw = PCA^T w / scale`` (not unit)."""
    w = np.asarray(pipe.named_steps["probe"].coef_, dtype=np.float64)[row]
    if "pca" in pipe.named_steps:
        w = pipe.named_steps["pca"].components_.T @ w
    scale = pipe.named_steps["scale"].scale_
    return w / scale
