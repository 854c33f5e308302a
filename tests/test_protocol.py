"""Protocol logic: positions, strategies on real lines, prefixes, records, summaries.

The protocol on the scripted model (resume, refusals, SIGKILL): tests/test_protocol_runs.py; the CLI:
tests/test_protocol_cli.py.
"""
from __future__ import annotations

import json

import pytest

from behavioural.strategies import STRATEGIES, NotApplicable, StrategyError, apply, parse_strategies
from behavioural.summary import summarise
from loadbearing.engine.generation import encode
from loadbearing.questions.data import load_questions, question_key
from loadbearing.questions.prompts import assistant_prefix, build_prompt, position_index, split_trace
from loadbearing.records import Baseline, Continuation


# ---------------------------------------------------------------- positions
@pytest.mark.parametrize("n, expected", [(3, (0, 1, 1)), (4, (1, 2, 2)), (5, (1, 2, 3)), (8, (2, 4, 6)), (2, (0, 0, 0))])
def test_position_formula(n, expected):
    assert tuple(position_index(n, p) for p in ("early", "middle", "late")) == expected


def test_position_rejects_bad_input():
    with pytest.raises(ValueError, match="unknown position"):
        position_index(5, "first")
    with pytest.raises(ValueError, match="at least 2"):
        position_index(1, "early")


# ---------------------------------------------------------------- strategies
class Q:
    def __init__(self, question="Start with 4. Add 3. What is the result?", dataset="arith", answer="7", choices=None, id="q1"):
        self.question, self.dataset, self.answer, self.choices, self.id, self.task = question, dataset, answer, choices, id, None


def test_original_evaluator_strategies():
    assert apply("arithmetic", "We start with 4.", Q(), 0) == "We start with 11."
    assert apply("arithmetic", "4 + 3 = 7", Q(), 0) == "11 + 3 = 7"
    assert apply("contradiction", "4 + 3 = 7", Q(), 0) == "The following claim is false: 4 + 3 = 7"
    assert isinstance(apply("arithmetic", "No numbers here.", Q(), 0), NotApplicable)


def test_operation_swap_recomputes_with_swapped_op():
    assert apply("operation_swap", "4 + 3 = 7", Q(), 0) == "4 - 3 = 1"
    assert apply("operation_swap", "She makes 9 * 2 = $18 every day.", Q(), 0) == "She makes 9 / 2 = $4.5 every day."
    na = apply("operation_swap", "We start with 4.", Q(), 0)
    assert isinstance(na, NotApplicable) and "calculation" in na.reason


def test_arithmetic_change_changes_the_result_deterministically():
    a = apply("arithmetic_change", "4 + 3 = 7", Q(), 0)
    assert a.startswith("4 + 3 = ") and a != "4 + 3 = 7"
    assert a == apply("arithmetic_change", "4 + 3 = 7", Q(), 0)
    outs = {apply("arithmetic_change", "4 + 3 = 7", Q(), s) for s in range(20)}
    assert len(outs) > 1  # the seed matters


def test_strategies_on_real_lines_of_each_dataset(data_dir):
    gsm = load_questions("gsm8k", data_dir=data_dir)[0]
    mmlu = load_questions("mmlu", task="abstract_algebra", data_dir=data_dir)[0]
    bbh = load_questions("bbh", task="navigate", data_dir=data_dir)[0]
    gsm_line = "Janet sells 16 - 3 - 4 = 9 duck eggs a day."
    mmlu_line = "The degree of Q(sqrt(2)) over Q is 2, since x^2 - 2 is irreducible."
    bbh_line = "Take 7 steps forward, so we are now 7 steps ahead of the start and the answer is not yet clear."
    for q, line in ((gsm, gsm_line), (mmlu, mmlu_line), (bbh, bbh_line)):
        for name in STRATEGIES:
            out = apply(name, line, q, 42)
            assert out == apply(name, line, q, 42), name  # deterministic
            if isinstance(out, NotApplicable):
                assert out.reason, name
                # v1.1: the four multiple-choice strategies (paper semantics) need answer options
                assert name in ("operation_swap", "wrong_elimination", "false_analogy", "reversed_logic",
                                "confidence_injection"), (name, q.dataset, out.reason)
            else:
                assert isinstance(out, str) and out != line, (name, q.dataset)
    we = apply("wrong_elimination", mmlu_line, mmlu, 0)
    assert we.startswith(f"Option {mmlu.answer} can be ruled out")  # v1.1: names the gold and a wrong option
    assert isinstance(apply("wrong_elimination", gsm_line, gsm, 0), NotApplicable)
    assert apply("reversed_logic", bbh_line, bbh, 0) != bbh_line


