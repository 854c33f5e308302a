"""The gradient command on synthetic run directories (no model): per-cell table, clustered regression,
deviance partition in both orders, refusals, degenerate inputs, uptake, cross-model pairing, outputs."""
from __future__ import annotations

import dataclasses
import json

import pytest
from helpers.gradient_runs import make_run

from behavioural.gradient import GradientConfig, GradientError, format_summary, is_complete, main, run_gradient
from behavioural.gradient.uptake import uptake
from loadbearing.records import Continuation


@pytest.fixture()
def ladder(tmp_path):
    specs = [("s2_o3", 0.9, 0.15), ("s2_o5", 0.7, 0.35), ("s3_o5", 0.5, 0.6), ("s2_o9", 0.4, 0.8)]
    return [make_run(tmp_path, f"run-{lv}", level=lv, acc=a, p_c=p, n_q=16, seed=i)
            for i, (lv, a, p) in enumerate(specs)]


def test_ladder_table_regression_partition_and_files(ladder, tmp_path, capsys):
    out = tmp_path / "grad"
    rc = main([str(p) for p in ladder] + ["--output-dir", str(out)])
    assert rc == 0, capsys.readouterr().err
    s = json.loads((out / "gradient.json").read_text())
    from loadbearing.results.check import read_result
    from loadbearing.results.stages import GradientSummary

    assert read_result(out / "gradient.json", GradientSummary) == s  # the typed result reads the file back unchanged
    assert is_complete(out) and (out / "gradient.png").stat().st_size > 1000 and (out / "gradient.md").is_file()
    cells = {c["cell"]: c for c in s["cells"]}
    assert list(cells) == ["s2_o3", "s2_o5", "s3_o5", "s2_o9"]  # ladder order, not alphabetical
    c = cells["s2_o5"]
    # paper's definition: 16 baselines, round(0.7*16)=11 correct, the 5 wrong ones count (3 of them unparsed)
    assert (c["baseline_accuracy"]["k"], c["baseline_accuracy"]["n"]) == (11, 16)
    assert c["baseline_coverage"]["k"] == 16 - 2 - 0 or c["baseline_coverage"]["k"] < 16
    assert c["n_questions"] == 11 and c["n_generations"] == 11 * 2 * 3
    assert c["propagation"]["method"] == "korn-graubard" and c["propagation"]["n_questions"] == 11
    assert c["control_error"]["k"] == 0
    assert s["axis"] == "accuracy"
    reg = s["regression"]
    assert reg["status"] == "ok" and "difficulty" in reg["coefficients"] and reg["cluster"] == "question"
    assert reg["coefficients"]["difficulty"]["coef"] > 0  # harder -> more propagation
    dp = reg["deviance_partition"]
    for order in ("difficulty_first", "type_first"):
        shares = [dp[order][k]["share"] for k in ("difficulty", "type", "interaction")]
        assert abs(sum(shares) - 1) < 1e-6
    assert dp["difficulty_first"]["difficulty"]["share"] > dp["difficulty_first"]["type"]["share"]
    assert s["within_dataset"]["m1|arith"]["status"] == "ok"
    assert s["position"]["status"] == "ok" and set(s["position"]["rates"]) == {"early", "middle", "late"}
    assert s["cross_model"]["status"] == "skipped"
    fam = s["type_by_difficulty"]["family"]
    assert fam["missing"] == [] and set(fam["table"]["m1"]) == {"numerical", "text"}
    printed = capsys.readouterr().out
    assert "Per task or level" in printed and "difficulty first" in printed and "type first" in printed
    # difficulty is tested at the level where it varies: 4 cells, the Knapp-Hartung t against its bootstrap
    dt = s["difficulty_test"]["per_model"]["m1"]
    assert dt["status"] == "ok" and dt["n_cells"] == 4 and dt["df"] == 2 and dt["slope"] > 0 and 0 <= dt["p"] <= 1
    assert dt["n_boot"] == 999 and 0 <= dt["p_t"] <= 1
    assert "Difficulty test (one observation per cell)" in printed
    assert "parametric bootstrap under no slope (999 draws" in printed
    md = (out / "gradient.md").read_text()  # the row-level difficulty p is shown with its caveat beside it
    assert "caveat: difficulty varies only between cells" in md and "caveat:" in printed
    assert reg["edit_type_model"]["status"] == "ok" and "C(edit_type)[T.text]" in reg["edit_type_model"]["coefficients"]
    assert reg["deviance_partition_edit_type"]["type"] == "edit_type"
    assert c["perturbed_coverage"]["method"] == "korn-graubard"


def test_refuses_mixed_protocols_unless_allowed(tmp_path):
    a = make_run(tmp_path, "a", protocol="1.0")
    b = make_run(tmp_path, "b", protocol="1.1", level="s2_o5")
    with pytest.raises(GradientError, match="protocol_version differs.*--allow-mixed"):
        run_gradient(GradientConfig(runs=(str(a), str(b)), output=str(tmp_path / "g")))
    assert not (tmp_path / "g").exists()  # refused: no partial output
    s = run_gradient(GradientConfig(runs=(str(a), str(b)), allow_mixed=True, plot=False))
    assert s["allow_mixed_used"] and "protocol_version" in s["mixed"][0]


