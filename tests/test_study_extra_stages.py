"""The study's optional stages (other causal tests, activation patching) through its one stage selector."""
from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]


def test_optional_stages_are_registered_but_not_default():
    from study.dryrun.plan import select_stages
    from study.stages.core import REGISTRY

    for name in ("early_answer", "filler", "paraphrase", "resample", "receiver_heads", "suppression", "patch"):
        assert name in REGISTRY and not REGISTRY[name].default
    default = select_stages(None)
    assert "early_answer" not in default and default[0] == "behaviour" and "steering" in default
    assert select_stages("behaviour,patch") == ["behaviour", "patch"]
    assert set(select_stages("all")) == set(REGISTRY)


def test_dry_run_plans_the_optional_stages(tmp_path):
    r = subprocess.run([sys.executable, "-m", "study", "--dry-run", "--output-dir", str(tmp_path / "s"),
                        "--stages", "behaviour,early_answer,filler,resample,receiver_heads,suppression,patch"],
                       cwd=REPO, capture_output=True, text=True, timeout=120)
    assert r.returncode == 0, r.stderr
    for name in ("early_answer", "filler", "resample", "receiver_heads", "suppression", "patch"):
        assert f" {name} " in r.stdout
    assert not (tmp_path / "s").exists()


def test_unknown_stage_is_one_error_line(tmp_path):
    r = subprocess.run([sys.executable, "-m", "study", "--dry-run", "--stages", "behaviour,early_answr"],
                       cwd=REPO, capture_output=True, text=True, timeout=120)
    assert r.returncode == 2
    lines = [x for x in r.stderr.splitlines() if x.strip()]
    assert len(lines) == 1 and "early_answr" in lines[0] and "early_answer" in lines[0]


@pytest.mark.integration
def test_study_runs_causal_tests_and_patching_on_embedded_model(tmp_path):
    out = tmp_path / "study"
    cmd = [sys.executable, "-m", "study", "--output-dir", str(out), "--task", "s2_o3", "--max-examples", "12",
           "--strategy", "arithmetic_change", "--max-new-tokens", "48", "--stages",
           "behaviour,early_answer,filler,patch", "--patch-layers", "0,15,30", "--patch-cases", "2", "--quiet"]
    env = dict(os.environ, PYTHONPATH=str(REPO))
    r = subprocess.run(cmd, cwd=REPO, capture_output=True, text=True, env=env, timeout=600)
    assert r.returncode == 0, r.stdout[-3000:] + r.stderr[-3000:]
    summary = json.loads((out / "summary.json").read_text())
    assert summary["eligible"] > 0
    for name in ("early_answer", "filler"):
        s = json.loads((out / name / "summary.json").read_text())
        assert s, name
    report = (out / "report.md").read_text()
    assert "Early answering" in report and "Filler" in report
    assert (out / "patching" / "patching.json").is_file() or "Skipped" in report
