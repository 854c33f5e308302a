"""Crash safety: SIGKILL at several points (seeded), then ``--resume``, gives the records of an uninterrupted
run, with nothing lost and nothing duplicated; for ``behavioural.run``, ``behavioural.labels.stage`` and ``study``.

    .venv/bin/pytest -q tests/test_reliability_crash.py

The killed process is a subprocess running the real CLI ``main`` with the scripted model (tests/fakes.py),
slowed down so a kill lands mid-stage; the kill moment is "once the stage's output has N records" plus a
seeded random delay. Resumes run in-process with the same fakes.
"""
from __future__ import annotations

import functools
import json
import os
import random
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from loadbearing.files import read_jsonl

REPO = Path(__file__).resolve().parents[1]
RUN_ARGS = ["--dataset", "arith", "--task", "s2_o5", "--max-examples", "12", "--strategy",
            "arithmetic_change,contradiction", "--max-new-tokens", "64", "--batch-size", "2", "--quiet"]
STUDY_ARGS = ["--task", "s2_o5", "--max-examples", "16", "--folds", "2", "--k", "1", "--alphas", "0.5", "--max-cases",
              "2", "--random-seeds", "1", "--max-new-tokens", "16", "--batch-size", "2", "--permutations", "9", "--quiet"]

DRIVER = r'''
import functools, os, sys, time
sys.path[:0] = [{repo!r}, {tests!r}]
from transformers import AutoTokenizer
from loadbearing.engine.models import dequantised_gguf_dir, embedded_gguf_path
import loadbearing.engine.models as M, behavioural.protocol as P
import behavioural.labels.stage as L, behavioural.labels.labellers as LL
from fakes import fake_lm, scripted_generate
tok = AutoTokenizer.from_pretrained(str(dequantised_gguf_dir(embedded_gguf_path())[0]))
if tok.pad_token is None:
    tok.pad_token = tok.eos_token
if os.environ.get("CRASH_TINY"):
    from helpers.tiny import make_tiny_lm
    lm = make_tiny_lm(tok)
else:
    lm = fake_lm(tok)
M.load_model = lambda *a, **k: lm
P.generate = functools.partial(scripted_generate, delay=float(os.environ.get("CRASH_GEN_DELAY", "0")))
_one = LL.RuleLabeller.label_one
def slow_one(self, c, question=None):
    time.sleep(float(os.environ.get("CRASH_LABEL_DELAY", "0")))
    return _one(self, c, question)
LL.RuleLabeller.label_one = slow_one
L.label_run.__kwdefaults__["chunk"] = int(os.environ.get("CRASH_LABEL_CHUNK", "64"))
import importlib
main = importlib.import_module(sys.argv[1]).main
sys.exit(main(sys.argv[2:]))
'''


@pytest.fixture(scope="module")
def driver(tmp_path_factory) -> Path:
    p = tmp_path_factory.mktemp("driver") / "driver.py"
    p.write_text(DRIVER.format(repo=str(REPO), tests=str(REPO / "tests")))
    return p


def _lines(path: Path) -> int:
    try:
        return path.read_bytes().count(b"\n")
    except OSError:
        return 0


def kill_when(driver: Path, module: str, argv: list[str], ready, *, seed: int, env: dict | None = None,
              timeout: float = 120) -> int:
    """Start ``python -m module argv`` (with fakes), SIGKILL it once ``ready()`` plus a seeded random delay;
    returns the exit status (-9 when killed, 0 if it finished first)."""
    e = dict(os.environ, PYTHONPATH=str(REPO), **(env or {}))
    p = subprocess.Popen([sys.executable, str(driver), module, *argv], cwd=REPO, env=e, stdout=subprocess.DEVNULL,
                         stderr=subprocess.PIPE)
    t0 = time.time()
    try:
        while not ready():
            if p.poll() is not None:
                return p.returncode
            if time.time() - t0 > timeout:
                raise AssertionError(f"{module} never reached the kill point")
            time.sleep(0.005)
        time.sleep(random.Random(seed).uniform(0, 0.05))
        p.send_signal(signal.SIGKILL)
        return p.wait()
    finally:
        if p.poll() is None:
            p.kill()
            p.wait()
        if p.stderr:
            p.stderr.close()


