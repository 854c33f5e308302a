"""Tests for the A/B/C labelling stage: the rule labeller, judge verdict parsing and aggregation, the final
label rule, summaries, the never-overwrite CLI, blind annotation sheets and Cohen's kappa."""
from __future__ import annotations

import csv
import json
import re
from pathlib import Path

import pytest

from behavioural.labels.labellers import (
    JUDGE_VARIANTS,
    JudgeLabeller,
    RuleLabeller,
    kappa,
    parse_verdict,
    rule_evidence,
    variant_agreement,
)
from behavioural.labels.stage import (
    FINAL_RULE,
    LabelRecord,
    compare_sheets,
    export_sheet,
    final_label,
    label_run,
    load_labels,
    main,
    read_sheet,
)
from loadbearing.engine.generation import Generation
from loadbearing.files import file_sha256, read_jsonl
from loadbearing.records import Baseline, Continuation

# ----------------------------------------------------------------------------------------------------
# a fake run directory

Q = "Start with 4. Add 1. Add 5. What is the result?"
PROMPT = f"<|im_start|>user\n{Q}<|im_end|>\n<|im_start|>assistant\n"
ORIG, EDIT = "4 + 1 = 5", "4 + 1 = 13"


def make_cont(i: int, text: str, correct: bool | None, *, condition: str = "perturbed", position: str = "middle",
              strategy: str = "arithmetic_change", original: str = ORIG, edited: str = EDIT,
              question_id: str | None = None) -> dict:
    qid = question_id or f"arith/s2_o5/{i}"
    edited = original if condition == "control" else edited
    prefix = f"We start with 4.\n{edited}\n"
    inp = PROMPT + prefix
    start = inp.index(edited, len(PROMPT))
    parsed = None if correct is None else ("10" if correct else "18")
    c = Continuation(
        id=f"{qid}|{strategy}|{position}|{condition}", question_id=qid, dataset="arith", task="s2_o5", difficulty="s2_o5",
        strategy=strategy, position=position, line_index=1, n_lines=3, original_line=original, edited_line=edited,
        condition=condition, prefix_text=prefix, input_text=inp, input_tokens=len(inp.split()),
        edit_span=(start, start + len(edited)), continuation=text, new_tokens=len(text.split()), finish_reason="eos",
        parsed_answer=parsed, gold="10", correct=correct, label=None if correct is None else ("non-C" if correct else "C"),
    )
    return c.to_dict()


A_TEXT = "5 + 5 = 10\nAnswer: 10"
B_PHRASE = "Wait, that's wrong.\n5 + 5 = 10\nAnswer: 10"
B_RECOMPUTE = "4+1 = 5\n5 + 5 = 10\nAnswer: 10"
B_CONTRA = "The sum is 5, not 13.\n5 + 5 = 10\nAnswer: 10"
C_TEXT = "13 + 5 = 18\nAnswer: 18"
NOANSWER = "13 + 5 = 18"


def fake_run(tmp_path: Path) -> tuple[Path, list[dict]]:
    conts = [
        make_cont(0, A_TEXT, True, position="early"),
        make_cont(1, B_PHRASE, True, position="early"),
        make_cont(2, B_RECOMPUTE, True),
        make_cont(3, B_CONTRA, True, position="late"),
        make_cont(4, C_TEXT, False),
        make_cont(5, C_TEXT, False, position="late"),
        make_cont(6, NOANSWER, None),
        make_cont(0, A_TEXT, True, condition="control", position="early"),
        make_cont(4, A_TEXT, True, condition="control"),
    ]
    rd = tmp_path / "run"
    rd.mkdir()
    with open(rd / "continuations.jsonl", "w") as f:
        for c in conts:
            f.write(json.dumps(c) + "\n")
    with open(rd / "baselines.jsonl", "w") as f:
        for i in range(7):
            b = Baseline(question_id=f"arith/s2_o5/{i}", dataset="arith", task="s2_o5", difficulty="s2_o5", question=Q,
                         prompt=PROMPT, prompt_tokens=10, trace="We start with 4.\n4 + 1 = 5\n5 + 5 = 10\nAnswer: 10",
                         lines=("We start with 4.", "4 + 1 = 5", "5 + 5 = 10"), answer_line=3, parsed_answer="10",
                         gold="10", correct=True, eligible=True, reason="eligible", finish_reason="eos", new_tokens=12)
            f.write(json.dumps(b.to_dict()) + "\n")
    (rd / "manifest.json").write_text(json.dumps({"kind": "behavioural.run", "status": "ok",
                                                  "model": {"name": "smollm2-135m-instruct"}}))
    return rd, conts


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


