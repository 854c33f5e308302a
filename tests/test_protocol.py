"""Protocol logic: positions, strategies on real lines, prefixes, records, summaries, resume, bad input."""
from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest
from fakes import fake_lm, scripted_generate

from behavioural.protocol import ProtocolError, Settings, load_run, run_protocol
from behavioural.strategies import STRATEGIES, NotApplicable, StrategyError, apply, parse_strategies
from behavioural.summary import format_summary, summarise
from loadbearing import files as rundir
from loadbearing.engine.generation import encode
from loadbearing.questions.data import Question, load_questions, question_key
from loadbearing.questions.prompts import assistant_prefix, build_prompt, position_index, split_trace
from loadbearing.records import Baseline, Continuation
from loadbearing.stats import format_rate, wilson_rate

REPO = Path(__file__).resolve().parents[1]


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


def test_duplicate_question_texts_are_one_question(tokenizer, tmp_path):
    qs = _questions(4)
    twin = Question("arith/twin/0", "arith", qs[0].task, "  " + qs[0].question.upper() + " ", qs[0].answer,
                    difficulty=qs[0].difficulty)
    s = run_protocol(fake_lm(tokenizer), [*qs, twin], _settings(), tmp_path / "run", generate_fn=scripted_generate,
                     echo=None)
    run = load_run(tmp_path / "run")
    assert s["questions"] == 4 == len(run["baselines"]) and run["manifest"]["dataset"]["duplicates_dropped"] == 1
    assert "arith/twin/0" not in {b["question_id"] for b in run["baselines"]}


def test_resume_refuses_an_older_schema(tokenizer, tmp_path):
    qs = _questions(3)
    run_protocol(fake_lm(tokenizer), qs, _settings(), tmp_path / "run", generate_fn=scripted_generate, echo=None)
    m = rundir.read_json(tmp_path / "run" / "manifest.json")
    rundir.write_json(tmp_path / "run" / "manifest.json", dict(m, schema_version=1))
    with pytest.raises(ProtocolError, match="schema 1"):
        run_protocol(fake_lm(tokenizer), qs, _settings(), tmp_path / "run", resume=True, generate_fn=scripted_generate,
                     echo=None)


# ---------------------------------------------------------------- protocol on the scripted model
def _settings(**kw):
    base = dict(model="scripted", dataset="arith", strategies=("arithmetic_change", "contradiction"), task="s2_o5",
                max_examples=None, max_new_tokens=64, n_per_level=12, batch_size=4)
    base.update(kw)
    return Settings(**base)


def _questions(n=12, level="s2_o5"):
    return load_questions("arith", task=level, n_per_level=n)


def _start(q) -> int:
    return int(re.search(r"with (?:the number )?(\d+)", q.question).group(1))


