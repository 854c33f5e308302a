"""The whole pipeline end to end on the embedded model: behaviour -> labels -> activations -> probes ->
steering -> report.md, with every stage's files checked."""
from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]


@pytest.mark.integration
def test_study_end_to_end_on_embedded_model(tmp_path):
    out = tmp_path / "study"
    cmd = [sys.executable, "study.py", "--output-dir", str(out), "--task", "s2_o3", "--max-examples", "24",
           "--folds", "3", "--k", "1,2", "--alphas", "1", "--max-cases", "4", "--random-seeds", "1",
           "--max-new-tokens", "64", "--quiet"]
    r = subprocess.run(cmd, cwd=REPO, capture_output=True, text=True, env=dict(os.environ, PYTHONPATH=str(REPO)))
    assert r.returncode == 0, r.stdout[-3000:] + r.stderr[-3000:]
    summary = json.loads((out / "summary.json").read_text())
    assert summary["questions"] == 24 and summary["eligible"] > 0
    assert (out / "labels" / "rule" / "labels.jsonl").is_file()
    from activations.store import open_store

    with open_store(out / "activations.h5") as st:
        # the perturbed continuations only (the probes read those); SmolLM2: embeddings + 30 blocks
        assert st.n_rows == summary["overall"]["perturbed"] and len(st.layers) == 31
    probes = json.loads((out / "probes" / "results.json").read_text())
    assert probes["headline"] and (out / "probes" / "directions.h5").is_file()
    steer = json.loads((out / "steering" / "summary.json").read_text())
    assert steer["verdict"]
    report = (out / "report.md").read_text()
    for section in ("Behaviour", "Labels", "Activations", "Probes", "Steering", "Verdict"):
        assert section in report, section
    # a second invocation refuses to overwrite; --resume skips every finished stage
    r2 = subprocess.run(cmd, cwd=REPO, capture_output=True, text=True, env=dict(os.environ, PYTHONPATH=str(REPO)))
    assert r2.returncode == 2 and "already exists" in r2.stderr
    r3 = subprocess.run([sys.executable, "study.py", "--resume", str(out), "--task", "s2_o3", "--max-examples", "24",
                         "--max-new-tokens", "64", "--quiet"], cwd=REPO, capture_output=True, text=True,
                        env=dict(os.environ, PYTHONPATH=str(REPO)))
    assert r3.returncode == 0, r3.stderr[-2000:]
    assert r3.stdout.count("already complete, skipped") == 5
