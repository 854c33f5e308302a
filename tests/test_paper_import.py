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
    assert main([str(src), "--output-dir", str(tmp_path / "llama"), "--model", "llama-3.1-8b-instruct"]) == 0
    printed = capsys.readouterr().out
    assert "Table 4" in printed and "Error Propagation" in printed and "Source" in printed
    assert Run(tmp_path / "llama").manifest["model"]["name"] == "llama-3.1-8b-instruct"
    assert main([str(src), "--output-dir", str(tmp_path / "gemma"), "--model", "gemma-2-9b-it"]) == 0
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
    line = next(ln for ln in t.splitlines() if ln.startswith("Source") and "GSM8K" in ln and "Error" in ln)
    assert " 1 " in f" {line.split()[-2]} " and line.split()[-1] == "33.3%"


def test_published_accuracy_feeds_the_gradient(tmp_path):
    import_rows(str(SAMPLE), tmp_path / "p", model="m", baseline_accuracy="gsm8k=0.865")
    s = run_gradient(GradientConfig(runs=(str(tmp_path / "p"),), plot=False))
    gsm = next(c for c in s["cells"] if c["cell"] == "gsm8k")
    assert gsm["baseline_accuracy"]["rate"] == pytest.approx(0.865) and gsm["baseline_accuracy"]["method"] == "published"


def test_mixing_with_protocol_runs_is_refused(tmp_path):
    from helpers.gradient_runs import make_run

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
    assert main([str(tmp_path / "missing.json"), "--output-dir", str(tmp_path / "o")]) == 2
    assert "not found" in capsys.readouterr().err
    (tmp_path / "o").mkdir()
    assert main([str(SAMPLE), "--output-dir", str(tmp_path / "o"), "--model", "m"]) == 2
    assert "already exists" in capsys.readouterr().err
    with pytest.raises(PaperImportError):
        parse_accuracy("gsm8k")
    assert parse_accuracy("bbh=57.9")["bbh"]["rate"] == pytest.approx(0.579)


def test_annotation_sheet_is_scored_shaped_and_left_for_the_labeller(tmp_path, capsys):
    """The paper's annotation-sheet CSV (hand-written rows in its schema): scored by this toolkit's scorer,
    the edit's shape as strategy, no labels until behavioural.labels.stage runs; the rule labeller then labels."""
    from behavioural.labels import stage as label

    out = tmp_path / "sheet"
    assert main([str(FIX / "paper_annotation_sheet.csv"), "--model", "paper-8-9b", "--output-dir", str(out)]) == 0
    printed = capsys.readouterr().out
    assert "imported 5 continuations of 5 questions" in printed and "python -m behavioural.label" in printed
    run = Run(out)
    conts = {c.id: c for c in run.continuations("perturbed")}
    assert [conts[f"annotation-{i}"].correct for i in range(7, 12)] == [True, True, True, False, None]
    assert conts["annotation-9"].gold == "B"  # MMLU gold is the letter; the answer was given as option text
    assert {i: conts[f"annotation-{i}"].strategy for i in (7, 8, 9, 10)} == {
        7: "paper:arithmetic", 8: "paper:arithmetic", 9: "paper:replaced", 10: "paper:appended"}
    assert not (out / "labels").exists()
    assert label.main([str(out), "--labeller", "rule", "--quiet"]) == 0
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


def _local_release(root: Path, copies: int = 5) -> Path:
    """A local copy of the release laid out as the dataset repository (data/continuations/*.jsonl and
    data/aggregates/behavioral_taxonomy.csv), its rows in the release schema: the fixture's gemma rows, each
    question repeated ``copies`` times under new ids and texts."""
    rows = [r for r in json.loads(RELEASE.read_text()) if r["model"] == "gemma-2-9b-it"]
    out = [dict(r, id=f"{r['id']}v{c}", question=f"{r['question']} (variant {c})") for c in range(copies) for r in rows]
    (root / "data" / "continuations").mkdir(parents=True)
    half = len(out) // 2  # two row files, read in name order
    for name, part in (("a.jsonl", out[:half]), ("b.jsonl", out[half:])):
        (root / "data" / "continuations" / name).write_text("".join(json.dumps(r) + "\n" for r in part))
    (root / "data" / "aggregates").mkdir()
    (root / "data" / "aggregates" / "behavioral_taxonomy.csv").write_text(
        "Category,Setting,Behavior,Count,Percentage\nPosition,early (25%),Silent Bypass,2620,37.2%\n")
    return root