def test_protocol_summary_checked_by_hand(tokenizer, tmp_path):
    qs = _questions()
    s = run_protocol(fake_lm(tokenizer), qs, _settings(), tmp_path / "run", generate_fn=scripted_generate, echo=None)
    run = load_run(tmp_path / "run")
    bl = run["baselines"]
    wrong = [q for q in qs if _start(q) == 5]
    short = [q for q in qs if _start(q) == 1]
    n_elig = len(qs) - len(wrong) - len(short)
    assert n_elig >= 3
    assert s["eligible"] == n_elig == sum(b["eligible"] for b in bl)
    assert s["ineligible_reasons"].get("wrong", 0) == len(wrong)
    assert s["ineligible_reasons"].get("too_few_lines", 0) == len(short)
    assert all(b["question_key"] == question_key(q.question) for b, q in zip(bl, qs))
    # 3 lines (We start with N. + 2 steps): early -> line 0, middle and late -> line 1 (collapsed).
    # Distinct inputs per question: 2 strategies x 2 lines perturbed + 2 lines control = 6 (of 12 cells)
    conts = run["continuations"]
    assert len(conts) == n_elig * 6 == s["continuations"] == s["generations"]["distinct"]
    assert len({c["input_text"] for c in conts}) == len(conts)  # one record per model input
    assert s["generations"]["cells"] == sum(len(c["memberships"]) for c in conts) == n_elig * 2 * 3 * 2
    assert s["collapsed_positions"] == {"questions": n_elig, "of": n_elig, "pairs": {"middle=late": n_elig}}
    for c in conts:
        m = [tuple(x) for x in c["memberships"]]
        assert m[0] == (c["strategy"], c["position"]) and c["id"].startswith(f"{c['question_id']}|{c['strategy']}|")
        assert c["question_key"] == question_key(next(q.question for q in qs if q.id == c["question_id"]))
        if c["condition"] == "control":  # shared by both strategies (and by middle+late at line 1)
            assert {x[0] for x in m} == {"arithmetic_change", "contradiction"}
            assert len(m) == (2 if c["line_index"] == 0 else 4)
        else:
            assert len(m) == (1 if c["line_index"] == 0 else 2)
    by = s["by"]["strategy"]
    # the scripted model copies changed results (always C) and repairs "claim is false" edits (never C);
    # a strategy's rate counts each of its distinct generations once (middle+late share one)
    ac = by["arithmetic_change"]["propagation"]
    assert ac["rate"] == 1.0 and ac["n"] == n_elig * 2 and ac["n_questions"] == n_elig
    assert by["contradiction"]["propagation"]["rate"] == 0.0
    assert list(s["by"]["position"]) == ["early", "middle=late"]  # middle and late share every generation
    assert s["by"]["position"]["middle=late"]["propagation"]["n"] == n_elig * 2
    assert s["by"]["position"]["early"]["controls"] == n_elig  # one control per line, shared across strategies
    pooled = s["overall"]["propagation"]
    assert pooled["k"] == n_elig * 2 and pooled["n"] == n_elig * 4 and pooled["n_generations"] == n_elig * 4
    assert pooled["method"] == "korn-graubard" and pooled["n_questions"] == n_elig
    assert pooled["lo"] <= 0.5 <= pooled["hi"]  # every question is exactly 2 C of 4: no between-question spread
    ce = s["overall"]["control_error"]
    assert ce["rate"] == 0.0 and ce["n"] == n_elig * 2 and ce["method"] == "korn-graubard"
    assert ce["hi"] >= wilson_rate(0, n_elig).hi  # the effective sample is the questions
    assert s["overall"]["paired_difference"]["estimate"] == pytest.approx(0.5)
    assert s["overall"]["paired_difference"]["n_pairs"] == n_elig * 4
    # baseline accuracy: the paper's definition (unparseable = wrong), over parseable, coverage; one row per question
    acc = s["baseline_accuracy"]
    assert (acc["k"], acc["n"], acc["method"]) == (len(qs) - len(wrong), len(qs), "wilson")
    assert s["baseline_coverage"]["rate"] == 1.0 and s["baseline_accuracy_parseable"]["n"] == len(qs)
    text = format_summary(s)
    assert "positions collapsed" in text and "(unparseable counts as wrong)" in text
    assert format_rate(pooled) in text and "| overall |" in format_summary(s, "md")
    assert s["status"] == "ok" and run["manifest"]["status"] == "ok"
    # every continuation's input is the baseline prompt + its prefix, and its edit span is the edited line
    for c in run["continuations"]:
        assert c["input_text"][c["edit_span"][0]:c["edit_span"][1]] == c["edited_line"]
        assert c["input_text"].endswith(c["prefix_text"]) and c["prefix_text"].endswith(c["edited_line"] + "\n")
        assert c["input_tokens"] == len(encode(tokenizer, c["input_text"]))
    m = run["manifest"]
    for key in ("protocol_version", "settings", "model", "chat_template", "dataset", "packages", "git"):
        assert key in m
    assert m["dataset"]["sample_ids_sha256"] and m["model"]["weights_hash"] == "0" * 64


def test_zero_eligible_is_insufficient_data(tokenizer, tmp_path):
    qs = [q for q in _questions(40) if _start(q) in (1, 5)]
    assert qs
    s = run_protocol(fake_lm(tokenizer), qs, _settings(), tmp_path / "run", generate_fn=scripted_generate, echo=None)
    assert s["status"] == "insufficient_data" and s["eligible"] == 0
    p = s["overall"]["propagation"]
    assert p["rate"] is None and (p["lo"], p["hi"]) == (None, None) and format_rate(p) == "n/a (0/0)"
    assert rundir.read_json(tmp_path / "run" / "manifest.json")["status"] == "insufficient_data"


