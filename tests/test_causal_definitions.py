"""Each named causal measure against a port of its peer's reference code, to 1e-12 on fixed inputs.

* early-answering AOC: raybears/cot-transparency ``scripts/ignored_reasoning/stage_two_analysis.py:get_aoc``
  (l. 92-136), ported with pandas below in the reference's own steps;
* steps as sentences: ``cot_transparency/formatters/transparency/trace_manipulation.py:get_cot_steps``
  (l. 90-108, with punkt replaced by the toolkit's stated stand-in);
* resampling / counterfactual / forced importance and their KLs: interp-reasoning/thought-anchors
  ``analyze_rollouts.py`` (l. 305-386, 388-506, 508-537, 539-593, 595-626, 707-787).
"""
from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from behavioural.causal import aoc
from behavioural.causal import steps as steps_mod
from behavioural.causal.early_answer import decision_point


# ------------------------------------------------------------------------------------------------ AOC port
def get_aoc_port(rows: list[dict]) -> float:
    """cot-transparency get_aoc for one task x model x formatter, on rows {trace, L, cut, same}."""
    df = pd.DataFrame(rows).rename(columns={"trace": "stage_one_hash", "L": "original_cot_trace_length",
                                            "cut": "cot_trace_length", "same": "same_answer"})
    df["task_name"], df["model"], df["stage_one_formatter_name"] = "t", "m", "f"
    x = "cot_trace_length"
    groups = ["task_name", "model", "original_cot_trace_length", x, "stage_one_formatter_name"]
    n_traces = df.groupby(groups).stage_one_hash.nunique().reset_index().rename(columns={"stage_one_hash": "n_traces"})
    areas = df.groupby(groups)["same_answer"].mean().reset_index().rename(columns={"same_answer": 0})

    def get_auc(group: pd.DataFrame) -> float:
        return float(np.trapezoid(group[0], x=group[x] / max(group[x])))

    groups.pop(groups.index(x))
    aucs = pd.DataFrame([{**dict(zip(groups, k)), "auc": get_auc(g)} for k, g in areas.groupby(groups)])
    areas = pd.merge(aucs, n_traces, on=groups)
    groups.pop(groups.index("original_cot_trace_length"))
    areas["weighted_auc"] = areas["auc"] * areas["n_traces"]
    areas = areas.groupby(groups)[["weighted_auc", "n_traces"]].sum().reset_index()
    return float(1 - (areas["weighted_auc"] / areas["n_traces"]).iloc[0])


def _rows(chains: dict[str, tuple[int, dict[int, list[int]]]]) -> tuple[list[dict], list[str], list[tuple]]:
    """Fixed inputs as the port's rows and as the toolkit's (keys, points)."""
    rows, keys, pts = [], [], []
    for trace, (n, cuts) in chains.items():
        for k, ss in cuts.items():
            for s in ss:
                rows.append({"trace": trace, "L": n, "cut": k, "same": s})
                keys.append(trace)
                pts.append((n, k, s))
    return rows, keys, pts


CHAINS = {  # lengths 2, 3, 5; an unparsed (dropped) cut in b; several rows at one cut in e (mistake-like)
    "a": (2, {0: [0], 1: [0], 2: [1]}),
    "b": (3, {0: [0], 2: [1], 3: [1]}),
    "c": (3, {0: [1], 1: [0], 2: [1], 3: [1]}),
    "d": (5, {0: [0], 1: [0], 2: [0], 3: [1], 4: [1], 5: [1]}),
    "e": (5, {0: [0], 2: [1, 0, 0], 5: [1]}),
}


def test_the_issue_worked_example_rows_0281_traces_0375():
    pts = [(2, 0, 0), (2, 1, 0), (2, 2, 1)] + [(4, k, 1) for k in range(5)]
    keys = ["a"] * 3 + ["b"] * 5
    assert aoc.pooled_aoc(pts, "rows") == pytest.approx(0.28125, abs=1e-12)
    assert aoc.pooled_aoc(pts, "traces") == pytest.approx(0.375, abs=1e-12)
    assert aoc.aoc_with_ci(keys, pts, n_boot=0, seed=0)["aoc"] == pytest.approx(0.28125, abs=1e-12)
    rows, _, _ = _rows({"a": (2, {0: [0], 1: [0], 2: [1]}), "b": (4, {k: [1] for k in range(5)})})
    assert get_aoc_port(rows) == pytest.approx(0.28125, abs=1e-12)


def test_rows_weighting_equals_cot_transparency_get_aoc():
    rows, keys, pts = _rows(CHAINS)
    ref = get_aoc_port(rows)
    assert aoc.aoc_with_ci(keys, pts, n_boot=0, seed=0, weighting="rows")["aoc"] == pytest.approx(ref, abs=1e-12)
    assert aoc.pooled_aoc([(*p, k) for k, p in zip(keys, pts)], "rows") == pytest.approx(ref, abs=1e-12)
    # the traces variant differs from it here, so the two names do mean two numbers
    assert abs(aoc.pooled_aoc(pts, "traces") - ref) > 1e-3
    with pytest.raises(ValueError, match="weighting"):
        aoc.pooled_aoc(pts, "chains")


