"""The gradient's difficulty test at the cell level (behavioural.gradient.cells) and the row coding."""
from __future__ import annotations

import numpy as np
import pytest
from scipy import stats

from behavioural.gradient.cells import (
    N_BOOT,
    bootstrap_t,
    cell_slope,
    data_seed,
    kh_slopes,
    logit_and_var,
    meta_regression,
)


def test_equal_variances_give_the_ordinary_regression_t_test():
    rng = np.random.default_rng(0)
    x = np.array([0.1, 0.3, 0.45, 0.6, 0.8])
    y = 0.5 + 1.2 * x + rng.normal(0, 0.3, 5)
    r = meta_regression(y, x, np.full(5, 0.05))
    ref = stats.linregress(x, y)
    assert r["slope"] == pytest.approx(ref.slope) and r["p_t"] == pytest.approx(ref.pvalue)
    assert r["df"] == 3 and r["ci95"][0] < r["slope"] < r["ci95"][1]
    many = kh_slopes(np.stack([y, y]), np.stack([x, x]), np.full((2, 5), 0.05))
    assert np.allclose(many["p"], ref.pvalue)


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_the_bootstrap_reference_is_the_t_law_where_that_is_exact(seed):
    """Equal variances, no error in difficulty: the t statistic is the ordinary regression t whatever tau^2, so
    under the fitted normal null it follows t on C - 2 df exactly and the bootstrap p must match that t's p
    within its Monte Carlo error (20,000 draws: SE <= 0.0036)."""
    rng = np.random.default_rng(seed)
    x = np.sort(rng.uniform(0.1, 0.8, 4))
    y = 0.3 + 1.5 * x + rng.normal(0, 0.4, 4)
    ref = stats.linregress(x, y).pvalue
    p = float(bootstrap_t(y, x, np.full(4, 0.05), n_boot=20_000, seed=seed)["p"][0])
    assert abs(p - ref) <= 4 * np.sqrt(ref * (1 - ref) / 20_000) + 1e-4, (p, ref)
    r = meta_regression(y, x, np.full(4, 0.05), n_boot=20_000, seed=seed)  # its interval: the same reference
    assert np.allclose(r["ci95"], r["ci95_t"], atol=0.02 * (r["ci95_t"][1] - r["ci95_t"][0]))


def test_the_bootstrap_p_is_seeded_independent_of_batching_and_matches_its_interval():
    rng = np.random.default_rng(3)
    Y = rng.normal(0, 0.5, (6, 5)) + np.linspace(0, 1.5, 5)[None] * rng.uniform(0, 2, (6, 1))
    X = np.broadcast_to(np.linspace(0.1, 0.7, 5), Y.shape) + rng.normal(0, 0.05, Y.shape)
    VY = rng.uniform(0.05, 0.4, Y.shape)
    VX = np.full(Y.shape, 0.004)
    batch = bootstrap_t(Y, X, VY, VX)["p"]
    one = [meta_regression(Y[i], X[i], VY[i], VX[i]) for i in range(6)]
    assert np.allclose(batch, [r["p"] for r in one]) and [r["n_boot"] for r in one] == [N_BOOT] * 6
    assert np.array_equal(batch, bootstrap_t(Y, X, VY, VX)["p"])  # seeded: the same cells, the same p
    for r in one:  # the interval is slope +/- the bootstrap's critical |t| x se: it excludes 0 when p < 0.05
        assert (r["ci95"][0] > 0 or r["ci95"][1] < 0) == (r["p"] < 0.05) or abs(r["p"] - 0.05) < 2e-3
        assert 1 / (N_BOOT + 1) <= r["p"] <= 1


def test_each_data_set_draws_its_own_bootstrap_from_its_data():
    """The draws are seeded from the seed and the data set's bytes (CRC-32): the same data give the same p, in a
    batch or alone; a data set that differs only by a shift of every logit (the same t, the same null law) gets
    other draws, so its p differs within the Monte Carlo error instead of repeating it (with one fixed set of
    draws for every data set the two p were identical, and the bench's simulations shared one draw's error)."""
    rng = np.random.default_rng(5)
    x = np.array([0.1, 0.35, 0.5, 0.75])
    y = 0.2 + rng.normal(0, 0.4, 4)
    vy, vx = np.array([0.05, 0.1, 0.2, 0.3]), np.full(4, 0.004)
    assert data_seed(0, y, x) == data_seed(0, y.copy(), x.tolist()) != data_seed(1, y, x)
    assert data_seed(0, y, x) != data_seed(0, y + 1.0, x)
    Y = np.stack([y, y + 1.0, y])
    r = bootstrap_t(Y, np.stack([x] * 3), np.stack([vy] * 3), np.stack([vx] * 3), n_boot=4000)
    assert kh_slopes(Y, np.stack([x] * 3), np.stack([vy] * 3), np.stack([vx] * 3))["t"] == pytest.approx([
        kh_slopes(y, x, vy, vx)["t"][0]] * 3)
    assert r["p"][0] == r["p"][2] != r["p"][1]  # same data, same draws; shifted data, its own draws
    assert abs(r["p"][0] - r["p"][1]) < 4 * np.sqrt(2 * 0.25 / 4000)
    assert r["p"][0] == bootstrap_t(y, x, vy, vx, n_boot=4000)["p"][0]  # alone or in a batch
    assert bootstrap_t(y, x, vy, vx, n_boot=4000, seed=1)["p"][0] != r["p"][0]