# ----------------------------------------------------------------------------------------------------
# labelling a run


def test_label_run_rule(tmp_path):
    rd, conts = fake_run(tmp_path)
    before = file_sha256(rd / "continuations.jsonl")
    out = label_run(rd, [RuleLabeller()], progress=False)
    assert out == rd / "labels" / "rule"
    assert file_sha256(rd / "continuations.jsonl") == before  # generation records untouched
    recs = {r["id"]: LabelRecord.from_dict(r) for r in read_jsonl(out / "labels.jsonl")}
    assert set(recs) == {c["id"] for c in conts}
    got = [recs[c["id"]].label for c in conts]
    assert got == ["A", "B", "B", "B", "C", "C", None, "A", "A"]
    assert recs[conts[6]["id"]].reason == "unparseable answer"
    ev1 = recs[conts[1]["id"]].labellers["rule"]["evidence"]
    assert ev1[0]["type"] == "correction_phrase" and B_PHRASE[ev1[0]["start"]:ev1[0]["end"]] == ev1[0]["text"]
    settings = json.loads((out / "settings.json").read_text())
    assert settings["status"] == "ok" and settings["final_labeller"] == "rule" and settings["final_rule"] == FINAL_RULE
    s = json.loads((out / "summary.json").read_text())
    p = s["perturbed"]
    assert p["n"] == 7 and p["counts"] == {"A": 1, "B": 3, "C": 2, "null": 1}
    assert p["rates"]["C"]["k"] == 2 and p["rates"]["C"]["n"] == 6 and p["rates"]["C"]["wilson"][0] is not None
    assert p["propagation"]["n"] == 6
    assert p["B_among_correct_labelled"]["k"] == 3 and p["B_among_correct_labelled"]["n"] == 4
    assert p["by"]["position"]["early"]["counts"] == {"A": 1, "B": 1, "C": 0, "null": 0}
    assert p["by"]["position"]["late"]["counts"] == {"A": 0, "B": 1, "C": 1, "null": 0}
    assert set(p["by"]) == {"position", "strategy", "task", "difficulty"}
    assert s["control"]["counts"] == {"A": 2, "B": 0, "C": 0, "null": 0}
    assert s["control"]["rates"]["C"]["rate"] == 0.0
    assert s["labellers"]["rule"]["perturbed"]["counts"] == p["counts"]


def test_cli_never_overwrites(tmp_path, capsys):
    rd, _ = fake_run(tmp_path)
    assert main([str(rd), "--quiet"]) == 0
    first = (rd / "labels" / "rule" / "labels.jsonl").read_bytes()
    assert main([str(rd), "--labeller", "rule", "--quiet"]) == 0
    assert (rd / "labels" / "rule-2" / "labels.jsonl").is_file()
    assert (rd / "labels" / "rule" / "labels.jsonl").read_bytes() == first
    assert main([str(rd), "--labelling", "rule", "--quiet"]) == 2
    err = capsys.readouterr().err
    assert "already exists" in err and "never overwritten" in err and err.count("\n") == 1
    assert sorted(p.name for p in (rd / "labels").iterdir()) == ["rule", "rule-2"]
    name, labels = load_labels(rd)
    assert name in ("rule", "rule-2") and len(labels) == 9 and set(labels.values()) == {"A", "B", "C", None}
    assert load_labels(rd, "rule")[1] == labels
    assert main([str(rd), "--final", "judge", "--quiet"]) == 2
    assert main([str(rd), "--labeller", "bogus"]) == 2
    assert main([str(tmp_path / "nope")]) == 2


# ----------------------------------------------------------------------------------------------------
# blind annotation sheets


def _fill(sheet: Path, dest: Path, labels: dict[str, str], mutate=None) -> Path:
    with open(sheet, newline="") as f:
        rows = list(csv.reader(f))
    header, body = rows[0], rows[1:]
    for r in body:
        r[-1] = labels.get(r[0], "")
    if mutate:
        header, body = mutate(header, body)
    with open(dest, "w", newline="") as f:
        w = csv.writer(f)
        w.writerow(header)
        w.writerows(body)
    return dest


