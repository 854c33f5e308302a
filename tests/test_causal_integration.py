"""The causal tests on the real embedded model (integration tier): a small arith run, then each stage."""
from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest
import torch

from behavioural.causal.early_answer import EarlyAnswerConfig, run_early_answer
from behavioural.causal.filler import FillerConfig, run_filler
from behavioural.causal.paraphrase import ParaphraseConfig, run_paraphrase

pytestmark = pytest.mark.integration
REPO = Path(__file__).resolve().parents[1]


@pytest.fixture(scope="module")
def small_run(tmp_path_factory) -> Path:
    """8 easy questions, one strategy and position: a run with a few eligible chains in well under a minute."""
    run = tmp_path_factory.mktemp("causal-int") / "run"
    cmd = [sys.executable, "-m", "behavioural.run", "--dataset", "arith", "--task", "s2_o3", "--max-examples", "8",
           "--strategy", "arithmetic", "--line-positions", "middle", "--max-new-tokens", "48", "--batch-size", "8",
           "--output-dir", str(run), "--quiet"]
    r = subprocess.run(cmd, capture_output=True, text=True, timeout=110, cwd=REPO)
    assert r.returncode == 0, r.stderr[-2000:]
    return run


@pytest.fixture(autouse=True, scope="module")
def _threads():
    n = torch.get_num_threads()
    torch.set_num_threads(2)
    yield
    torch.set_num_threads(n)


@pytest.mark.timeout(120)
def test_early_answering_on_the_embedded_model(small_run, smol):
    s = run_early_answer(EarlyAnswerConfig(small_run, max_answer_tokens=8, n_boot=200, quiet=True), smol, echo=None)
    assert s["status"] == "ok" and s["n_questions"] >= 1
    rows = [json.loads(x) for x in (small_run / "early_answer" / "records.jsonl").read_text().splitlines()]
    assert len(rows) == s["n_rows"] == sum(q["n_lines"] + 1 for q in s["questions"])
    assert s["aoc"]["aoc"] is None or 0.0 <= s["aoc"]["aoc"] <= 1.0
    # the forced answer after the whole chain is the baseline's own answer for most chains
    assert s["full_chain_matches_baseline"]["k"] >= s["full_chain_matches_baseline"]["n"] // 2


@pytest.mark.timeout(120)
def test_filler_on_the_embedded_model(small_run, smol):
    s = run_filler(FillerConfig(small_run, fillers=("dots",), fractions=(0.5, 1.0), max_answer_tokens=8, n_boot=200,
                                quiet=True), smol, echo=None)
    assert s["status"] == "ok" and s["token_count_matched"] == s["n_filler_rows"]
    assert [p["fraction"] for p in s["sweep"]["dots"]] == [0.0, 0.5, 1.0]
    assert s["accuracy"]["full"]["n"] >= 1


@pytest.mark.timeout(120)
def test_paraphrase_on_the_embedded_model(small_run, smol):
    s = run_paraphrase(ParaphraseConfig(small_run, fractions=(0.5, 1.0), max_new_tokens=24, paraphrase_tokens=40,
                                        n_boot=200, quiet=True, allow_same_paraphraser=True), smol, echo=None)
    # two fractions per chain; at 1 the reference is the baseline (the run has no control after the last line)
    assert s["status"] == "ok" and sum(s["reference_sources"].values()) == 2 * s["n_questions"]
    assert s["reference_sources"].get("baseline", 0) >= s["n_questions"] and len(s["curve"]) == 2
    rows = [json.loads(x) for x in (small_run / "paraphrase" / "records.jsonl").read_text().splitlines()]
    assert all(r["paraphrase_raw"] is not None and r["original_lines"] for r in rows)


@pytest.mark.timeout(300)
def test_receiver_heads_and_suppression_on_the_embedded_model(small_run, smol):
    from behavioural.causal.attention import AttentionConfig, run_receiver_heads, run_suppression

    before = smol.model.config._attn_implementation
    cfg = AttentionConfig(small_run, max_questions=1, quiet=True)
    r = run_receiver_heads(cfg, smol, echo=None)
    assert smol.model.config._attn_implementation == before  # read eagerly, restored after
    assert r["n_sampled_questions"] == 1 and len(r["top_heads"]) == 20
    q = r["questions"][0]
    assert len(q["receiver_score"]) == q["n_lines"] and q["top_step"] is not None
    s = run_suppression(cfg, smol, echo=None)
    m = s["questions"][0]["matrix"]
    n = len(m)
    # causal: masking a later step leaves the earlier steps' distributions as they were
    assert all(m[i][j] < -15 for i in range(n) for j in range(i + 1, n))
    assert all(m[i][j] > -15 for i in range(1, n) for j in range(i))