def test_difficulty_error_widens_the_slope_interval():
    x = np.array([0.1, 0.3, 0.5, 0.7])
    y = np.array([-2.0, -1.1, -0.2, 0.9])
    a = meta_regression(y, x, np.full(4, 0.04))
    b = meta_regression(y, x, np.full(4, 0.04), np.full(4, 0.01))
    assert b["se"] >= a["se"] - 1e-12


def test_logit_variance_is_clustered_by_question():
    spread = logit_and_var([1, 1, 1, 1, 1, 1], [4] * 6)
    lumped = logit_and_var([4, 2, 0, 0, 0, 0], [4] * 6)
    assert spread[0] == pytest.approx(lumped[0]) and lumped[1] > spread[1]


def _rows(cells: dict[str, list[tuple[str, int]]]):
    out = []
    for cell, qs in cells.items():
        for qk, k in qs:
            for i in range(4):
                out.append({"model": "m", "cell": cell, "qkey": f"{cell}-{qk}", "label": "C" if i < k else "non-C",
                            "first": True, "gen": f"{cell}-{qk}-{i}"})
    return out


def test_two_cells_are_descriptive_three_are_tested():
    rows = _rows({"a": [("q1", 1), ("q2", 0)], "b": [("q1", 2), ("q2", 3)], "c": [("q1", 4), ("q2", 3)]})
    acc = {"a": 0.9, "b": 0.6, "c": 0.3}
    cells: list[dict] = [{"model": "m", "cell": c, "baseline_accuracy": {"rate": a, "n": 10}} for c, a in acc.items()]
    diff = {("m", c): 1 - a for c, a in acc.items()}
    two = cell_slope(rows, cells[:2], {k: v for k, v in diff.items() if k[1] != "c"}, axis="accuracy")["per_model"]["m"]
    assert two["status"] == "descriptive" and two["p"] is None and ">= 3 cells" in two["message"]
    three = cell_slope(rows, cells, diff, axis="accuracy")["per_model"]["m"]
    assert three["status"] == "ok" and three["df"] == 1 and three["slope"] > 0
    assert "parametric bootstrap" in three["test"] and 0 < three["p"] <= 1 and 0 < three["p_t"] <= 1
    assert all(c["vx"] > 0 for c in three["cells"])  # the estimated accuracy's error is carried


def test_rows_code_edit_type_weights_and_unknown_positions(tmp_path):
    import json

    from helpers.gradient_runs import make_run

    from behavioural.gradient.regression import _frame
    from behavioural.gradient.rows import edit_type, load_runs

    assert edit_type("numerical") == "numerical" and edit_type("logical") == "text" and edit_type("text") == "text"
    d = make_run(tmp_path, "r", n_q=6)
    conts = [json.loads(line) for line in (d / "continuations.jsonl").read_text().splitlines()]
    i, j = [k for k, c in enumerate(conts) if c["condition"] == "perturbed"][:2]
    conts[i]["memberships"] = [[conts[i]["strategy"], "middle"], [conts[i]["strategy"], "late"]]
    conts[j]["position"] = None
    (d / "continuations.jsonl").write_text("".join(json.dumps(c) + "\n" for c in conts))
    data = load_runs([str(d)])
    shared = [r for r in data.rows if r["id"] == conts[i]["id"]]
    # one generation that is both the middle and the late edit: one row at the merged position, weight 1
    assert [(r["position"], r["positions"], r["weight"]) for r in shared] == [("middle=late", ("middle", "late"), 1.0)]
    unknown = [r for r in data.rows if r["id"] == conts[j]["id"]]
    assert unknown and unknown[0]["position"] == "unknown"
    df = _frame(data.rows, {("m1", data.rows[0]["cell"]): 0.5})
    assert df["pos_index"].isna().sum() >= 1  # not silently "middle"
