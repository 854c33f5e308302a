"""The study package: every stage called as a library function, skipped when its own output is complete.

    .venv/bin/pytest -q tests/test_study.py -m "not integration"

The fast tests run the whole pipeline on the scripted model (behaviour) and a tiny in-process Llama
(activations, steering); the integration test runs ``python -m study`` on the embedded SmolLM2.
"""
from __future__ import annotations

import functools
import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
FAST = ["--task", "s2_o5", "--max-examples", "16", "--folds", "2", "--k", "1", "--alphas", "0.5", "--max-cases", "2",
        "--random-seeds", "1", "--max-new-tokens", "16", "--quiet"]


@pytest.fixture(scope="module")
def fast_study(tmp_path_factory, tiny_lm) -> Path:
    """One complete FAST study (scripted behaviour, tiny Llama), built once; tests work on copies of it."""
    from fakes import scripted_generate

    import behavioural.protocol as protocol
    import loadbearing.engine.models as models
    from study.driver import main

    out = tmp_path_factory.mktemp("fast-study") / "study"
    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(models, "load_model", lambda *a, **k: tiny_lm)
        mp.setattr(protocol, "generate", functools.partial(scripted_generate))
        assert main(["--output-dir", str(out), *FAST]) == 0
    return out


def _copy_study(src: Path, dst: Path) -> Path:
    """A copy of a finished study (modification times kept), as if it had been run at ``dst``."""
    shutil.copytree(src, dst)
    return dst


def _records(out: Path) -> dict:
    from loadbearing.files import read_jsonl

    return {"continuations": read_jsonl(out / "continuations.jsonl"),
            "labels": read_jsonl(out / "labels" / "rule" / "labels.jsonl")}


def test_study_runs_every_stage_and_resume_skips_them(tmp_path, fake_models, fast_study, capsys):
    from study.driver import main

    out = _copy_study(fast_study, tmp_path / "study")
    for f in ("summary.json", "labels/rule/summary.json", "activations.h5", "probes/results.json",
              "steering/summary.json", "report.md", "report.txt", "report.html", "browse.html", "study.json",
              "gradient/skipped.json"):
        assert (out / f).is_file(), f
    md = (out / "report.md").read_text()
    for section in ("Behaviour", "Labels", "Activations", "Probes", "Steering", "| overall |", "| perturbed |",
                    "Difficulty gradient", "One task/level only", "Trace browser", "browse.html"):
        assert section in md, section
    assert "not run yet" not in md and "could not render" not in md
    txt = (out / "report.txt").read_text()
    assert "Steering" in txt and "Labelling rule (final labeller: rule)." in txt  # the labels section as text
    capsys.readouterr()
    # a second new study there is refused; --resume alone skips every finished stage, with the stored settings
    assert main(["--output-dir", str(out), *FAST]) == 2
    assert "already exists" in capsys.readouterr().err
    # --resume of the complete study: one line, nothing written
    assert main(["--resume", str(out)]) == 0
    cap = capsys.readouterr()
    assert cap.out.count("\n") == 1 and "the study is complete" in cap.out and not cap.err
    # with the report gone, --resume alone skips every finished stage, with the stored settings, and rewrites it
    (out / "report.html").unlink()
    assert main(["--resume", str(out)]) == 0
    cap = capsys.readouterr()
    assert cap.out.count("already complete, skipped") == 7  # behaviour, labels, gradient, ..., steering, browser
    assert "resuming" in cap.out and "max_examples=16" in cap.out
    assert (out / "report.html").is_file()
    # explicit options that differ from the stored ones are refused, naming each; nothing is modified
    before = (out / "study.json").read_bytes()
    assert main(["--resume", str(out), "--max-examples", "20", "--folds", "3"]) == 2
    err = capsys.readouterr().err
    assert "--max-examples 20" in err and "--folds 3" in err and err.count("\n") == 1
    assert (out / "study.json").read_bytes() == before


def _snapshot(d: Path) -> dict[str, tuple]:
    """Every file and directory under ``d``: its bytes' hash (files) and modification time."""
    import hashlib

    out = {}
    for p in sorted([d, *d.rglob("*")]):
        st = p.stat()
        out[str(p.relative_to(d))] = (hashlib.sha256(p.read_bytes()).hexdigest() if p.is_file() else "dir", st.st_mtime_ns)
    return out


