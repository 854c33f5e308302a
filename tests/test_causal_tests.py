"""The causal tests beside edit-and-continue (behavioural.causal): early answering, filler, paraphrase.

Runs are written by the real protocol with the scripted model (tests/fakes.py); each stage then runs with a
scripted forced-answer model whose behaviour is known, so curves, AOCs and rates are checked by hand.
"""
from __future__ import annotations

import json
import math
import re
from pathlib import Path

import pytest
from fakes import fake_lm, scripted_generate

from behavioural.causal import aoc
from behavioural.causal.common import ANSWER_PREFIX
from behavioural.causal.early_answer import EarlyAnswerConfig, run_early_answer
from behavioural.causal.early_answer import format_summary as ea_format
from behavioural.causal.early_answer import is_complete as ea_complete
from behavioural.causal.early_answer import main as ea_main
from behavioural.causal.filler import FillerConfig, filler_text, run_filler
from behavioural.causal.paraphrase import INSTRUCTION, ParaphraseConfig, clean_paraphrase, run_paraphrase
from behavioural.causal.paraphrase import main as para_main
from behavioural.protocol import Settings, run_protocol
from loadbearing.engine.generation import Generation
from loadbearing.questions.data import load_questions
from loadbearing.questions.prompts import FORMAT_INSTRUCTIONS
from loadbearing.runs import Run

K = 1  # the scripted early answerer knows the answer once the chain holds line K (0-based)


def _settings(**kw):
    base = dict(model="scripted", dataset="arith", strategies=("arithmetic_change", "contradiction"), task="s2_o5,s3_o5",
                max_examples=None, max_new_tokens=64, n_per_level=6, batch_size=4)
    return Settings(**(base | kw))


def _start(q) -> int:
    m = re.search(r"with (?:the number )?(\d+)", q.question)
    assert m is not None
    return int(m.group(1))


@pytest.fixture(scope="module")
def run_dir(tokenizer, tmp_path_factory) -> Path:
    qs = load_questions("arith", task="s2_o5,s3_o5", n_per_level=6)
    out = tmp_path_factory.mktemp("causal") / "run"
    run_protocol(fake_lm(tokenizer), qs, _settings(), out, generate_fn=scripted_generate, echo=None, progress=False)
    return out


@pytest.fixture
def run_copy(run_dir, tmp_path) -> Path:
    import shutil

    dst = tmp_path / "run"
    shutil.copytree(run_dir, dst)
    return dst


class Scripted:
    """Forced answers by rule: ``rule(chain_lines, gold) -> answer``; counts the inputs it generated."""

    def __init__(self, run: Path, rule):
        self.gold = {b.prompt: b.gold for b in Run(run).baselines()}
        self.rule, self.calls = rule, 0

    def __call__(self, lm, texts, **kw):
        out = []
        for t in texts:
            self.calls += 1
            prompt = next(p for p in self.gold if t.startswith(p))
            chain = t[len(prompt):]
            assert chain.endswith(ANSWER_PREFIX)
            lines = [x for x in chain[: -len(ANSWER_PREFIX)].split("\n") if x.strip()]
            out.append(Generation(f" {self.rule(lines, self.gold[prompt])}\n", 3, "eos"))
        return out


def _knows_after_k(lines, gold):
    return gold if len(lines) > K else "999"


# ------------------------------------------------------------------------------------------------ definitions
def test_every_format_instruction_asks_for_the_forced_answer_label():
    assert all(f"'{ANSWER_PREFIX} " in v for v in FORMAT_INSTRUCTIONS.values())


def test_question_aoc_and_the_weighted_pooled_aoc_by_hand():
    assert aoc.question_aoc(3, [(0, 0), (1, 0), (2, 1), (3, 1)]) == pytest.approx(0.5)
    assert aoc.question_aoc(4, [(0, 0), (1, 0), (2, 1), (3, 1), (4, 1)]) == pytest.approx(0.375)
    assert aoc.question_aoc(3, [(0, None), (1, 0), (2, 1), (3, 1)]) is None  # no k=0: the curve has no start
    # two chains of length 2, one with an unparsed cut: the length's mean curve is (0, .5, 1) over x = (0, .5, 1)
    pts = [(2, 0, 0), (2, 1, 1), (2, 2, 1), (2, 1, 0), (2, 2, 1)]
    assert aoc.pooled_aoc(pts, "traces") == pytest.approx(1 - (0.5 * 0.25 + 0.5 * 0.75))
    # weighting: two chains of length 3 (AOC 0.5 each) and one of length 4 (0.375)
    three = [(3, k, s) for k, s in enumerate((0, 0, 1, 1))]
    four = [(4, k, s) for k, s in enumerate((0, 0, 1, 1, 1))]
    assert aoc.pooled_aoc(three + three + four, "traces") == pytest.approx((2 * 0.5 + 0.375) / 3)
    # cot-transparency's rows weighting: lengths weigh 2 x 4 and 1 x 5 (chain, cut) rows
    assert aoc.pooled_aoc(three + three + four) == pytest.approx((8 * 0.5 + 5 * 0.375) / 13)
    assert aoc.pooled_aoc([]) is None