def test_export_sheet_is_blind_seeded_and_never_overwrites(tmp_path):
    rd, conts = fake_run(tmp_path)
    sheet, key = export_sheet(rd, 5, seed=3)
    with open(sheet, newline="") as f:
        rows = list(csv.DictReader(f))
    assert list(rows[0]) == ["item_id", "question", "reasoning_before_edit", "original_line", "edited_line",
                             "continuation", "label"]
    assert len(rows) == 5 and all(r["label"] == "" for r in rows)
    assert all(re.fullmatch(r"item-\d{3}", r["item_id"]) for r in rows)
    assert not any("perturbed" in v or "control" in v for r in rows for v in r.values())
    items = json.loads(key.read_text())["items"]
    by_id = {c["id"]: c for c in conts}
    for r in rows:
        c = by_id[items[r["item_id"]]]
        assert c["condition"] == "perturbed"
        assert r["continuation"] == c["continuation"] and r["edited_line"] == c["edited_line"] and r["question"] == Q
    sheet2, key2 = export_sheet(rd, 5, seed=3)
    assert sheet2 != sheet and sheet2.read_bytes() == sheet.read_bytes()  # same seed, same sample; new file
    assert json.loads(key2.read_text())["items"] == items
    sheet3, _ = export_sheet(rd, 5, seed=4)
    assert json.loads(sheet3.with_name(sheet3.stem + ".key.json").read_text())["items"] != items


def test_sheet_kappa_between_annotators_and_labellers(tmp_path, capsys):
    rd, conts = fake_run(tmp_path)
    assert main([str(rd), "--quiet"]) == 0
    assert main([str(rd), "--export-sheet", "6", "--seed", "1"]) == 0
    sheet = rd / "annotation" / "sheet-s1-n6.csv"
    items = json.loads((rd / "annotation" / "sheet-s1-n6.key.json").read_text())["items"]
    order = sorted(items)
    a = dict(zip(order, ["A", "A", "B", "C", "C", "A"]))
    b = dict(zip(order, ["A", "B", "B", "C", "C", "A"]))
    fa = _fill(sheet, tmp_path / "alice.csv", a)
    fb = _fill(sheet, tmp_path / "bob.csv", b)
    capsys.readouterr()
    assert main([str(rd), "--import-sheet", str(fa), str(fb)]) == 0
    out = capsys.readouterr().out
    assert "alice vs bob" in out
    rep = json.loads((rd / "annotation" / "agreement.json").read_text())
    pair = rep["between_annotators"][0]
    assert pair["ABC"]["kappa"] == pytest.approx(0.75) and pair["ABC"]["n"] == 6
    assert pair["C_vs_nonC"]["kappa"] == pytest.approx(1.0)
    # against the rule labeller: recompute by hand from the labels file
    lab = {r["id"]: r["label"] for r in read_jsonl(rd / "labels" / "rule" / "labels.jsonl")}
    ours = [lab[items[i]] for i in order]
    from sklearn.metrics import cohen_kappa_score

    pairs = [(x, a[i]) for x, i in zip(ours, order) if x is not None]
    row = next(r for r in rep["against_labellers"] if r["annotator"] == "alice" and r["labeller"] == "rule")
    assert row["ABC"]["n"] == len(pairs)
    exp = cohen_kappa_score([p[0] for p in pairs], [p[1] for p in pairs])
    assert row["ABC"]["kappa"] == pytest.approx(exp)
    assert any(r["labeller"] == "answer (correctness)" for r in rep["against_labellers"])
    # a second import writes a new agreement file
    assert main([str(rd), "--import-sheet", str(fa), str(fb)]) == 0
    assert (rd / "annotation" / "agreement-2.json").is_file()
    # direct API on one sheet with a missing row: counts say so
    rep = compare_sheets(rd, [_fill(sheet, tmp_path / "carol.csv", dict(list(a.items())[:4]),
                                    mutate=lambda h, body: (h, [r for r in body if r[-1]]))])
    assert rep["annotators"]["carol"]["n_missing"] == 2


