"""The protocol's CLI (``python -m behavioural.run``): its help, bad input refused with one error line, an existing
output directory refused, and end to end on the embedded model (``-m integration``)."""
from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from behavioural.protocol import load_run

REPO = Path(__file__).resolve().parents[1]


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
