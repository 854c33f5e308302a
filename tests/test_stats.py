"""Intervals: values against statsmodels/scipy references, nulls for empty denominators, clustered bootstrap."""
import pytest
from scipy.stats import beta

from loadbearing.stats import (
    Rate,
    cluster_bootstrap_ci,
    clustered_rate,
    format_rate,
    paired_difference_ci,
    proportion_ci,
    rate,
    wilson_rate,
)


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
    def mean(v):
        return sum(v) / len(v) if v else None

    clustered = cluster_bootstrap_ci(groups, values, mean, seed=1)
    naive = cluster_bootstrap_ci(list(range(100)), values, mean, seed=1)
    assert clustered["estimate"] == 0.5 and clustered["n_clusters"] == 10

    def width(r):
        return r["ci"][1] - r["ci"][0]

    assert width(clustered) > 2 * width(naive)
    assert cluster_bootstrap_ci(groups, values, mean, seed=1) == clustered  # seeded


def test_paired_difference_drops_unscored_pairs():
    rows = [("q1", 1.0, 0.0), ("q1", 1.0, None), ("q2", 0.0, 0.0), ("q3", None, 1.0), ("q3", 1.0, 0.0)]
    r = paired_difference_ci(rows, seed=0)
    assert r["n_pairs"] == 3 and r["n_dropped"] == 2 and r["estimate"] == pytest.approx(2 / 3)
    assert paired_difference_ci([], seed=0)["estimate"] is None


# ---------------------------------------------------------------- the one rate type and formatter


def test_rate_round_trips_and_formats():
    r = Rate(49, 68, 0.604, 0.813, "cluster-bootstrap", n_questions=23, n_generations=68)
    assert r.value == pytest.approx(49 / 68)
    assert Rate.from_dict(r.to_dict()) == r
    assert format_rate(r) == "72.1% [60.4, 81.3] (49/68; 23 q)"
    assert format_rate(r.to_dict()) == format_rate(r)
    assert format_rate(Rate(3, 10, 0.1, 0.6, "wilson", n_generations=4)) == "30.0% [10.0, 60.0]\u2020 (3/10; 4 gen)"
    assert format_rate(Rate(0, 0, None, None, "none")) == "n/a (0/0)" and Rate(0, 0, None, None, "none").value is None
    assert format_rate(Rate(1, 2, None, None, "none", 1)) == "50.0% [n/a] (1/2; 1 q)"
    assert format_rate(r, style="md") == format_rate(r)
    with pytest.raises(ValueError, match="style"):
        format_rate(r, style="html")
    with pytest.raises(ValueError):
        Rate(3, 2, None, None, "wilson")


def test_legacy_rate_dict_reads_as_wilson():
    d = rate(14, 57)
    r = Rate.from_dict(d)
    assert r.method == "wilson" and r == wilson_rate(14, 57)
    assert format_rate(d) == "24.6% [15.2, 37.1] (14/57)"
    legacy = {k: d[k] for k in ("k", "n", "rate", "wilson", "exact")}
    assert Rate.from_dict(legacy) == r


def test_clustered_rate_is_pooled_and_wider_than_rowwise():
    groups = [g for g in range(10) for _ in range(10)]
    succ = [g % 2 == 0 for g in groups]
    r = clustered_rate(succ, groups)
    assert (r.k, r.n, r.n_questions, r.method) == (50, 100, 10, "korn-graubard")
    w = wilson_rate(50, 100)
    assert r.hi - r.lo > 1.5 * (w.hi - w.lo)
    assert clustered_rate(succ, groups) == r  # deterministic (no resampling)
    # pooled point, not a mean of per-question rates
    p = clustered_rate([True, False, False, False, True], ["a", "a", "a", "a", "b"])
    assert p.value == pytest.approx(2 / 5)


def test_clustered_rate_one_row_per_question_is_about_clopper_pearson():
    r = clustered_rate([i < 5 for i in range(24)], list(range(24)))  # steering: one case per question
    lo, hi = proportion_ci(5, 24, "exact")  # deff = K / (K - 1) here: a hair wider than Clopper-Pearson
    assert r.lo <= lo and r.hi >= hi and (r.hi - r.lo) < 1.05 * (hi - lo)


