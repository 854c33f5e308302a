"""The paper-rows importer on hand-written fixtures in the paper's two schemas (the 50-row samples and the
Hugging Face release); no network: the hub path is never touched here."""
from __future__ import annotations

import json
from pathlib import Path

import pytest

from behavioural.gradient import GradientConfig, run_gradient
from behavioural.paper_import import PaperImportError, import_rows, main, parse_accuracy, table4
from loadbearing.runs import Run

FIX = Path(__file__).parent / "fixtures"
SAMPLE = FIX / "paper_rows_sample.json"
RELEASE = FIX / "paper_rows_release.json"


def test_sample_schema_round_trip(tmp_path, data_dir):
    out = tmp_path / "paper"
    res = import_rows(str(SAMPLE), out, model="gemma-2-9b-it", data_dir=str(data_dir),
                      baseline_accuracy="gsm8k=86.5,bbh=0.579")
    assert res["rows"] == 8 and res["questions"] == 6
    assert res["labels"] == {"A": 2, "B": 3, "C": 3, None: 0}  # mmlu_41 has a rule label only: B
    run = Run(out)
    assert run.manifest["kind"] == "paper_import" and run.manifest["baselines_eligible_only"]
    conts = {c.id: c for c in run.continuations("perturbed")}
    c = conts["gsm8k_12|arithmetic_change|early|perturbed"]
    assert c.label == "C" and c.correct is False and c.input_text[c.edit_span[0]:c.edit_span[1]] == c.edited_line
    assert conts["bbh_3|reversed_logic|middle|perturbed"].task == "boolean_expressions"  # derived task map
    assert conts["bbh_260|false_analogy|late|perturbed"].task == "causal_judgement"
    assert conts["mmlu_40|wrong_elimination|middle|perturbed"].task == "high_school_biology"
    name, labels = run.labels()
    assert name == "paper" and labels["gsm8k_11|operation_swap|late|perturbed"] == "B"
    _, rule = run.labels("paper-rule")
    assert rule["gsm8k_11|operation_swap|late|perturbed"] == "A"  # rule and judge disagree here
    assert labels["mmlu_41|confidence_injection|early|perturbed"] == "B"  # no judge: rule label
    b = run.questions()["gsm8k_11"]
    assert b.eligible and b.correct and len(b.lines) == 4 and b.trace.endswith("Answer: 7")


def test_release_schema_jsonl_two_models(tmp_path, capsys):
    rows = json.loads(RELEASE.read_text())
    src = tmp_path / "rows.jsonl"
    src.write_text("".join(json.dumps(r) + "\n" for r in rows))
    with pytest.raises(PaperImportError, match="2 models.*--model"):
        import_rows(str(src), tmp_path / "x")
    assert not (tmp_path / "x").exists()
    assert main([str(src), "--output", str(tmp_path / "llama"), "--model", "llama-3.1-8b-instruct"]) == 0
    printed = capsys.readouterr().out
    assert "Table 4" in printed and "Error Propagation" in printed and "Source" in printed
    assert Run(tmp_path / "llama").manifest["model"]["name"] == "llama-3.1-8b-instruct"
    assert main([str(src), "--output", str(tmp_path / "gemma"), "--model", "gemma-2-9b-it"]) == 0
    s = run_gradient(GradientConfig(runs=(str(tmp_path / "gemma"), str(tmp_path / "llama")), plot=False))
    cells = {(c["model"], c["cell"]) for c in s["cells"]}
    assert ("gemma-2-9b-it", "gsm8k") in cells
    assert s["axis"] == "level"  # no baseline accuracy in the release: the paper's dataset ordinal
    assert s["cross_model"]["status"] == "ok"
    assert s["cross_model"]["pairs"]["gemma-2-9b-it - llama-3.1-8b-instruct"]["estimate"] == 0
    assert s["taxonomy"]["status"] == "ok" and s["taxonomy"]["n"] == 16
    assert any("only eligible baselines" in n for n in s["notes"])


def test_table4_counts(tmp_path):
    import_rows(str(SAMPLE), tmp_path / "p", model="m")
    t = table4(tmp_path / "p")
    line = next(ln for ln in t.splitlines() if ln.startswith("Source") and "gsm8k" in ln and "Error" in ln)
    assert " 1 " in f" {line.split()[-2]} " and line.split()[-1] == "33.3%"


