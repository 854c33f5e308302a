"""Resampling importance (behavioural.causal.resample): a scripted sampler with known importances, resume,
shards, bad input, and one integration run on the embedded model.

The run is written by the real protocol with the scripted model (tests/fakes.py). The scripted sampler's
rollout ``j`` after the first ``k`` reasoning lines writes a *different* step ``k`` when ``j`` is even (the
original line when odd), then the rest of the original chain; its answer is wrong exactly when it replaced
step ``K`` by a different one. Forced answers are right exactly when the prefix holds line ``K``. So step K
is the anchor: cf(K) = acc(D(K)) - acc(R(K+1)) = 0 - 1 = -1, cf(K-1) = 1 - 1/2 = +1/2, every other cf = 0,
and the forced importance is 1 at K and 0 elsewhere.
"""
from __future__ import annotations

import json
import math
import re
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from fakes import fake_lm, scripted_generate

from behavioural.causal.common import ANSWER_PREFIX
from behavioural.causal.resample import ResampleConfig, is_complete, main, run_resample, sample_keys
from behavioural.causal.resample_summary import answer_kl
from behavioural.protocol import Settings, run_protocol
from loadbearing.engine.generation import Generation
from loadbearing.engine.sampling import Sampling
from loadbearing.questions.data import load_questions
from loadbearing.runs import Run

K = 1
N = 4


@pytest.fixture(scope="module")
def run_dir(tokenizer, tmp_path_factory) -> Path:
    qs = load_questions("arith", task="s2_o5,s3_o5", n_per_level=4)
    out = tmp_path_factory.mktemp("resample") / "run"
    settings = Settings(model="scripted", dataset="arith", strategies=("arithmetic_change",), task="s2_o5,s3_o5",
                        max_examples=None, max_new_tokens=64, n_per_level=4, batch_size=4)
    run_protocol(fake_lm(tokenizer), qs, settings, out, generate_fn=scripted_generate, echo=None, progress=False)
    return out


@pytest.fixture
def run_copy(run_dir, tmp_path) -> Path:
    dst = tmp_path / "run"
    shutil.copytree(run_dir, dst)
    return dst


class Sampler:
    """The scripted sampler of the module docstring; records the sampling settings and keys it was given."""

    def __init__(self, run: Path):
        self.base = {b.prompt: b for b in Run(run).baselines()}
        self.calls: list[dict] = []

    def __call__(self, lm, texts, *, sampling=None, sample_keys=None, **kw):
        assert isinstance(sampling, Sampling) and not sampling.greedy and len(sample_keys) == len(texts)
        self.calls.append({"sampling": sampling, "keys": list(sample_keys), **kw})
        out = []
        for t, key in zip(texts, sample_keys):
            prompt = next(p for p in self.base if t.startswith(p))
            b = self.base[prompt]
            m = re.search(r"k=(\d+)\|r=(\d+)$", key)
            assert m is not None
            k, j = int(m.group(1)), int(m.group(2))
            if t.endswith(ANSWER_PREFIX):  # forced: right once the chain holds line K
                out.append(Generation(f" {b.gold if k > K else 999}\n", 2, "eos"))
                continue
            assert t == prompt + ("" if k == 0 else "\n".join(b.lines[:k]) + "\n")
            rest = list(b.lines[k:])
            wrong = False
            if rest and j % 2 == 0:
                rest[0] = f"Something else entirely {j}"
                wrong = k == K
            out.append(Generation("\n".join(rest + [f"Answer: {999 if wrong else b.gold}"]), 9, "eos"))
        return out


def _config(run, **kw: Any) -> ResampleConfig:
    base: dict[str, Any] = {"run_dir": str(run), "rollouts": N, "max_questions": None, "n_boot": 200, "quiet": True}
    return ResampleConfig(**(base | kw))