def test_clustered_rate_is_monotone_in_k():
    groups = [i // 2 for i in range(132)]  # 66 questions x 2 rows
    prev = None
    for k in range(0, 12):
        r = clustered_rate([i < 2 * k and i % 2 == 0 for i in range(132)], groups)  # one success per question
        assert r.lo <= r.value <= r.hi
        if prev is not None:
            assert r.lo >= prev.lo and r.hi >= prev.hi
        prev = r
    z = clustered_rate([False] * 132, groups)
    one = clustered_rate([True] + [False] * 131, groups)
    assert z.lo == 0.0 and one.hi >= z.hi  # 0/132 and 1/132 side by side (the old fallback: [0, 5.5] vs [0, 2.3])
    assert round(100 * z.hi, 1) == 5.5


def test_clustered_rate_edge_cases():
    assert clustered_rate([], [], n_boot=10, seed=0).value is None
    one = clustered_rate([True, False], ["q", "q"], n_boot=10, seed=0)
    assert one.value == 0.5 and one.lo is None and one.n_questions == 1
    # all rows agree: the clustering cannot be seen, so the questions are the sample (0 of 30 questions)
    z = clustered_rate([False] * 207, [i % 30 for i in range(207)])
    assert z.method == "korn-graubard" and z.lo == 0.0 and 0.10 < z.hi < 0.14
    full = clustered_rate([True] * 207, [i % 30 for i in range(207)])
    assert full.hi == 1.0 and full.lo == pytest.approx(1 - z.hi)
    with pytest.raises(ValueError, match="length"):
        clustered_rate([True], [], n_boot=10, seed=0)


def test_few_clusters_flag_and_marker():
    few = clustered_rate([i % 3 == 0 for i in range(30)], [i // 6 for i in range(30)])  # 5 questions
    assert few.few_clusters and few.to_dict()["few_clusters"] is True
    assert format_rate(few).split(" (")[0].endswith("\u2020")
    many = clustered_rate([i % 3 == 0 for i in range(120)], [i // 6 for i in range(120)])  # 20 questions
    assert not many.few_clusters and "\u2020" not in format_rate(many)
    assert wilson_rate(3, 10).few_clusters and not wilson_rate(3, 30).few_clusters
    assert not Rate(1, 2, None, None, "none", 1).few_clusters  # no interval, nothing to flag
    assert Rate.from_dict(few.to_dict()) == few


def test_paired_difference_is_a_clustered_mover_interval():
    import numpy as np

    from loadbearing.stats import design_effect_interval

    rows = [(g, float(g % 2 == 0 or i == 0), float(i == 2 and g < 5)) for g in range(8) for i in range(3)]
    r = paired_difference_ci(rows)
    A = np.array([sum(float(g % 2 == 0 or i == 0) for i in range(3)) for g in range(8)])
    B = np.array([1.0] * 5 + [0.0] * 3)
    N = np.full(8, 3.0)
    pa, pb = A.sum() / 24, B.sum() / 24
    (la,), (ua,) = design_effect_interval(A, N)
    (lb,), (ub,) = design_effect_interval(B, N)
    ea, eb = A - pa * N, B - pb * N
    rho = (ea * eb).sum() / np.sqrt((ea ** 2).sum() * (eb ** 2).sum())
    lo = pa - pb - np.sqrt((pa - la) ** 2 + (ub - pb) ** 2 - 2 * rho * (pa - la) * (ub - pb))
    hi = pa - pb + np.sqrt((ua - pa) ** 2 + (pb - lb) ** 2 - 2 * rho * (ua - pa) * (pb - lb))
    assert r["estimate"] == pytest.approx(pa - pb) and r["n_clusters"] == 8 and r["n_dropped"] == 0
    assert r["ci"] == pytest.approx([lo, hi])
    flat = paired_difference_ci([(g, 1.0, 1.0) for g in range(30)])  # no discordant pair: not a zero-width interval
    assert flat["estimate"] == 0.0 and flat["ci"][0] < 0 < flat["ci"][1]


def test_cluster_sums_bootstrap_resamples_whole_questions():
    import numpy as np

    from loadbearing.stats import cluster_resample_weights, cluster_sums_bootstrap

    W = cluster_resample_weights(5, 200, seed=3)
    assert W.shape == (200, 5) and (W.sum(1) == 5).all()
    sizes = [1, 2, 3, 4, 5, 6]
    g = np.repeat(np.arange(6), sizes)
    correct = np.repeat([1, 0, 1, 0, 1, 1], sizes).astype(float)
    ci = cluster_sums_bootstrap(g, np.stack([correct, np.ones_like(correct)], axis=1),
                                lambda s: [s[:, 0] / s[:, 1]], n_boot=500, seed=1)
    W = cluster_resample_weights(6, 500, seed=1)  # the same stream: question j drawn W[b, j] times
    ref = (W @ np.array([1, 0, 3, 0, 5, 6])) / (W @ np.array(sizes))
    a = (1 - 0.95) / 2
    assert ci == [[float(np.quantile(ref, a)), float(np.quantile(ref, 1 - a))]]
    assert cluster_sums_bootstrap([0, 0], np.ones(2), lambda s: [s], n_boot=100) is None  # one question
    assert cluster_sums_bootstrap([0, 1], np.ones(2), lambda s: [s], n_boot=0) is None


def test_cluster_bootstrap_is_labelled_descriptive_and_never_zero_width():
    from loadbearing.stats import cluster_bootstrap_ci

    mean = lambda v: sum(v) / len(v)  # noqa: E731
    same = cluster_bootstrap_ci(["a", "b", "c", "d"], [1.0, 1.0, 1.0, 1.0], mean, n_boot=200)
    assert same["estimate"] == 1.0 and same["ci"] == [None, None] and same["label"] == "descriptive"
    assert same["note"].startswith("no interval: every resample of the 4 clusters gave the same value")
    spread = cluster_bootstrap_ci(["a", "b", "c", "d"], [0.0, 1.0, 0.5, 1.0], mean, n_boot=200)
    assert spread["ci"][0] < spread["ci"][1] and "not a calibrated 95% interval" in spread["note"]


def test_anova_design_effect_bounds():
    """All-or-none questions of m rows: rho = 1, deff = m; the same rate in every question: rho = 0, deff = 1."""
    import numpy as np

    from loadbearing.stats import anova_deff

    ng = np.full((1, 6), 4.0)
    assert anova_deff(np.array([[4.0, 0, 4, 0, 0, 0]]), ng)[0] == pytest.approx(4.0)
    assert anova_deff(np.array([[2.0, 2, 2, 2, 2, 2]]), ng)[0] == pytest.approx(1.0)
    assert anova_deff(np.zeros((1, 6)), ng)[0] == pytest.approx(1.0)  # no events: no between-question spread


def _satterthwaite_df_by_matrices(ng, rho):
    """tr(W)^2 / tr(W^2), W = G' Omega G, G = M C, built row by row (the definition cluster_df closes)."""
    import numpy as np

    n = int(ng.sum())
    C = (np.repeat(np.arange(len(ng)), ng)[:, None] == np.arange(len(ng))[None]).astype(float)
    omega = (1 - rho) * np.eye(n) + rho * C @ C.T
    G = (np.eye(n) - np.ones((n, n)) / n) @ C
    W = G.T @ omega @ G
    return np.trace(W) ** 2 / np.trace(W @ W)


def test_cluster_df_is_the_satterthwaite_df_of_the_cluster_variance():
    """The closed form equals tr(W)^2 / tr(W^2) under the exchangeable working covariance; K - 1 at equal sizes
    whatever rho; never above K - 1; about K_eff - 1 at rho = 0 and the usual sizes; fewer at a higher rho."""
    import numpy as np

    from loadbearing.stats import cluster_df

    rng = np.random.default_rng(3)
    for K in (2, 3, 5, 16):
        ng = rng.integers(1, 15, K)
        for rho in (0.0, 0.3, 0.9, 1.0):
            assert cluster_df(ng, rho)[0] == pytest.approx(_satterthwaite_df_by_matrices(ng, rho), rel=1e-9)
            assert cluster_df(ng, rho)[0] <= K - 1 + 1e-9
    assert np.allclose(cluster_df(np.full((3, 7), 6), np.array([0.0, 0.4, 1.0])), 6.0)
    ng = rng.integers(3, 12, 66)
    k_eff = ng.sum() ** 2 / (ng ** 2).sum()
    assert cluster_df(ng, 0.0)[0] == pytest.approx(k_eff - 1, rel=0.02)
    per_rho = cluster_df(np.broadcast_to(ng, (3, 66)), np.array([0.0, 0.3, 0.9]))
    assert per_rho[0] > per_rho[1] > per_rho[2]
    assert cluster_df(np.array([40, 1]), 1.0)[0] == pytest.approx(1.0)  # two questions: one degree of freedom


def test_anova_rho_is_the_correlation_behind_anova_deff():
    import numpy as np

    from loadbearing.stats import anova_deff, anova_rho

    ng = np.full((1, 6), 4.0)
    assert anova_rho(np.array([[4.0, 0, 4, 0, 0, 0]]), ng)[0] == pytest.approx(1.0)
    assert anova_rho(np.array([[2.0, 2, 2, 2, 2, 2]]), ng)[0] == pytest.approx(0.0)
    assert anova_rho(np.zeros((1, 6)), ng)[0] == 0.0
    kg, ng = np.array([[3.0, 0, 1, 5, 2]]), np.array([[6.0, 3, 4, 9, 5]])
    rho = anova_rho(kg, ng)
    assert anova_deff(kg, ng)[0] == pytest.approx(1 + ((ng ** 2).sum() / ng.sum() - 1) * rho[0])
    assert anova_deff(kg, ng, rho)[0] == anova_deff(kg, ng)[0]


def test_korn_graubard_degrees_of_freedom_follow_the_estimated_correlation():
    """Unequal sizes: the interval uses cluster_df at the data's ANOVA rho; wider than with K_eff - 1 from the
    sizes alone when the rows are correlated; df="clusters" keeps K - 1 (the old comparison)."""
    import numpy as np
    from scipy import stats

    from loadbearing.stats import anova_rho, cluster_df, design_effect_interval

    ng = np.array([30, 2, 3, 2, 25, 4, 3, 2, 3, 2])
    kg = np.array([[20, 0, 1, 0, 3, 4, 0, 0, 3, 1]])
    rho = anova_rho(kg.astype(float), ng[None].astype(float))
    assert 0 < rho[0] < 1
    k_eff = ng.sum() ** 2 / (ng ** 2).sum()
    assert cluster_df(ng, rho)[0] < k_eff - 1
    lo, hi = design_effect_interval(kg, ng)
    lo0, hi0 = design_effect_interval(kg, ng, df="clusters")
    assert lo[0] < lo0[0] and hi[0] > hi0[0]
    # the t ratio that scales n*: the interval at the new df is the one at K_eff - 1 rescaled
    assert stats.t.ppf(0.975, cluster_df(ng, rho)[0]) > stats.t.ppf(0.975, k_eff - 1)
