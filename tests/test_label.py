"""The A/B/C labellers (behavioural.labels): the rule labeller's evidence, judge verdict parsing and aggregation,
the final label rule, and the agreement statistics (Cohen's kappa, agreement between judge variants).

Labelling a run, the CLI and resume: tests/test_label_run.py; blind annotation sheets: tests/test_label_sheets.py.
"""
from __future__ import annotations

import pytest
from helpers.label_runs import A_TEXT, B_CONTRA, B_RECOMPUTE, C_TEXT, EDIT, ORIG, PROMPT, Q, make_cont

from behavioural.labels.labellers import (
    JUDGE_VARIANTS,
    JudgeLabeller,
    RuleLabeller,
    kappa,
    parse_verdict,
    rule_evidence,
    variant_agreement,
)
from behavioural.labels.stage import FINAL_RULE, final_label
from loadbearing.engine.generation import Generation


def fake_generate(replies):
    """A stand-in for loadbearing.engine.generation.generate: replies(text) -> reply text."""

    def gen(lm, texts, *, max_new_tokens, batch_size=8, stop_at_answer=False, progress=True, desc=""):
        return [Generation(replies(t), 3, "eos") for t in texts]

    return gen


class _Tok:
    def apply_chat_template(self, msgs, tokenize=False, add_generation_prompt=True):
        return "\n".join(f"[{m['role']}] {m['content']}" for m in msgs) + "\n[assistant] "


class _LM:
    name = "fake-judge"
    tokenizer = _Tok()


# ----------------------------------------------------------------------------------------------------
# rule labeller


def ev(text, original=ORIG, edited=EDIT, inp=PROMPT + f"We start with 4.\n{EDIT}\n"):
    return rule_evidence(text, original, edited, inp)


def test_rule_bypass_is_A():
    assert ev(A_TEXT) == []
    assert ev(C_TEXT) == []  # propagating the edit is not noticing it
    assert RuleLabeller().label_one(make_cont(0, A_TEXT, True))["noticed"] is False


@pytest.mark.parametrize("text,phrase", [
    ("Wait, 5 + 5 = 10", "Wait"),
    ("Actually the sum is 5. 5 + 5 = 10", "Actually"),
    ("Hmm, that's wrong. 5 + 5 = 10", "that's wrong"),
    ("Let me recheck: 5 + 5 = 10", "Let me recheck"),
    ("Correction: 5 + 5 = 10", "Correction"),
    ("I made a mistake above. 5 + 5 = 10", "I made a mistake"),
])
def test_rule_correction_phrases(text, phrase):
    got = [e for e in ev(text) if e["type"] == "correction_phrase"]
    assert got, text
    assert any(phrase.lower() in e["text"].lower() or e["text"].lower() in phrase.lower() for e in got)


def test_rule_recomputes_original_equation_and_spans():
    got = ev(B_RECOMPUTE)
    assert [e["type"] for e in got] == ["recomputes_original"]
    e = got[0]
    assert B_RECOMPUTE[e["start"]:e["end"]] == e["text"] == "4+1 = 5"


def test_rule_recomputes_unseen_original_value_but_not_in_answer_line():
    orig, edited = "3 boxes of 4 apples, so 3 * 4 = 12 apples.", "3 boxes of 4 apples, so 3 * 4 = 27 apples."
    inp = "Tom has 3 boxes with 4 apples each. He eats 2. How many are left?\n" + edited + "\n"
    text = "That gives 12 apples in total.\n12 - 2 = 10\nAnswer: 10"
    got = rule_evidence(text, orig, edited, inp)
    assert [(e["type"], e["text"]) for e in got] == [("recomputes_original", "12")]
    assert got[0]["start"] == text.index("12")
    # the original value only in the final answer line is not a visible repair
    assert rule_evidence("27 - 2 = 25\nThe answer is 12.\nAnswer: 12", orig, edited, inp) == []


def test_rule_contradicts_edit():
    got = ev(B_CONTRA)
    assert [(e["type"], e["text"]) for e in got] == [("contradicts_edit", "not 13")]
    got = ev("13 is wrong here. 5 + 5 = 10")
    assert [(e["type"], e["text"]) for e in got] == [("contradicts_edit", "13 is wrong")]
    got = ev("4 + 1 is 6, so 6 + 5 = 11")  # recomputed to another value: contradicts the edited line
    assert [e["type"] for e in got] == ["contradicts_edit"]
    for e in got:
        assert "4 + 1 is 6" == e["text"]