def test_scripted_sampler_gives_the_known_importances(run_copy, tokenizer):
    sampler = Sampler(run_copy)
    s = run_resample(_config(run_copy), fake_lm(tokenizer), generate_fn=sampler, echo=None)
    eligible = [b for b in Run(run_copy).baselines() if b.eligible]
    assert s["n_sampled_questions"] == len(eligible) >= 3
    for q in s["questions"]:
        n = q["n_lines"]
        cf = [st["cf_importance"] for st in q["steps"]]
        want = [0.0] * n
        want[K], want[K - 1] = -1.0, 0.5
        assert cf == want
        assert [st["forced_importance"] for st in q["steps"]] == [1.0 if i == K else 0.0 for i in range(n)]
        # thought-anchors' sign: next minus current (keeping step K-1 does not help; keeping K does)
        assert [st["resampling_importance"] for st in q["steps"]][K - 1:K + 1] == [-0.5, 0.5]
        assert q["anchor"] == K and q["steps"][K]["rank"] == 1
        st = q["steps"][K]
        assert st["n_different"] == N // 2 and st["different_fraction"] == 0.5
        # thought-anchors' KL: D(K) = 2 wrong vs R(K+1) (4 right) pooled with S(K) (2 right), 1e-9 smoothing
        a = 1e-9
        p, qd = [(2 + a) / (2 + 2 * a), a / (2 + 2 * a)], [a / (6 + 2 * a), (6 + a) / (6 + 2 * a)]
        assert st["kl_importance"] == pytest.approx(sum(x * math.log(x / y) for x, y in zip(p, qd)), rel=1e-12)
        # every rollout agrees (cf = -1 in each resample): no zero-width interval is reported
        assert st["cf_ci"] == [None, None]
        # the paper's edit positions: middle/late lines of a 3-4 line chain are K or later
        assert {e["position"] for e in q["edited"]} == {"early", "middle", "late"}
        for e in q["edited"]:
            assert e["is_anchor"] == (e["step"] == K)
    # one row per rollout (and per forced answer), each with its seed and sampling settings
    rows = [json.loads(x) for x in (run_copy / "resample" / "records.jsonl").read_text().splitlines()]
    assert len(rows) == sum(2 * N * (len(b.lines) + 1) for b in eligible)
    assert all(r["sampling"] == {"temperature": 0.6, "top_p": 0.95, "seed": 44} and isinstance(r["row_seed"], int)
               for r in rows)
    assert len({r["row_seed"] for r in rows}) == len(rows)
    man = json.loads((run_copy / "resample" / "manifest.json").read_text())
    assert man["extra"]["similarity_provenance"]["method"] == "tfidf"
    assert man["extra"]["sampling_provenance"]["paper"]["rollouts"] == 100
    # the rollouts of one prefix are neighbours in one call (the fast path shares their prefix)
    keys = sampler.calls[0]["keys"]
    assert keys[:N] == [f"{eligible[0].question_id}|k=0|r={j}" for j in range(N)]
    md = (run_copy / "resample" / "summary.md").read_text()
    assert "| anchor |" in md and "is anchor" in md
    assert is_complete(run_copy) and is_complete(run_copy / "resample")


def test_resume_writes_nothing_and_shards_merge(run_copy, tokenizer):
    cfg = _config(run_copy)
    full = run_resample(cfg, fake_lm(tokenizer), generate_fn=Sampler(run_copy), echo=None)
    out = run_copy / "resample"
    before = (out / "records.jsonl").read_bytes()
    again = Sampler(run_copy)
    run_resample(_config(run_copy, resume=True), fake_lm(tokenizer), generate_fn=again, echo=None)
    assert again.calls == [] and (out / "records.jsonl").read_bytes() == before
    # two shards, then an unsharded run in a fresh copy takes their rows instead of sampling again
    fresh = run_copy.parent / "fresh"
    shutil.copytree(run_copy, fresh)
    shutil.rmtree(fresh / "resample")
    for i in range(2):
        run_resample(_config(fresh, shard=f"{i}/2"), fake_lm(tokenizer), generate_fn=Sampler(fresh), echo=None)
    merged_sampler = Sampler(fresh)
    merged = run_resample(_config(fresh), fake_lm(tokenizer), generate_fn=merged_sampler, echo=None)
    assert merged_sampler.calls == []
    assert merged["questions"] == full["questions"]


