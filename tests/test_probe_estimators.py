"""scikit-learn conformance of every probe estimator: ``parametrize_with_checks`` over LogisticProbe,
MassMeanProbe and MLPProbe (unit tier), and clear errors on wrong input."""
from __future__ import annotations

import numpy as np
import pytest
from scipy import sparse
from sklearn.utils.estimator_checks import parametrize_with_checks

from probes.fit.estimators import LogisticProbe, MassMeanProbe
from probes.fit.mlp import MLPProbe

# small settings keep the MLP's ~50 checks fast; the defaults are exercised by tests/test_mlp_probe.py
FAST_MLP = MLPProbe(hidden_sizes=(8, 16), weight_decays=(1e-3,), max_iter=60, patience=10, inner_folds=2)
ESTIMATORS = [LogisticProbe(), MassMeanProbe(), FAST_MLP]


def expected_failed_checks(estimator) -> dict[str, str]:
    """Exemptions, each with its reason (none needed at present)."""
    return {}


@parametrize_with_checks(ESTIMATORS, expected_failed_checks=expected_failed_checks)
def test_sklearn_estimator_checks(estimator, check):
    check(estimator)


def _xy(n=40, d=5, seed=0):
    rng = np.random.default_rng(seed)
    X = rng.normal(size=(n, d))
    return X, (X[:, 0] > 0).astype(int)


@pytest.mark.parametrize("make", [LogisticProbe, MassMeanProbe, lambda: MLPProbe(max_iter=20, inner_folds=2)])
@pytest.mark.parametrize("case,exc,pattern", [
    ("nan", ValueError, r"NaN"),
    ("inf", ValueError, r"infinity"),
    ("length", ValueError, r"inconsistent numbers of samples"),
    ("sparse", TypeError, r"[Ss]parse data was passed"),
    ("y2d", ValueError, r"y should be a 1d array"),
    ("one_class", ValueError, r"one class"),
    ("groups", ValueError, r"groups has 3 entries but X has 40 rows"),
    ("features_at_predict", ValueError, r"X has 4 features, but \w+ is expecting 5 features"),
])
def test_wrong_input_gets_a_clear_error(make, case, exc, pattern):
    X, y = _xy()
    est = make()
    with pytest.raises(exc, match=pattern):
        if case == "nan":
            X[3, 1] = np.nan
            est.fit(X, y)
        elif case == "inf":
            X[3, 1] = np.inf
            est.fit(X, y)
        elif case == "length":
            est.fit(X, y[:-1])
        elif case == "sparse":
            est.fit(sparse.csr_matrix(X), y)
        elif case == "y2d":
            est.fit(X, np.stack([y, y], axis=1))
        elif case == "one_class":
            est.fit(X, np.zeros(len(y), dtype=int))
        elif case == "groups":
            est.fit(X, y, groups=[0, 1, 2])
        else:
            est.fit(X, y).predict(X[:, :4])


def test_n_iter_recorded():
    X, y = _xy()
    assert np.all(LogisticProbe().fit(X, y).n_iter_ >= 1)
    m = MLPProbe(max_iter=30, inner_folds=2).fit(X, y)
    assert 1 <= m.n_iter_ <= 30 and m.hidden_size_ in m.hidden_sizes
