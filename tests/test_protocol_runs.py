"""The protocol on the scripted model (tests/fakes.py): duplicate questions, a summary checked by hand, no eligible
question, refusals of an existing or changed run, resume after a half-written line, a finished run or a SIGKILL."""
from __future__ import annotations

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
from behavioural.summary import format_summary
from loadbearing import files as rundir
from loadbearing.engine.generation import encode
from loadbearing.questions.data import Question, load_questions, question_key
from loadbearing.stats import format_rate, wilson_rate

REPO = Path(__file__).resolve().parents[1]


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