def test_the_question_sample_is_seeded_and_shared_by_shards(run_copy, tokenizer):
    run = Run(run_copy)
    a = sample_keys(run, _config(run_copy, max_questions=2))
    assert a is not None and a == sample_keys(run, _config(run_copy, max_questions=2)) and len(a) == 2
    assert a != sample_keys(run, _config(run_copy, max_questions=2, sample_seed=7)) or len(
        [b for b in run.baselines() if b.eligible]) == 2
    s = run_resample(_config(run_copy, max_questions=2), fake_lm(tokenizer), generate_fn=Sampler(run_copy), echo=None)
    assert {q["question_key"] for q in s["questions"]} == a


def test_bad_input_gives_one_error_line_and_writes_nothing(run_copy, capsys):
    assert main([str(run_copy), "--rollouts", "0"]) == 2
    err = capsys.readouterr().err.strip()
    assert err.startswith("error: --rollouts must be >= 1") and "\n" not in err
    assert main([str(run_copy), "--temperature", "0"]) == 2
    assert "greedy" in capsys.readouterr().err
    assert main([str(run_copy), "--similarity", "st:not-a-cached-model"]) == 2
    assert capsys.readouterr().err.startswith("error: --similarity")
    # a run with no eligible baselines
    path = run_copy / "baselines.jsonl"
    rows = [json.loads(x) | {"eligible": False} for x in path.read_text().splitlines()]
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    assert main([str(run_copy)]) == 2
    err = capsys.readouterr().err.strip()
    assert "no eligible baselines" in err and err.count("\n") == 0
    assert not (run_copy / "resample").exists()


def test_resample_accuracy_band_ceiling_and_resummarising_a_finished_stage(run_copy, tokenizer, capsys):
    s = run_resample(_config(run_copy), fake_lm(tokenizer), generate_fn=Sampler(run_copy), echo=None)
    # rollouts from the question alone are all right (only a different step K breaks the answer): the ceiling
    assert all(q["resample_accuracy"] == 1.0 and q["in_band"] for q in s["questions"])
    assert s["ceiling"]["at_ceiling"] == s["ceiling"]["n_questions"] == len(s["questions"])
    assert s["accuracy_band"] is None and "at the ceiling" in (run_copy / "resample" / "summary.md").read_text()
    before = (run_copy / "resample" / "summary.json").read_bytes()
    # thought-anchors' band keeps none of them: one error line, the finished stage's files untouched
    assert main([str(run_copy), "--rollouts", str(N), "--max-questions", "0", "--resume",
                 "--accuracy-band", "0.25,0.75"]) == 2
    err = capsys.readouterr().err.strip()
    assert err.startswith("error: --accuracy-band 0.25,0.75 selects no question") and "\n" not in err
    assert (run_copy / "resample" / "summary.json").read_bytes() == before
    assert main([str(run_copy), "--accuracy-band", "0.9"]) == 2
    assert capsys.readouterr().err.startswith("error: --accuracy-band '0.9'")
    # a band that keeps them re-summarises the records, sampling nothing
    again = Sampler(run_copy)
    s2 = run_resample(_config(run_copy, resume=True, accuracy_band=(0.5, 1.0)), fake_lm(tokenizer), generate_fn=again,
                      echo=None)
    assert again.calls == [] and s2["accuracy_band"] == [0.5, 1.0] and s2["n_in_band"] == len(s["questions"])
    assert s2["summary_options"] == {"accuracy_band": [0.5, 1.0]}