def test_agreement_rank_correlation_and_two_by_two():
    rows = [(f"q{i}", a, p) for i, (a, p) in enumerate([(0.1, 0.0), (0.2, 0.1), (0.3, 0.5), (0.4, 0.9)])]
    ag = aoc.agreement(rows, n_boot=200, seed=0)
    assert ag["spearman"]["rho"] == pytest.approx(1.0)
    t = ag["table"]
    assert t["cells"] == {"high_aoc_high_prop": 2, "high_aoc_low_prop": 0, "low_aoc_high_prop": 0, "low_aoc_low_prop": 2}
    assert t["agree"]["k"] == 4 and t["agree"]["n"] == 4 and t["agree"]["lo"] < 1
    flat = aoc.agreement([(f"q{i}", 0.2, p) for i, p in enumerate((0.1, 0.5, 0.9))], n_boot=50, seed=0)
    assert flat["spearman"]["rho"] is None  # a constant AOC ranks nothing


def test_filler_text_matches_the_token_count(tokenizer):
    for n in (1, 7, 23):
        t = filler_text(tokenizer, "...", n)
        assert set(t.split()) == {"..."} and len(tokenizer(t, add_special_tokens=False)["input_ids"]) == n
    text = "We begin at 3.\n\nAnswer: 7\nSo the answer is 4.\nthen 3 + 1 = 4\nextra line"
    assert clean_paraphrase(text, 2, "arith") == ["We begin at 3.", "then 3 + 1 = 4"]


# ------------------------------------------------------------------------------------------------ early answering
def test_early_answering_step_curve_and_known_aoc(tokenizer, run_copy):
    gen = Scripted(run_copy, _knows_after_k)
    s = run_early_answer(EarlyAnswerConfig(run_copy, n_boot=200, quiet=True), fake_lm(tokenizer), generate_fn=gen,
                         echo=None)
    elig = [b for b in Run(run_copy).baselines() if b.eligible]
    assert gen.calls == sum(len(b.lines) + 1 for b in elig) == s["n_rows"]
    for q in s["questions"]:
        n = q["n_lines"]
        assert q["same"] == [0] * (K + 1) + [1] * (n - K)  # a step at line K
        assert q["aoc"] == pytest.approx({3: 0.5, 4: 0.375}[n])
    lengths = [len(b.lines) for b in elig]
    assert set(lengths) == {3, 4}
    want = (lengths.count(3) * 0.5 + lengths.count(4) * 0.375) / len(lengths)  # traces: weighted by chains
    assert s["aoc"]["traces"]["aoc"] == pytest.approx(want) and s["aoc"]["n_questions"] == len(elig)
    rows_w = {3: 4 * lengths.count(3), 4: 5 * lengths.count(4)}  # rows (the headline): by (chain, cut) rows
    want = (rows_w[3] * 0.5 + rows_w[4] * 0.375) / (rows_w[3] + rows_w[4])
    assert s["aoc"]["aoc"] == pytest.approx(want) and s["aoc"]["weighting"] == "rows"
    lo, hi = s["aoc"]["ci"]
    assert lo <= want <= hi
    # the decision point: the answer settles at the cut that first holds line K
    assert all(q["decision_point"] == K + 1 and q["nldd_share"] == pytest.approx((q["n_lines"] - K - 1) / q["n_lines"])
               for q in s["questions"])
    assert s["decision_point"]["overall"]["n_questions"] == len(elig)
    m = s["adding_mistakes"]["aoc"]  # the run's own edits: one point per parsed perturbed continuation + the chain
    n_parsed = sum(c.parsed_answer is not None for c in Run(run_copy).continuations("perturbed"))
    assert m["n_points"] == n_parsed + len(elig) and m["aoc"] is not None
    assert set(s["by"]["task"]) == {"s2_o5", "s3_o5"} and s["by"]["task"]["s2_o5"]["aoc"] == pytest.approx(0.5)
    assert s["no_chain_accuracy"]["k"] == 0 and s["full_chain_accuracy"]["k"] == len(elig)
    assert s["full_chain_matches_baseline"]["k"] == len(elig)
    ag = s["agreement"]
    assert ag["n_questions"] == len(elig) and all(q["propagation"] is not None for q in s["questions"])
    out = run_copy / "early_answer"
    rows = [json.loads(x) for x in (out / "records.jsonl").read_text().splitlines()]
    assert len(rows) == s["n_rows"] and rows[0]["assistant_text"] == "" and rows[0]["answer_text"].startswith("Answer:")
    assert (out / "summary.md").read_text().startswith("Early answering")
    assert ea_complete(run_copy) and ea_complete(out)
    assert "AOC" in ea_format(s, "md") and "| group |" in ea_format(s, "md")


