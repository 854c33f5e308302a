"""The study on the paper's datasets with the embedded model, end to end (integration tier, real data files).

    .venv/bin/pytest -q -m integration tests/test_study_paper_datasets.py

Each case runs ``python -m study`` to a complete report at small n (each well under 120 s on 2 cores): every
stage either finishes or is skipped with its one-line insufficient-data reason (``stages.json``), and the
report prints that reason in the stage's place.
"""
from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
DATA = Path(os.environ.get("LOADBEARING_DATA", REPO.parent / "shared" / "data"))
SMALL = ["--folds", "2", "--k", "1", "--alphas", "0.5", "--max-cases", "2", "--random-seeds", "1",
         "--steer-max-new-tokens", "32", "--activation-layers", "0,15,30", "--permutations", "9", "--quiet"]
CASES = {
    "gsm8k": ["--dataset", "gsm8k", "--max-examples", "4", "--max-new-tokens", "128"],
    "mmlu": ["--dataset", "mmlu", "--task", "marketing", "--max-examples", "6", "--max-new-tokens", "96"],
    # tracking: lettered options (A)-(C), eligible traces (docs/paper-datasets.md); sports: yes/no, 2-line traces
    # two of BBH's six edits (one that propagates on this model, one that does not) at one position: its few-shot
    # prompts are ~1,500 tokens, so every cell costs a lot
    "bbh": ["--dataset", "bbh", "--task", "tracking_shuffled_objects_three_objects,sports_understanding",
            "--max-examples", "6", "--max-new-tokens", "128", "--strategy", "reversed_logic,contradiction",
            "--line-positions", "middle"],
}


@pytest.mark.integration
@pytest.mark.timeout(240)
@pytest.mark.parametrize("name", list(CASES))
def test_study_on_a_paper_dataset_reaches_a_complete_report(name, tmp_path):
    from study.stages.core import REGISTRY

    out = tmp_path / name
    cmd = [sys.executable, "-m", "study", "--output-dir", str(out), "--data-dir", str(DATA), *CASES[name], *SMALL]
    r = subprocess.run(cmd, cwd=REPO, capture_output=True, text=True, env=dict(os.environ, PYTHONPATH=str(REPO)))
    assert r.returncode == 0, r.stdout[-3000:] + r.stderr[-3000:]
    assert r.stdout.count("---- study settings") == 1 and "s2_o3" not in r.stdout
    manifest = json.loads((out / "manifest.json").read_text())
    assert manifest["settings"]["few_shot"] is True  # the embedded model: the benchmark's own exemplars
    skipped = json.loads((out / "stages.json").read_text())["skipped"] if (out / "stages.json").is_file() else {}
    report = (out / "report.md").read_text()
    for st in (s for s in REGISTRY.values() if s.default):  # the stages a study runs when --stages is not given
        done = st.is_complete(st.output(out))
        assert done or st.name in skipped, f"{st.name}: neither finished nor skipped with a reason"
        if st.name in skipped:
            assert "\n" not in skipped[st.name] and skipped[st.name] in report
    assert "not run yet" not in report and (out / "study.toml").is_file()
