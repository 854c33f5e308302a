"""The diagnosticity table's rows for patching, probes, steering and ablation (study.validate.rows), a stage's
refusal as the measure's note, and the shipped table that every study report shows (study.validate.shipped)."""
from __future__ import annotations

import json
from pathlib import Path

import pytest


def _write(d: Path, rel: str, obj: dict) -> None:
    p = d / rel
    p.parent.mkdir(parents=True, exist_ok=True)
    p.write_text(json.dumps(obj))


def _patching_case(q: str, edit_by_layer: dict[int, float]) -> dict:
    res = [{"kind": "sweep", "layer": lay, "group": "edit", "restored": v} for lay, v in edit_by_layer.items()]
    res += [{"kind": "sweep", "layer": 1, "group": "last", "restored": 0.9}]  # another group: not the edit row
    return {"question_key": q, "results": res}


def _organism(d: Path, *, edit: float, gain: float, moved: float) -> Path:
    # layers 0 (embeddings: 1.0 by construction) .. 3 (last): only 1 and 2 count
    _write(d, "patching/patching.json", {"cases": [_patching_case(f"q{i}", {0: 1.0, 1: edit, 2: edit / 2, 3: 0.0})
                                                   for i in range(4)]})
    _write(d, "probes/results.json", {"headline": {"logistic": {
        "accuracy": {"rate": 0.8}, "gain_p_value": 0.04,
        "gain_over_metadata": {"value": gain, "lo": gain - 0.05, "hi": gain + 0.05, "n_questions": 30}}}})
    sets = [{"key": f"L1|k1|a1|{op}", "operator": op, "difference": {"estimate": moved, "ci": [moved - 0.1, moved + 0.1],
                                                                      "n_questions": 12}} for op in ("add", "ablate")]
    _write(d, "steering/summary.json", {"verdicts": {op: {"strongest": f"L1|k1|a1|{op}", "verdict_code": "null"}
                                                     for op in ("add", "ablate")}, "settings": sets})
    return d


def test_extra_rows_read_each_stage_without_choosing_a_layer_on_the_data(tmp_path):
    from study.validate.rows import ablation, patching, probes, steering

    d = _organism(tmp_path / "lb", edit=0.8, gain=0.1, moved=0.2)
    m = patching(d)
    # per case the best group, each averaged over layers 1 and 2: edit (0.8 + 0.4) / 2 = 0.6 against last 0.9
    assert m.estimate == pytest.approx(0.9)
    d2 = _organism(tmp_path / "lb2", edit=1.6, gain=0.1, moved=0.2)
    assert patching(d2).estimate == pytest.approx(1.2)  # the edit group now restores more than the last token
    assert m.n_questions == 4 and set(m.per_question) == {"q0", "q1", "q2", "q3"} and "[1, 2]" in m.note
    pr = probes(d)
    assert pr.estimate == 0.1 and pr.ci == (pytest.approx(0.05), pytest.approx(0.15)) and pr.n_questions == 30
    assert "gain p = 0.04" in pr.note and not pr.per_question  # one value per organism: no AUROC
    assert steering(d).estimate == 0.2 and ablation(d).note.startswith("ablate L1|k1|a1|ablate")
    empty = tmp_path / "none"
    empty.mkdir()
    assert all(f(empty).estimate is None for f in (patching, probes, steering, ablation))


def test_the_table_carries_every_test_and_names_a_refused_stage(tmp_path, monkeypatch):
    from study.validate import table as tab
    from study.validate.table import diagnosticity, render

    monkeypatch.setattr(tab, "MEASURES", {})  # the per-question rates need whole runs: tests/test_organisms.py

    dirs = {"load-bearing": _organism(tmp_path / "lb", edit=0.8, gain=0.1, moved=0.3),
            "decorative": _organism(tmp_path / "dec", edit=0.1, gain=0.0, moved=0.0)}
    (tmp_path / "dec" / "probes" / "results.json").unlink()
    why = "class 'C' occurs in only 3 question(s) (3 rows), fewer than --folds 5"
    t = diagnosticity(dirs, {"decorative": {"probes": why}})
    assert set(t["tests"]) == {"patching", "probes", "steering", "ablation"}
    assert t["tests"]["patching"]["auroc"] == 0.5 and t["tests"]["patching"]["ordered"] is False  # 0.9 both
    assert t["tests"]["probes"]["measures"]["decorative"]["note"] == f"refused: {why}"
    assert t["tests"]["steering"]["auroc"] is None and t["tests"]["steering"]["separates"] is False
    md = render(t, command="python -m study.validate --output-dir X")
    assert f"The probes stage refused on the decorative organism: {why}" in md
    assert "| activation patching (restored fraction, best position group) | 0.90" in md


def test_the_shipped_table_is_a_report_section(tmp_path, monkeypatch):
    from loadbearing.report.blocks import blocks_markdown
    from study.validate import shipped
    from study.validate import table as tab
    from study.validate.table import diagnosticity

    monkeypatch.setattr(tab, "MEASURES", {})
    dirs = {"load-bearing": _organism(tmp_path / "lb", edit=0.8, gain=0.1, moved=0.3),
            "decorative": _organism(tmp_path / "dec", edit=0.1, gain=0.0, moved=0.0)}
    path = tmp_path / "diagnosticity.json"
    assert shipped.report_blocks(path=path) is None  # nothing shipped: no section
    obj = shipped.publish(diagnosticity(dirs), command="python -m study.validate --output-dir X --publish",
                          weights={"load-bearing": "abc", "decorative": "def"}, path=path)
    assert json.loads(path.read_text()) == obj and "per_question" not in path.read_text()
    md = blocks_markdown(shipped.report_blocks(path=path))
    assert "Not a measurement of this run's model" in md and "python -m study.validate --output-dir X --publish" in md
    assert "activation patching (restored fraction, best position group)" in md and "separates" in md
    monkeypatch.setattr(shipped, "SHIPPED", path)
    from study.report.sections import SECTIONS

    sec = next(s for s in SECTIONS if s.name == "planted_truth")
    assert sec.blocks(tmp_path) is not None  # the report reads the shipped file by default
