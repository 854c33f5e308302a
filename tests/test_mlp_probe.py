"""The MLP probe in the probe study: it finds a non-linear (XOR) signal the linear probe cannot, matches the
linear probe on a linear signal, sees exactly the linear probes' folds, and fills the paper's table layout;
the bypass target; probe sets on the command line. Small synthetic stores (small d, few epochs)."""
from __future__ import annotations

import csv
import json

import numpy as np
import pytest
from helpers.probe_stores import lab, write_store

from activations.store import open_store
from probes.config import ALL_PROBES, PROBES, ProbeConfig, parse_probes
from probes.data import ProbeError, load_probe_data
from probes.experiment import train_probes
from probes.fit.cv import cross_val_predict_grouped, outer_folds
from probes.fit.mlp_cv import MLPBackend, cv_predict
from probes.paper_table import COLUMNS, pm
from probes.train import main

FAST = dict(n_boot=200, permutations=10, Cs=(0.01, 1.0, 100.0), transfer=False, directions=False)
MLP = {"permutations": 10, "hidden_sizes": (16,), "weight_decays": (1e-3, 1e-1)}


def _store(tmp_path, kind: str, q: int = 60, per: int = 4, d: int = 6, seed: int = 0, name: str = "s.h5"):
    """Layer 0 noise; layer 1 carries an XOR (kind="xor") or a linear (kind="linear") signal in dims 0-1."""
    rng = np.random.default_rng(seed)
    n = q * per
    acts = rng.normal(size=(n, 2, d)).astype(np.float32)
    a, b = acts[:, 1, 0], acts[:, 1, 1]
    if kind == "xor":
        y = ((a > 0) ^ (b > 0)).astype(int)
    else:
        y = (a + b + 0.8 * rng.normal(size=n) > 0).astype(int)
    label3 = np.where(y == 1, "C", np.where(rng.random(n) < 0.5, "A", "B"))
    return write_store(tmp_path / name, acts, lab(y), np.repeat(np.arange(q), per), label3=list(label3)), y


def _run(path, probes=("logistic", "mlp"), folds=4, **kw):
    with open_store(path) as st:
        data = load_probe_data(st, target=kw.pop("target", "propagation"))
        res, _ = train_probes(data, probes=probes, folds=folds, mlp=MLP, **FAST, **kw)
    return res


def test_mlp_beats_linear_on_xor(tmp_path):
    path, _ = _store(tmp_path, "xor")
    res = _run(path)
    lin, mlp = (res["probes"][pk]["layers"][1]["accuracy"] for pk in ("logistic", "mlp"))
    assert lin["rate"] < 0.62 and mlp["rate"] > 0.75
    assert mlp["lo"] > lin["hi"]  # question-clustered intervals apart
    assert res["probes"]["mlp"]["layers"][0]["accuracy"]["rate"] < 0.62  # no signal at layer 0
    m = res["probes"]["mlp"]["layers"][1]
    assert m["control"]["n_permutations"] == 10 and m["control"]["accuracy"]["rate"] < 0.62
    assert m["gain_over_metadata"]["lo"] > 0  # the same metadata baseline as the linear probes
    assert res["mlp"]["permutations"] == 10 and all(isinstance(p, dict) for p in m["C_per_fold"])


def test_mlp_matches_linear_on_linear_signal(tmp_path):
    path, _ = _store(tmp_path, "linear")
    res = _run(path)
    lin, mlp = (res["probes"][pk]["layers"][1]["accuracy"] for pk in ("logistic", "mlp"))
    assert lin["rate"] > 0.7
    assert lin["lo"] <= mlp["rate"] <= lin["hi"] and mlp["lo"] <= lin["rate"] <= mlp["hi"]
    assert abs(res["headline"]["mlp"]["accuracy"]["rate"] - res["headline"]["logistic"]["accuracy"]["rate"]) < 0.1