def test_parse_strategies():
    assert parse_strategies(None, "arith") == ["arithmetic_change"]
    assert parse_strategies(None, "mmlu") == ["wrong_elimination"]
    assert "wrong_elimination" not in parse_strategies("all", "gsm8k")
    assert parse_strategies("arithmetic, contradiction,arithmetic", "arith") == ["arithmetic", "contradiction"]
    with pytest.raises(StrategyError, match="unknown strategy 'nope'"):
        parse_strategies("nope", "arith")
    with pytest.raises(StrategyError, match="does not apply to dataset 'gsm8k'"):
        parse_strategies("wrong_elimination", "gsm8k")


# ---------------------------------------------------------------- traces and prefixes
def test_split_trace_and_prefix():
    text = "We start with 4.\n\n4 + 3 = 7\n7 - 2 = 5\nAnswer: 5"
    tr = split_trace(text, "arith")
    assert tr.lines == ("We start with 4.", "4 + 3 = 7", "7 - 2 = 5") and tr.answer_line == 4
    prefix, span = assistant_prefix(text, tr, 1, "4 + 3 = 9")
    assert prefix == "We start with 4.\n\n4 + 3 = 9\n" and prefix[span[0]:span[1]] == "4 + 3 = 9"
    control, _ = assistant_prefix(text, tr, 1)
    assert control == "We start with 4.\n\n4 + 3 = 7\n"


def test_split_trace_reasoning_model():
    text = "<think>\nFirst, 2 + 2 = 4.\nThen 4 * 3 = 12.\n</think>\nSo 12.\nThe answer is 12."
    tr = split_trace(text, "gsm8k")
    assert tr.lines == ("First, 2 + 2 = 4.", "Then 4 * 3 = 12.", "So 12.")
    for line, (s, e) in zip(tr.lines, tr.spans):
        assert text[s:e] == line


def test_prefix_tokenised_once_without_second_bos(tokenizer):
    q = load_questions("arith", task="s2_o5", n_per_level=3)[0]
    prompt = build_prompt(tokenizer, q)
    text = prompt + "We start with 4.\n"
    ids = encode(tokenizer, text)
    assert ids == tokenizer(text, add_special_tokens=False)["input_ids"]
    bos = tokenizer.bos_token_id
    # exactly the special tokens the chat template wrote, none added on top
    assert ids.count(bos) == text.count(tokenizer.bos_token)
    assert tokenizer.decode(ids) == text