def test_step_to_step_matrix_of_the_scripted_sampler(run_copy, tokenizer):
    s = run_resample(_config(run_copy, forced=False), fake_lm(tokenizer), generate_fn=Sampler(run_copy), echo=None)
    for q in s["questions"]:
        n, m = q["n_lines"], q["step_matrix"]
        lines = next(b.lines for b in Run(run_copy).baselines() if b.question_id == q["question_id"])
        for i in range(n):
            for j in range(n):
                if j <= i:
                    assert m[i][j] is None
                elif j == i + 1 and lines[j] not in lines[:j]:
                    # kept step i: step i+1 is the one resampled, so only the odd rollouts still write it
                    assert m[i][j] == pytest.approx(-0.5)
                elif lines[j] not in lines[:j]:
                    assert m[i][j] == pytest.approx(0.0)


def test_step_matrix_is_process_chunk_pairs_match_rate_difference():
    from behavioural.causal.resample_matrix import step_matrix

    lines = ["a b", "c d", "e f"]
    rows = [{"kind": "rollout", "k": 0, "generation": "x\nc d\ne f"}, {"kind": "rollout", "k": 0, "generation": "q"},
            {"kind": "rollout", "k": 1, "generation": "c d\ne f"}, {"kind": "rollout", "k": 1, "generation": "c d"},
            {"kind": "rollout", "k": 2, "generation": "z"}, {"kind": "rollout", "k": 2, "generation": "e f"}]
    m = step_matrix(rows, lines, lambda _c, a, b: float(a == b), 0.8)
    # M[i][j] = match(R(i+1), L[j]) - match(R(i), L[j])
    assert m[0][1] == pytest.approx(1.0 - 0.5) and m[0][2] == pytest.approx(0.5 - 0.5)
    assert m[1][2] == pytest.approx(0.5 - 0.5) and m[2][2] is None and m[1][0] is None


def test_answer_kl_is_zero_for_equal_distributions():
    rows = [{"parsed_answer": "3"}, {"parsed_answer": "4"}]
    assert answer_kl(rows, rows) == pytest.approx(0.0)
    assert answer_kl(rows, []) is None


# ------------------------------------------------------------------------------------------------ integration


@pytest.mark.integration
@pytest.mark.timeout(240)
def test_resample_on_the_embedded_model(tmp_path, smol):
    run = tmp_path / "run"
    cmd = [sys.executable, "-m", "behavioural.run", "--dataset", "arith", "--task", "s2_o5", "--max-examples", "12",
           "--strategy", "arithmetic", "--line-positions", "middle", "--max-new-tokens", "64", "--batch-size", "16",
           "--output-dir", str(run), "--quiet"]
    r = subprocess.run(cmd, capture_output=True, text=True, timeout=200)
    assert r.returncode == 0, r.stderr[-2000:]
    cfg = ResampleConfig(run_dir=str(run), rollouts=3, max_questions=2, max_new_tokens=48, n_boot=100,
                         batch_size=16, quiet=True)
    s = run_resample(cfg, smol, echo=None)
    assert 1 <= s["n_sampled_questions"] <= 2 and s["n_scored"] > 0
    rows = [json.loads(x) for x in (run / "resample" / "records.jsonl").read_text().splitlines()]
    assert len(rows) == s["n_rollouts"] == sum(2 * 3 * (q["n_lines"] + 1) for q in s["questions"])
    # a seeded rollout does not depend on its batch: the same stage at another batch size gives the same rows
    other = tmp_path / "other"
    shutil.copytree(run, other)
    shutil.rmtree(other / "resample")
    run_resample(ResampleConfig(**(cfg.__dict__ | {"run_dir": str(other), "batch_size": 5})), smol, echo=None)
    rows2 = [json.loads(x) for x in (other / "resample" / "records.jsonl").read_text().splitlines()]
    assert [r["generation"] for r in rows2] == [r["generation"] for r in rows]
