"""The batched torch solver reaches scikit-learn's optimum: coefficients, predictions and accuracies on fixed
data; the torch CV path equals the sklearn CV path; permutation controls and validity pieces behave."""
from __future__ import annotations

import numpy as np
import pytest
import torch
from sklearn.linear_model import LogisticRegression
from sklearn.preprocessing import StandardScaler

from probes.controls import max_over_layers_null, permutation_correct_sklearn, permutation_p, question_permutations
from probes.fit.cv import cross_val_predict_grouped, outer_folds
from probes.fit.fast import cv_predict, logistic_fits, mass_mean_fits, permutation_correct
from probes.fit.solver import Design, resolve_device, solve
from probes.validity import metadata_baseline, metadata_features, paired_gain, transfer, within_cell

CS = (1e-3, 0.1, 1.0, 100.0)


def _data(n=300, d=30, seed=0, k=2):
    rng = np.random.default_rng(seed)
    # ill-conditioned, offset features (like hidden states)
    A = rng.normal(size=(d, d)) * np.logspace(0, -2, d)[:, None]
    X = rng.normal(size=(n, d)) @ A + rng.normal(size=d) * 30
    if k == 2:
        y = ((X - X.mean(0)) @ rng.normal(size=d) + rng.normal(size=n) > 0).astype(int)
    else:
        y = rng.integers(0, k, n)
        X = X + 2 * np.eye(d)[y] * X.std(0)
    return X, y


def _sk(X, y, mask, C):
    sc = StandardScaler().fit(X[mask])
    lr = LogisticRegression(C=C, max_iter=10000, tol=1e-10).fit(sc.transform(X[mask]), y[mask])
    W = lr.coef_ / sc.scale_
    return W, lr.intercept_ - W @ sc.mean_


@pytest.mark.parametrize("k", [2, 3])
@pytest.mark.parametrize("precondition", [True, False])
def test_coefficients_and_predictions_match_sklearn(k, precondition):
    X, y = _data(k=k)
    masks = np.stack([np.arange(len(y)) % 3 != j for j in range(3)])
    D = Design.build(X, masks, precondition=precondition)
    probs = [(m, c) for m in range(3) for c in CS]
    th, info = solve(D, np.tile(y, (len(probs), 1)), [m for m, _ in probs], [c for _, c in probs], n_classes=k,
                     tol=1e-6, max_iter=2000)
    assert info.converged.all()
    W, b = D.raw_coef(th, torch.tensor([m for m, _ in probs]))
    for i, (m, c) in enumerate(probs):
        Ws, bs = _sk(X, y, masks[m], c)
        zs, zt = X @ Ws.T + bs, X @ W[i].T + b[i]
        rel = np.abs(Ws - W[i]).max() / np.abs(Ws).max()
        assert rel < 2e-2, (k, m, c, rel)
        ps = zs.argmax(1) if k > 2 else (zs[:, 0] > 0)
        pt = zt.argmax(1) if k > 2 else (zt[:, 0] > 0)
        assert np.mean(ps == pt) >= 0.99


def test_warm_start_reaches_same_optimum():
    X, y = _data()
    D = Design.build(X, np.ones((1, len(y)), bool))
    cold, _ = solve(D, y[None], [0], [10.0], n_classes=2, tol=1e-7, max_iter=2000)
    warm, _ = solve(D, y[None], [0], [0.01], n_classes=2)
    warm, _ = solve(D, y[None], [0], [10.0], n_classes=2, theta0=warm, tol=1e-7, max_iter=2000)
    assert torch.allclose(cold, warm, atol=1e-3, rtol=1e-2)


@pytest.mark.parametrize("kind", ["logistic", "mass_mean"])
def test_cv_predict_equals_sklearn_path(kind):
    X, y = _data(n=240, d=20, seed=3)
    g = np.arange(len(y)) // 4
    f = outer_folds(y, g, 5, 0)
    a = cross_val_predict_grouped(kind, X, y, g, f, Cs=CS, inner_folds=3)
    b = cv_predict(kind, X, y, g, f, Cs=CS, inner_folds=3)
    assert a["C"] == b["C"]
    assert np.allclose(a["inner_score"], b["inner_score"], atol=0.02)  # sklearn stops short on big C
    assert np.mean(a["pred"] == b["pred"]) >= 0.99
    assert abs(np.mean(a["pred"] == y) - np.mean(b["pred"] == y)) <= 0.005


def test_mass_mean_closed_form_matches_estimator_three_class():
    from probes.fit.cv import pipeline_for

    X, y = _data(n=200, d=12, k=3, seed=4)
    m = np.arange(len(y)) % 4 != 0
    classes, W, b = mass_mean_fits(X, y[None], m[None])[0]
    pipe = pipeline_for("mass_mean", int(m.sum()), X.shape[1], inner_folds=0).fit(X[m], y[m])
    assert np.array_equal(classes[np.argmax(X @ W.T + b, axis=1)], pipe.predict(X))


