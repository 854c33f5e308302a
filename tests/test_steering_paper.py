"""The paper's steering design (``steering.sweep --design paper``) and the Table 7 layout, on the planted tiny
model of tests/test_steering.py (identity blocks; the residual direction e_63 turns its answer 3 into 7)."""
from __future__ import annotations

import csv
import json

import numpy as np
import pytest
from helpers.steering import PLANT, make_steering_run, planted_lm, unit

from steering.paper.design import DESIGN_FILE, load_design, paper_layer

pytestmark = pytest.mark.usefixtures("one_thread")


def _paper_dirs(path, layer=2, paper_bases=True, resid_norm=2.0):
    """directions.h5 as the probes write it: the toolkit's basis, and the paper's m2 / probe_pc with e_63 first."""
    from probes.directions import write_directions

    rows = lambda first, rest: np.stack([unit(first)] + [unit(i) for i in rest])  # noqa: E731
    r = {"logistic": unit(PLANT), "mass_mean": unit(PLANT), "basis": rows(PLANT, range(40, 47)),
         "names": [f"b{i}" for i in range(8)], "resid_norm": resid_norm}
    if paper_bases:
        r.update(basis_m2=rows(PLANT, range(40, 47)), names_m2=["mean_diff"] + [f"within_c_pc{i}" for i in range(1, 8)],
                 basis_probe_pc=rows(PLANT, range(50, 57)), names_probe_pc=["probe"] + [f"pc{i}" for i in range(1, 8)])
    path.mkdir(parents=True, exist_ok=True)
    write_directions(path / "directions.h5", {layer: r}, target="propagation", position="prefix_last",
                     store={"path": "/nowhere/activations.h5"}, n_directions=8)
    return path


def test_the_preset_is_the_papers_design():
    d = load_design()
    assert d.alphas == (-10.0, -5.0, -2.0, -1.0, -0.5, 0.0, 0.5, 1.0, 2.0, 5.0, 10.0)  # multi_direction.py ALPHAS
    assert d.ks == (2, 4, 8) and d.bases == ("m2", "probe_pc") and d.dose == "sum" and d.alpha_units == "raw"
    assert (d.decoder_block, d.n_decoder_blocks) == (21, 42) and 0.0 not in d.steered_alphas
    assert paper_layer(42, d) == 22  # model.model.layers[21]'s output is hidden_states[22]
    assert paper_layer(30, d) == 16 and paper_layer(2, d) == 2
    assert any("raw alphas" in n for n in d.notes)


