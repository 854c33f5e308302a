"""The study report: the verdict box (study.report.verdicts), the markdown edits, the optional sections, report.html.

    flock /tmp/cpu.lock .venv/bin/python -m pytest -q -p no:cacheprovider tests/test_report.py

Each verdict line for each outcome and for a missing stage, from hand-made stage files; the report's edits on its
objects (fold, footnote, empty column, headings); the section registry; the counting table on a hand-made run; a
whole report of a partial study, twice (deterministic); the figure writer. A real small study's report in headless
Chromium (the verdict lines on the first screen, ``-m integration``): tests/test_report_first_screen.py.
"""
from __future__ import annotations

import json
from pathlib import Path

import pytest

from loadbearing.report.blocks import (
    Code,
    Heading,
    Paragraph,
    Row,
    Section,
    Table,
    block_markdown,
    blocks_markdown,
    fold_long_tables,
    render_markdown,
    table,
)
from loadbearing.report.html import blocks_html
from study.report.html import render_report_html
from study.report.verdicts import probe_verdict, propagation_verdict, read_verdicts, steering_verdict


def _rate(k, n, lo=None, hi=None, nq=30):
    return {"k": k, "n": n, "rate": k / n if n else None, "lo": lo, "hi": hi, "method": "cluster-bootstrap",
            "n_questions": nq, "n_generations": None}


def _behaviour(k=30, n=40, diff=(0.6, 0.9), ctrl_k=1):
    return {"questions": 20, "eligible": 10, "eligible_questions": 30, "baseline_accuracy": _rate(10, 20, 0.3, 0.7),
            "continuations": 4, "not_applicable": 0, "ineligible_reasons": {"eligible": 10, "wrong": 10},
            "overall": {"propagation": _rate(k, n, 0.6, 0.85), "control_error": _rate(ctrl_k, 20, 0.0, 0.2),
                        "paired_difference": {"estimate": 0.7, "ci": list(diff), "n_clusters": 30, "n_pairs": 40}}}


# ------------------------------------------------------------------------------------------ (a) propagation
def test_propagation_yes_not_shown_too_little_and_not_run():
    v = propagation_verdict(_behaviour(), "runs/s")
    assert v.answer == "yes" and v.n_questions == 30
    line = v.line("md")
    assert "75.0% [60.0, 85.0] (30/40; 30 q)" in line and "+70.0 pp [+60.0, +90.0]" in line
    assert "30 questions" in line and "`python -m behavioural.summary runs/s`" in line and "\n" not in line
    assert propagation_verdict(_behaviour(diff=(-0.1, 0.3))).answer == "not shown"
    assert propagation_verdict(_behaviour(diff=(-0.4, -0.1))).answer == "no"
    few = propagation_verdict(_behaviour(k=0, n=0))
    assert few.answer == "too little data" and "no parseable perturbed continuation" in few.detail
    assert "eligible 10 of 20" in few.detail
    none = propagation_verdict(None, "runs/s")
    assert none.answer == "not run" and "behavioural stage has not finished" in none.detail and not none.answered


# ------------------------------------------------------------------------------------------ (b) probes
def _probes(gains: dict[str, tuple[float, float, float]]):
    return {"data": {"n_rows": 40, "n_questions": 30, "notes": []}, "settings": {"folds": 5},
            "metadata_baseline": {"accuracy": _rate(30, 40, 0.6, 0.85)},
            "headline": {k: {"accuracy": _rate(32, 40, 0.65, 0.9), "control_p_value": 0.0099,
                             "gain_over_metadata": {"value": v, "lo": lo, "hi": hi, "n_rows": 40, "n_questions": 30}}
                         for k, (v, lo, hi) in gains.items()}}


def test_probe_yes_no_not_shown_and_missing():
    v = probe_verdict(_probes({"logistic": (0.05, 0.01, 0.09)}), "runs/s")
    assert v.answer == "yes" and v.n_questions == 30
    line = v.line("md")
    assert "gain +5.0 pp [+1.0, +9.0]" in line and "shuffled-label p = 0.010" in line and "30 questions" in line
    # the exact command: every recorded non-default setting, into a fresh directory (tests/test_report_commands.py)
    assert "python -m probes.train runs/s/activations.h5 --output-dir runs/s/rerun/probes" in line
    assert probe_verdict(_probes({"logistic": (-0.05, -0.09, -0.01)})).answer == "no"
    two = probe_verdict(_probes({"logistic": (0.0, -0.03, 0.03), "mass_mean": (0.01, -0.02, 0.04)}))
    assert two.answer == "not shown" and two.detail.startswith("mass_mean") and "of 2 probes" in two.detail
    # the largest of several gains: yes only when its gain p times the number of probes is below 0.05
    many = _probes({"logistic": (0.05, 0.01, 0.09), "mlp": (0.02, -0.01, 0.05), "mass_mean": (0.0, -0.03, 0.03)})
    many["headline"]["logistic"]["gain_p_value"] = 0.03
    v3 = probe_verdict(many)
    assert v3.answer == "not shown" and "gain p x 3 = 0.090 (Bonferroni" in v3.detail
    many["headline"]["logistic"]["gain_p_value"] = 0.01
    assert probe_verdict(many).answer == "yes"
    assert "not a test against the metadata" in v3.detail
    empty = probe_verdict({"data": {"n_questions": 3, "notes": ["only one class"]}, "headline": {}})
    assert empty.answer == "too little data" and "only one class" in empty.detail
    assert probe_verdict(None).answer == "not run"