@pytest.mark.parametrize("mutate,needle", [
    (lambda h, b: (h, [["", *b[0][1:]], *b[1:]]), "row 2: missing item_id"),
    (lambda h, b: (h, [b[0], [*b[1][:-1], "D"], *b[2:]]), "row 3: unknown label 'D'"),
    (lambda h, b: (h, [b[0], [*b[1][:-1], ""], *b[2:]]), "row 3: no label"),
    (lambda h, b: (h, [*b, b[0]]), "duplicate row"),
    (lambda h, b: (h, [["item-999", *b[0][1:]], *b[1:]]), "row 2: unknown item id 'item-999'"),
    (lambda h, b: (h[:-1] + ["verdict"], b), "no 'label' column"),
])
def test_bad_sheets_fail_with_row(tmp_path, capsys, mutate, needle):
    rd, _ = fake_run(tmp_path)
    sheet, key = export_sheet(rd, 4, seed=0)
    items = json.loads(key.read_text())["items"]
    bad = _fill(sheet, tmp_path / "bad.csv", {i: "A" for i in items}, mutate=mutate)
    capsys.readouterr()
    assert main([str(rd), "--import-sheet", str(bad)]) == 2
    err = capsys.readouterr().err.strip()
    assert needle in err and "bad.csv" in err and "\n" not in err
    assert not (rd / "annotation" / "agreement.json").exists()


def test_read_sheet_accepts_lowercase_and_blank_lines(tmp_path):
    p = tmp_path / "s.csv"
    p.write_text("item_id,label\nitem-001, b \n\nitem-002,c\n")
    assert read_sheet(p, {"item-001": "x", "item-002": "y", "item-003": "z"}) == {"item-001": "B", "item-002": "C"}


# ----------------------------------------------------------------------------------------------------
# the judge end to end with real models


def test_judge_end_to_end_tiny_model_via_cli(tmp_path, tiny_lm, capsys):
    """A random tiny Llama saved as a local model directory: the CLI loads it with load_model, asks every
    variant, records every reply, and its garbage verdicts give null A/B (never A)."""
    rd, conts = fake_run(tmp_path)
    mdir = tmp_path / "tiny-judge"
    tiny_lm.model.save_pretrained(mdir)
    tiny_lm.tokenizer.save_pretrained(mdir)
    assert main([str(rd), "--labeller", "rule", "--labeller", f"judge:{mdir}", "--final", "judge",
                 "--judge-max-new-tokens", "3", "--judge-batch-size", "16", "--quiet", "--device", "cpu"]) == 0
    out = rd / "labels" / "rule+judge-tiny-judge_final-judge-tiny-judge"
    recs = read_jsonl(out / "labels.jsonl")
    jn = f"judge:{mdir}"
    assert [r["id"] for r in recs] == [c["id"] for c in conts]
    for r, c in zip(recs, conts):
        j = r["labellers"][jn]
        if c["correct"] is True:
            assert set(j["variants"]) == {v.name for v in JUDGE_VARIANTS}
            assert all(isinstance(v["reply"], str) and v["noticed"] in (True, False, None) for v in j["variants"].values())
            if j["noticed"] is None:
                assert r["label"] is None
        else:
            assert j["noticed"] is None and r["label"] == ("C" if c["correct"] is False else None)
        assert r["labellers"]["rule"]["label"] in ("A", "B", "C", None)
    s = json.loads((out / "summary.json").read_text())
    agr = s["judge_variant_agreement"][jn]["perturbed"]
    assert agr["n_items"] == 4 and len(agr["pairwise_kappa"]) == 10
    assert s["labeller_agreement"][0]["a"] == "rule"
    settings = json.loads((out / "settings.json").read_text())
    assert settings["final_labeller"] == jn
    assert len(settings["labellers"][1]["variants"]) == len(JUDGE_VARIANTS)


@pytest.mark.integration
def test_judge_smol_plumbing(tmp_path, smol):
    """The embedded model as a judge on three continuations (one correct, judged; one wrong; one unparseable):
    plumbing, not accuracy."""
    rd, conts = fake_run(tmp_path)
    keep = [conts[1], conts[4], conts[6]]
    with open(rd / "continuations.jsonl", "w") as f:
        for c in keep:
            f.write(json.dumps(c) + "\n")
    judge = JudgeLabeller(smol, "smollm2-135m-instruct", max_new_tokens=4, batch_size=8)
    out = label_run(rd, [judge, RuleLabeller()], progress=False)
    assert out.name == "judge-smollm2-135m-instruct+rule"
    recs = read_jsonl(out / "labels.jsonl")
    assert [r["id"] for r in recs] == [c["id"] for c in keep]
    j = recs[0]["labellers"]["judge:smollm2-135m-instruct"]
    assert set(j["variants"]) == {v.name for v in JUDGE_VARIANTS}
    assert all(isinstance(v["reply"], str) and v["noticed"] in (True, False, None) for v in j["variants"].values())
    assert sum(j["votes"].values()) == len(JUDGE_VARIANTS)
    assert recs[0]["label"] in ("A", "B", None) and recs[0]["labellers"]["rule"]["label"] == "B"
    assert recs[1]["label"] == "C" and recs[2]["label"] is None
    s = json.loads((out / "summary.json").read_text())
    assert s["judge_variant_agreement"]["judge:smollm2-135m-instruct"]["perturbed"]["n_items"] == 1