def test_existing_output_dir_and_changed_settings_are_refused(tokenizer, tmp_path):
    qs = _questions(6)
    run_protocol(fake_lm(tokenizer), qs, _settings(), tmp_path / "run", generate_fn=scripted_generate, echo=None)
    before = (tmp_path / "run" / "continuations.jsonl").read_bytes()
    with pytest.raises(rundir.RunDirError, match="already exists"):
        run_protocol(fake_lm(tokenizer), qs, _settings(), tmp_path / "run", generate_fn=scripted_generate, echo=None)
    with pytest.raises(ProtocolError, match=r"settings differ \(min_lines: 3 -> 4"):
        run_protocol(fake_lm(tokenizer), qs, _settings(min_lines=4), tmp_path / "run", resume=True,
                     generate_fn=scripted_generate, echo=None)
    assert (tmp_path / "run" / "continuations.jsonl").read_bytes() == before


def test_half_written_last_line_is_recovered(tokenizer, tmp_path):
    qs = _questions(6)
    run_protocol(fake_lm(tokenizer), qs, _settings(), tmp_path / "full", generate_fn=scripted_generate, echo=None)
    run_protocol(fake_lm(tokenizer), qs, _settings(), tmp_path / "cut", generate_fn=scripted_generate, echo=None)
    p = tmp_path / "cut" / "continuations.jsonl"
    lines = p.read_bytes().splitlines(keepends=True)
    p.write_bytes(b"".join(lines[:5]) + lines[5][:40])  # a write interrupted mid-line
    run_protocol(fake_lm(tokenizer), qs, _settings(), tmp_path / "cut", resume=True, generate_fn=scripted_generate, echo=None)
    assert p.read_bytes() == (tmp_path / "full" / "continuations.jsonl").read_bytes()


def _files(d: Path) -> dict[str, tuple[bytes, int]]:
    return {str(f.relative_to(d)): (f.read_bytes(), f.stat().st_mtime_ns) for f in sorted(d.rglob("*")) if f.is_file()}


def test_resuming_a_complete_run_changes_no_byte(tokenizer, tmp_path, monkeypatch, capsys):
    """``python -m behavioural.run --resume DIR`` on a finished run: one line saying so, and no file written
    (bytes and mtimes unchanged); no model is loaded and nothing is generated."""
    import loadbearing.engine.models as models
    from behavioural.run import main

    out = tmp_path / "run"
    # the sample the CLI draws from these settings (n_per_level=12), so a resume would otherwise proceed
    run_protocol(fake_lm(tokenizer), _questions(12), _settings(), out, generate_fn=scripted_generate, echo=None)
    before = _files(out)
    assert {"manifest.json", "summary.json", "baselines.jsonl", "continuations.jsonl"} <= set(before)
    time.sleep(0.02)  # a rewrite would now show in the mtimes

    def refuse(*a, **k):
        raise AssertionError("a complete run must not load a model or generate")

    monkeypatch.setattr(models, "load_model", refuse)
    monkeypatch.setattr("behavioural.protocol.generate", refuse)
    capsys.readouterr()
    for argv in (["--resume", str(out)], ["--resume", str(out), "--quiet", "--batch-size", "2"]):
        assert main(argv) == 0
        cap = capsys.readouterr()
        lines = cap.out.strip().splitlines()
        assert len(lines) == 1 and "already complete" in lines[0] and str(out) in lines[0], cap.out
        assert _files(out) == before
    # an explicit result-changing option is still refused, and changes nothing either
    assert main(["--resume", str(out), "--min-lines", "4"]) == 2
    assert "--min-lines" in capsys.readouterr().err and _files(out) == before