def test_fold_assignment_identical_to_linear_probes(tmp_path, monkeypatch):
    path, _ = _store(tmp_path, "xor", q=40)
    seen: list[tuple[str, np.ndarray, np.ndarray]] = []
    orig = MLPBackend.cv

    def spy(self, kind, X, y, groups, fold_ids):
        seen.append((kind, np.array(fold_ids), np.array(groups)))
        return orig(self, kind, X, y, groups, fold_ids)

    monkeypatch.setattr(MLPBackend, "cv", spy)
    _run(path, probes=("logistic", "mass_mean", "mlp"), folds=4)
    assert sorted({k for k, _, _ in seen}) == ["logistic", "mass_mean", "mlp"] and len(seen) == 6
    ref, groups = seen[0][1], seen[0][2]
    with open_store(path) as st:
        data = load_probe_data(st)
        assert np.array_equal(ref, outer_folds(data.y, data.groups("question"), 4, 0))
    for _, f, g in seen:
        assert np.array_equal(f, ref) and np.array_equal(g, groups)
    for q in np.unique(groups):  # each question in one fold only
        assert len(np.unique(ref[groups == q])) == 1


def test_batched_cv_agrees_with_the_estimator_in_a_pipeline():
    rng = np.random.default_rng(4)
    n, d = 160, 6
    X = rng.normal(size=(n, d))
    y = ((X[:, 0] > 0) ^ (X[:, 1] > 0)).astype(np.int64)
    groups = np.arange(n) // 2
    folds = outer_folds(y, groups, 4, 0)
    fast = cv_predict(X, y, groups, folds, inner_folds=3, seed=0)
    ref = cross_val_predict_grouped("mlp", X, y, groups, folds, seed=0, inner_folds=3)
    assert np.mean(fast["pred"] == ref["pred"]) > 0.95
    assert np.allclose(fast["inner_score"], ref["inner_score"], atol=0.05)


def test_bypass_target_contrasts_a_with_b_and_c(tmp_path):
    path, y = _store(tmp_path, "linear", q=20)
    with open_store(path) as st:
        data = load_probe_data(st, target="bypass")
        l3 = st.rows["label3"].to_numpy()
    assert data.class_names == ["non-A", "A"]
    assert np.array_equal(data.y, (l3 == "A").astype(int))
    assert set(l3[data.y == 0]) == {"B", "C"}


def test_paper_table_csv_cell_recomputed_by_hand(tmp_path, capsys):
    path, _ = _store(tmp_path, "linear", q=36)
    # no B at all: the rule labeller's demo case -> the 3-class task is skipped in one line
    with open_store(path) as st:
        rows = st.rows
    y = (rows["label"] == "C").to_numpy().astype(int)
    p2 = write_store(tmp_path / "noB.h5", np.stack([np.asarray(_read(path, L)) for L in (0, 1)], axis=1), lab(y),
                     rows["question_id"].tolist(), label3=list(np.where(y == 1, "C", "A")))
    out = tmp_path / "probes"
    rc = main([str(p2), "--output-dir", str(out), "--probe", "logistic,mlp", "--paper-table", "--solver", "sklearn",
               "--folds", "3", "--permutations", "5", "--mlp-permutations", "3", "--bootstrap", "50",
               "--no-transfer", "--no-directions", "--mlp-hidden", "16", "--cs", "0.01,1,100"])
    text = capsys.readouterr().out
    assert rc == 0
    skip = [ln for ln in text.splitlines() if "skipping '3-class (A/B/C)'" in ln]
    assert len(skip) == 1 and "no B among" in skip[0]
    with open(out / "paper_table.csv", newline="") as f:
        table = list(csv.DictReader(f))
    assert tuple(table[0]) == COLUMNS
    assert {r["task"] for r in table} == {"Binary bypass", "Binary faithful"}
    assert {r["probe"] for r in table} == {"linear", "mlp"}
    cell = next(r for r in table if r["task"] == "Binary faithful" and r["layer"] == "1" and r["probe"] == "linear")
    # by hand: the same question-grouped folds, the logistic probe's held-out predictions, accuracy per fold
    with open_store(p2) as st:
        data = load_probe_data(st)
        X, groups = data.X(1), data.groups("question")
    folds = outer_folds(data.y, groups, 3, 0)
    pred = cross_val_predict_grouped("logistic", X, data.y, groups, folds, inner_folds=3, Cs=(0.01, 1.0, 100.0))["pred"]
    accs = [float(np.mean(pred[folds == k] == data.y[folds == k])) for k in range(3)]
    assert [float(v) for v in cell["per_fold_acc"].split(",")] == pytest.approx(accs, abs=5e-4)
    assert float(cell["acc_mean"]) == pytest.approx(np.mean(accs), abs=5e-4)
    assert float(cell["acc_std"]) == pytest.approx(np.std(accs), abs=5e-4)
    assert cell["acc_ci"] == pm(float(np.mean(accs)), float(np.std(accs)))
    assert cell["n"] == str(data.n) and cell["best_layer"] in ("yes", "")
    md = (out / "paper_table.md").read_text()
    assert "Two estimands" in md and "nested-CV headline" in md and "skipped 3-class (A/B/C)" in md
    res = json.loads((out / "results.json").read_text())
    assert "3-class (A/B/C)" in res["paper_table"]["skipped"] and set(res["headline"]) == {"logistic", "mlp"}


