"""Probes: no leakage under grouped CV, planted signals found at the right layer with the right direction,
controls and honest layer selection, clear refusals. Small synthetic stores written with StoreWriter."""
from __future__ import annotations

import json

import numpy as np
import pytest
from helpers.probe_stores import lab, write_store

from activations.store import open_store
from probes import ProbeError, load_direction_info, load_directions
from probes.data import check_folds, load_probe_data
from probes.fit.cv import cross_val_predict_grouped, outer_folds, permute_by_group, score_predictions
from probes.fit.direction_fit import fit_directions
from probes.fit.estimators import LogisticProbe, MassMeanProbe, make_probe_pipeline, raw_direction
from probes.train import main, train_probes

FAST = dict(n_boot=200, permutations=20, Cs=(0.01, 1.0, 100.0))


def cos(a, b):
    return float(a @ b / np.linalg.norm(a) / np.linalg.norm(b))


# ---------------------------------------------------------------------------------------------- estimators
def test_estimators_follow_sklearn_api():
    from sklearn.base import clone

    rng = np.random.default_rng(0)
    X = rng.normal(size=(120, 5))
    y = (X[:, 0] > 0).astype(int)
    g = np.repeat(np.arange(40), 3)
    for est in (LogisticProbe(), MassMeanProbe()):
        c = clone(est)
        assert c.fit(X, y, groups=g) is c
        assert c.score(X, y) > 0.85
        assert np.isfinite(c.inner_score_) and c.n_inner_folds_ == 3
    assert LogisticProbe().fit(X, y).n_inner_folds_ == 3  # no groups -> row-level inner folds
    # three classes: one direction per class
    y3 = rng.integers(0, 3, 120)
    X3 = X + 3 * np.eye(5)[y3]
    m = MassMeanProbe().fit(X3, y3)
    assert m.directions_.shape == (3, 5) and m.score(X3, y3) > 0.8


def test_raw_direction_undoes_scaler_and_pca():
    rng = np.random.default_rng(1)
    scales = np.exp(rng.uniform(-2, 2, 12))
    X = rng.normal(size=(400, 12)) * scales
    u = rng.normal(size=12) / scales  # decision rule in raw coordinates
    y = (X @ u + 0.05 * rng.logistic(size=400) > 0).astype(int)
    for pca in (None, 12):
        pipe = make_probe_pipeline("logistic", pca=pca, Cs=(1e3,), inner_folds=0).fit(X, y)
        assert cos(raw_direction(pipe), u) > 0.95


