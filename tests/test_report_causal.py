"""The report's causal tests side by side (study.report.causal): the table on small synthetic stage outputs whose
numbers are worked out by hand, the early-answering figure, and the section appearing only when a stage ran.

Four questions in two tasks: q1, q2 in t1 and q3, q4 in t2, each chain two lines long.
"""
from __future__ import annotations

import json
import re
import shutil
from pathlib import Path

import pytest

from loadbearing.stats import clustered_rate, paired_difference_ci
from study.report.causal import causal_section, early_answer_curves, side_by_side, table_markdown

TASK = {"q1": "t1", "q2": "t1", "q3": "t2", "q4": "t2"}
#: early answering: same-as-full-chain per cut k = 0, 1, 2 (AOC by hand: 1 - trapezoid over x = k/2)
SAME = {"q1": [0, 0, 1], "q2": [1, 1, 1], "q3": [0, 1, 1], "q4": [0, 0, 1]}
AOC = {"q1": 0.75, "q2": 0.0, "q3": 0.25, "q4": 0.75}
#: filler: (correct with '...', correct with the full chain)
FILLER = {"q1": (False, True), "q2": (True, True), "q3": (False, True), "q4": (False, True)}
#: paraphrase: same answer as the reference (None: not scored)
PARA = {"q1": False, "q2": True, "q3": False, "q4": None}
#: resampling: each question's edited steps (step, cf importance); q1's middle and late edit the same step
EDITED = {"q1": [(0, None), (1, -0.5), (1, -0.5)], "q3": [(0, -1.0), (1, 0.5)]}


def _rate(k: int, n: int, nq: int) -> dict:
    return {"k": k, "n": n, "rate": k / n if n else None, "lo": 0.1, "hi": 0.9, "method": "korn-graubard", "n_questions": nq,
            "n_generations": n, "few_clusters": True}


def _meta(q: str) -> dict:
    return {"question_id": q, "question_key": f"key-{q}", "dataset": "arith", "task": TASK[q], "difficulty": TASK[q],
            "n_lines": 2}


def _stage(out: Path, name: str, summary: dict, records: list[dict] = (), status: str = "ok") -> None:
    d = out / name
    d.mkdir(parents=True)
    (d / "manifest.json").write_text(json.dumps({"kind": f"behavioural.{name}", "status": status}))
    (d / "summary.json").write_text(json.dumps(summary))
    (d / "records.jsonl").write_text("".join(json.dumps(r) + "\n" for r in records))


def make_study(out: Path, *, ea_by: bool = True) -> Path:
    """The behaviour summary and the four causal stages' outputs, in their own formats."""
    out.mkdir(parents=True)
    (out / "manifest.json").write_text(json.dumps({"status": "ok", "model": {"name": "scripted"}}))
    (out / "summary.json").write_text(json.dumps({
        "questions": 4, "eligible": 4, "eligible_questions": 4, "baseline_accuracy": _rate(4, 4, 4), "continuations": 12,
        "not_applicable": 0, "ineligible_reasons": {"eligible": 4},
        "overall": {"propagation": _rate(6, 8, 4), "control_error": _rate(0, 4, 4),
                    "paired_difference": {"estimate": 0.75, "ci": [0.4, 0.9], "n_clusters": 4, "n_pairs": 8}},
        "by": {"task": {"t1": {"propagation": _rate(4, 4, 2)}, "t2": {"propagation": _rate(2, 4, 2)}}}}))
    questions = [_meta(q) | {"k": [0, 1, 2], "same": s, "answers": ["1", "2", "3"], "aoc": AOC[q],
                             "full_chain_answer": "3"} for q, s in SAME.items()]
    ea = {"aoc": {"aoc": 0.4375, "ci": [0.1, 0.7], "n_questions": 4, "n_points": 12}, "questions": questions}
    if ea_by:  # the stage's own per-task numbers (shown as they are)
        ea["by"] = {"task": {"t1": {"aoc": 0.375, "ci": [0.0, 0.75], "n_questions": 2},
                             "t2": {"aoc": 0.5, "ci": [0.25, 0.75], "n_questions": 2}}}
    _stage(out, "early_answer", ea)
    rows = [_meta(q) | {"condition": c, "correct": ok} for q, pair in FILLER.items()
            for c, ok in zip(("dots", "full"), pair)]
    _stage(out, "filler", {"fillers": {"dots": "..."}}, rows)
    _stage(out, "paraphrase", {"paraphraser": "scripted"}, [_meta(q) | {"same_answer": s} for q, s in PARA.items()])
    rs = [_meta(q) | {"edited": [{"position": p, "step": st, "cf_importance": cf}
                                 for p, (st, cf) in zip(("early", "middle", "late"), e)]} for q, e in EDITED.items()]
    _stage(out, "resample", {"questions": rs, "n_sampled_questions": 2})
    return out


