"""The probes stage as a library call: ProbeConfig validation (one-line errors before any work), train(config),
is_complete, format_summary, the validity outputs in results.json, question_key grouping."""
from __future__ import annotations

import json

import numpy as np
import pytest
from helpers.probe_stores import lab, write_store

from probes.train import ProbeConfig, format_summary, is_complete, main, train


@pytest.mark.parametrize("argv,pattern", [
    (["--cs", "nan"], r"--cs 'nan'.*finite numbers > 0"),
    (["--cs", "inf,1"], r"--cs 'inf,1'"),
    (["--cs", "0,1"], r"--cs '0,1'"),
    (["--cs", "x"], r"--cs 'x'"),
    (["--pca", "0", "--solver", "sklearn"], r"--pca must be a positive"),
    (["--pca", "4"], r"--pca needs --solver sklearn"),
    (["--n-directions", "0"], r"--n-directions must be at least 1"),
    (["--inner-folds", "1"], r"--inner-folds must be at least 2"),
    (["--folds", "1"], r"--folds must be at least 2"),
    (["--bootstrap", "-1"], r"--bootstrap must be 0"),
    (["--permutations", "-2"], r"--permutations must be 0 or more"),
    (["--device", "tpu"], r"unknown or unavailable --device 'tpu'; available here: auto, cpu"),
])
def test_bad_settings_refused_before_work(tmp_path, capsys, argv, pattern):
    import re

    out = tmp_path / "out"
    rc = main([str(tmp_path / "missing.h5"), "--output-dir", str(out), "--quiet", *argv])
    err = capsys.readouterr().err.strip()
    assert rc == 2 and err.startswith("error: ") and "\n" not in err
    assert re.search(pattern, err), err
    assert not out.exists()