def test_early_answering_over_sentences_cuts_at_sentence_ends(tokenizer, run_copy):
    gen = Scripted(run_copy, _knows_after_k)
    s = run_early_answer(EarlyAnswerConfig(run_copy, steps="sentences", n_boot=0, quiet=True), fake_lm(tokenizer),
                         generate_fn=gen, echo=None)
    rows = [json.loads(x) for x in (run_copy / "early_answer" / "records.jsonl").read_text().splitlines()]
    assert {r["steps"] for r in rows} == {"sentences"} and s["steps"]["unit"] == "sentences"
    assert "punkt" in s["steps"]["splitter"]
    # one calculation per line: every line is one sentence, so the cuts are the line cuts
    assert all(r["n_steps"] == r["n_lines"] for r in rows) and all(r["assistant_text"] == "" or
                                                                    r["assistant_text"].endswith("\n") for r in rows)


def test_early_answering_resume_skips_rows_and_a_complete_stage_writes_nothing(tokenizer, run_copy, capsys):
    cfg = EarlyAnswerConfig(run_copy, n_boot=50, quiet=True)
    full = Scripted(run_copy, _knows_after_k)
    s1 = run_early_answer(cfg, fake_lm(tokenizer), generate_fn=full, echo=None)
    out = run_copy / "early_answer"
    # interrupted: the last rows lost, the manifest still says running
    lines = (out / "records.jsonl").read_text().splitlines(keepends=True)
    (out / "records.jsonl").write_text("".join(lines[:5]) + lines[5][:10])
    m = json.loads((out / "manifest.json").read_text())
    (out / "manifest.json").write_text(json.dumps(m | {"status": "running"}))
    (out / "summary.json").unlink()
    again = Scripted(run_copy, _knows_after_k)
    s2 = run_early_answer(cfg.__class__(run_copy, n_boot=50, quiet=True, resume=True), fake_lm(tokenizer),
                          generate_fn=again, echo=None)
    assert again.calls == full.calls - 5 and s2["aoc"] == s1["aoc"]
    before = {p.name: (p.read_bytes(), p.stat().st_mtime_ns) for p in out.iterdir()}
    third = Scripted(run_copy, _knows_after_k)
    msgs: list[str] = []
    run_early_answer(EarlyAnswerConfig(run_copy, resume=True, quiet=True), fake_lm(tokenizer), generate_fn=third,
                     echo=msgs.append)
    assert third.calls == 0 and msgs == [f"{out} is already complete; nothing to do"]
    assert {p.name: (p.read_bytes(), p.stat().st_mtime_ns) for p in out.iterdir()} == before
    with pytest.raises(Exception, match="already exists; continue it with --resume"):
        run_early_answer(cfg, fake_lm(tokenizer), generate_fn=third, echo=None)
    with pytest.raises(Exception, match="settings differ"):
        run_early_answer(EarlyAnswerConfig(run_copy, max_answer_tokens=4, resume=True), fake_lm(tokenizer),
                         generate_fn=third, echo=None)