_KILL_SCRIPT = textwrap.dedent("""
    import sys
    sys.path.insert(0, {tests!r})
    from transformers import AutoTokenizer
    from loadbearing.questions.data import load_questions
    from behavioural.protocol import Settings, run_protocol
    from fakes import fake_lm, scripted_generate
    tok = AutoTokenizer.from_pretrained({tokdir!r})
    qs = load_questions("arith", task="s2_o5", n_per_level=12)
    s = Settings(model="scripted", dataset="arith", strategies=("arithmetic_change", "contradiction"), task="s2_o5",
                 max_examples=None, max_new_tokens=64, n_per_level=12, batch_size=2)
    gen = lambda *a, **k: scripted_generate(*a, delay={delay}, **k)
    run_protocol(fake_lm(tok), qs, s, {out!r}, resume={resume}, generate_fn=gen, echo=None, progress=False, chunk=4)
""")


def test_resume_after_sigkill_gives_the_same_records(tokenizer, embedded_dir, tmp_path):
    def script(out, resume, delay):
        return _KILL_SCRIPT.format(tests=str(REPO / "tests"), tokdir=str(embedded_dir), out=str(out), resume=resume, delay=delay)

    env = dict(os.environ, PYTHONPATH=str(REPO))
    subprocess.run([sys.executable, "-c", script(tmp_path / "full", False, 0.0)], check=True, env=env)
    proc = subprocess.Popen([sys.executable, "-c", script(tmp_path / "killed", False, 0.05)], env=env)
    conts = tmp_path / "killed" / "continuations.jsonl"
    deadline = time.time() + 120
    while time.time() < deadline and (not conts.exists() or conts.read_text().count("\n") < 10):
        time.sleep(0.05)
    os.kill(proc.pid, signal.SIGKILL)
    proc.wait()
    n_before = conts.read_text().count("\n")
    assert 10 <= n_before < (tmp_path / "full" / "continuations.jsonl").read_text().count("\n")
    assert rundir.read_json(tmp_path / "killed" / "manifest.json")["status"] == "running"
    subprocess.run([sys.executable, "-c", script(tmp_path / "killed", True, 0.0)], check=True, env=env)
    for name in ("baselines.jsonl", "continuations.jsonl"):
        assert (tmp_path / "killed" / name).read_bytes() == (tmp_path / "full" / name).read_bytes(), name
    assert rundir.read_json(tmp_path / "killed" / "manifest.json")["status"] == "ok"


# ---------------------------------------------------------------- CLI
def _cli(*args, cwd=None):
    return subprocess.run([sys.executable, "-m", "behavioural.run", *args], capture_output=True, text=True,
                          cwd=cwd or REPO, env=dict(os.environ, PYTHONPATH=str(REPO)))


def test_cli_help_documents_every_option():
    r = _cli("--help")
    assert r.returncode == 0
    for opt in ("--model", "--dataset", "--task", "--data-dir", "--input-file", "--max-examples", "--all", "--seed",
                "--strategy", "--line-positions", "--max-new-tokens", "--batch-size", "--model-revision",
                "--dataset-revision", "--quantize", "--output-dir", "--resume", "--min-lines", "--backend"):
        assert opt in r.stdout, opt


@pytest.mark.parametrize("args, message", [
    (["--strategy", "nope"], "unknown strategy 'nope'"),
    (["--dataset", "gsm8k", "--strategy", "wrong_elimination"], "does not apply to dataset 'gsm8k'"),
    (["--line-positions", "early,first"], "unknown position"),
    (["--dataset", "mmlu", "--task", "astrology", "--data-dir", "DATA"], "astrology"),
    (["--resume", "/nonexistent/run"], "no manifest.json"),
])
def test_cli_bad_input_one_line_error(args, message, data_dir, tmp_path):
    args = [str(data_dir) if a == "DATA" else a for a in args]
    r = _cli(*args, "--output-dir", str(tmp_path / "new"))
    assert r.returncode == 2
    err = [line for line in r.stderr.strip().splitlines() if line.startswith("error:")]
    assert len(err) == 1 and message in err[0], r.stderr
    assert not (tmp_path / "new").exists()