def _cells(md: str) -> dict[str, list[str]]:
    return {line.split(" | ")[0].lstrip("| "): [c.strip() for c in line.strip("| ").split(" | ")[1:]]
            for line in md.splitlines() if line.startswith("| ") and not line.startswith("| task")}


def test_the_table_by_hand(tmp_path):
    t = side_by_side(make_study(tmp_path / "s"))
    assert t is not None and t["group"] == "task" and t["values"] == ["t1", "t2"] and t["not_run"] == []
    md = table_markdown(t)
    assert md.splitlines()[0] == ("| task | edit-and-continue propagation | early-answering AOC | filler '...' minus "
                                  "full chain | paraphrase: answer changed | resampling: edited step's importance |")
    rows = _cells(md)
    assert list(rows) == ["overall", "t1", "t2"]
    # propagation and the AOC: the stages' own summaries, as they are
    assert rows["overall"][0] == "75.0% [10.0, 90.0]† (6/8; 4 q)" and rows["t2"][0] == "50.0% [10.0, 90.0]† (2/4; 2 q)"
    assert rows["overall"][1] == "0.438 [0.100, 0.700]† (4 q)" and rows["t1"][1] == "0.375 [0.000, 0.750]† (2 q)"
    # filler - full chain, paired per question: overall (-1 + 0 - 1 - 1) / 4, t1 (-1 + 0) / 2, t2 -1
    cells = {r["group"]: r["cells"] for r in t["rows"]}
    assert [cells[g]["filler"]["estimate"] for g in ("overall", "t1", "t2")] == [-0.75, -0.5, -1.0]
    lo, hi = paired_difference_ci([(f"key-{q}", float(a), float(b)) for q, (a, b) in FILLER.items()])["ci"]
    assert rows["overall"][2] == f"-75.0 pp [{100 * lo:+.1f}, {100 * hi:+.1f}]† (4 q)"
    # paraphrase: changed = not same, over the scored rows: 2/3 overall, 1/2 in t1, 1/1 in t2 (one question: no interval)
    assert rows["t1"][3].startswith("50.0% [") and rows["t1"][3].endswith("(1/2; 2 q)")
    assert rows["t2"][3] == "100.0% [n/a] (1/1; 1 q)"
    r = clustered_rate([True, False, True], ["key-q1", "key-q2", "key-q3"])
    assert rows["overall"][3] == f"66.7% [{100 * r.lo:.1f}, {100 * r.hi:.1f}]† (2/3; 3 q)"
    # resampling: q1's step 1 once (-0.5), q3's -1.0 and +0.5: overall -1/3 over 2 questions; each task 1 question
    assert cells["overall"]["resample"]["estimate"] == pytest.approx(-1 / 3)
    assert cells["overall"]["resample"]["n_questions"] == 2 and rows["overall"][4].startswith("-0.33 [")
    assert rows["t1"][4] == "-0.50 [n/a] (1 q)" and rows["t2"][4] == "-0.25 [n/a] (1 q)"


def test_an_aoc_the_stage_did_not_split_is_recomputed_from_its_questions(tmp_path):
    t = side_by_side(make_study(tmp_path / "s", ea_by=False))
    cells = {r["group"]: r["cells"]["aoc"] for r in t["rows"]}
    # same length: the pooled AOC is the mean of the question AOCs
    assert cells["t1"]["estimate"] == pytest.approx((AOC["q1"] + AOC["q2"]) / 2)
    assert cells["t2"]["estimate"] == pytest.approx((AOC["q3"] + AOC["q4"]) / 2)
    assert cells["t2"]["n_questions"] == 2 and cells["overall"]["estimate"] == 0.4375


def test_a_stage_that_did_not_finish_is_not_run_and_the_section_says_how_to_run_it(tmp_path):
    out = make_study(tmp_path / "s")
    shutil.rmtree(out / "paraphrase")
    m = out / "resample" / "manifest.json"
    m.write_text(json.dumps({"kind": "behavioural.causal.resample", "status": "running"}))
    md = causal_section(out)
    assert md is not None
    rows = _cells(md.split("\n\n")[0])
    assert all(r[3] == "not run" and r[4] == "not run" for r in rows.values())
    assert rows["t1"][1] == "0.375 [0.000, 0.750]† (2 q)"
    assert f"not run: paraphrase, resample (`python -m study --resume {out} --stages paraphrase,resample`)" in md


def test_no_causal_stage_no_section(tmp_path):
    out = make_study(tmp_path / "s")
    for name in ("early_answer", "filler", "paraphrase", "resample"):
        shutil.rmtree(out / name)
    assert side_by_side(out) is None and causal_section(out) is None
    from study.report.write import render

    assert "Causal tests side by side" not in render(out)