def test_shards_then_an_unsharded_run_merges_them(tokenizer, run_copy):
    calls = 0
    for i in range(2):
        g = Scripted(run_copy, _knows_after_k)
        run_early_answer(EarlyAnswerConfig(run_copy, shard=f"{i}/2", n_boot=50, quiet=True), fake_lm(tokenizer),
                         generate_fn=g, echo=None)
        calls += g.calls
        assert (run_copy / "early_answer" / f"shard-{i}-of-2" / "summary.json").is_file()
    merged = Scripted(run_copy, _knows_after_k)
    s = run_early_answer(EarlyAnswerConfig(run_copy, n_boot=50, quiet=True), fake_lm(tokenizer),
                         generate_fn=merged, echo=None)
    assert merged.calls == 0 and s["n_rows"] == calls


# ------------------------------------------------------------------------------------------------ filler
def test_filler_on_a_model_that_ignores_the_chain_leaves_the_answer_unchanged(tokenizer, run_copy):
    gen = Scripted(run_copy, lambda lines, gold: gold)
    s = run_filler(FillerConfig(run_copy, n_boot=50, quiet=True), fake_lm(tokenizer), generate_fn=gen, echo=None)
    n = s["n_questions"]
    for c in ("none", "dots", "dashes", "full"):
        assert s["accuracy"][c]["k"] == s["accuracy"][c]["n"] == n
    assert all(s["same_as_full_chain"][f]["k"] == n for f in ("dots", "dashes"))
    assert s["difference"]["dots"]["none"]["estimate"] == 0 and s["token_count_matched"] == s["n_filler_rows"] == 2 * n
    rows = [json.loads(x) for x in (run_copy / "filler" / "records.jsonl").read_text().splitlines()]
    dots = next(r for r in rows if r["condition"] == "dots")
    assert set(dots["assistant_text"].split()) == {"..."} and dots["filler_tokens"] == dots["chain_tokens"] > 0
    # the sweep: 0 (no chain), then a quarter, half, three quarters and all of the chain's token count
    assert [p["fraction"] for p in s["sweep"]["dots"]] == [0.0, 0.25, 0.5, 0.75, 1.0]
    half = [r for r in rows if r["condition"] == "dots@0.5"]
    assert len(half) == n and all(abs(r["filler_tokens"] - round(r["chain_tokens"] / 2)) <= 1 for r in half)
    # a model that reads the chain: with filler (one line of it) the answer falls to the no-chain answer
    import shutil

    shutil.rmtree(run_copy / "filler")
    s2 = run_filler(FillerConfig(run_copy, n_boot=50, quiet=True), fake_lm(tokenizer),
                    generate_fn=Scripted(run_copy, _knows_after_k), echo=None)
    assert [s2["accuracy"][c]["k"] for c in ("none", "dots", "dashes", "full")] == [0, 0, 0, n]
    assert [p["accuracy"]["k"] for p in s2["sweep"]["dots"]] == [0] * 5 and s2["full_accuracy"]["k"] == n
    assert s2["difference"]["dots"]["full"]["estimate"] == -1.0


# ------------------------------------------------------------------------------------------------ paraphrase
def _with_paraphraser(rewrite):
    def gen(lm, texts, **kw):
        out = []
        for t in texts:
            if INSTRUCTION in t:
                user = t.rsplit("<|im_start|>user\n", 1)[1].split("<|im_end|>", 1)[0]
                text = "\n".join(rewrite(x) for x in user.split("\n"))
                out.append(Generation(text, 5, "eos"))
            else:
                out += scripted_generate(lm, [t])
        return out
    return gen


def _para(run, **kw):
    return ParaphraseConfig(run, n_boot=50, quiet=True, allow_same_paraphraser=True, **kw)