# ------------------------------------------------------------------------------------------ (c) steering
def _steering(code: str, est=0.2, ci=(-0.05, 0.45), p_holm=0.25):
    best = {"key": "L3|k1|a0.5|probe", "layer": 3, "k": 1, "alpha_rel": 0.5, "strongest": True,
            "moved_of_all": _rate(5, 24, 0.08, 0.37, 24),
            "control": {"kind": "random", "moved_of_all": _rate(0, 48, 0.0, 0.14, 24)},
            "difference": {"estimate": est, "ci": list(ci), "n_questions": 24}, "p_value": 0.06, "p_holm": p_holm}
    other = dict(best, key="L3|k2|a0.5|probe", k=2, strongest=False)
    return {"verdict_code": code, "verdict": f"{code}: ...", "sesoi": 0.1, "n_c_questions": 24, "n_c_cases": 24,
            "multiple_comparisons": {"n_tests": 2}, "power": {"n_cases_for_null": 190}, "settings": [best, other]}


@pytest.mark.parametrize("code", ["effect", "harm", "null", "inconclusive"])
def test_steering_each_code(code):
    v = steering_verdict(_steering(code), "runs/s")
    assert v.answer == code and v.n_questions == 24 and v.answered
    line = v.line("md")
    assert "strongest setting L3 k=1 alpha=0.5x|resid|" in line and "+20.0 pp [-5.0, +45.0]" in line
    assert "Holm p = 0.25 over 2 settings" in line and "24 questions" in line
    assert ("python -m steering.sweep runs/s --directions runs/s/probes --output-dir runs/s/rerun/steering "
            "--layers 3 --k 1,2 --alphas 0.5") in line
    if code == "inconclusive":
        assert "a null would need about 190" in line
    if code == "null":
        assert "every interval within 10 pp" in line


def test_steering_insufficient_missing_and_caution():
    s = {"verdict_code": "insufficient_data", "verdict": "insufficient_data: no type-C case left; nothing to steer",
         "n_c_questions": 0, "settings": []}
    v = steering_verdict(s)
    assert v.answer == "too little data" and v.detail == "no type-C case left; nothing to steer"
    assert steering_verdict(None).answer == "not run"
    c = _steering("inconclusive")
    c["verdict"] += " [caution: the directions were fitted on steered questions; not a held-out test]"
    assert "[caution: the directions were fitted on steered questions" in steering_verdict(c).detail


def test_read_verdicts_of_an_empty_directory(tmp_path):
    vs = read_verdicts(tmp_path)
    assert [v.key for v in vs] == ["propagation", "probe", "steering"]
    assert all(v.answer == "not run" for v in vs)
    (tmp_path / "summary.json").write_text(json.dumps(_behaviour()))
    (tmp_path / "steering").mkdir()
    (tmp_path / "steering" / "summary.json").write_text("{cut off")
    assert [v.answer for v in read_verdicts(tmp_path)] == ["yes", "not run", "not run"]


def test_a_stage_the_study_skipped_gives_its_reason_in_the_box(tmp_path):
    reason = "needs behaviour, which found too little data: no eligible baselines"
    (tmp_path / "stages.json").write_text(json.dumps({"kind": "study.stages",
                                                      "skipped": {"probes": reason, "steering": reason}}))
    vs = read_verdicts(tmp_path)
    assert [v.answer for v in vs] == ["not run", "skipped", "skipped"]
    assert all(reason in v.detail and "have not been trained" not in v.detail for v in vs[1:])
    assert not any(v.answered for v in vs)


# ------------------------------------------------------------------------------------------ the report's edits
def _table(n: int, extra_empty: bool = False) -> Table:
    head = ("layer", "acc") + (("note",) if extra_empty else ())
    return Table(head, tuple(Row((str(i), f"{50 + i}%") + (("",) if extra_empty else ())) for i in range(n)))