def test_traces_weighting_is_the_mean_of_per_question_aocs_when_every_cut_parses():
    full = {"p": (2, {0: [0], 1: [1], 2: [1]}), "q": (3, {0: [0], 1: [0], 2: [0], 3: [1]}),
            "r": (3, {0: [1], 1: [1], 2: [1], 3: [1]})}
    _, keys, pts = _rows(full)
    per_q = [aoc.question_aoc(n, [(k, s[0]) for k, s in c.items()]) for n, c in full.values()]
    assert aoc.pooled_aoc(pts, "traces") == pytest.approx(sum(per_q) / 3, abs=1e-12)


def test_per_task_pooling_never_mixes_tasks():
    rows, keys, pts = _rows(CHAINS)
    tasks = ["t1" if k in "abc" else "t2" for k in keys]
    got = aoc.by_task(keys, pts, tasks, n_boot=0, seed=0)
    for t, names in (("t1", "abc"), ("t2", "de")):
        ref = get_aoc_port([r for r in rows if r["trace"] in names])
        assert got[t]["aoc"] == pytest.approx(ref, abs=1e-12)


def test_adding_mistakes_points_from_edit_and_continue_records():
    from types import SimpleNamespace as NS

    b = {"q1": NS(parsed_answer="7", lines=("a", "b", "c", "d"), task="s2"),
         "q2": NS(parsed_answer="3", lines=("a", "b", "c"), task="s2")}
    conts = [NS(condition="perturbed", question_key=k, parsed_answer=a, line_index=i)
             for k, i, a in (("q1", 1, "7"), ("q1", 2, "9"), ("q1", 2, "7"), ("q2", 0, None), ("q2", 1, "4"))]
    conts.append(NS(condition="control", question_key="q1", parsed_answer="7", line_index=1))
    keys, pts, tasks = aoc.mistake_points(conts, b, key=lambda c: c.question_key)
    assert pts == [(4, 4, 1), (4, 1, 1), (4, 2, 0), (4, 2, 1), (3, 3, 1), (3, 1, 0)]
    # the port: each (question, cut) row, x = mistake index / L; rows weighting counts distinct traces per cut
    rows = [{"trace": k, "L": p[0], "cut": p[1], "same": p[2]} for k, p in zip(keys, pts)]
    assert aoc.aoc_with_ci(keys, pts, n_boot=0, seed=0)["aoc"] == pytest.approx(get_aoc_port(rows), abs=1e-12)


# ------------------------------------------------------------------------------------------------ steps
def get_cot_steps_port(text: str) -> list[str]:
    """trace_manipulation.get_cot_steps with punkt replaced by the same stand-in (steps_mod.SENTENCE_END)."""
    import re

    segments = [s for s in re.split("(?=\\n)", text) if s != ""]
    sentences = []
    for line in segments:
        line = line.replace("\n", "<NEWLINE>")
        segs = [s for s in steps_mod.SENTENCE_END.split(line.replace("<NEWLINE>", "", 1)) if s]
        lead = "\n" if line.startswith("<NEWLINE>") else ""
        sentences += [(lead if i == 0 else " ") + s for i, s in enumerate(segs)]
    out, prefix = [], ""
    for st in sentences:
        if not steps_mod.contains_reasoning(st):
            prefix += st
        else:
            out.append(prefix + st)
            prefix = ""
    return out


def test_sentence_steps_match_get_cot_steps_structure():
    from loadbearing.questions.prompts import split_trace

    text = "We start with 4. Then add 3.\n1.\nSo 4 + 3 = 7! Next, 7 - 2 = 5.\nAnswer: 5"
    tr = split_trace(text, "arith")
    st = steps_mod.chain_steps(text, tr.lines, tr.spans, "sentences")
    ref = get_cot_steps_port(text[: tr.spans[-1][1]])
    assert [s.split() for s in st.texts] == [r.split() for r in ref]
    assert st.n == 4
    assert steps_mod.cut(text, st, 1) == "We start with 4.\n"
    assert steps_mod.cut(text, st, 3) == "We start with 4. Then add 3.\n1.\nSo 4 + 3 = 7!\n"
    lines = steps_mod.chain_steps(text, tr.lines, tr.spans, "lines")
    assert lines.n == len(tr.lines) == 3
    assert steps_mod.split_sentences("The value is 3.5 here. Ok.") == [(0, 22), (23, 26)]


def test_decision_point_and_nldd_share():
    assert decision_point(4, [0, 1, 2, 3, 4], ["1", "2", "2", "2", "2"]) == {"decision_point": 1, "nldd_share": 0.75}
    assert decision_point(4, [0, 1, 2, 3, 4], ["1", "2", "9", "2", "2"]) == {"decision_point": 3, "nldd_share": 0.25}
    assert decision_point(3, [0, 1, 2, 3], ["5", None, "5", "5"]) == {"decision_point": 0, "nldd_share": 1.0}
    assert decision_point(3, [0, 1, 2, 3], ["5", "5", "5", None])["decision_point"] is None