@pytest.fixture
def fakes(monkeypatch, tokenizer):
    from fakes import fake_lm, scripted_generate

    import behavioural.protocol as protocol
    import loadbearing.engine.models as models

    lm = fake_lm(tokenizer)
    monkeypatch.setattr(models, "load_model", lambda *a, **k: lm)
    monkeypatch.setattr(protocol, "generate", functools.partial(scripted_generate))
    return lm


def _run_records(d: Path) -> dict:
    conts = read_jsonl(d / "continuations.jsonl")
    ids = [c["id"] for c in conts]
    assert len(ids) == len(set(ids)), "duplicated continuation"
    return {"baselines": read_jsonl(d / "baselines.jsonl"), "continuations": conts,
            "skipped": read_jsonl(d / "skipped.jsonl")}


def _summary(d: Path) -> dict:
    s = json.loads((d / "summary.json").read_text())
    s.pop("run_dir", None)
    return s


@pytest.fixture(scope="module")
def reference_run(tmp_path_factory, driver) -> Path:
    out = tmp_path_factory.mktemp("ref") / "run"
    r = subprocess.run([sys.executable, str(driver), "behavioural.run", *RUN_ARGS, "--output-dir", str(out)], cwd=REPO,
                       capture_output=True, text=True, env=dict(os.environ, PYTHONPATH=str(REPO)))
    assert r.returncode == 0, r.stderr[-2000:]
    return out


# kill points: (file, fraction of the uninterrupted run's records written before the kill); records are written
# per chunk of 16 generations, so the fractions are chosen to land before the last chunk
RUN_POINTS = [("baselines.jsonl", 0.05), ("continuations.jsonl", 0.05), ("continuations.jsonl", 0.4),
              ("continuations.jsonl", 0.6)]


@pytest.mark.parametrize("seed,point", list(enumerate(RUN_POINTS)))
def test_behavioural_run_killed_then_resumed(seed, point, tmp_path, driver, reference_run, fakes, capsys):
    from behavioural.run import main

    out = tmp_path / "run"
    fname, frac = point
    n = max(1, int(frac * _lines(reference_run / fname)))
    rc = kill_when(driver, "behavioural.run", [*RUN_ARGS, "--output-dir", str(out)], lambda: _lines(out / fname) >= n,
                   seed=seed, env={"CRASH_GEN_DELAY": "0.02"})
    assert rc == -signal.SIGKILL
    assert json.loads((out / "manifest.json").read_text())["status"] == "running"
    assert main(["--resume", str(out), "--quiet"]) == 0  # the README's command, alone
    assert _run_records(out) == _run_records(reference_run)
    assert _summary(out) == _summary(reference_run)
    m = json.loads((out / "manifest.json").read_text())
    assert m["status"] == "ok" and m["resumed"] == 1 and not (out / ".lock").exists()


