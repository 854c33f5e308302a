"""Typed results: each stage's summary is a TypedDict written to JSON and read back unchanged, and a file that
lacks a key its type requires is one clear error naming the key.

    .venv/bin/pytest -q tests/test_results.py
"""
from __future__ import annotations

import json

import pytest

from behavioural.results import BehaviourSummary, LabelSummary, read_summary
from loadbearing.files import write_json
from loadbearing.results.check import ResultError, check_result, read_result, write_result


def _records(n_questions: int = 6):
    """Baselines and continuations (perturbed + control per question, two strategies, one unparsed) as the
    protocol writes them."""
    baselines, conts = [], []
    for q in range(n_questions):
        qid = f"arith/{q}"
        ok = q % 3 != 2
        baselines.append({"question_id": qid, "question": f"Start with {q}.", "correct": ok if q != 5 else None,
                          "eligible": ok, "reason": "eligible" if ok else "wrong", "difficulty": f"s2_o{3 + 2 * (q % 2)}",
                          "task": f"s2_o{3 + 2 * (q % 2)}"})
        if not ok:
            continue
        for k, strat in enumerate(("arithmetic", "contradiction")):
            for cond in ("perturbed", "control"):
                label = None if (q == 4 and cond == "perturbed") else ("C" if cond == "perturbed" and (q + k) % 2 else "A")
                conts.append({"id": f"{qid}/{strat}/{cond}", "question_id": qid, "condition": cond, "strategy": strat,
                              "position": "middle", "line_index": 1, "label": label, "input_text": f"{qid} {strat} {cond}",
                              "difficulty": baselines[-1]["difficulty"], "task": baselines[-1]["task"]})
    return baselines, conts


def test_the_behaviour_summary_round_trips_through_json_unchanged(tmp_path):
    from behavioural.summary import summarise

    s = summarise(*_records(), seed=0, n_boot=200)
    s.update(status="ok", protocol_version="1.1", run_dir=str(tmp_path))
    write_result(tmp_path / "summary.json", s)
    back = read_summary(tmp_path)
    assert back == s and list(back) == list(s)  # same keys, same order, same numbers
    assert back["overall"]["propagation"]["n"] == 6 and back["by"]["strategy"]["contradiction"]["perturbed"] == 4
    write_json(tmp_path / "plain.json", s)  # the stage's own writer: byte-identical
    assert (tmp_path / "plain.json").read_bytes() == (tmp_path / "summary.json").read_bytes()
    assert read_summary(tmp_path / "nowhere") is None


def test_the_label_summary_round_trips(tmp_path):
    from behavioural.labels.label_summary import summarize
    from behavioural.labels.rule import RuleLabeller

    _, conts = _records()
    recs = [dict(c, correct=None if c["label"] is None else c["label"] != "C",
                 labellers={"rule": {"label": c["label"], "noticed": False}}) for c in conts]
    s = summarize(recs, [RuleLabeller()], "rule")
    write_result(tmp_path / "summary.json", s)
    back = read_result(tmp_path / "summary.json", LabelSummary)
    assert back == json.loads(json.dumps(s)) and back["perturbed"]["counts"]["C"] == 3


def test_a_summary_missing_a_key_is_one_clear_error(tmp_path):
    from behavioural.summary import summarise

    s = summarise(*_records(), seed=0, n_boot=200)
    del s["overall"]["propagation"]
    del s["by"]["strategy"]["arithmetic"]["questions"]
    (tmp_path / "summary.json").write_text(json.dumps(s))
    with pytest.raises(ResultError) as e:
        read_result(tmp_path / "summary.json", BehaviourSummary)
    msg = str(e.value)
    assert "summary.json is not a BehaviourSummary" in msg and "'overall.propagation'" in msg
    assert "'by.strategy.arithmetic.questions'" in msg and "re-run the stage" in msg
    with pytest.raises(ResultError, match="the file is list, not an object"):
        check_result([], BehaviourSummary)
