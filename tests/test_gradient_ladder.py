"""bench/ladder_study.py end to end on the tiny in-process model (no real model, a few seconds)."""
from __future__ import annotations

import importlib.util
import json
from pathlib import Path

import pytest

SCRIPT = Path(__file__).resolve().parents[1] / "bench" / "ladder_study.py"


def _load():
    spec = importlib.util.spec_from_file_location("ladder_study", SCRIPT)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)  # type: ignore[union-attr]
    return mod


def test_ladder_study_runs_levels_then_gradient(tmp_path, tiny_lm, monkeypatch, capsys):
    import loadbearing.engine.models

    monkeypatch.setattr(loadbearing.engine.models, "load_model", lambda *a, **k: tiny_lm)
    mod = _load()
    out = tmp_path / "ladder"
    rc = mod.main(["--output-dir", str(out), "--levels", "s2_o3=3,s3_o5=3", "--max-new-tokens", "6", "--batch-size", "4",
                   "--quiet"])
    assert rc == 0
    printed = capsys.readouterr().out
    assert "ladder study: 2 levels in" in printed and "Per task or level" in printed
    meta = json.loads((out / "ladder_study.json").read_text())
    assert meta["levels"] == {"s2_o3": 3, "s3_o5": 3} and meta["elapsed_seconds"] > 0
    g = json.loads((out / "gradient" / "gradient.json").read_text())
    assert [c["cell"] for c in g["cells"]] == ["s2_o3", "s3_o5"]
    assert all(c["baselines"] == 3 for c in g["cells"])
    assert mod.main(["--output-dir", str(out), "--levels", "s2_o3=3"]) == 2  # finished study: refused
    with pytest.raises(SystemExit):
        mod.parse_counts("s2_o3")
