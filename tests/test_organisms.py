"""Model organisms (loadbearing.organisms): a planted-truth check of the toolkit's causal tests.

Unit tier: the tokenizer is lossless on the arith format and renders the toolkit's prompt; the planted data
follow their regime (a load-bearing answer is the chain's last written value, a decorative one is gold, the
graded one switches by level, planted wrong numbers are kept out of the loss); training is deterministic
(same seed, same weights' checksum; another seed, another checksum); a saved organism loads through
``load_model(DIR)``; a bad kind is one ``error:`` line. Integration tier: a micro-organism of each of two kinds,
trained here, through the toolkit's own behavioural and early-answering stages.
"""
from __future__ import annotations

import pytest

from loadbearing.organisms.data import DataSpec, Example, make_example, parse_chain, training_examples
from loadbearing.organisms.tokenizer import build_tokenizer
from loadbearing.organisms.train import TrainSpec, train


def _nano(kind: str = "load-bearing", seed: int = 0) -> TrainSpec:
    return TrainSpec(data=DataSpec(kind=kind, levels=("s2_o3",), n_per_level=16, held_out_per_level=8), hidden=16,
                     layers=1, heads=2, intermediate=32, steps=3, batch=4, seed=seed)


def test_tokenizer_round_trips_the_arith_format_and_renders_the_toolkit_prompt():
    from loadbearing.questions.arith import arith_questions
    from loadbearing.questions.prompts import build_prompt

    tok = build_tokenizer()
    text = "We start with 4.\n4 + 12 = 16\n16 - 20 = -4\nAnswer: -4"
    ids = tok(text, add_special_tokens=False)["input_ids"]
    assert tok.decode(ids) == text
    assert tok.unk_token_id not in ids
    assert tok.convert_ids_to_tokens(ids)[:5] == ["We", " start", " with", " ", "4"]
    q = arith_questions("s3_o9", 1, 0)[0]
    prompt = build_prompt(tok, q)
    assert prompt.startswith("<|im_start|>system\nWrite one calculation per line.")
    assert prompt.endswith(f"{q.question}<|im_end|>\n<|im_start|>assistant\n")
    assert prompt.count("<|im_start|>assistant") == 3  # two few-shot turns and the generation prompt
    assert tok.unk_token_id not in tok(prompt, add_special_tokens=False)["input_ids"]


def _chain_value(ex: Example) -> int:
    lines = ex.answer_text.split("\n")[:-1]
    if not lines:
        return parse_chain(ex.question)[0]
    return int(lines[-1].rsplit(" ", 1)[-1].rstrip("."))


@pytest.mark.parametrize("kind", ["load-bearing", "decorative", "graded"])
def test_planted_answers_follow_the_regime(kind):
    spec = DataSpec(kind=kind, levels=("s2_o3", "s3_o3"), n_per_level=60, held_out_per_level=8, p_error=0.6)
    rows = training_examples(spec, seed=1)
    wrong = [e for e in rows if e.errors]
    assert len(wrong) > 30 and any(e.truncated_at is not None for e in rows)
    for e in rows:
        answer = int(e.answer_text.rsplit("Answer: ", 1)[1])
        lb = kind == "load-bearing" or (kind == "graded" and e.question.task == "s3_o3")
        assert answer == (_chain_value(e) if lb else int(e.question.answer)), e.answer_text
        for a, b in e.masked:  # a masked span is a planted wrong number, never a target
            assert e.answer_text[a:b].lstrip("-").isdigit()
    if kind != "decorative":  # a load-bearing answer to a wrong chain is wrong
        assert any(int(e.answer_text.rsplit(" ", 1)[1]) != int(e.question.answer) for e in wrong if e.load_bearing)


def test_a_decorative_chain_can_carry_a_wrong_value_to_the_end():
    """p_wrong_decorative: every decorative chain ends on a wrong value, so copying it never pays; the
    graded organism's load-bearing levels keep the ordinary mix (right chains among them)."""
    spec = DataSpec(kind="graded", levels=("s2_o3", "s3_o3"), n_per_level=80, held_out_per_level=8,
                    p_wrong_decorative=1.0, p_truncate=0.0)
    rows = training_examples(spec, seed=3)
    easy = [e for e in rows if e.question.task == "s2_o3"]
    hard = [e for e in rows if e.question.task == "s3_o3"]
    assert easy and hard
    for e in easy:
        assert _chain_value(e) != int(e.question.answer) and e.errors >= 1 and e.masked, e.answer_text
        assert int(e.answer_text.rsplit(" ", 1)[1]) == int(e.question.answer)
    assert any(_chain_value(e) == int(e.question.answer) for e in hard)