def test_pca_larger_than_rows_refused(tmp_path, capsys):
    rng = np.random.default_rng(0)
    p = write_store(tmp_path / "a.h5", rng.normal(size=(40, 2, 50)).astype(np.float32), lab(np.arange(40) % 2),
                    np.arange(40) // 2)
    rc = main([str(p), "--output-dir", str(tmp_path / "o"), "--quiet", "--solver", "sklearn", "--pca", "45"])
    err = capsys.readouterr().err
    assert rc == 2 and "--pca 45 exceeds" in err and "use --pca 32 or fewer" in err


def _study_store(tmp_path, twins=False):
    rng = np.random.default_rng(1)
    q, per, nl, d = 48, 4, 3, 16
    n = q * per
    acts = rng.normal(size=(n, nl, d)).astype(np.float32)
    strategies = [("numerical", "text", "logical")[i % 3] for i in range(n)]
    positions = [("early", "late")[(i // 3) % 2] for i in range(n)]
    t = rng.normal(size=n)
    acts[:, 2, 0] += 2.0 * t  # signal beyond the metadata at layer 2
    y = ((t + (np.array(strategies) == "numerical") * 1.0 + 0.3 * rng.normal(size=n)) > 0.5).astype(int)
    qs = np.repeat(np.arange(q), per)
    return write_store(tmp_path / "a.h5", acts, lab(y), qs, strategies=strategies, positions=positions)


def test_train_library_call_writes_validity_outputs(tmp_path):
    p = _study_store(tmp_path)
    out = train(ProbeConfig(store=str(p), output=str(tmp_path / "probes"), folds=4, permutations=20, bootstrap=100,
                            cs=(0.01, 1.0, 100.0), quiet=True, n_directions=3))
    assert is_complete(out) and not is_complete(tmp_path)
    r = json.loads((out / "results.json").read_text())
    from loadbearing.results.check import read_result
    from loadbearing.results.stages import ProbeResults

    assert read_result(out / "results.json", ProbeResults) == r  # the typed result reads the file back unchanged
    assert r["schema_version"] == 2 and r["solver"]["name"] == "torch"
    assert r["data"]["group_key"] in ("question_key", "question_id")
    mb = r["metadata_baseline"]
    assert mb["features"] == ["strategy", "edit_position"] and mb["accuracy"]["rate"] is not None
    assert sum(mb["chosen_counts"].values()) == 4 and set(mb["chosen_counts"]) <= {"logistic", "lookup"}
    assert r["control_scheme"]["n_exchanged"] == 48 and r["control_scheme"]["fallback"] == "none"
    for pk in ("logistic", "mass_mean"):
        res = r["probes"][pk]
        layer2 = res["layers"][2]
        assert layer2["control"]["n_permutations"] == 20 and len(layer2["control"]["accuracy_per_permutation"]) == 20
        assert layer2["control_p_value"] == pytest.approx(1 / 21)  # the real signal beats every permutation
        g = layer2["gain_over_metadata"]
        assert g["value"] > 0 and g["lo"] is not None and g["n_questions"] == 48
        assert res["nested"]["gain_over_metadata"]["value"] is not None
        assert res["nested"]["control_p_value"] is not None
        assert len(res["within_cell"]["cells"]) == 6
        assert 0 < res["nested"]["gain_p_value"] <= 1 and r["headline"][pk]["gain_p_value"] is not None
        assert layer2["accuracy"]["method"] == "korn-graubard" and layer2["accuracy"]["n_questions"] == 48
    t = r["transfer"]["logistic"]
    assert [e["held_out"] for e in t["leave_one_strategy_out"]] == ["logical", "numerical", "text"]
    assert "in_distribution" in t["leave_one_strategy_out"][0]
    for style in ("text", "md"):
        s = format_summary(r, style=style)
        assert "metadata-only baseline (strategy, edit_position" in s and "gain over metadata" in s
    assert "| layer |" in format_summary(r, style="md")
    from probes import read_directions

    ds = read_directions(out)
    assert ds.layers == [0, 1, 2] and ds.bases[2].shape == (3, 16)
    with pytest.raises(ValueError):
        format_summary(r, style="html")


def test_sklearn_and_torch_solvers_agree_on_a_store(tmp_path):
    p = _study_store(tmp_path)
    rs = {}
    for s in ("sklearn", "torch"):
        out = train(ProbeConfig(store=str(p), output=str(tmp_path / s), folds=4, permutations=3, bootstrap=50,
                                cs=(0.01, 1.0, 100.0), quiet=True, transfer=False, directions=False, solver=s))
        rs[s] = json.loads((out / "results.json").read_text())
    for pk in ("logistic", "mass_mean"):
        for a, b in zip(rs["sklearn"]["probes"][pk]["layers"], rs["torch"]["probes"][pk]["layers"]):
            assert abs(a["accuracy"]["rate"] - b["accuracy"]["rate"]) <= 0.005, (pk, a["layer"])


def test_groups_use_question_key_when_present(tmp_path):
    """Two question ids with the same text (same question_key) must land in the same fold."""
    import pandas as pd

    from probes.data import load_probe_data

    class Store:
        path = "mem"
        positions = ["prefix_last"]
        layers = [0]
        n_rows = 8
        attrs = {}

        @property
        def rows(self):
            return pd.DataFrame({"condition": ["perturbed"] * 8, "label": lab(np.arange(8) % 2), "label3": [""] * 8,
                                 "question_id": [f"q{i}" for i in range(8)],
                                 "question_key": ["k0", "k0", "k1", "k1", "k2", "k2", "k3", "k3"],
                                 "strategy": ["s"] * 8, "edit_position": ["early"] * 8})

    data = load_probe_data(Store())
    assert data.group_key == "question_key"
    assert len(np.unique(data.groups("question"))) == 4


def test_second_writer_refused_and_no_lock_left(tmp_path, capsys):
    from loadbearing.locks import output_lock

    p = _study_store(tmp_path)
    out = tmp_path / "probes"
    with output_lock(out):
        rc = main([str(p), "--output-dir", str(out), "--quiet", "--permutations", "0", "--no-transfer"])
    err = capsys.readouterr().err.strip()
    assert rc == 2 and err.startswith("error: ") and "\n" not in err and not out.exists()
    assert main([str(p), "--output-dir", str(out), "--quiet", "--permutations", "2", "--no-transfer", "--folds", "3"]) == 0
    assert is_complete(out) and not list(tmp_path.glob("*.lock"))


def test_rows_without_question_key_fall_back_to_question_id():
    """The one rule (loadbearing.runs.question_key_of), per row: question_key, else question_id."""
    import pandas as pd

    from probes.data import load_probe_data

    class Store:
        path = "mem"
        positions = ["prefix_last"]
        layers = [0]
        n_rows = 8
        attrs = {}

        @property
        def rows(self):
            return pd.DataFrame({"condition": ["perturbed"] * 8, "label": lab(np.arange(8) % 2), "label3": [""] * 8,
                                 "question_id": [f"q{i}" for i in range(8)],
                                 "question_key": ["k0", "k0", "k1", "k1", None, None, "", ""],
                                 "strategy": ["s"] * 8, "edit_position": ["early"] * 8})

    data = load_probe_data(Store())
    assert list(data.questions) == ["k0", "k0", "k1", "k1", "q4", "q5", "q6", "q7"]
    assert data.group_key == "question_key, else question_id"
    assert len(np.unique(data.groups("question"))) == 6