# -------------------------------------------------------------------------------------------- CV behaviour
def test_random_labels_within_control_interval(tmp_path):
    """No leakage: with random labels the probes score like the shuffled-label control. Five layers of
    independent noise average out the sampling noise of a single comparison."""
    rng = np.random.default_rng(2)
    n, q, nl = 200, 50, 5
    acts = rng.normal(size=(n, nl, 12)).astype(np.float32)
    y = rng.integers(0, 2, n)
    qs = np.repeat(np.arange(q), n // q)
    p = write_store(tmp_path / "a.h5", acts, lab(y), qs)
    with open_store(p) as st:
        data = load_probe_data(st)
        res, _ = train_probes(data, folds=5, transfer=False, directions=False, **FAST)
    for pk in ("logistic", "mass_mean"):
        rows = res["probes"][pk]["layers"]
        acc = np.mean([e["accuracy"]["rate"] for e in rows])
        lo = np.mean([e["control"]["accuracy"]["wilson"][0] for e in rows])
        hi = np.mean([e["control"]["accuracy"]["wilson"][1] for e in rows])
        assert lo <= acc <= hi, (pk, acc, lo, hi)
        assert all(abs(e["selectivity"]) < 0.15 for e in rows), [e["selectivity"] for e in rows]
        assert res["probes"][pk]["nested"]["accuracy"]["rate"] < 0.62
    assert res["majority_baseline"]["accuracy"]["rate"] is not None


def test_question_shared_features_chance_grouped_not_ungrouped():
    rng = np.random.default_rng(3)
    q, per, d = 40, 6, 96
    qf = rng.normal(size=(q, d))
    qy = rng.permutation(np.r_[np.zeros(q // 2, int), np.ones(q // 2, int)])
    X = np.repeat(qf, per, axis=0) + 0.05 * rng.normal(size=(q * per, d))
    y = np.repeat(qy, per)
    g = np.repeat(np.arange(q), per)
    names = ["non-C", "C"]
    out = {}
    for grouped in (True, False):
        groups = g if grouped else np.arange(len(y))
        folds = outer_folds(y, groups, 5, seed=0)
        if grouped:  # no question straddles folds
            assert all(len(set(folds[g == i])) == 1 for i in range(q))
        run = cross_val_predict_grouped("logistic", X, y, groups, folds, inner_folds=3, Cs=(0.01, 1.0, 100.0))
        out[grouped] = score_predictions(y, run["pred"], names, groups=g, n_boot=200)["accuracy"]
    lo, hi = out[True]["cluster_ci"]
    assert lo <= 0.5 <= hi and out[True]["rate"] < 0.7, out[True]
    assert out[False]["rate"] > 0.95, out[False]


def test_permutation_is_question_level():
    rng = np.random.default_rng(4)
    g = np.repeat(np.arange(30), 4)
    y = np.repeat(rng.integers(0, 2, 30), 4)
    yp = permute_by_group(y, g, rng)
    assert np.bincount(yp).tolist() == np.bincount(y).tolist()
    assert all(len(set(yp[g == i])) == 1 for i in range(30))  # within-question structure kept
    assert (yp != y).any()


def test_planted_signal_found_at_layer_with_direction(tmp_path):
    rng = np.random.default_rng(5)
    q, per, nl, d = 60, 5, 4, 20
    n = q * per
    scales = np.exp(rng.uniform(-1.5, 1.5, d))  # non-unit feature scales
    acts = (rng.normal(size=(n, nl, d)) * scales).astype(np.float32)
    u = rng.normal(size=d) / scales  # the planted rule at layer 2, raw coordinates
    s = acts[:, 2, :] @ u
    y = (s + 0.1 * s.std() * rng.logistic(size=n) > np.median(s)).astype(int)
    qs = np.repeat(np.arange(q), per)
    p = write_store(tmp_path / "a.h5", acts, lab(y), qs)
    out = tmp_path / "probes"
    assert main([str(p), "--folds", "3", "--bootstrap", "100", "--quiet", "--n-directions", "5",
                 "--cs", "0.01,1,100"]) == 0
    res = json.loads((out / "results.json").read_text())
    lg = res["probes"]["logistic"]
    accs = {e["layer"]: e["accuracy"]["rate"] for e in lg["layers"]}
    assert max(accs, key=accs.get) == 2 and accs[2] > 0.85
    assert all(accs[L] < 0.7 for L in (0, 1, 3))
    assert lg["layers"][2]["selectivity"] > 0.3
    assert set(lg["nested"]["chosen_layers_per_fold"]) == {2}
    assert lg["nested"]["accuracy"]["rate"] > 0.85
    assert res["headline"]["logistic"]["accuracy"]["rate"] == lg["nested"]["accuracy"]["rate"]
    assert lg["selected_optimistic"]["layer"] == 2
    assert res["transfer"]["logistic"]["layer"] == 2
    assert set(res["transfer"]["logistic"]["by"]) == {"strategy", "edit_position"}
    assert res["store"]["attrs"]["model_name"] == "synthetic"
    assert res["data"]["class_counts"]["C"]["rows"] == int(y.sum())
    assert (out / "accuracy_vs_layer.png").stat().st_size > 1000
    # exported direction: raw coordinates, toward non-C
    B = load_directions(out, 2)
    assert B.shape == (5, d) and B.dtype == np.float32
    assert np.allclose(B @ B.T, np.eye(5), atol=1e-5)
    import h5py

    with h5py.File(out / "directions.h5", "r") as h:
        assert int(h.attrs["selected_layer"]) == 2 and list(h.attrs["layers"]) == [0, 1, 2, 3]
        assert json.loads(h.attrs["store"])["attrs"]["model_name"] == "synthetic"
    info = load_direction_info(out / "directions.h5", 2)
    assert cos(info["logistic"], -u) > 0.9
    assert cos(B[0], -u) > 0.9
    assert info["names"][:2] == ["logistic", "mass_mean_orth"]
    assert info["resid_norm"] == pytest.approx(float(np.linalg.norm(acts[:, 2, :], axis=1).mean()), rel=1e-4)
    with pytest.raises(ProbeError, match=r"available layers: \[0, 1, 2, 3\]"):
        load_directions(out, 7)


def test_mass_mean_direction_in_raw_coordinates():
    rng = np.random.default_rng(6)
    n, d = 300, 16
    scales = np.exp(rng.uniform(-1.5, 1.5, d))
    delta = rng.normal(size=d)
    y = rng.integers(0, 2, n)
    X = rng.normal(size=(n, d)) * scales + np.outer(1 - y, delta)  # non-C rows shifted by delta
    r = fit_directions(X, y, np.arange(n) // 3, n_directions=4)
    assert cos(r["mass_mean"], delta) > 0.9
    assert r["basis"].shape == (4, d)
    assert np.allclose(r["basis"] @ r["basis"].T, np.eye(4), atol=1e-5)


def test_three_class_target(tmp_path):
    rng = np.random.default_rng(7)
    q, per, d = 45, 4, 12
    n = q * per
    acts = rng.normal(size=(n, 2, d)).astype(np.float32)
    y3 = rng.integers(0, 3, n)
    acts[:, 1, :3] += 2.5 * np.eye(3)[y3]
    l3 = np.array(["A", "B", "C"])[y3]
    p = write_store(tmp_path / "a.h5", acts, lab(y3 == 2), np.repeat(np.arange(q), per), label3=list(l3))
    with open_store(p) as st:
        data = load_probe_data(st, target="three_class")
        assert data.class_names == ["A", "B", "C"]
        res, dirs = train_probes(data, folds=3, transfer=False, n_directions=3, **FAST)
    for pk in ("logistic", "mass_mean"):
        e = res["probes"][pk]["layers"]
        assert e[1]["accuracy"]["rate"] > 0.8 and e[0]["accuracy"]["rate"] < 0.55
    assert set(dirs) == {0, 1} and dirs[1]["basis"].shape == (3, d)


# ------------------------------------------------------------------------------------------- bad input
def _small(tmp_path, labels, qs=None, name="s.h5", **kw):
    n = len(labels)
    rng = np.random.default_rng(8)
    acts = rng.normal(size=(n, 2, 6)).astype(np.float32)
    qs = np.arange(n) // 2 if qs is None else qs
    return write_store(tmp_path / name, acts, labels, qs, **kw)


@pytest.mark.parametrize("case,pattern", [
    ("nolabels", r"has no label on any of its 40 perturbed rows"),
    ("oneclass", r"only class 'non-C' among the 40 labelled perturbed rows"),
    ("rare", r"class 'C' occurs in only 2 question\(s\) \(3 rows\), fewer than --folds 5.*use --folds 2 or fewer"),
    ("layer", r"unknown layer\(s\) \[7\].*this store has layers \[0, 1\]"),
    ("position", r"unknown --token-position 'edit_last'"),
    ("incomplete", r"incomplete"),
])
def test_bad_input_clear_one_line_errors(tmp_path, capsys, case, pattern):
    n = 40
    argv = []
    if case == "nolabels":
        p = _small(tmp_path, [""] * n)
    elif case == "oneclass":
        p = _small(tmp_path, ["non-C"] * n)
    elif case == "rare":
        labels = ["non-C"] * n
        labels[0] = labels[1] = labels[2] = "C"  # questions 0 and 1 only
        p = _small(tmp_path, labels)
    elif case == "incomplete":
        p = _small(tmp_path, lab(np.arange(n) % 2), complete=False)
    else:
        p = _small(tmp_path, lab(np.arange(n) % 2))
        argv = ["--layers", "0,7"] if case == "layer" else ["--token-position", "edit_last"]
    out = tmp_path / "out"
    rc = main([str(p), "--output-dir", str(out), "--quiet"] + argv)
    err = capsys.readouterr().err.strip()
    assert rc == 2
    assert err.startswith("error: ") and "\n" not in err
    import re

    assert re.search(pattern, err), err
    assert not out.exists()
    assert not list(tmp_path.glob(".out.partial*"))


def test_existing_output_never_overwritten(tmp_path, capsys):
    p = _small(tmp_path, lab(np.arange(40) % 2))
    out = tmp_path / "probes"  # the default location
    out.mkdir()
    (out / "results.json").write_text("keep me")
    assert main([str(p), "--quiet"]) == 2
    err = capsys.readouterr().err
    assert "already exists" in err and "--output-dir" in err
    assert (out / "results.json").read_text() == "keep me"


def test_check_folds_counts_questions_not_rows():
    y = np.array([1] * 10 + [0] * 10)
    g = np.array([0] * 10 + list(range(1, 11)))  # class 1: ten rows, one question
    with pytest.raises(ProbeError, match=r"class 'C' occurs in only 1 question\(s\) \(10 rows\).*no fold count"):
        check_folds(y, g, 2, ["non-C", "C"])


def test_cli_help_and_docstring():
    import probes.train as t

    assert t.__doc__.split("\n\n")[1].strip().startswith("python -m probes.train ")
    with pytest.raises(SystemExit) as e:
        main(["--help"])
    assert e.value.code == 0


def test_steer_holdout_fits_directions_on_other_questions(tmp_path):
    """--steer-holdout: CV scores use every question, the directions only the fit half, and directions.h5
    records the split that the steering stage reads (so steered questions were never fitted on)."""
    from steering.sweep.grid import sweep_directions as steering_directions

    rng = np.random.default_rng(7)
    q, per, nl, d = 40, 4, 2, 12
    n = q * per
    acts = rng.normal(size=(n, nl, d)).astype(np.float32)
    y = (acts[:, 1, 0] > 0).astype(int)
    qs = np.repeat([f"key-{i:03d}" for i in range(q)], per)  # keys that differ from their group codes
    p = write_store(tmp_path / "a.h5", acts, lab(y), qs)
    assert main([str(p), "--folds", "3", "--bootstrap", "50", "--permutations", "5", "--quiet", "--n-directions", "2",
                 "--cs", "1", "--steer-holdout", "0.5", "--no-transfer"]) == 0
    res = json.loads((tmp_path / "probes" / "results.json").read_text())
    split = steering_directions(tmp_path / "probes" / "directions.h5").fit_split()
    assert split is not None
    held, fit = set(split["held_out"]), set(split["fit"])
    assert held and fit and not held & fit and len(held | fit) == q
    assert held | fit == {str(x) for x in qs}  # the stored question keys, not group codes
    assert abs(len(held) - q / 2) <= 1
    assert res["directions"]["question_split"]["held_out"] == sorted(held)
    # the default steering layer is chosen on the fit questions only (the signal is at layer 1)
    assert res["directions"]["selected_layer"] == 1 and set(res["directions"]["layer_scores"]) == {"0", "1"}
    from probes import read_directions

    assert read_directions(tmp_path / "probes").selected_layer == 1
    # bad fractions are refused in one line before any work
    assert main([str(p), "--steer-holdout", "1.5", "--output-dir", str(tmp_path / "x")]) == 2
    assert not (tmp_path / "x").exists()