def test_published_accuracy_feeds_the_gradient(tmp_path):
    import_rows(str(SAMPLE), tmp_path / "p", model="m", baseline_accuracy="gsm8k=0.865")
    s = run_gradient(GradientConfig(runs=(str(tmp_path / "p"),), plot=False))
    gsm = next(c for c in s["cells"] if c["cell"] == "gsm8k")
    assert gsm["baseline_accuracy"]["rate"] == pytest.approx(0.865) and gsm["baseline_accuracy"]["method"] == "published"


def test_mixing_with_protocol_runs_is_refused(tmp_path):
    from test_gradient import make_run

    import_rows(str(SAMPLE), tmp_path / "p", model="m")
    ours = make_run(tmp_path, "ours")
    from behavioural.gradient import GradientError

    with pytest.raises(GradientError, match="not comparable"):
        run_gradient(GradientConfig(runs=(str(tmp_path / "p"), str(ours)), plot=False))


@pytest.mark.parametrize("rows,msg", [
    ([{"id": "x"}], "missing source"),
    (["not an object"], "not an object"),
])
def test_bad_rows(tmp_path, rows, msg):
    src = tmp_path / "bad.json"
    src.write_text(json.dumps(rows))
    with pytest.raises(PaperImportError, match=msg):
        import_rows(str(src), tmp_path / "o", model="m")
    assert not (tmp_path / "o").exists()


def test_cli_errors(tmp_path, capsys):
    assert main([str(tmp_path / "missing.json"), "--output", str(tmp_path / "o")]) == 2
    assert "not found" in capsys.readouterr().err
    (tmp_path / "o").mkdir()
    assert main([str(SAMPLE), "--output", str(tmp_path / "o"), "--model", "m"]) == 2
    assert "already exists" in capsys.readouterr().err
    with pytest.raises(PaperImportError):
        parse_accuracy("gsm8k")
    assert parse_accuracy("bbh=57.9")["bbh"]["rate"] == pytest.approx(0.579)


def test_annotation_sheet_is_scored_shaped_and_left_for_the_labeller(tmp_path, capsys):
    """The paper's annotation-sheet CSV (hand-written rows in its schema): scored by this toolkit's scorer,
    the edit's shape as strategy, no labels until behavioural.labels.stage runs; the rule labeller then labels."""
    from behavioural.labels import stage as label

    out = tmp_path / "sheet"
    assert main([str(FIX / "paper_annotation_sheet.csv"), "--model", "paper-8-9b", "--output", str(out)]) == 0
    printed = capsys.readouterr().out
    assert "imported 5 continuations of 5 questions" in printed and "python -m behavioural.label" in printed
    run = Run(out)
    conts = {c.id: c for c in run.continuations("perturbed")}
    assert [conts[f"annotation-{i}"].correct for i in range(7, 12)] == [True, True, True, False, None]
    assert conts["annotation-9"].gold == "B"  # MMLU gold is the letter; the answer was given as option text
    assert {i: conts[f"annotation-{i}"].strategy for i in (7, 8, 9, 10)} == {
        7: "paper:arithmetic", 8: "paper:arithmetic", 9: "paper:replaced", 10: "paper:appended"}
    assert not (out / "labels").exists()
    assert label.main([str(out), "--labeller", "rule", "--no-progress"]) == 0
    _, labels = run.labels("rule")
    assert labels["annotation-7"] == "B"  # "Wait, 4 * 6 = 24, not 30."
    assert labels["annotation-8"] == "A" and labels["annotation-10"] == "C" and labels["annotation-11"] is None


def test_annotation_sheet_errors(tmp_path):
    bad = tmp_path / "bad.csv"
    bad.write_text('"id","text"\n"1","x"\n', encoding="utf-8")
    with pytest.raises(PaperImportError, match="annotation_id"):
        import_rows(str(bad), tmp_path / "o1", model="m")
    with pytest.raises(PaperImportError, match="--model"):
        import_rows(str(FIX / "paper_annotation_sheet.csv"), tmp_path / "o2")
    assert not (tmp_path / "o1").exists() and not (tmp_path / "o2").exists()