def test_paraphrase_keeps_the_answer_when_the_rewrite_keeps_the_numbers(tokenizer, run_copy):
    s = run_paraphrase(_para(run_copy), fake_lm(tokenizer),
                       generate_fn=_with_paraphraser(lambda x: f"In other words, {x}"), echo=None)
    nq, nf = s["n_questions"], 4
    assert s["answer_changed"]["k"] == 0 and s["answer_changed"]["n"] == nq * nf
    assert s["numbers_preserved"]["k"] == nq * nf and s["same_as_run_model"] is True
    rows = [json.loads(x) for x in (run_copy / "paraphrase" / "records.jsonl").read_text().splitlines()]
    r = next(r for r in rows if r["fraction"] == 0.5)
    assert r["paraphrased_lines"] == [f"In other words, {x}" for x in r["original_lines"]]
    assert len(r["original_lines"]) == max(1, math.floor(0.5 * r["n_lines"] + 0.5)) == r["line_index"] + 1
    assert r["assistant_text"].startswith("In other words, ")
    assert not r["identical"] and s["answer_changed_rewritten_numbers_kept"]["n"] == nq * nf
    # the curve: every fraction keeps every answer; the whole chain paraphrased is referenced by the baseline
    assert [p["fraction"] for p in s["curve"]] == [0.25, 0.5, 0.75, 1.0]
    assert all(p["retention"]["k"] == p["retention"]["n"] == nq for p in s["curve"])
    assert s["mean_gap"]["estimate"] == 0.0 and "--allow-same-paraphraser" in (run_copy / "paraphrase" /
                                                                               "summary.md").read_text()
    full = [r for r in rows if r["fraction"] == 1.0]
    assert all(r["reference_source"] == "baseline" and len(r["original_lines"]) == r["n_lines"] for r in full)


def test_paraphrase_that_changes_a_number_changes_the_answer(tokenizer, run_copy):
    s = run_paraphrase(_para(run_copy), fake_lm(tokenizer),
                       generate_fn=_with_paraphraser(lambda x: re.sub(r"(\d+)$", lambda m: str(int(m.group(1)) + 40), x)),
                       echo=None)
    rows = [json.loads(x) for x in (run_copy / "paraphrase" / "records.jsonl").read_text().splitlines()]
    # a rewrite that changed a calculation changes the answer; one that kept every number keeps it
    assert all(r["same_answer"] is (r["numbers_preserved"]) for r in rows)
    changed = [r for r in rows if not r["numbers_preserved"]]
    assert s["answer_changed"]["k"] == len(changed) > 0 and {r["fraction"] for r in changed} >= {0.5, 0.75, 1.0}
    # from half the chain on every rewrite changes a result: the reference is right, the continuation wrong
    assert all(p["retention"]["k"] == 0 and p["gap"]["estimate"] == 1.0 for p in s["curve"] if p["fraction"] >= 0.5)
    want = sum(p["gap"]["estimate"] for p in s["curve"]) / 4
    assert s["mean_gap"]["estimate"] == pytest.approx(want) and s["mean_gap"]["estimate"] >= 0.75


def test_the_paraphraser_must_differ_from_the_run_model(run_copy, capsys):
    _one_error(capsys, para_main([str(run_copy)]), "--paraphraser is missing", "--allow-same-paraphraser")
    _one_error(capsys, para_main([str(run_copy), "--paraphraser", "scripted"]), "is the run model")
    _one_error(capsys, para_main([str(run_copy), "--allow-same-paraphraser", "--fractions", "0,1"]), "--fractions")
    assert not (run_copy / "paraphrase").exists()


# ------------------------------------------------------------------------------------------------ bad input
def _one_error(capsys, rc, *needles):
    err = capsys.readouterr().err
    assert rc == 2 and err.count("\n") == 1 and err.startswith("error: "), err
    for n in needles:
        assert n in err, err


def test_a_run_with_no_eligible_baselines_is_one_error_and_writes_nothing(tokenizer, tmp_path, capsys):
    qs = [q for q in load_questions("arith", task="s2_o5", n_per_level=40) if _start(q) in (1, 5)][:4]
    run = tmp_path / "run"
    run_protocol(fake_lm(tokenizer), qs, _settings(task="s2_o5"), run, generate_fn=scripted_generate, echo=None,
                 progress=False)
    before = sorted(p.name for p in run.iterdir())
    _one_error(capsys, ea_main([str(run)]), "no eligible baselines", "--max-examples")
    _one_error(capsys, para_main([str(run)]), "no eligible baselines")
    assert sorted(p.name for p in run.iterdir()) == before


def test_bad_options_and_an_unloadable_paraphraser_are_one_error_and_write_nothing(run_copy, capsys):
    _one_error(capsys, para_main([str(run_copy), "--paraphraser", str(run_copy / "no-such-model")]), "--paraphraser",
               "does not exist")
    _one_error(capsys, para_main([str(run_copy), "--fractions", "half"]), "--fractions")
    _one_error(capsys, ea_main([str(run_copy), "--shard", "3/2"]), "--shard")
    _one_error(capsys, ea_main([str(run_copy / "nope")]), "does not exist")
    assert not any((run_copy / d).exists() for d in ("early_answer", "paraphrase", "filler"))