def _read(path, layer):
    with open_store(path) as st:
        return st.read(layer, "prefix_last")


def test_probe_sets_and_both():
    assert parse_probes("both") == PROBES == ("logistic", "mass_mean")
    assert parse_probes("logistic,mass_mean,mlp") == ALL_PROBES
    assert parse_probes("mlp") == ("mlp",) and parse_probes("mlp,both") == ("mlp", "logistic", "mass_mean")
    assert ProbeConfig(store="x", probe="logistic,mlp").probes == ("logistic", "mlp")
    with pytest.raises(ProbeError, match=r"unknown --probe 'svm' in 'logistic,svm'"):
        parse_probes("logistic,svm")


def test_cli_refuses_a_bad_probe_set_in_one_line(tmp_path, capsys):
    rc = main([str(tmp_path / "missing.h5"), "--probe", "logistic,svm", "--output-dir", str(tmp_path / "o")])
    err = capsys.readouterr().err.strip()
    assert rc == 2 and err.startswith("error: ") and "\n" not in err and "unknown --probe 'svm'" in err


def test_mlp_transfer_checks_run(tmp_path):
    path, _ = _store(tmp_path, "linear", q=30)
    with open_store(path) as st:
        data = load_probe_data(st)
        res, _ = train_probes(data, probes=("mlp",), folds=3, mlp=MLP, n_boot=50, permutations=3, Cs=(1.0,),
                              directions=False, transfer=True, transfer_layer=1)
    t = res["transfer"]["mlp"]
    assert t["layer"] == 1 and t["leave_one_strategy_out"] and set(t["by"]) == {"strategy", "edit_position"}


def test_batched_training_does_not_couple_problems():
    """A problem trained in a batch (with others that stop earlier or later, and another standardisation group)
    ends where it ends alone: same kept epoch, same weights up to float32 round-off."""
    from probes.fit.mlp_train import train_mlps

    rng = np.random.default_rng(0)
    n, d, B = 120, 10, 6
    X = rng.normal(size=(n, d))
    y = ((X[:, 0] > 0) ^ (X[:, 1] > 0)).astype(int)
    T = np.stack([y if i % 2 == 0 else rng.permutation(y) for i in range(B)])
    va = rng.random((B, n)) < 0.2
    st = np.ones((B, n), bool)
    st[3:, :20] = False
    wd = np.array([1e-3, 1e-1] * 3)
    kw = dict(hidden=8, n_classes=2, max_iter=80)
    together = train_mlps(X, T, ~va, va, st, wd, **kw)
    for i in range(B):
        alone = train_mlps(X, T[i:i + 1], ~va[i:i + 1], va[i:i + 1], st[i:i + 1], wd[i:i + 1], **kw)
        assert together["n_iter"][i] == alone["n_iter"][0]
        assert np.allclose(together["W1"][i], alone["W1"][0], atol=1e-5)
        assert np.allclose(together["W2"][i], alone["W2"][0], atol=1e-5)