def test_cli_errors_are_one_line(tmp_path, capsys):
    assert main([str(tmp_path / "nope")]) == 2
    err = capsys.readouterr().err
    assert err.startswith("error: ") and err.count("\n") == 1
    a = make_run(tmp_path, "a")
    out = tmp_path / "o"
    out.mkdir()
    (out / "x").write_text("keep")
    assert main([str(a), "--output-dir", str(out)]) == 2
    assert "already exists" in capsys.readouterr().err and (out / "x").read_text() == "keep"
    assert main([str(a), str(a)]) == 2 and "twice" in capsys.readouterr().err


def test_degenerate_inputs_give_messages(tmp_path):
    one = make_run(tmp_path, "one", p_c=0.4)
    s = run_gradient(GradientConfig(runs=(str(one),), plot=False))
    assert any("one difficulty value" in n for n in s["regression"]["notes"])
    assert s["regression"]["deviance_partition"]["status"] == "skipped"
    assert "task(s)/level(s)" in s["within_dataset"]["m1|arith"]["message"]
    allc = make_run(tmp_path, "allc", p_c=1.0, level="s2_o5")
    s = run_gradient(GradientConfig(runs=(str(allc),), plot=False))
    assert s["regression"]["status"] == "skipped" and "every scored continuation is C" in s["regression"]["message"]
    # perfect separation: level 1 never propagates, level 2 always does
    lo = make_run(tmp_path, "lo", level="s2_o3", p_c=0.0, acc=0.9)
    hi = make_run(tmp_path, "hi", level="s3_o9", p_c=1.0, acc=0.4)
    s = run_gradient(GradientConfig(runs=(str(lo), str(hi)), output=str(tmp_path / "sep")))
    reg = s["regression"]
    assert reg["status"] in ("separation", "ok", "failed")
    if reg["status"] == "ok":
        assert any("separation" in p for p in reg["problems"])
    txt = format_summary(s)
    assert "Per task or level" in txt
    # no continuations at all (no eligible baselines)
    none = make_run(tmp_path, "none", acc=0.0, level="s3_o9")
    s = run_gradient(GradientConfig(runs=(str(none),), plot=False))
    assert s["status"] == "insufficient_data" and s["cells"][0]["propagation"]["rate"] is None
    format_summary(s, style="md")


def test_cross_model_pairs_on_shared_questions(tmp_path):
    texts = [f"shared question {i}" for i in range(12)]
    a = make_run(tmp_path, "a", model="big", texts=texts, p_c=0.1, acc=0.9, seed=1)
    b = make_run(tmp_path, "b", model="small", texts=texts, p_c=0.7, acc=0.6, seed=2)
    a2 = make_run(tmp_path, "a2", model="big", level="s3_o5", p_c=0.3, acc=0.6, seed=3)
    b2 = make_run(tmp_path, "b2", model="small", level="s3_o5", p_c=0.9, acc=0.3, seed=4)
    s = run_gradient(GradientConfig(runs=tuple(map(str, (a, b, a2, b2))), plot=False))
    cm = s["cross_model"]
    assert cm["status"] == "ok" and cm["n_shared_questions"] == round(0.6 * 12) + round(0.3 * 12)
    d = cm["pairs"]["big - small"]
    assert d["estimate"] < 0 and d["n_clusters"] == cm["n_shared_questions"]
    assert "model_x_difficulty" in cm


def test_memberships_count_one_generation(tmp_path):
    d = make_run(tmp_path, "m", strategies=("arithmetic",), positions=("middle",), p_c=0.5)
    rows = [json.loads(x) for x in (d / "continuations.jsonl").read_text().splitlines()]
    if "memberships" not in {f.name for f in dataclasses.fields(Continuation)}:
        pytest.skip("records do not carry memberships yet (issue #12)")
    for r in rows:
        r["memberships"] = [["arithmetic", "middle"], ["arithmetic", "late"]]
    (d / "continuations.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
    s = run_gradient(GradientConfig(runs=(str(d),), plot=False))
    c = s["cells"][0]
    n_pert = sum(r["condition"] == "perturbed" for r in rows)
    assert c["propagation"]["n"] == n_pert and c["n_generations"] == n_pert and c["n_shared_generations"] == n_pert
    # the generation fills middle and late: one position level, not the same outcome counted at two positions
    assert set(s["position"]["rates"]) == {"middle=late"} and s["position"]["rates"]["middle=late"]["n"] == n_pert


def test_taxonomy_from_labels(tmp_path):
    d = make_run(tmp_path, "lab", labels=True, p_c=0.4)
    s = run_gradient(GradientConfig(runs=(str(d),), plot=False))
    tx = s["taxonomy"]
    assert tx["status"] == "ok"
    tot = sum(v["count"] for g in tx["dataset"].values() for v in g.values())
    assert tot == tx["n"]


@pytest.mark.parametrize("orig,edit,cont,want", [
    ("4 + 3 = 7", "4 + 3 = 9", "9 + 2 = 11\nAnswer: 11", True),
    ("4 + 3 = 7", "4 + 3 = 9", "7 + 2 = 9\nAnswer: 9", True),   # 9 reappears in reasoning
    ("4 + 3 = 7", "4 + 3 = 9", "7 + 2 = 11\nAnswer: 9", False),  # only the answer line has it
    ("We pick (A).", "This rules out option (A); choose option (C).", "So (C) it is.\nAnswer: (C)", True),
    ("b = 2", "The following claim is false: b = 2", "c = 3\nAnswer: 7", False),
    ("b = 2 and c = 3", "c = 3 and b = 2", "done", None),
])
def test_uptake_rule(orig, edit, cont, want):
    got, why = uptake(orig, edit, cont)
    assert got is want, why