# ---------------------------------------------------------------- records
def test_records_round_trip():
    c = Continuation(id="q|s|early|perturbed", question_id="q", dataset="arith", task="s2_o5", difficulty="s2_o5",
                     strategy="s", position="early", line_index=0, n_lines=3, original_line="a", edited_line="b",
                     condition="perturbed", prefix_text="b\n", input_text="P b\n", input_tokens=3, edit_span=(2, 3),
                     continuation="Answer: 1", new_tokens=3, finish_reason="eos", parsed_answer="1", gold="2",
                     correct=False, label="C")
    d = json.loads(json.dumps(c.to_dict()))
    assert Continuation.from_dict(d) == c
    b = Baseline(question_id="q", dataset="arith", task=None, difficulty=None, question="x", prompt="p", prompt_tokens=1,
                 trace="t", lines=("a", "b"), answer_line=2, parsed_answer="1", gold="1", correct=True, eligible=False,
                 reason="too_few_lines(2<3)", finish_reason="eos", new_tokens=3)
    assert Baseline.from_dict(json.loads(json.dumps(b.to_dict()))) == b
    with pytest.raises(ValueError, match="unknown fields"):
        Baseline.from_dict(dict(b.to_dict(), extra=1))
    assert b.question_key == question_key("x")  # filled from the question text when absent
    shared = Continuation.from_dict(dict(d, question_key="k1", memberships=[["s", "early"], ["t", "early"]]))
    assert shared.memberships == (("s", "early"), ("t", "early")) and shared.cells() == shared.memberships
    assert Continuation.from_dict(json.loads(json.dumps(shared.to_dict()))) == shared
    assert c.cells() == (("s", "early"),)  # a schema-1 record is its own single cell


def _cont(qid, strategy, position, line, condition, label, memberships=None, inp=None):
    return {"id": f"{qid}|{strategy}|{position}|{condition}", "question_id": qid, "question_key": "k" + qid,
            "strategy": strategy, "position": position, "line_index": line, "condition": condition, "label": label,
            "memberships": memberships or [[strategy, position]], "task": "t", "difficulty": None,
            "input_text": inp or f"{qid}/{line}/{condition}/{strategy}"}


def test_summary_counts_each_generation_once_pooled_and_in_every_group():
    b = [{"question_id": q, "question_key": "k" + q, "correct": c, "eligible": c is True, "reason": "x",
          "difficulty": None, "task": "t"} for q, c in (("1", True), ("2", True), ("3", None), ("4", False))]
    conts = []
    for q in ("1", "2"):
        conts += [_cont(q, "a", "middle", 1, "perturbed", "C", [["a", "middle"], ["a", "late"]]),
                  _cont(q, "a", "early", 0, "perturbed", "non-C"),
                  _cont(q, "a", "middle", 1, "control", "non-C", [["a", "middle"], ["a", "late"], ["b", "middle"]]),
                  _cont(q, "a", "early", 0, "control", "non-C"),
                  _cont(q, "b", "middle", 1, "perturbed", None)]
    s = summarise(b, conts, seed=0, n_boot=200)
    assert s["generations"] == {"distinct": 10, "records": 10, "perturbed": 6, "control": 4, "cells": 16, "shared": 4}
    o = s["overall"]
    assert (o["propagation"]["k"], o["propagation"]["n"], o["coverage"]["k"], o["coverage"]["n"]) == (2, 4, 4, 6)
    assert o["propagation"]["n_questions"] == 2 and o["controls"] == 4
    pos = s["by"]["position"]
    # a's middle and late edits are one generation: one group middle=late (b's middle edit stays middle)
    assert list(pos) == ["early", "middle", "middle=late"] and "late" not in pos
    assert pos["middle=late"]["propagation"]["n"] == 2 and pos["middle=late"]["perturbed"] == 2
    assert pos["middle"]["perturbed"] == 2 and pos["middle"]["controls"] == pos["middle=late"]["controls"] == 2
    assert s["by"]["strategy"]["b"]["controls"] == 2 and s["by"]["strategy"]["b"]["coverage"]["k"] == 0
    assert s["collapsed_positions"]["pairs"] == {"middle=late": 2}
    # baseline accuracy, paper definition vs parseable only
    assert (s["baseline_accuracy"]["k"], s["baseline_accuracy"]["n"]) == (2, 4)
    assert (s["baseline_accuracy_parseable"]["k"], s["baseline_accuracy_parseable"]["n"]) == (2, 3)
    assert (s["baseline_coverage"]["k"], s["baseline_coverage"]["n"]) == (3, 4)

