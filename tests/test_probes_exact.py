"""The probe stage's speed-ups change no result: the vectorised StratifiedGroupKFold gives scikit-learn's own
splits index for index (probes.fit.splits), unique_rows is np.unique over rows, and the permuted mass-mean refits
(decision values from the fit's own GEMM) predict what the per-problem rule predicts."""
from __future__ import annotations

import warnings

import numpy as np
import pytest
from sklearn.model_selection import StratifiedGroupKFold

from probes.fit.estimators import inner_splits
from probes.fit.splits import stratified_group_kfold


def sklearn_splits(y, groups, k, seed):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", UserWarning)
        cv = StratifiedGroupKFold(n_splits=k, shuffle=True, random_state=seed)
        return list(cv.split(np.zeros(len(y)), y, groups))


def same(a, b) -> bool:
    return len(a) == len(b) and all(np.array_equal(x, u) and np.array_equal(t, v) for (x, t), (u, v) in zip(a, b))


@pytest.mark.parametrize("draw", range(120))
def test_the_splits_are_scikit_learns(draw):
    r = np.random.default_rng(draw)
    n = int(r.integers(20, 300))
    k = int(r.integers(2, 6))
    if draw % 3 == 0:  # equal-sized questions, as in a study (many exactly tied candidate folds)
        groups = np.arange(n) // int(r.integers(1, 6))
    else:
        groups = r.integers(0, max(k + 1, n // int(r.integers(2, 8))), n)
    if draw % 2:
        y = (r.random(n) < r.uniform(0.05, 0.6)).astype(np.int64)
    else:
        y = r.integers(0, int(r.integers(2, 5)), n)
    seed = int(r.integers(0, 4))
    try:
        want = sklearn_splits(y, groups, k, seed)
    except ValueError as e:  # what scikit-learn refuses, we refuse the same way (it is scikit-learn's own call)
        with pytest.raises(ValueError, match=str(e)[:20]):
            stratified_group_kfold(y, groups, k, seed)
        return
    assert same(stratified_group_kfold(y, groups, k, seed), want)


def test_string_groups_and_a_study_sized_split():
    r = np.random.default_rng(7)
    n = 3000
    groups = np.array([f"q{i // 5}" for i in range(n)], dtype=object)
    y = (r.random(n) < 0.37).astype(np.int64)
    for seed in (0, 1):
        assert same(stratified_group_kfold(y, groups, 3, seed), sklearn_splits(y, groups, 3, seed))


def test_inner_splits_unchanged_for_the_permuted_labels_of_a_study():
    """The permutation refits' inner splits (probes.fit.permuted.inner_masks) are the splits scikit-learn gives."""
    from probes.fit.cv import permute_by_group

    r = np.random.default_rng(3)
    n = 600
    q = np.arange(n) // 4
    y = (r.random(n) < 0.4).astype(np.int64)
    for _ in range(5):
        yp = permute_by_group(y, q, r)
        got = inner_splits(yp, q, 3, 0)
        want = [(a, b) for a, b in sklearn_splits(yp, q, 3, 0) if len(np.unique(yp[a])) > 1]
        assert same(got, want)


@pytest.mark.parametrize("shape", [(1, 1), (5, 3), (40, 8), (300, 1001), (64, 4097)])
def test_unique_rows_is_numpys_unique_over_rows(shape):
    """probes.fit.solver.unique_rows (the scaler masks of thousands of refits, packed) = np.unique(axis=0)."""
    from probes.fit.solver import unique_rows

    r = np.random.default_rng(sum(shape))
    base = r.random((max(1, shape[0] // 4), shape[1])) < 0.6
    m = base[r.integers(0, len(base), shape[0])]  # many repeated rows, as the permutation refits have
    u, inv = unique_rows(m)
    want_u, want_inv = np.unique(m, axis=0, return_inverse=True)
    assert u.dtype == bool and np.array_equal(u, want_u) and np.array_equal(inv, np.asarray(want_inv).reshape(-1))


@pytest.mark.parametrize("kind", ["mass_mean", "logistic"])
@pytest.mark.parametrize("n_classes", [2, 3])
def test_permuted_refits_predict_as_the_single_fit_does(n_classes, kind):
    """cv_many (mass-mean decisions from the fit's own GEMM; logistic as a reference) gives every label vector the
    predictions and inner scores cv_predict gives it alone."""
    from probes.controls import question_permutations
    from probes.fit.cv import outer_folds
    from probes.fit.fast import cv_predict
    from probes.fit.permuted import cv_many, inner_masks

    r = np.random.default_rng(n_classes)
    n, d = 240, 12
    y = r.integers(0, n_classes, n)
    X = r.standard_normal((n, d)) + 0.8 * y[:, None] * (np.arange(d) < 2) + 50.0 * (np.arange(d) == 3)
    g = np.arange(n) // 4
    f = outer_folds(y, g, 4, 0)
    Yp = np.vstack([y[None], question_permutations(y, g, 3, seed=1)])
    Cs = (0.001, 0.01, 0.1, 1.0, 10.0)
    many = cv_many(kind, X, Yp, f, inner_masks(Yp, g, f, 3, 0), Cs=Cs)
    for p in range(len(Yp)):
        ref = cv_predict(kind, X, Yp[p], g, f, Cs=Cs, inner_folds=3, seed=0)
        assert np.array_equal(many["pred"][p], ref["pred"])
        assert np.allclose(many["inner"][p], ref["inner_score"], equal_nan=True)
        if kind == "logistic":
            assert np.array_equal(many["C"][p], ref["C"])


@pytest.mark.parametrize("K", [1, 3])
def test_predict_logits_reads_the_last_axis_of_numpy_and_torch_logits_alike(K):
    """One rule for every caller: the per-row rule on [n, K], and on [n, B, K] each column's own [n, K] rule,
    the same classes from a numpy array and a torch tensor."""
    import torch

    from probes.fit.fast import predict_logits

    z = np.random.default_rng(K).standard_normal((7, 4, K))
    per_col = np.stack([predict_logits(z[:, b, :]) for b in range(4)], axis=1)
    want = (z[:, :, 0] > 0).astype(np.int64) if K == 1 else z.argmax(2)
    assert np.array_equal(per_col, want)
    assert np.array_equal(predict_logits(z), want)
    t = predict_logits(torch.as_tensor(z))
    assert t.dtype == torch.int64 and np.array_equal(t.numpy(), want)
    assert predict_logits(z).dtype == np.int64