def test_fold_long_tables_and_unfold():
    blocks = (Paragraph("intro"), Paragraph("**logistic** per layer"), _table(31), Paragraph("after"), _table(3))
    folded = fold_long_tables(blocks, "full per-layer table: probes/results.json", min_rows=12)
    assert len(folded) == 4 and folded[1].fold and folded[1].caption == "**logistic** per layer"  # the caption moved in
    flat = blocks_markdown(folded)
    assert "| 30 |" not in flat and "| 2 | 52% |" in flat
    assert "_**logistic** per layer (31 rows): folded; full per-layer table: probes/results.json_" in flat
    html = blocks_html(folded)
    assert html.count("<details>") == 1 and "<summary><b>logistic</b> per layer (31 rows)</summary>" in html
    assert html.count("<tr>") == 1 + 31 + 1 + 3  # both tables' header and body rows, the long one inside <details>
    assert '<p class="pointer">full per-layer table: probes/results.json</p>' in html


def test_empty_columns_footnotes_and_headings():
    t = _table(2, extra_empty=True).without_empty_columns()
    assert t.header == ("layer", "acc") and block_markdown(t).splitlines()[0] == "| layer | acc |"
    steer = Table(("setting", "moved"), (Row(("a *", "1")),), footnote="* strongest setting (ranked by moved-of-all)")
    secs = [Section("S", (steer, Paragraph("- a list")))]
    assert "\n\\* strongest setting" in render_markdown(secs, title="r")  # in the report: a footnote, escaped
    assert "\n* strongest setting" in block_markdown(steer)  # in the stage's own file: as the stage wrote it
    html = blocks_html((steer,))
    assert "<p>* strongest setting" in html and "<li>" not in html
    assert render_markdown([Section("S", (Heading("A", 1), Heading("B", 2), Code("# code")))], title="r").endswith(
        "### A\n\n#### B\n\n```\n# code\n```\n")


def test_text_with_markup_is_escaped_then_rendered_in_html():
    html = blocks_html((Paragraph("<script>x</script> **b** `c<d>` [ok](a.html) [bad](javascript:alert(1))"),))
    assert "<script>" not in html and "&lt;script&gt;" in html and "<b>b</b>" in html and "<code>c&lt;d&gt;</code>" in html
    assert '<a href="a.html">ok</a>' in html and 'href="javascript' not in html


# ------------------------------------------------------------------------------------------ sections, counting
def test_patching_section_absent_then_included_with_its_figure(tmp_path):
    from study.report.sections import SECTIONS

    patching = next(s for s in SECTIONS if s.name == "patching")
    assert patching.blocks(tmp_path) is None
    d = tmp_path / "patching"
    d.mkdir()
    cell = {"mean": 0.5, "ci": [0.25, 0.75], "n_cases": 2}
    groups = ("edit", "before", "last", "all")
    summary = {"cells": [dict(cell, layer=0, group=g) for g in groups], "n_cases": 2, "n_questions": 2, "n_excluded": 0,
               "controls": {"random_layer": [dict(cell, group=g) for g in groups], "random_position": []}}
    settings = {"command": "python -m steering.patching x", "min_gap": 0.1, "engine": "hf-hooks", "answer_prefix": "Answer:",
                "layers": [0]}
    (d / "patching.json").write_text(json.dumps({"summary": summary, "settings": settings}))
    (d / "patching.png").write_bytes(b"\x89PNG\r\n\x1a\n")
    md = blocks_markdown(patching.blocks(tmp_path))
    assert not md.startswith("#") and md.startswith("Command: `python -m steering.patching x`")
    assert "| 0 | 0.50 [0.25, 0.75] | 0.50 [0.25, 0.75] |" in md and md.endswith("![patching heat map](patching/patching.png)")


def test_register_places_a_section_before_the_counting_appendix(monkeypatch):
    import study.report.sections as rs

    monkeypatch.setattr(rs, "SECTIONS", list(rs.SECTIONS))
    rs.register(rs.ReportSection("early", "Early answering", lambda out: None))
    assert [s.name for s in rs.SECTIONS][-2:] == ["early", "counting"]
    rs.register(rs.ReportSection("early", "Early answering (v2)", lambda out: (Paragraph("x"),)))
    assert [s.title for s in rs.SECTIONS if s.name == "early"] == ["Early answering (v2)"]