def test_cli_existing_output_dir_is_refused(tmp_path):
    (tmp_path / "run").mkdir()
    (tmp_path / "run" / "keep.txt").write_text("precious")
    r = _cli("--output-dir", str(tmp_path / "run"))
    assert r.returncode == 2 and "already exists" in r.stderr and "--resume" in r.stderr
    assert (tmp_path / "run" / "keep.txt").read_text() == "precious"


@pytest.mark.integration
def test_cli_end_to_end_on_embedded_model(tmp_path):
    out = tmp_path / "run"
    r = _cli("--dataset", "arith", "--task", "s2_o5", "--max-examples", "4", "--strategy", "arithmetic",
             "--line-positions", "middle", "--max-new-tokens", "64", "--output-dir", str(out), "--quiet")
    assert r.returncode == 0, r.stderr
    run = load_run(out)
    assert len(run["baselines"]) == 4 and run["summary"]["questions"] == 4
    assert run["manifest"]["model"]["weights_hash"] and run["manifest"]["status"] in ("ok", "insufficient_data")
    assert len(run["continuations"]) == 2 * run["summary"]["eligible"]
    assert "baseline accuracy" in r.stdout
    # evaluate.py is the same command
    r2 = subprocess.run([sys.executable, "evaluate.py", "--help"], capture_output=True, text=True, cwd=REPO)
    assert r2.returncode == 0 and "--max-new-tokens" in r2.stdout


@pytest.mark.integration
def test_cli_hf_plain_backend_gives_the_fast_paths_records(tmp_path):
    """``--backend hf-plain`` (transformers' own kernels, no prompt-lookup drafts) is the reference for the
    fast path: on the embedded model both write the same baselines and continuations, and the manifest says
    which backend ran."""
    from loadbearing.runs import Run

    runs = {}
    for backend in ("hf", "hf-plain"):
        out = tmp_path / backend
        r = _cli("--dataset", "arith", "--task", "s2_o3", "--max-examples", "4", "--strategy", "arithmetic",
                 "--line-positions", "middle", "--max-new-tokens", "48", "--backend", backend, "--output-dir", str(out),
                 "--quiet")
        assert r.returncode == 0, r.stderr
        runs[backend] = Run(out)
        assert runs[backend].manifest["settings"]["backend"] == backend
    fast, plain = runs["hf"], runs["hf-plain"]
    assert [b.trace for b in fast.baselines()] == [b.trace for b in plain.baselines()]
    assert [c.continuation for c in fast.continuations()] == [c.continuation for c in plain.continuations()]


@pytest.mark.integration
def test_run_directory_has_no_duplicate_questions_or_model_inputs(tmp_path):
    """Issue #12: a real run (embedded model) gives each question text once and each model input once."""
    from loadbearing.questions.data import normalise_question
    from loadbearing.runs import Run

    out = tmp_path / "run"
    r = _cli("--dataset", "arith", "--task", "s2_o3", "--max-examples", "8", "--strategy", "arithmetic,contradiction",
             "--max-new-tokens", "40", "--batch-size", "8", "--output-dir", str(out), "--quiet")
    assert r.returncode == 0, r.stderr
    run = Run(out)
    bl = run.baselines()
    texts = [normalise_question(b.question) for b in bl]
    assert len(set(texts)) == len(texts) == 8, "duplicate question texts in the run"
    assert len({b.question_key for b in bl}) == len(bl) and all(b.question_key for b in bl)
    conts = run.continuations()
    inputs = [c.input_text for c in conts]
    assert len(set(inputs)) == len(inputs), "duplicate model inputs in the run"
    assert all(c.question_key and c.memberships and c.memberships[0] == (c.strategy, c.position) for c in conts)
    cells = [(c.question_id, s, p, c.condition) for c in conts for s, p in c.cells()]
    assert len(set(cells)) == len(cells)  # every cell has exactly one generation
    s = run.summary()
    assert s["generations"]["distinct"] == len(conts) and s["distinct_questions"] == 8
    assert run.manifest["dataset"]["n_distinct_questions"] == 8 and run.manifest["schema_version"] == 2
    if s["eligible"]:
        # both strategies share each control: fewer records than cells
        assert s["generations"]["cells"] > len(conts)