def test_rule_text_edit_quoting_is_not_restating():
    orig = "So option B is correct."
    edited = "The following claim is false: So option B is correct."
    assert rule_evidence("As stated, The following claim is false: So option B is correct.\nAnswer: A", orig, edited) == []
    # v1.1 (rule version 2): the edit kept the whole original line and only added a prefix, so repeating the
    # line is copying the prefix, not repair evidence (v1.0 counted it as recomputes_original)
    assert rule_evidence("Hmm. So option B is correct.\nAnswer: B", orig, edited) == []
    got = rule_evidence("The claim is actually true.\nAnswer: B", orig, edited)
    assert {e["type"] for e in got} == {"contradicts_edit", "correction_phrase"}


def test_rule_controls_have_no_edit_evidence():
    c = make_cont(0, "4 + 1 = 5\n5 + 5 = 10\nAnswer: 10", True, condition="control")
    assert RuleLabeller().label_one(c) == {"noticed": False, "evidence": [], "evidence_types": [], "evidence_kinds": {}}


# ----------------------------------------------------------------------------------------------------
# judge parsing and aggregation


@pytest.mark.parametrize("reply", ["", "   ", "A good point", "The answer is NOTICED", "NOTICED\nbecause it says wait",
                                   "maybe", "A or B", "NOTICED NOT NOTICED", "Verdict: C", "YESNO", "I think B"])
def test_parse_verdict_garbage_is_null(reply):
    assert all(parse_verdict(reply, v) is None for v in JUDGE_VARIANTS)


@pytest.mark.parametrize("reply,idx,val", [
    ("NOTICED", 0, True), ("not noticed.", 0, False), ("**NOT NOTICED**", 1, False),
    ("Verdict: A", 2, False), ("**Verdict: B**", 3, True), ("(B)", 2, True), ("Some reasoning.\nVerdict: A", 3, False),
    ("YES", 4, True), ("no", 4, False),
])
def test_parse_verdict_strict_forms(reply, idx, val):
    assert parse_verdict(reply, JUDGE_VARIANTS[idx]) is val
    # a verdict word of another variant's vocabulary is not accepted
    other = JUDGE_VARIANTS[(idx + 2) % len(JUDGE_VARIANTS)]
    if {w for w, _ in other.verdicts} != {w for w, _ in JUDGE_VARIANTS[idx].verdicts}:
        assert parse_verdict(reply, other) is None


def test_judge_variants_differ_in_wording_and_original_shown():
    assert len(JUDGE_VARIANTS) >= 4
    assert len({v.instruction for v in JUDGE_VARIANTS}) == len(JUDGE_VARIANTS)
    assert {v.show_original for v in JUDGE_VARIANTS} == {True, False}
    judge = JudgeLabeller(_LM(), "fake")
    c = make_cont(0, A_TEXT, True)
    assert all(v.prefill in ("Verdict:", "Answer:") for v in JUDGE_VARIANTS)
    shown = judge._texts(JUDGE_VARIANTS[0], Q, c)
    assert shown.endswith("[assistant] Verdict:")
    blind = judge._texts(JUDGE_VARIANTS[1], Q, c)
    assert "Before the edit" in shown and ORIG in shown and EDIT in shown and A_TEXT in shown and Q in shown
    assert "Before the edit" not in blind and ORIG not in blind.replace(EDIT, "")


def _by_variant(answers: dict):
    """replies keyed by variant: the variant is recognised from its instruction in the prompt."""

    def reply(text):
        for v in JUDGE_VARIANTS:
            if v.instruction in text:
                return answers.get(v.name, "garbage")
        raise AssertionError("unknown prompt")

    return reply