def test_resume_of_a_complete_study_writes_nothing(tmp_path, fake_models, fast_study, capsys):
    from study.driver import is_complete, main

    out = _copy_study(fast_study, tmp_path / "study")
    assert is_complete(out)
    for p in [out, *out.rglob("*")]:  # every mtime a day back, so any rewrite shows even on a coarse clock
        st = p.stat()
        os.utime(p, ns=(st.st_atime_ns, st.st_mtime_ns - 86_400 * 10**9))
    before = _snapshot(out)
    capsys.readouterr()
    for argv in (["--resume", str(out)], ["--resume", str(out), "--batch-size", "3", "--quiet"]):
        assert main(argv) == 0
        cap = capsys.readouterr()
        assert cap.out.splitlines() == [f"{out}: the study is complete (every stage finished, report written); "
                                        f"nothing to do. Report: {out / 'report.md'}"]
        assert _snapshot(out) == before
    # a study missing one stage's output is not complete, and a resume redoes only what is missing
    (out / "browse.html").unlink()
    assert not is_complete(out)
    assert main(["--resume", str(out)]) == 0
    assert "already complete, skipped" in capsys.readouterr().out and (out / "browse.html").is_file()


def test_resume_repairs_missing_summary_and_unfinished_labels(tmp_path, fake_models, fast_study, capsys):
    from study.driver import main

    out = _copy_study(fast_study, tmp_path / "study")
    ref = _records(out)
    (out / "summary.json").unlink()  # the behavioural stage must redo its summary
    s = json.loads((out / "labels" / "rule" / "settings.json").read_text())
    (out / "labels" / "rule" / "settings.json").write_text(json.dumps(dict(s, status="running")))
    lines = (out / "labels" / "rule" / "labels.jsonl").read_text().splitlines(keepends=True)
    (out / "labels" / "rule" / "labels.jsonl").write_text("".join(lines[:5]) + lines[5][:20])
    capsys.readouterr()
    assert main(["--resume", str(out)]) == 0
    assert (out / "summary.json").is_file()
    assert _records(out) == ref
    assert capsys.readouterr().out.count("already complete, skipped") == 5  # gradient, activations, probes, steering, browser


def test_resume_of_a_missing_directory_is_an_error(tmp_path, capsys):
    from study.driver import main

    assert main(["--resume", str(tmp_path / "typo")]) == 2
    err = capsys.readouterr().err
    assert "no such study directory" in err and err.count("\n") == 1
    assert not (tmp_path / "typo").exists()


def test_help_and_report_cli(tmp_path, capsys):
    r = subprocess.run([sys.executable, "-m", "study", "--help"], cwd=REPO, capture_output=True, text=True)
    assert r.returncode == 0 and "--resume" in r.stdout
    from study.report.write import main as report_main

    assert report_main([str(tmp_path / "nope")]) == 2
    assert "does not exist" in capsys.readouterr().err


@pytest.mark.integration
def test_study_end_to_end_on_embedded_model(tmp_path):
    out = tmp_path / "study"
    cmd = [sys.executable, "-m", "study", "--output-dir", str(out), "--task", "s2_o3", "--max-examples", "12",
           "--folds", "3", "--k", "1,2", "--alphas", "1", "--max-cases", "4", "--random-seeds", "1",
           "--max-new-tokens", "64", "--activation-layers", "0,10,20,30", "--permutations", "19", "--quiet"]
    env = dict(os.environ, PYTHONPATH=str(REPO))
    r = subprocess.run(cmd, cwd=REPO, capture_output=True, text=True, env=env)
    assert r.returncode == 0, r.stdout[-3000:] + r.stderr[-3000:]
    summary = json.loads((out / "summary.json").read_text())
    assert summary["questions"] == 12 and summary["eligible"] > 0
    assert (out / "labels" / "rule" / "labels.jsonl").is_file()
    from activations.store import open_store

    with open_store(out / "activations.h5") as st:
        # the perturbed continuations only (the probes read those), at the layers asked for (of SmolLM2's 31)
        assert st.n_rows == summary["overall"]["perturbed"] and list(st.layers) == [0, 10, 20, 30]
    probes = json.loads((out / "probes" / "results.json").read_text())
    assert probes["headline"] and (out / "probes" / "directions.h5").is_file()
    steer = json.loads((out / "steering" / "summary.json").read_text())
    assert steer["verdict"]
    assert steer["split"]["disjoint"] is True  # directions fitted on other questions than the steered ones
    assert (out / "browse.html").is_file() and (out / "report.html").is_file()
    report = (out / "report.md").read_text()
    for section in ("Behaviour", "Labels", "Activations", "Probes", "Steering"):
        assert section in report, section
    r2 = subprocess.run(cmd, cwd=REPO, capture_output=True, text=True, env=env)
    assert r2.returncode == 2 and "already exists" in r2.stderr
    r3 = subprocess.run([sys.executable, "-m", "study", "--resume", str(out)], cwd=REPO, capture_output=True,
                        text=True, env=env)
    assert r3.returncode == 0, r3.stderr[-2000:]
    assert "the study is complete" in r3.stdout and r3.stdout.count("\n") == 1