def test_local_release_copy_gives_table4_then_activations_probes_and_gradient(tmp_path, tiny_lm):
    """The released rows through the toolkit: a local copy of the release -> paper_import (Table 4 in the paper's
    layout) -> activations (a tiny model stands in for Gemma) -> probes --paper-table -> the gradient."""
    import csv

    from activations.cache import CacheConfig, cache_activations
    from behavioural.paper_import import TABLE4_COLUMNS
    from probes.train import ProbeConfig, train

    rel = _local_release(tmp_path / "release")
    rows = [json.loads(x) for f in sorted((rel / "data" / "continuations").glob("*.jsonl"))
            for x in f.read_text().splitlines()]
    run = tmp_path / "paper-gemma"
    res = import_rows(str(rel), run, model="gemma-2-9b-it")
    assert res["rows"] == len(rows) == 40 and res["questions"] == 30
    with open(rel / "data" / "aggregates" / "behavioral_taxonomy.csv", newline="") as f:
        released_header = next(csv.reader(f))
    with open(run / "table4.csv", newline="") as f:
        table = list(csv.reader(f))
    assert table[0] == released_header == list(TABLE4_COLUMNS)
    cells = {(r[0], r[1], r[2]): (int(r[3]), r[4]) for r in table[1:]}
    gsm = [r for r in rows if r["source"] == "gsm8k"]
    k = sum(r["final_label"] == "error_propagation" for r in gsm)
    assert cells[("Source", "GSM8K", "Error Propagation")] == (k, f"{100 * k / len(gsm):.1f}%")
    mid = [r for r in rows if r["perturbation_point"] == "middle"]
    k = sum(r["final_label"] == "self_correction" for r in mid)
    assert cells[("Position", "middle (50%)", "Self-Correction")] == (k, f"{100 * k / len(mid):.1f}%")
    assert [r[1] for r in table[1:] if r[0] == "Source"][::3] == ["GSM8K", "MMLU", "BBH"]  # the paper's order
    assert sum(n for (cat, _, _), (n, _) in cells.items() if cat == "Strategy") == len(rows)

    store = cache_activations(CacheConfig(run_dir=run, layers="all", labels="paper", conditions="perturbed",
                                          progress=False), lm=tiny_lm)
    train(ProbeConfig(store=str(store), output=str(run / "probes"), folds=2, probe="logistic", paper_table=True,
                      permutations=5, bootstrap=50, transfer=False, quiet=True))
    with open(run / "probes" / "paper_table.csv", newline="") as f:
        probe_rows = list(csv.DictReader(f))
    assert {r["task"] for r in probe_rows} == {"3-class (A/B/C)", "Binary bypass", "Binary faithful"}
    assert all(int(r["n"]) == len(rows) for r in probe_rows)  # every released row has a label and an input

    s = run_gradient(GradientConfig(runs=(str(run),), output=str(tmp_path / "gradient"), plot=False))
    assert s["taxonomy"]["status"] == "ok" and s["taxonomy"]["n"] == len(rows)
    assert s["taxonomy"]["dataset"]["gsm8k"]["C"]["count"] == cells[("Source", "GSM8K", "Error Propagation")][0]


def test_local_release_directory_without_rows_is_refused(tmp_path):
    (tmp_path / "empty").mkdir()
    with pytest.raises(PaperImportError, match="without data/continuations"):
        import_rows(str(tmp_path / "empty"), tmp_path / "o", model="m")
    assert not (tmp_path / "o").exists()