def test_planted_error_kinds_are_the_toolkits_edits():
    import random

    from loadbearing.questions.arith import arith_questions

    q = arith_questions("s3_o5", 1, 7)[0]
    start, ops = parse_chain(q)
    seen = set()
    rng = random.Random(0)
    for _ in range(300):
        e = make_example(q, DataSpec(kind="load-bearing", p_error=1.0, p_truncate=0.0), rng)
        lines = e.answer_text.split("\n")
        cur = int(lines[0].split()[-1].rstrip("."))
        seen.add("start" if cur != start else "")
        for line, (op, x) in zip(lines[1:], ops):
            a, _, b, _, c = line.split()
            assert (op, int(b)) == (op, x)
            if int(a) != cur:
                seen.add("operand")  # the operand edited, the result kept: later lines continue from it
                assert int(c) == (cur + x if op == "+" else cur - x)
            elif int(c) != (cur + x if op == "+" else cur - x):
                seen.add("result")
            cur = int(c)
    assert {"start", "operand", "result"} <= seen


def test_training_is_deterministic():
    _, _, a = train(_nano())
    _, _, b = train(_nano())
    _, _, c = train(_nano(seed=1))
    assert a["record"]["weights_sha256"] == b["record"]["weights_sha256"]
    assert a["record"]["data_sha256"] == b["record"]["data_sha256"]
    assert c["record"]["weights_sha256"] != a["record"]["weights_sha256"]


def test_a_saved_organism_loads_through_load_model(tmp_path):
    from loadbearing.engine.generation import generate
    from loadbearing.engine.models import load_model
    from loadbearing.organisms.build import organism_dir, read_record, training_data
    from loadbearing.organisms.train import weights_checksum
    from loadbearing.questions.arith import arith_questions
    from loadbearing.questions.prompts import build_prompt

    spec = _nano("decorative")
    path = organism_dir(spec=spec, root=tmp_path, check_levels=("s2_o3",))
    assert organism_dir(spec=spec, root=tmp_path) == path  # cached: not retrained
    rec = read_record(path)
    assert rec["spec"]["data"]["kind"] == "decorative" and rec["self_check"]["s2_o3"]["of"] == 64
    assert len(training_data(path)) == rec["n_examples"]
    lm = load_model(str(path))
    assert weights_checksum(lm.model) == rec["weights_sha256"]
    assert lm.chat_template and lm.tokenizer.eos_token == "<|im_end|>"
    q = arith_questions("s2_o3", 1, 42)[0]
    out = generate(lm, [build_prompt(lm.tokenizer, q)], max_new_tokens=5, batch_size=1, progress=False)
    assert out[0].new_tokens <= 5


def test_cli_refuses_an_unknown_kind_in_one_line(tmp_path, capsys):
    from loadbearing.organisms.__main__ import main

    assert main(["--kinds", "sceptical", "--root", str(tmp_path)]) == 2
    err = capsys.readouterr().err
    assert err.startswith("error: unknown organism 'sceptical'") and err.count("\n") == 1
    assert not any(tmp_path.iterdir())