def test_the_early_answering_curves_and_figure(tmp_path):
    out = make_study(tmp_path / "s")
    ea = json.loads((out / "early_answer" / "summary.json").read_text())
    curves = {c["label"]: c for c in early_answer_curves(ea, "task")}
    assert list(curves) == ["pooled", "t1", "t2"]
    assert curves["pooled"]["x"] == [0.0, 0.5, 1.0] and curves["pooled"]["same"] == [0.25, 0.5, 1.0]
    assert curves["t1"]["same"] == [0.5, 0.5, 1.0] and curves["t2"]["same"] == [0.0, 0.5, 1.0]
    assert curves["t1"]["n"] == [2, 2, 2] and curves["pooled"]["n_questions"] == 4
    lo, hi = curves["pooled"]["lo"][1], curves["pooled"]["hi"][1]
    assert lo < 0.5 < hi  # the bin's interval, clustered by question
    md = causal_section(out)
    fig = out / "report_figures" / "early_answer_curves.png"
    assert fig.is_file() and fig.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n" and fig.stat().st_size > 5000
    assert md.endswith("![early-answering curves](report_figures/early_answer_curves.png)")


def test_the_report_embeds_the_section_and_its_figure(tmp_path):
    from study.report.write import write_report

    out = make_study(tmp_path / "s")
    write_report(out)
    md = (out / "report.md").read_text()
    sec = md.split("Causal tests side by side", 1)[1].split("\n## ", 1)[0]
    assert "| overall | 75.0% [10.0, 90.0]† (6/8; 4 q) |" in sec
    assert "![early-answering curves](report_figures/early_answer_curves.png)" in sec
    html = (out / "report.html").read_text()
    assert 'alt="early-answering curves" src="data:image/png;base64,' in html
    txt = (out / "report.txt").read_text()  # the same table as plain text (padded columns, no markup)
    assert re.search(r"^overall +75\.0% \[10\.0, 90\.0\]† \(6/8; 4 q\)", txt, re.M) and "| overall |" not in txt


#: white-box stages by hand, 3 steps each: (receiver score, suppression effect) per question. Per-question Spearman
#: rho: q1 +1, q2 -1, q3 +1, q4 -0.5 (mean 0.125); same top step: q1, q3 (2 of 4); chance 1/3
WHITEBOX = {"q1": ([1, 2, 3], [1, 2, 3]), "q2": ([3, 2, 1], [1, 2, 3]), "q3": ([1, 3, 2], [1, 3, 2]),
            "q4": ([1, 2, 3], [3, 1, 2])}


def test_the_agreement_figure_is_drawn_from_the_table_and_linked(tmp_path):
    from behavioural.causal.agreement import step_agreement
    from study.report.figures import AGREEMENT, agreement_figure
    from study.report.write import write_report

    out = make_study(tmp_path / "s")
    _stage(out, "receiver_heads", {"questions": [_meta(q) | {"n_lines": 3, "receiver_score": r}
                                                 for q, (r, _) in WHITEBOX.items()]})
    _stage(out, "suppression", {"questions": [_meta(q) | {"n_lines": 3, "step_effect": e} for q, (_, e) in WHITEBOX.items()]})
    ag = step_agreement(out, n_boot=200)
    (pair,) = ag["pairs"]
    assert (pair["a"], pair["b"], pair["n_questions_rho"]) == ("receiver", "suppression", 4)
    assert pair["mean_spearman"] == pytest.approx(0.125) and (pair["same_top_step"]["k"], pair["same_top_step"]["n"]) == (2, 4)
    assert pair["chance_same_top"] == pytest.approx(1 / 3)
    md = causal_section(out)
    fig = out / AGREEMENT
    assert fig.is_file() and fig.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n" and fig.stat().st_size > 5000
    table_row = next(line for line in md.splitlines() if line.startswith("| receiver vs suppression |"))
    assert "+0.12" in table_row and "| 4 |" in table_row
    assert md.index(table_row) < md.index(f"![step-level agreement]({AGREEMENT})")  # the figure follows its table
    write_report(out)
    assert f"![step-level agreement]({AGREEMENT})" in (out / "report.md").read_text()
    assert 'alt="step-level agreement" src="data:image/png;base64,' in (out / "report.html").read_text()
    # a pair without a defined rho or top step is still drawn (as n/a); no pair, no figure
    empty = dict(pair, mean_spearman=None, ci=[None, None], same_top_step={"k": 0, "n": 0, "lo": None, "hi": None},
                 chance_same_top=None)
    fig.unlink()
    assert agreement_figure(out, {"pairs": [empty, pair]}) == AGREEMENT and fig.is_file()
    assert agreement_figure(out, {"pairs": []}) is None