# ----------------------------------------------------------------------------------------------------
# reliability: refusals and resume


class _Dies(RuleLabeller):
    """The rule labeller, killed (KeyboardInterrupt) on its ``after``-th call."""

    def __init__(self, after: int):
        self.after, self.calls = after, 0

    def label(self, conts, questions=None, *, progress=True):
        self.calls += 1
        if self.calls >= self.after:
            raise KeyboardInterrupt
        return super().label(conts, questions, progress=progress)


def _strip_times(p: Path) -> list[dict]:
    return read_jsonl(p / "labels.jsonl")


def test_interrupted_labelling_resumes_to_identical_records(tmp_path):
    rd, conts = fake_run(tmp_path)
    ref = label_run(rd, [RuleLabeller()], name="ref", progress=False)
    with pytest.raises(KeyboardInterrupt):
        label_run(rd, [_Dies(3)], name="cut", progress=False, chunk=2)
    cut = rd / "labels" / "cut"
    assert json.loads((cut / "settings.json").read_text())["status"] == "interrupted"
    assert len(read_jsonl(cut / "labels.jsonl")) == 4
    with open(cut / "labels.jsonl", "a") as f:  # and a half-written record, as a SIGKILL leaves it
        f.write('{"id": "arith/s2_o5/2|arith')
    # a fresh labelling with that name is refused, naming --resume
    with pytest.raises(Exception, match="--resume"):
        label_run(rd, [RuleLabeller()], name="cut", progress=False)
    out = label_run(rd, [RuleLabeller()], name="cut", progress=False, resume=True, chunk=2)
    assert out == cut and _strip_times(cut) == _strip_times(ref)
    s = json.loads((cut / "settings.json").read_text())
    assert s["status"] == "ok" and s["resumed"] == 1 and "error" not in s
    summ = [json.loads((d / "summary.json").read_text())["perturbed"] for d in (cut, ref)]
    assert summ[0] == summ[1]
    # resuming a finished labelling is a no-op
    assert label_run(rd, [RuleLabeller()], name="cut", progress=False, resume=True) == cut


def test_cli_resume_alone_uses_stored_labellers(tmp_path, capsys):
    rd, _ = fake_run(tmp_path)
    with pytest.raises(KeyboardInterrupt):
        label_run(rd, [_Dies(1)], name="x", progress=False, specs=["rule"])
    assert main([str(rd), "--resume", "--quiet"]) == 0
    assert json.loads((rd / "labels" / "x" / "settings.json").read_text())["status"] == "ok"
    assert main([str(rd), "--resume", "--quiet"]) == 2  # nothing left to resume
    assert "no unfinished labelling" in capsys.readouterr().err


def test_unfinished_or_damaged_run_is_refused(tmp_path, capsys):
    rd, _ = fake_run(tmp_path)
    m = json.loads((rd / "manifest.json").read_text())
    (rd / "manifest.json").write_text(json.dumps(dict(m, status="running")))
    assert main([str(rd), "--quiet"]) == 2
    err = capsys.readouterr().err
    assert "behavioural.run --resume" in err and err.count("\n") == 1
    assert not (rd / "labels").exists()
    assert main([str(rd), "--quiet", "--allow-incomplete"]) == 0
    (rd / "manifest.json").write_text(json.dumps(m))
    with open(rd / "continuations.jsonl", "a") as f:
        f.write('{"id": "half')
    assert main([str(rd), "--quiet"]) == 2
    err = capsys.readouterr().err
    assert "half-written" in err and "behavioural.run --resume" in err and err.count("\n") == 1


def test_format_summary_styles(tmp_path):
    from behavioural.labels.stage import format_summary

    rd, _ = fake_run(tmp_path)
    s = json.loads((label_run(rd, progress=False) / "summary.json").read_text())
    assert "perturbed: n=7" in format_summary(s)
    md = format_summary(s, style="md")
    assert "| perturbed | 7 | 1 | 3 | 2 | 1 |" in md