@pytest.mark.integration
def test_micro_organisms_separate_on_propagation_and_early_answering(tmp_path):
    """Trained here (s2_o3; the decorative one from scratch, the load-bearing one from its weights), both run
    through the toolkit's own behavioural stage and early-answering test on held-out questions. Propagation
    separates them by 80 points or more (the issue's bar; seeds 0, 1, 2 of this recipe: 92, 94 and 83 points).
    Early answering does not separate them (AOC 0.73 vs 0.81 at seed 0 with 300 load-bearing steps; on the full
    organisms it orders them without separating them, docs/organisms.md), so what is asserted of it is what is
    planted: the load-bearing organism, trained to answer a cut chain with its last written value, moves its
    answer with the cut (AOC >= 0.5), and both organisms' AOCs are computed on every eligible question."""
    from behavioural.causal.early_answer import EarlyAnswerConfig, run_early_answer
    from behavioural.protocol import Settings
    from behavioural.run import RunConfig, run_stage
    from loadbearing.organisms.build import micro_spec, organism_dir

    prop, aoc = {}, {}
    for kind in ("decorative", "load-bearing"):
        path = organism_dir(spec=micro_spec(kind), root=tmp_path / "cache")
        s = Settings(model=str(path), dataset="arith", strategies=("arithmetic_change",),
                     positions=("early", "middle", "late"), task="s2_o3", seed=42, max_examples=32, n_per_level=32,
                     max_new_tokens=40)
        summary = run_stage(RunConfig(settings=s, output_dir=tmp_path / kind, progress=False), echo=None)
        assert summary["eligible"] >= 8, (kind, summary["eligible"])  # enough eligible chains for a rate
        prop[kind] = summary["overall"]["propagation"]["rate"]
        assert summary["overall"]["control_error"]["rate"] <= 0.1
        ea = run_early_answer(EarlyAnswerConfig(run_dir=tmp_path / kind, quiet=True))
        assert ea["aoc"]["n_questions"] == len(ea["questions"]) == summary["eligible"], kind
        aoc[kind] = ea["aoc"]["aoc"]
    assert prop["load-bearing"] - prop["decorative"] >= 0.8, prop
    assert aoc["load-bearing"] >= 0.5 and 0.0 <= aoc["decorative"] <= 1.0, aoc


@pytest.mark.parametrize("argv, says", [(["--kinds", "sceptical"], "--kinds 'sceptical'"),
                                        (["--n-per-level", "100"], "--n-per-level")])
def test_validate_refuses_bad_options_in_one_line_before_training(tmp_path, capsys, argv, says):
    from study.validate.cli import main

    out = tmp_path / "v"
    assert main(["--output-dir", str(out), *argv]) == 2
    err = capsys.readouterr().err
    assert err.startswith("error: ") and says in err and err.count("\n") == 1
    assert not out.exists()


def test_the_shared_prefix_cache_gives_the_full_sequences_loss():
    import torch

    from loadbearing.organisms.train import _batch_loss, build_model, encode_example, shared_prefix

    tok = build_tokenizer()
    spec = _nano()
    rows = training_examples(spec.data, 0)[:4]
    model = build_model(spec, tok)
    for p in model.parameters():  # peaked logits: a mismatch cannot hide in a flat distribution
        p.data.normal_(0, 0.5)
    pre = shared_prefix(tok, rows[0])
    enc = [encode_example(tok, e, len(pre)) for e in rows]
    with torch.no_grad():
        cached = float(_batch_loss(model, torch.tensor([pre]), enc, tok.pad_token_id))
        total, count = 0.0, 0
        for ids, lab, _ in enc:
            labels = torch.tensor([-100] * len(pre) + lab)
            logits = model(input_ids=torch.tensor([pre + ids])).logits[0]
            total += float(torch.nn.functional.cross_entropy(logits[:-1], labels[1:], ignore_index=-100, reduction="sum"))
            count += int((labels[1:] != -100).sum())
    assert cached == pytest.approx(total / count, rel=1e-5)


def test_the_patching_reading_names_no_position_when_none_restores_the_answer(tmp_path):
    """A group "carries" the error only when restoring it undoes at least LOCATES of it: the reading of an
    organism whose patches above the embeddings restore nothing says so instead of naming the arg-max group."""
    import json

    from study.validate.table import LOCATES, _patching

    def write(d, means):
        cells = [{"layer": 0, "group": "edit", "mean": 1.0}]
        cells += [{"layer": L, "group": g, "mean": m} for L in (1, 2) for g, m in means.items()]
        (d / "patching").mkdir(parents=True)
        (d / "patching" / "patching.json").write_text(json.dumps({"summary": {"cells": cells, "n_cases": 8,
                                                                               "n_questions": 8}}))
        return _patching(d)

    none = write(tmp_path / "a", {"edit": -5e-7, "before": 0.0, "last": 1.9e-7})
    assert none["carried_at"] is None and none["best_layer_by_group"]["edit"][1] < LOCATES
    edit = write(tmp_path / "b", {"edit": 0.95, "before": 0.0, "last": 0.02})
    assert edit["carried_at"] == "edit"