def test_permutations_torch_equal_sklearn_reference():
    X, y = _data(n=160, d=10, seed=5)
    g = np.arange(len(y)) // 4
    f = outer_folds(y, g, 4, 0)
    Yp = question_permutations(y, g, 6, seed=1)
    assert Yp.shape == (6, len(y))
    for kind, Cs in (("logistic", [1.0, 0.1, 1.0, 10.0]), ("mass_mean", [None] * 4)):
        t = permutation_correct(kind, X, Yp, f, Cs)
        s = permutation_correct_sklearn(kind, X, Yp, f, Cs)
        assert np.abs(t - s).max() <= 1, (kind, t, s)


def test_logistic_fits_skips_one_class_masks():
    X, y = _data(n=100, d=5)
    one = y == 1
    fits = logistic_fits(X, y, np.arange(100), [np.ones(100, bool), one], Cs=(1.0,), inner_folds=2)
    assert fits[0] is not None and fits[1] is None and fits[0]["coef"].shape == (1, 5)


def test_p_values_and_max_stat():
    assert permutation_p(0.9, [0.5] * 99) == pytest.approx(0.01)
    assert permutation_p(0.5, [0.5] * 99) == 1.0
    assert permutation_p(None, [0.5]) is None
    c = np.array([[[3, 4]], [[5, 1]]])  # [L=2, P=1, F=2]
    assert max_over_layers_null(c, 10)[0] == pytest.approx(0.9)


def test_device_resolution():
    assert resolve_device("cpu").type == "cpu"
    assert resolve_device("auto").type in ("cpu", "cuda")
    with pytest.raises(ValueError, match="available here: auto, cpu"):
        resolve_device("tpu")


def test_metadata_baseline_and_gain_and_cells():
    import pandas as pd

    rng = np.random.default_rng(7)
    n = 240
    strat = rng.choice(["a", "b", "c"], n)
    pos = rng.choice(["early", "late"], n)
    y = ((strat == "a") | (rng.random(n) < 0.1)).astype(int)  # label fully explained by metadata
    meta = pd.DataFrame({"strategy": strat, "edit_position": pos, "task": "t", "dataset": "d"})
    g = np.arange(n) // 3
    f = outer_folds(y, g, 5, 0)
    F, used = metadata_features(meta)
    assert used == ["strategy", "edit_position"] and F.shape == (n, 2)
    mb = metadata_baseline(meta, y, g, f, Cs=(0.1, 1.0, 10.0))
    assert np.mean(mb["pred"] == y) > 0.85
    gain = paired_gain(mb["pred"] == y, mb["pred"] == y, g, n_boot=200)
    assert gain["value"] == 0 and gain["lo"] < 0 < gain["hi"] < 0.06 and gain["n_questions"] == n // 3
    better = paired_gain(np.ones(n, bool), mb["pred"] == y, g, n_boot=200)
    assert better["value"] > 0 and better["lo"] > 0
    wc = within_cell(y, mb["pred"], f, strat, pos, g)
    assert set(wc["cells"]) == {f"{s} x {p}" for s in "abc" for p in ("early", "late")}
    assert wc["pooled"]["n_rows"] == n


def test_leave_one_out_transfer_never_trains_on_held_out_value():
    y = np.array([0, 1] * 30)
    vals = np.array(["a", "b", "c"] * 20)
    f = np.arange(60) % 3
    seen = []

    def fp(trains, tests):
        for tr, te in zip(trains, tests):
            seen.append((set(vals[tr]), set(vals[te]), bool((tr & te).any())))
        return [np.zeros(int(te.sum()), dtype=np.int64) for te in tests]

    res = transfer(y, f, vals, fp, mode="leave_one_out")
    assert [r["value"] for r in res] == ["a", "b", "c"]
    for tr_vals, te_vals, overlap in seen:
        assert not overlap and not (tr_vals & te_vals)


