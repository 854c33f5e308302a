"""Each named causal measure against a port of its peer's reference code, to 1e-12 on fixed inputs.

* early-answering AOC: raybears/cot-transparency ``scripts/ignored_reasoning/stage_two_analysis.py:get_aoc``
  (l. 92-136), ported with pandas below in the reference's own steps;
* steps as sentences: ``cot_transparency/formatters/transparency/trace_manipulation.py:get_cot_steps``
  (l. 90-108, with punkt replaced by the toolkit's stated stand-in);
* resampling / counterfactual / forced importance and their KLs: interp-reasoning/thought-anchors
  ``analyze_rollouts.py`` (l. 305-386, 388-506, 508-537, 539-593, 595-626, 707-787).
"""
from __future__ import annotations

import math
from collections import defaultdict

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


# ------------------------------------------------------------------------------------------------ thought anchors
def _ta_kl(sols1: list[dict], sols2: list[dict]) -> float:
    """analyze_rollouts.calculate_kl_divergence, use_prob_true=False, laplace_smooth=False (l. 707-787)."""
    c1: dict = defaultdict(int)
    c2: dict = defaultdict(int)
    for s in sols1:
        if s.get("answer", ""):
            c1[s["answer"]] += 1
    for s in sols2:
        if s.get("answer", ""):
            c2[s["answer"]] += 1
    if not c1 or not c2:
        return 0.0
    support = set(c1) | set(c2)
    v, t1, t2, alpha = len(support), sum(c1.values()), sum(c2.values()), 1e-9
    kl = 0.0
    for a in support:
        p, q = (c1[a] + alpha) / (t1 + alpha * v), (c2[a] + alpha) / (t2 + alpha * v)
        kl += p * math.log(p / q)
    return max(0.0, kl)


def _ta_acc(sols: list[dict]) -> float:
    correct = sum(1 for s in sols if s.get("is_correct", False) is True and s.get("answer", "") != "")
    total = len([s for s in sols if s.get("is_correct", None) is not None and s.get("answer", "") != ""])
    return correct / total if total > 0 else 0.0


def _ta_importances(chunk_info: dict[int, list[dict]], emb: dict[str, np.ndarray], forced: dict[int, list[dict]],
                    i: int, threshold: float = 0.8) -> dict[str, float]:
    """The six importances of chunk i, written from analyze_rollouts.py l. 305-705 (default arguments)."""
    nxt = chunk_info.get(min(k for k in chunk_info if k > i), [])
    dissimilar, similar = [], []
    for sol in chunk_info[i]:
        a, b = emb[sol["chunk_removed"]], emb[sol["chunk_resampled"]]
        (dissimilar if np.dot(a, b) / (np.linalg.norm(a) * np.linalg.norm(b)) < threshold else similar).append(sol)
    cf = _ta_acc(dissimilar) - _ta_acc(nxt) if dissimilar and nxt else 0.0
    acc = {k: _ta_acc(v) for k, v in chunk_info.items()}
    facc = {k: _ta_acc(v) for k, v in forced.items()}
    return {"cf_importance": cf,
            "kl_importance": _ta_kl(dissimilar, nxt + similar) if dissimilar and nxt else 0.0,
            "resampling_importance": acc[i + 1] - acc[i],
            "resampling_kl": _ta_kl(chunk_info[i], chunk_info[i + 1]),
            "forced_importance": facc[i + 1] - facc[i],
            "forced_kl": _ta_kl(forced[i], forced[i + 1])}


def _fixed_rollouts(seed: int = 3):
    """Fixed rollouts of a 3-step chain: answers, correctness and embeddings drawn once from a seeded stream."""
    rng = np.random.default_rng(seed)
    lines = ["2 + 3 = 5", "5 + 1 = 6", "6 - 2 = 4"]
    emb = {t: rng.normal(size=4) for t in lines}
    rows, chunk_info, forced = [], defaultdict(list), defaultdict(list)
    for k in range(4):
        for j in range(7):
            ans = str(rng.choice(["4", "5", "9"], p=[0.5, 0.3, 0.2]))
            new = f"new step {k} {j}"
            # resampled steps near the original (similar) or far from it, by the draw
            base = emb[lines[k]] if k < 3 else rng.normal(size=4)
            emb[new] = base + rng.normal(scale=float(rng.choice([0.1, 3.0])), size=4)
            parsed = None if j == 6 else ans  # one unparsed rollout per cut
            sim = None if k == 3 else float(np.dot(emb[lines[k]], emb[new]) /
                                            (np.linalg.norm(emb[lines[k]]) * np.linalg.norm(emb[new])))
            rows.append({"kind": "rollout", "k": k, "parsed_answer": parsed,
                         "correct": None if parsed is None else parsed == "4", "different": None if sim is None else sim < 0.8,
                         "original_step": lines[k] if k < 3 else None, "new_step": new})
            if parsed is not None:  # thought-anchors' chunk_info keeps only rollouts with an answer
                chunk_info[k].append({"chunk_removed": lines[k] if k < 3 else new, "chunk_resampled": new,
                                      "is_correct": parsed == "4", "answer": parsed})
            fa = str(rng.choice(["4", "7"]))
            rows.append({"kind": "forced", "k": k, "parsed_answer": fa, "correct": fa == "4"})
            forced[k].append({"is_correct": fa == "4", "answer": fa})
    return rows, dict(chunk_info), dict(forced), emb


def test_resampling_counterfactual_forced_importances_and_kls_equal_thought_anchors():
    from behavioural.causal.resample_summary import as_thought_anchors, question_steps

    rows, chunk_info, forced, emb = _fixed_rollouts()
    steps = question_steps(rows, 3, n_boot=0, seed=0)
    assert any(st["n_different"] for st in steps) and any(st["n_different"] < st["n_rollouts"] for st in steps)
    for i, st in enumerate(steps):
        ref = _ta_importances(chunk_info, emb, forced, i)
        for name, want in ref.items():
            assert as_thought_anchors(st[name]) == pytest.approx(want, abs=1e-12), (i, name)


def test_the_zero_none_convention_and_the_similarity_threshold():
    from behavioural.causal.resample_similarity import THRESHOLD
    from behavioural.causal.resample_summary import as_thought_anchors, question_steps

    assert THRESHOLD == 0.8  # analyze_rollouts.py -st default (l. 64 of its arguments)
    rows, _, _, _ = _fixed_rollouts()
    for r in rows:  # no resample differs: thought-anchors returns 0.0 for cf, this toolkit None
        if r["kind"] == "rollout" and r["different"] is not None:
            r["different"] = False
    steps = question_steps(rows, 3, n_boot=0, seed=0)
    assert all(st["cf_importance"] is None and st["kl_importance"] is None for st in steps)
    assert as_thought_anchors(None) == 0.0 and as_thought_anchors(0.25) == 0.25