def test_second_writer_is_refused_while_a_run_is_going(tmp_path, driver, fakes, capsys):
    from behavioural.run import main

    out = tmp_path / "run"
    e = dict(os.environ, PYTHONPATH=str(REPO), CRASH_GEN_DELAY="0.05")
    p = subprocess.Popen([sys.executable, str(driver), "behavioural.run", *RUN_ARGS, "--output-dir", str(out)], cwd=REPO,
                         env=e, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        t0 = time.time()
        while _lines(out / "baselines.jsonl") < 1:
            assert time.time() - t0 < 60 and p.poll() is None
            time.sleep(0.01)
        before = (out / "manifest.json").read_bytes()
        assert main(["--resume", str(out), "--quiet"]) == 2
        err = capsys.readouterr().err
        assert f"pid {p.pid}" in err and "in use by another writer" in err and err.count("\n") == 1
        assert (out / "manifest.json").read_bytes() == before
    finally:
        p.kill()
        p.wait()
    assert main(["--resume", str(out), "--quiet"]) == 0  # the dead writer's lock is taken over
    ids = [c["id"] for c in read_jsonl(out / "continuations.jsonl")]
    assert len(ids) == len(set(ids)) == 48  # distinct model inputs (schema 2: shared controls/lines kept once)


LABEL_POINTS = [0.02, 0.2, 0.5, 0.8]


@pytest.mark.parametrize("seed,frac", list(enumerate(LABEL_POINTS)))
def test_labelling_killed_then_resumed(seed, frac, tmp_path, driver, reference_run, capsys):
    from behavioural.labels.stage import main

    run = tmp_path / "run"
    shutil.copytree(reference_run, run)
    ref = tmp_path / "ref"
    shutil.copytree(reference_run, ref)
    assert main([str(ref), "--quiet"]) == 0
    labels = run / "labels" / "rule" / "labels.jsonl"
    n = max(1, int(frac * _lines(run / "continuations.jsonl")))
    rc = kill_when(driver, "behavioural.labels.stage", [str(run), "--quiet"], lambda: _lines(labels) >= n, seed=seed,
                   env={"CRASH_LABEL_DELAY": "0.01", "CRASH_LABEL_CHUNK": "4"})
    assert rc == -signal.SIGKILL
    assert main([str(run), "--resume", "--quiet"]) == 0
    assert read_jsonl(labels) == read_jsonl(ref / "labels" / "rule" / "labels.jsonl")
    got, want = (json.loads((d / "labels" / "rule" / "summary.json").read_text()) for d in (run, ref))
    assert got == want
    # a fresh labelling (not a resume) still never touches the finished one
    assert main([str(run), "--quiet"]) == 0 and (run / "labels" / "rule-2").is_dir()


# ------------------------------------------------------------------------------------------ study
@pytest.fixture
def tiny_fakes(monkeypatch, tiny_lm):
    from fakes import scripted_generate

    import behavioural.protocol as protocol
    import loadbearing.engine.models as models

    monkeypatch.setattr(models, "load_model", lambda *a, **k: tiny_lm)
    monkeypatch.setattr(protocol, "generate", functools.partial(scripted_generate))
    return tiny_lm


def _study_records(d: Path) -> dict:
    from activations.store import open_store

    with open_store(d / "activations.h5") as st:
        rows = sorted(str(x) for x in st.rows["continuation_id"])
    probes = json.loads((d / "probes" / "results.json").read_text())
    return {**_run_records(d), "labels": read_jsonl(d / "labels" / "rule" / "labels.jsonl"), "store_rows": rows,
            "probe_headline": json.dumps(probes.get("headline"), sort_keys=True, default=str)}


STUDY_POINTS = [("continuations.jsonl", 10), ("labels/rule/labels.jsonl", 8), ("activations.h5", 0)]


@pytest.fixture(scope="module")
def study_reference(tmp_path_factory, tiny_lm) -> dict:
    """The records of one uninterrupted study (the same for every kill point: built once)."""
    from fakes import scripted_generate

    import behavioural.protocol as protocol
    import loadbearing.engine.models as models
    from study.driver import main

    ref = tmp_path_factory.mktemp("study-ref") / "ref"
    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(models, "load_model", lambda *a, **k: tiny_lm)
        mp.setattr(protocol, "generate", functools.partial(scripted_generate))
        assert main(["--output-dir", str(ref), *STUDY_ARGS]) == 0
    return _study_records(ref)


@pytest.mark.parametrize("seed,point", list(enumerate(STUDY_POINTS)))
def test_study_killed_then_resumed(seed, point, tmp_path, driver, tiny_fakes, study_reference, capsys):
    from study.driver import main

    out = tmp_path / "study"
    fname, n = point
    ready = (lambda: (out / fname).exists()) if n == 0 else (lambda: _lines(out / fname) >= n)
    rc = kill_when(driver, "study.driver", ["--output-dir", str(out), *STUDY_ARGS], ready, seed=seed,
                   env={"CRASH_TINY": "1", "CRASH_GEN_DELAY": "0.005", "CRASH_LABEL_DELAY": "0.01",
                        "CRASH_LABEL_CHUNK": "4"})
    assert rc == -signal.SIGKILL
    assert main(["--resume", str(out)]) == 0
    assert _study_records(out) == study_reference