def test_permuted_refits_choose_C_like_the_real_fit():
    from probes.fit.permuted import cv_many, fold_correct, inner_masks

    X, y = _data(n=160, d=10, seed=5)
    g = np.arange(len(y)) // 4
    f = outer_folds(y, g, 4, 0)
    Cs = (0.01, 0.1, 1.0, 10.0)
    Yp = np.vstack([y[None], question_permutations(y, g, 2, seed=1)])
    sp = inner_masks(Yp, g, f, 3, 0)
    for kind in ("logistic", "mass_mean"):
        real = cv_predict(kind, X, y, g, f, Cs=Cs, inner_folds=3, seed=0)
        many = cv_many(kind, X, Yp, f, sp, Cs=Cs)
        assert np.array_equal(many["pred"][0], real["pred"])  # row 0 = the real labels: the very same fit
        assert np.allclose(many["inner"][0], real["inner_score"], equal_nan=True)
        for p in (1, 2):  # each permutation is cross-validated as the real labels are (its own C)
            ref = cv_predict(kind, X, Yp[p], g, f, Cs=Cs, inner_folds=3, seed=0)
            assert np.array_equal(many["pred"][p], ref["pred"])
        c = fold_correct(many["pred"], Yp, f)
        assert c.shape == (3, 4) and (c >= 0).all()


def test_nested_and_gain_nulls_follow_the_real_rules():
    from probes.controls import fold_accuracy, gain_null, nested_null

    correct = np.array([[[3, 4]], [[5, -1]]])  # [L=2, P=1, F=2]; layer 1 skipped fold 1
    inner = np.array([[[0.6, 0.7]], [[0.8, np.nan]]])
    nc = nested_null(correct, inner)
    assert nc.tolist() == [[5, 4]]  # fold 0: layer 1 (better inner score); fold 1: layer 0 (layer 1 has none)
    sizes = np.array([10, 10])
    assert fold_accuracy(np.array([[5, -1]]), sizes)[0] == pytest.approx(0.5)  # a skipped fold leaves both sides
    assert gain_null(np.array([[5, 4]]), np.array([[4, -1]]), sizes)[0] == pytest.approx(0.1)


def test_lookup_table_is_a_baseline_candidate():
    import pandas as pd

    from probes.validity import metadata_baseline

    rng = np.random.default_rng(3)
    n = 360
    strat = rng.choice(["a", "b"], n)
    pos = rng.choice(["early", "late"], n)
    y = ((strat == "a") ^ (pos == "late")).astype(int)  # an interaction: one-hot logistic cannot fit it
    flip = rng.random(n) < 0.05
    y = np.where(flip, 1 - y, y)
    meta = pd.DataFrame({"strategy": strat, "edit_position": pos})
    g = np.arange(n) // 3
    f = outer_folds(y, g, 5, 0)
    mb = metadata_baseline(meta, y, g, f, Cs=(0.1, 1.0, 10.0))
    assert mb["chosen_counts"] == {"lookup": 5} and np.mean(mb["pred"] == y) > 0.9
    wc = within_cell(y, mb["pred"], f, strat, pos, g)
    assert wc["pooled"]["cell_majority"] == pytest.approx(np.mean(mb["pred"] == y))


def test_question_exchange_keeps_the_design_and_falls_back_within_cells():
    from probes.fit.cv import permute_by_group

    rng = np.random.default_rng(0)
    cells_q = [("a", "b")] * 20 + [("a", "b", "c")] * 10 + [("c",), ("b", "c")]  # the last two: unique designs
    g = np.concatenate([[i] * len(c) for i, c in enumerate(cells_q)])
    cells = np.concatenate([list(c) for c in cells_q])
    y = rng.integers(0, 2, len(g))
    info: dict = {}
    for _ in range(20):
        yp = permute_by_group(y, g, rng, cells, info)
        for c in "abc":  # the label-metadata link is kept: class counts per cell
            assert np.bincount(yp[cells == c], minlength=2).tolist() == np.bincount(y[cells == c], minlength=2).tolist()
        donors = {tuple(y[g == i]) for i in range(20)}
        assert all(tuple(yp[g == i]) in donors for i in range(20))  # a whole question's labels, row for row
    assert info["n_blocks"] == 2 and info["n_exchanged"] == 30 and info["n_fallback_questions"] == 2
    Yp, inf = question_permutations(y, g, 3, seed=1, cells=cells, with_info=True)
    assert Yp.shape == (3, len(y)) and "2 questions with a unique design" in inf["fallback"]