def test_paper_design_sweep_and_table7_from_its_generations(tokenizer, tmp_path):
    from steering.paper.design import run_paper_design
    from steering.paper.table7 import COLUMNS, PAPER_COLUMNS
    from steering.sweep.cli import SweepConfig

    lm = planted_lm(tokenizer)
    run = make_steering_run(tmp_path, tokenizer, n_c=3, n_non=3)
    dirs = _paper_dirs(tmp_path / "probes")
    out = tmp_path / "paper"
    cfg = SweepConfig(run_dir=str(run), directions=str(dirs), output=str(out), progress=False, max_new_tokens=6,
                      random_seeds=1, batch_size=64)
    msgs: list[str] = []
    s = run_paper_design(cfg, lm=lm, echo=msgs.append)
    assert s["status"] == "ok" and " raw (" in s["verdict"] and ("L2 m2 k=" in s["verdict"] or "L2 probe_pc k=" in s["verdict"])
    config = json.loads((out / "config.json").read_text())
    assert config["layers"] == [2] and config["dose"] == "sum" and config["config"]["alpha_units"] == "raw"
    assert config["ks"] == [2, 4, 8] and 0.0 not in config["alphas"] and len(config["alphas"]) == 10
    assert config["n_c_cases"] == 3 and config["n_non_c_cases"] == 3  # the paper's mix of outcomes
    keys = {st["key"] for st in config["settings"]}
    assert {"L2|k2|raw10|m2", "L2|k8|raw-0.5|probe_pc", "L2|k4|raw5|random0", "none|alpha0"} <= keys
    assert not any(k.endswith("|probe") for k in keys)  # the toolkit's own basis is not steered
    by_key = {st["key"]: st for st in config["settings"]}
    assert by_key["L2|k2|raw10|m2"]["alpha"] == 10.0 and by_key["L2|k2|raw10|m2"]["alpha_rel"] == pytest.approx(5.0)
    design = json.loads((out / DESIGN_FILE).read_text())
    assert design["layer"] == 2 and design["n_decoder_blocks"] == 2 and "relative depth 0.5" in design["layer_rule"]
    assert design["resid_norm"] == {"2": 2.0} and design["alpha_over_norm"]["2"]["10"] == pytest.approx(5.0)
    assert design["adapted"] and "[design]" in design["preset_text"]

    recs = [json.loads(x) for x in (out / "generations.jsonl").read_text().splitlines()]
    assert len(recs) == 6 * (1 + 2 * 3 * 10 + 3 * 10)  # rerun + 2 bases x 3 k x 10 alphas + random per k x alpha
    assert {r["directions"] for r in recs if r["basis"] == "probe"} == {"m2", "probe_pc"}
    with open(out / "table7.csv") as f:
        table = list(csv.DictReader(f))
    assert tuple(table[0]) == COLUMNS and COLUMNS[:6] == PAPER_COLUMNS
    assert PAPER_COLUMNS == ("Direction", "Alpha", "Error_Rate", "N", "Correct", "Avg_Response_Length")
    assert len(table) == 9 * 11  # (M2, probe, random) x 3 k, 11 alphas each
    assert [r["Alpha"] for r in table[:11]] == ["-10.0", "-5.0", "-2.0", "-1.0", "-0.5", "0.0", "0.5", "1.0", "2.0",
                                                 "5.0", "10.0"]
    assert [r["Direction"] for r in table[::11]] == ["M2 k=2", "M2 k=4", "M2 k=8", "probe k=2", "probe k=4",
                                                     "probe k=8", "random k=2", "random k=4", "random k=8"]

    # one cell by hand from generations.jsonl: M2, k = 2, alpha = +10
    cell = [r for r in recs if r["setting"] == "L2|k2|raw10|m2"]
    row = next(r for r in table if r["Direction"] == "M2 k=2" and r["Alpha"] == "10.0")
    correct = sum(r["correct"] is True for r in cell)
    assert int(row["N"]) == len(cell) == 6 and int(row["Correct"]) == correct
    assert row["Error_Rate"] == f"{1 - correct / len(cell):.3f}"
    assert row["Avg_Response_Length"] == f"{np.mean([len(r['text'].strip()) for r in cell]):.0f}"
    assert int(row["N_C"]) == 3 and int(row["N_Questions"]) == 6 and row["Basis"] == "M2" and row["K"] == "2"
    assert float(row["Alpha_Rel"]) == pytest.approx(5.0) and float(row["Resid_Norm"]) == pytest.approx(2.0)
    assert float(row["Error_Rate_Lo"]) <= float(row["Error_Rate"]) <= float(row["Error_Rate_Hi"])
    # the planted direction leads both paper bases: +1 along it turns the C cases' 3 into their gold 7 (+10
    # outweighs the model's own transitions and breaks the answer line), -1 leaves them wrong ...
    for key, moved in (("L2|k2|raw1|m2", True), ("L2|k4|raw2|probe_pc", True), ("L2|k2|raw-1|m2", False)):
        assert [r["correct"] for r in recs if r["setting"] == key and r["case_label"] == "C"] == [moved] * 3, key
    # ... and the alpha-0 row of every direction is the unsteered rerun, which reproduces the C cases
    base = [r for r in recs if r["setting"] == "none|alpha0"]
    zero = [r for r in table if r["Alpha"] == "0.0"]
    assert len(zero) == 9 and {r["N"] for r in zero} == {str(len(base))}
    assert {r["Correct"] for r in zero} == {str(sum(r["correct"] is True for r in base))} == {"3"}
    # random rows pool every random generation of the cases at that k and alpha
    rnd = next(r for r in table if r["Direction"] == "random k=8" and r["Alpha"] == "-5.0")
    assert int(rnd["N"]) == len([r for r in recs if r["setting"] == "L2|k8|raw-5|random0"]) == 6
    md = (out / "table7.md").read_text()
    assert "Table 7" in md and "layer 2: mean residual norm 2.00" in md and "5.000 x the norm" in md
    assert "adapted: raw alphas" in md and any("table7.csv" in m for m in msgs)


def test_design_refuses_fixed_options_and_old_directions_before_loading(tokenizer, tmp_path, capsys, monkeypatch):
    import loadbearing.engine.models as models
    from steering.sweep.cli import main

    def boom(*a, **k):
        raise AssertionError("the model must not be loaded for a bad input")

    monkeypatch.setattr(models, "load_model", boom)
    run = make_steering_run(tmp_path, tokenizer, n_c=2, n_non=0)
    new, old = _paper_dirs(tmp_path / "new"), _paper_dirs(tmp_path / "old", paper_bases=False)
    out = tmp_path / "out"
    cases = [([str(run), "--directions", str(new), "--design", "paper", "--k", "2"], "fixes --k"),
             ([str(run), "--directions", str(new), "--design", "paper", "--alphas", "1"], "fixes --alphas"),
             ([str(run), "--directions", str(old), "--design", "paper"], "holds no m2 or probe_pc basis"),
             ([str(run), "--directions", str(new), "--design", "paper", "--layers", "1"], "no directions for layer 1"),
             ([str(run), "--directions", str(new), "--design", "paper", "--layers", "1,2"], "steers one layer")]
    for argv, needle in cases:
        assert main(argv + ["--output-dir", str(out), "--quiet"]) == 2
        err = capsys.readouterr().err.strip()
        assert err.startswith("error: ") and needle in err and "\n" not in err, err
        assert not out.exists()
