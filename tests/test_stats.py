"""Intervals: values against statsmodels/scipy references, nulls for empty denominators, clustered bootstrap."""
import pytest
from scipy.stats import beta

from behavioural.stats import cluster_bootstrap_ci, paired_difference_ci, proportion_ci, rate


def test_wilson_matches_the_paper_figure():
    lo, hi = proportion_ci(14, 57)  # the paper: 24.6%, 95% Wilson CI 15.2-37.1%
    assert round(100 * lo, 1) == 15.2 and round(100 * hi, 1) == 37.1


def test_exact_is_clopper_pearson():
    lo, hi = proportion_ci(3, 10, "exact")
    assert lo == pytest.approx(beta.ppf(0.025, 3, 8)) and hi == pytest.approx(beta.ppf(0.975, 4, 7))


def test_empty_denominator_is_null_never_zero():
    assert proportion_ci(0, 0) == (None, None)
    r = rate(0, 0)
    assert r["rate"] is None and r["wilson"] == [None, None] and r["exact"] == [None, None]
    with pytest.raises(ValueError, match="unknown interval method"):
        proportion_ci(1, 2, "wald")
    with pytest.raises(ValueError):
        proportion_ci(3, 2)


def test_cluster_bootstrap_is_wider_when_rows_share_questions():
    # 10 questions, each with 10 identical rows: the effective sample is 10, not 100
    groups = [g for g in range(10) for _ in range(10)]
    values = [float(g % 2) for g in groups]
    mean = lambda v: sum(v) / len(v) if v else None
    clustered = cluster_bootstrap_ci(groups, values, mean, seed=1)
    naive = cluster_bootstrap_ci(list(range(100)), values, mean, seed=1)
    assert clustered["estimate"] == 0.5 and clustered["n_clusters"] == 10
    width = lambda r: r["ci"][1] - r["ci"][0]
    assert width(clustered) > 2 * width(naive)
    assert cluster_bootstrap_ci(groups, values, mean, seed=1) == clustered  # seeded


def test_paired_difference_drops_unscored_pairs():
    rows = [("q1", 1.0, 0.0), ("q1", 1.0, None), ("q2", 0.0, 0.0), ("q3", None, 1.0), ("q3", 1.0, 0.0)]
    r = paired_difference_ci(rows, seed=0)
    assert r["n_pairs"] == 3 and r["estimate"] == pytest.approx(2 / 3)
    assert paired_difference_ci([], seed=0)["estimate"] is None