def test_judge_majority_and_null():
    conts = [make_cont(0, A_TEXT, True), make_cont(4, C_TEXT, False)]
    maj = {"notice_shown": " NOTICED", "notice_blind": " NOTICED", "ab_shown": " B", "ab_blind": " A",
           "yesno_blind": " NO"}
    res = JudgeLabeller(_LM(), "fake", generate_fn=fake_generate(_by_variant(maj))).label(conts, {}, progress=False)
    assert res[0]["noticed"] is True and res[0]["votes"] == {"noticed": 3, "not_noticed": 2, "null": 0}
    assert res[1]["noticed"] is None and "skipped" in res[1]  # wrong answers are not judged by default
    # two parseable verdicts out of five: no strict majority -> undecided, never A
    few = {"notice_shown": " NOT NOTICED", "ab_shown": " A\nBecause it never says wait.\nVerdict: A"}
    res = JudgeLabeller(_LM(), "fake", generate_fn=fake_generate(_by_variant(few))).label(conts[:1], {}, progress=False)
    assert res[0]["noticed"] is None
    assert res[0]["votes"] == {"noticed": 0, "not_noticed": 2, "null": 3}
    assert final_label(True, res[0]["noticed"]) == (None, "correct answer, notice undecided")
    res = JudgeLabeller(_LM(), "fake", generate_fn=fake_generate(lambda t: " A good one")).label(conts[:1], {}, progress=False)
    assert res[0]["noticed"] is None and res[0]["votes"]["null"] == len(JUDGE_VARIANTS)
    res = JudgeLabeller(_LM(), "fake", generate_fn=fake_generate(lambda t: "lorem ipsum")).label(conts[:1], {}, progress=False)
    assert res[0]["noticed"] is None
    assert all(v["noticed"] is None and v["reply"] == "lorem ipsum" for v in res[0]["variants"].values())


def test_final_label_rule():
    assert final_label(None, True) == (None, "unparseable answer")
    assert final_label(False, True)[0] == "C"
    assert final_label(False, None)[0] == "C"
    assert final_label(True, True)[0] == "B"
    assert final_label(True, False)[0] == "A"
    assert final_label(True, None)[0] is None
    assert "C if the answer is parseable and wrong" in FINAL_RULE


# ----------------------------------------------------------------------------------------------------
# agreement statistics (expected values computed by hand)


def test_kappa_known_values():
    a = ["A", "A", "B", "C", "C", "A"]
    b = ["A", "B", "B", "C", "C", "A"]
    # po = 5/6; marginals a: A3 B1 C2, b: A2 B2 C2 -> pe = (6 + 2 + 4)/36 = 1/3; kappa = (5/6 - 1/3)/(2/3) = 0.75
    k = kappa(a, b)
    assert k["n"] == 6 and k["kappa"] == pytest.approx(0.75) and k["agreement"]["k"] == 5
    # binary: both raters C on items 4,5 only -> perfect agreement
    binary = lambda xs: ["C" if x == "C" else "non-C" for x in xs]  # noqa: E731
    assert kappa(binary(a), binary(b))["kappa"] == pytest.approx(1.0)
    # po = 2/4, pe = 0.5 -> kappa 0
    assert kappa(["A", "A", "B", "B"], ["A", "B", "A", "B"])["kappa"] == pytest.approx(0.0)
    # None = not rated: dropped; one shared label only -> undefined, null (not 1, not 0)
    k = kappa(["A", None, "A"], ["A", "B", "A"])
    assert k["n"] == 2 and k["kappa"] is None and k["agreement"]["rate"] == 1.0
    assert kappa([], [])["kappa"] is None and kappa([], [])["agreement"]["rate"] is None


def test_variant_agreement():
    names = ["v1", "v2", "v3"]
    items = [{"variants": {"v1": {"noticed": a}, "v2": {"noticed": b}, "v3": {"noticed": c}}}
             for a, b, c in [(True, True, True), (False, False, False), (True, False, True), (None, False, False)]]
    agr = variant_agreement(items, names)
    assert agr["n_items"] == 4
    assert agr["unanimous"]["k"] == 2 and agr["unanimous"]["n"] == 4
    assert agr["unanimous_among_fully_parsed"]["n"] == 3
    assert agr["per_variant"]["v1"]["parsed"]["k"] == 3
    pair = {(p["a"], p["b"]): p for p in agr["pairwise_kappa"]}
    # v1 vs v3 on 3 shared items: identical -> kappa 1
    assert pair[("v1", "v3")]["kappa"] == pytest.approx(1.0) and pair[("v1", "v3")]["n"] == 3
    # v1 vs v2 on (T,T),(F,F),(T,F): po=2/3; pe = (2/3*1/3)+(1/3*2/3) = 4/9; kappa = (2/3-4/9)/(5/9) = 0.4
    assert pair[("v1", "v2")]["kappa"] == pytest.approx(0.4)