@pytest.mark.usefixtures("one_thread")  # bitwise: with two threads a GEMM's split depends on the batch size
@pytest.mark.parametrize("k", [2, 3])
def test_a_c_path_started_from_the_previous_state_takes_the_same_steps(k):
    """``start=state_at(...)`` replaces the first evaluation of the next C on a warm path: the solution and the
    iteration counts are bitwise those of a warm start without it, and ``state.logits`` are the solution's logits
    (one intra-op thread, as ``make test`` runs, so a plain ``pytest`` on a multi-core machine passes too)."""
    from probes.fit.solver import state_at

    X, y = _data(k=k)
    masks = np.stack([np.arange(len(y)) % 3 != j for j in range(3)])
    D = Design.build(X, masks)
    Y, midx = np.tile(y, (3, 1)), [0, 1, 2]
    th_a = th_b = None
    state = None
    for C in CS:
        th_a, ia = solve(D, Y, midx, [C] * 3, n_classes=k, theta0=th_a)
        th_b, ib = solve(D, Y, midx, [C] * 3, n_classes=k, theta0=th_b, start=state)
        assert torch.equal(th_a, th_b) and np.array_equal(ia.n_iter, ib.n_iter), C
        state = state_at(D, th_b, Y, midx, n_classes=k)
        assert torch.equal(state.logits, D.logits(th_b, torch.as_tensor(midx)))
        assert state_at(D, th_b, Y, midx, n_classes=k, grad=False).data_loss.numel() == 0
    with pytest.raises(ValueError, match="start holds 3 problems"):
        solve(D, Y[:2], midx[:2], [1.0] * 2, n_classes=k, theta0=th_b[:2], start=state)


@pytest.mark.parametrize("k", [2, 3])
def test_the_state_a_solve_returns_is_the_state_at_its_solution(k):
    """``solve_with_state`` keeps each problem's state from the evaluation that accepted its last step (no
    evaluation more): it is :func:`state_at` of the solution (to float32 round-off: that evaluation ran over a
    sub-batch), and a C path started from it lands where one started from ``state_at`` does."""
    from probes.fit.solver import solve_with_state, state_at

    X, y = _data(k=k)
    masks = np.stack([np.arange(len(y)) % 3 != j for j in range(3)])
    D = Design.build(X, masks)
    Y, midx = np.tile(y, (3, 1)), [0, 1, 2]
    th_a = th_b = None
    st_a = st_b = None
    for C in CS:
        th_a, _ = solve(D, Y, midx, [C] * 3, n_classes=k, theta0=th_a, start=st_a)
        st_a = state_at(D, th_a, Y, midx, n_classes=k)
        th_b, info, st_b = solve_with_state(D, Y, midx, [C] * 3, n_classes=k, theta0=th_b, start=st_b)
        ref = state_at(D, th_b, Y, midx, n_classes=k)
        assert st_b.logits.shape == (len(y), 3, 1 if k == 2 else k)
        torch.testing.assert_close(st_b.logits, ref.logits, rtol=1e-5, atol=1e-5)
        torch.testing.assert_close(st_b.data_loss, ref.data_loss, rtol=1e-5, atol=1e-7)
        torch.testing.assert_close(st_b.data_grad, ref.data_grad, rtol=1e-4, atol=1e-6)
        assert info.converged.all()
        # both paths stop at max |gradient| <= tol: the same optimum to that tolerance (the weights of a weakly
        # regularised fit may differ by more along flat directions; its objective and predictions do not). A
        # lam-strongly convex objective with max |g| <= tol is within (d + 1) tol^2 / (2 lam) of its optimum
        lam = 1.0 / (C * float(D.n_train[0]))
        gap = (X.shape[1] + 1) * (1 if k == 2 else k) * 1e-4 ** 2 / (2 * lam)
        torch.testing.assert_close(st_b.data_loss, st_a.data_loss, rtol=1e-4, atol=max(1e-5, 2 * gap))
        agree = (st_b.logits > 0) == (st_a.logits > 0) if k == 2 else st_b.logits.argmax(2) == st_a.logits.argmax(2)
        assert agree.float().mean() >= 0.99, C


def test_bench_counts_the_solvers_gemm_work_exactly():
    """bench/bench_probes.py's floor reads SolverGemms: one evaluation of B problems is 2 x 2 n d B FLOPs (the
    preconditioner's products are not run by it), and the solver's functions are restored after the block."""
    import sys
    from pathlib import Path

    from probes.fit import solver
    from probes.fit.solver import state_at

    sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "bench"))
    from bench_probes import SolverGemms

    X, y = _data()
    D = Design.build(X, np.ones((1, len(y)), bool))
    theta = torch.zeros(4, 1, D.d + 1) + 0.01
    before = solver._loss_grad_parts
    with SolverGemms() as g:
        state_at(D, theta, np.repeat(y[None], 4, axis=0), [0, 0, 0, 0], n_classes=2)
        assert g.flops == 2 * 2.0 * 4 * D.n * D.d
        D.precondition(theta, torch.ones(4), 0.25)
        assert g.flops == 2 * 2.0 * 4 * D.n * D.d + 2 * 2.0 * 4 * D.d ** 2
        assert g.layer_flops == 0  # none of it inside probes.experiment._layer_pass
    assert solver._loss_grad_parts is before and solver.Design.precondition.__qualname__ == "Design.precondition"
    from probes import experiment

    assert experiment._layer_pass.__qualname__ == "_layer_pass"
