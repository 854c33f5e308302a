"""scikit-learn's ``StratifiedGroupKFold(shuffle=True)`` split, the same splits at a fraction of the cost.

    from probes.fit.splits import stratified_group_kfold
    for train, test in stratified_group_kfold(y, groups, n_splits=3, seed=0): ...

The probe study computes the grouped, stratified inner splits of every permuted label vector (the splits depend
on the labels, so the permutation null recomputes them as the real fit does): 5 outer folds x 101 label
vectors per study. scikit-learn's greedy assignment evaluates each candidate fold of each group with a handful
of numpy calls on tiny arrays (``_find_best_fold``), which made the split the metadata baseline's main cost.
This is that algorithm (scikit-learn 1.9, ``sklearn/model_selection/_split.py``,
``StratifiedGroupKFold._iter_test_indices`` and ``_find_best_fold``) with every candidate fold of a group
evaluated in one vectorised step: the same random-state draws, the same stable sort, the same floating-point
operations per candidate (the standard deviation over folds of the per-class fold fractions, its mean over
classes), the same ``np.isclose`` tie rule toward the smaller fold. ``tests/test_probes_splits.py`` checks the
splits index for index against scikit-learn's class on many label/group draws (ties included). Any input
scikit-learn would reject or warn about goes to scikit-learn itself.
"""
from __future__ import annotations

import math
import warnings

import numpy as np


def _sklearn_split(y: np.ndarray, groups: np.ndarray, n_splits: int, seed: int) -> list[tuple[np.ndarray, np.ndarray]]:
    from sklearn.model_selection import StratifiedGroupKFold  # deferred: scikit-learn is heavy to import

    with warnings.catch_warnings():
        warnings.simplefilter("ignore", UserWarning)
        cv = StratifiedGroupKFold(n_splits=n_splits, shuffle=True, random_state=seed)
        return [(tr, te) for tr, te in cv.split(np.zeros(len(y)), y, groups)]


def stratified_group_kfold(y, groups, n_splits: int, seed: int) -> list[tuple[np.ndarray, np.ndarray]]:
    """``[(train, test), ...]`` row indices, exactly ``StratifiedGroupKFold(n_splits, shuffle=True,
    random_state=seed).split(X, y, groups)`` for an integer ``seed``."""
    y = np.asarray(y).reshape(-1)
    groups = np.asarray(groups).reshape(-1)
    n = len(y)
    if y.dtype.kind not in "iub" or n == 0 or len(groups) != n or not isinstance(seed, (int, np.integer)):
        return _sklearn_split(y, groups, n_splits, seed)
    _, y_inv, y_cnt = np.unique(y, return_inverse=True, return_counts=True)
    y_inv = np.asarray(y_inv).reshape(-1)
    _, groups_inv, groups_cnt = np.unique(groups, return_inverse=True, return_counts=True)
    groups_inv = np.asarray(groups_inv).reshape(-1)
    n_classes, n_groups, S = len(y_cnt), len(groups_cnt), int(n_splits)
    if n_classes < 2 or np.all(S > y_cnt) or S > n_groups or S > n or S < 2:
        return _sklearn_split(y, groups, n_splits, seed)
    counts = np.zeros((n_groups, n_classes))
    np.add.at(counts, (groups_inv, y_inv), 1)  # integer-valued: the same floats as sklearn's += 1 loop
    rng = np.random.RandomState(int(seed))
    perm = np.arange(n_groups)
    rng.shuffle(perm)
    counts = counts[perm]
    inv_perm = np.empty_like(perm)
    inv_perm[perm] = np.arange(perm.size)
    groups_inv = inv_perm[groups_inv]
    order = np.argsort(-np.std(counts, axis=1), kind="stable")
    per_fold = np.zeros((S, n_classes))
    fold_of = np.empty(n_groups, dtype=np.int64)
    ar = np.arange(S)
    denom = y_cnt.reshape(1, 1, -1)
    cand = np.empty((S, S, n_classes))
    add_reduce = np.add.reduce
    for g in order.tolist():
        gc = counts[g]
        cand[:] = per_fold[None]
        cand[ar, ar] += gc  # candidate i: fold i with the group added
        # np.std(., axis=1) then .mean(axis=1), written as the ufuncs numpy's _var/_mean call (no Python overhead)
        a = cand / denom
        m = add_reduce(a, axis=1, keepdims=True) / S
        x = a - m
        np.multiply(x, x, out=x)
        ev = (np.sqrt(add_reduce(x, axis=1) / S).sum(axis=1) / n_classes).tolist()
        sizes = per_fold.sum(axis=1).tolist()
        best, min_eval, min_size = 0, math.inf, math.inf
        for i in range(S):
            e = ev[i]
            close = (abs(e - min_eval) <= 1e-8 + 1e-5 * abs(min_eval) and math.isfinite(min_eval)) or e == min_eval
            if e < min_eval or (close and sizes[i] < min_size):
                best, min_eval, min_size = i, e, sizes[i]
        per_fold[best] += gc
        fold_of[g] = best
    row_fold = fold_of[groups_inv]
    idx = np.arange(n)
    return [(idx[row_fold != i], idx[row_fold == i]) for i in range(S)]


__all__ = ["stratified_group_kfold"]