def _tiny_run(root: Path) -> Path:
    """Two questions; one generation fills two cells (middle = late), another two strategies' early cells."""
    from loadbearing.records import Continuation

    root.mkdir(parents=True, exist_ok=True)
    rows = []
    for q in ("q1", "q2"):
        for cid, strat, pos, mem, ok in ((f"{q}|a|early", "a", "early", (("a", "early"), ("b", "early")), False),
                                         (f"{q}|a|middle", "a", "middle", (("a", "middle"), ("a", "late")), q == "q1")):
            rows.append(Continuation(id=cid + "|perturbed", question_id=q, dataset="arith", task="t", difficulty="t",
                                     strategy=strat, position=pos, line_index=0, n_lines=3, original_line="x",
                                     edited_line="y", condition="perturbed", prefix_text="y\n", input_text=cid,
                                     input_tokens=3, edit_span=(0, 1), continuation="Answer: 1", new_tokens=2,
                                     finish_reason="eos", parsed_answer="1", gold="1" if ok else "2", correct=ok, label=None,
                                     memberships=mem).to_dict())
    (root / "manifest.json").write_text(json.dumps({"status": "ok", "model": {"name": "scripted"}}))
    (root / "continuations.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
    return root


def test_counting_table_shows_the_two_ways(tmp_path):
    from study.report.counting import counting_table

    assert counting_table(tmp_path) is None
    md = counting_table(_tiny_run(tmp_path / "run"))
    assert md is not None
    rows = {line.split(" | ")[0].lstrip("| "): line for line in md.splitlines() if line.startswith("| ")}
    # middle and late share one generation: one merged group, never two identical rows (or one counted twice)
    assert "position=late" not in rows
    assert rows["position=middle=late"].endswith("| C 1/2, A 0 | - |")
    assert rows["position=middle"].endswith("| - | C 1/2, A 0 |")  # by recorded cell: the first cell's name
    assert rows["strategy=a"].endswith("| C 3/4, A 0 | C 3/4, A 0 |")
    assert rows["strategy=b"].endswith("| C 2/2, A 0 | - |")
    # the early generation is shared by strategies a and b: position=early counts it once (issue #32)
    assert rows["position=early"].endswith("| C 2/2, A 0 | C 2/2, A 0 |")


# ------------------------------------------------------------------------------------------ the whole report
def test_report_of_a_partial_study_is_deterministic_and_says_what_is_missing(tmp_path):
    from study.report.write import render, write_report

    out = _tiny_run(tmp_path / "study")
    (out / "summary.json").write_text(json.dumps(_behaviour()))
    md = render(out)
    assert md == render(out)
    head = md.split("## Study")[0]
    assert head.count("\n- **Does") == 3 and "**not run**: no probes/results.json" in head
    assert "**Does the error propagate?** **yes**" in head
    assert "Counting conventions\n\n| group" in md and "could not render" not in md
    write_report(out)
    first = {n: (out / n).read_bytes() for n in ("report.md", "report.txt", "report.html")}
    write_report(out)
    assert first == {n: (out / n).read_bytes() for n in ("report.md", "report.txt", "report.html")}
    txt = first["report.txt"].decode()
    assert txt.splitlines()[3] == "Verdicts" and "Does the error propagate? YES:" in txt
    html = first["report.html"].decode()
    assert html.index('class="box"') < html.index("<nav>")


def test_html_box_comes_first():
    page = render_report_html([Section("Study", (Paragraph("meta"),)), Section("Verdicts", (Paragraph("**Q?** yes"),), box=True),
                               Section("1. X", (table(["a"], [["body"]]),))], browse=None)
    assert page.index('<section id="s1" class="box">') < page.index("<nav>") < page.index('id="s0"')



# ------------------------------------------------------------------------------------------ the figure writer
def test_the_figure_writer_is_atomic_and_closes_the_figure(tmp_path, monkeypatch):
    import loadbearing.files
    from loadbearing.figures import figure_bytes, pyplot, save_figure

    plt = pyplot()
    assert plt.get_backend().lower() == "agg"
    fig, ax = plt.subplots()
    ax.plot([0, 1], [0, 1])
    same = figure_bytes(fig, dpi=50, metadata={"Software": None})
    assert same == figure_bytes(fig, dpi=50, metadata={"Software": None}) and same.startswith(b"\x89PNG")
    out = save_figure(fig, tmp_path / "f.png", dpi=50)
    assert out.read_bytes().startswith(b"\x89PNG") and not plt.fignum_exists(fig.number)
    assert [p.name for p in tmp_path.iterdir()] == ["f.png"]  # no temp file left beside it

    fig2, _ = plt.subplots()

    def boom(*a, **k):
        raise OSError("disk full")

    monkeypatch.setattr(loadbearing.files.os, "replace", boom)
    with pytest.raises(OSError, match="disk full"):
        save_figure(fig2, tmp_path / "f.png", dpi=50)
    assert (tmp_path / "f.png").read_bytes() == out.read_bytes()  # the old figure is still whole
    assert [p.name for p in tmp_path.iterdir()] == ["f.png"]
