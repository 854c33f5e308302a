"""The bad-input battery: every case is refused with exactly one line on stderr (``error: ...``), no traceback,
a non-zero exit, unchanged inputs and no partial output; across the six commands.

    .venv/bin/pytest -q tests/test_bad_inputs.py

CLIs run in-process through ``main(argv)``. The inputs are one small study (behaviour with the scripted
model, activations and steering with a tiny in-process Llama), built once and copied for each case. A case's
machinery and the mutations that break an input: tests/helpers/bad_inputs.py.
"""
from __future__ import annotations

import functools
import importlib
import json
import shutil
from pathlib import Path

import pytest
from helpers.bad_inputs import NEW, Case, Env, S, append, gguf, hold_lock, nan_bases, replace_line, set_json, truncate
from helpers.bad_inputs import absent_new as _absent_new
from helpers.bad_inputs import hashes as _hashes
from helpers.bad_inputs import steer_argv as _steer_argv
from helpers.bad_inputs import study_new_argv as _study_new_argv

RUN, LABEL, CACHE, PROBES, STEER, STUDY = ("behavioural.run", "behavioural.labels.stage", "activations.cache", "probes.train",
                                           "steering.sweep", "study")
DATA = Path(__file__).resolve().parents[2] / "shared" / "data"
GOOD_RUN = ["--dataset", "arith", "--task", "s2_o5", "--max-examples", "4", "--max-new-tokens", "16", "--quiet"]


@pytest.fixture(scope="session")
def hashed_lm(tiny_lm):
    """The tiny Llama with a weights hash, as every real model has."""
    import dataclasses

    return dataclasses.replace(tiny_lm, weights_hash="0" * 64)


@pytest.fixture(scope="module")
def base(tmp_path_factory, hashed_lm) -> Path:
    """A finished small study: run, labels/rule, activations.h5, probes/, steering/."""
    from fakes import scripted_generate

    import behavioural.protocol as protocol
    import loadbearing.engine.models as models
    from study.driver import main

    out = tmp_path_factory.mktemp("base") / "study"
    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(models, "load_model", lambda *a, **k: hashed_lm)
        mp.setattr(protocol, "generate", functools.partial(scripted_generate))
        assert main(["--output-dir", str(out), "--task", "s2_o5", "--max-examples", "16", "--folds", "2", "--k", "1",
                     "--alphas", "0.5", "--max-cases", "2", "--random-seeds", "1", "--max-new-tokens", "16",
                     "--quiet"]) == 0
    return out


@pytest.fixture
def models_loaded(monkeypatch, hashed_lm):
    """A model load returns the tiny Llama (so a case that gets that far still runs fast) and is counted."""
    from fakes import scripted_generate

    import behavioural.protocol as protocol
    import loadbearing.engine.models as models

    calls: list = []

    def load(*a, **k):
        calls.append(a)
        return hashed_lm

    monkeypatch.setattr(models, "load_model", load)
    monkeypatch.setattr(protocol, "generate", functools.partial(scripted_generate))
    return calls


CASES: list[Case] = [
    # ---------------------------------------------------------------- behavioural.run
    Case("run-resume-truncated-manifest", RUN, lambda e: ["--resume", S(e)], lambda e: truncate(e.f("manifest.json")),
         needle="manifest.json"),
    Case("run-resume-manifest-is-a-list", RUN, lambda e: ["--resume", S(e)],
         lambda e: e.f("manifest.json").write_text("[1, 2]")),
    Case("run-resume-manifest-wrong-kind", RUN, lambda e: ["--resume", S(e)],
         lambda e: set_json(e.f("manifest.json"), kind="probes")),
    Case("run-resume-missing-dir", RUN, lambda e: ["--resume", str(e.tmp / "typo")], absent=lambda e: [e.tmp / "typo"]),
    Case("run-resume-no-manifest", RUN, lambda e: ["--resume", S(e)], lambda e: e.f("manifest.json").unlink()),
    Case("run-resume-other-settings", RUN, lambda e: ["--resume", S(e), "--max-examples", "5", "--seed", "3"],
         needle="--max-examples"),
    Case("run-resume-other-model-name", RUN, lambda e: ["--resume", S(e), "--model", "gemma-2-9b-it"], needle="--model"),
    Case("run-resume-other-weights", RUN, lambda e: ["--resume", S(e)],
         lambda e: (set_json(e.f("manifest.json"), **{"model.weights_hash": "f" * 64, "status": "running"})),
         needle="weights"),
    Case("run-resume-two-writers", RUN, lambda e: ["--resume", S(e)], lambda e: hold_lock(e.study),
         needle="another writer"),
    Case("run-resume-and-output-dir-differ", RUN, lambda e: ["--resume", S(e), "--output-dir", NEW(e)],
         absent=_absent_new),
    Case("run-output-dir-exists", RUN, lambda e: [*GOOD_RUN, "--output-dir", S(e)], needle="already exists"),
    Case("run-output-under-a-file", RUN, lambda e: [*GOOD_RUN, "--output-dir", str(e.f("summary.json") / "run")]),
    Case("run-non-gguf-model", RUN, lambda e: [*GOOD_RUN, "--model", gguf(e), "--output-dir", NEW(e)],
         absent=_absent_new, needle="GGUF"),
    Case("run-missing-gguf-model", RUN, lambda e: [*GOOD_RUN, "--model", str(e.tmp / "no.gguf"), "--output-dir", NEW(e)],
         absent=_absent_new),
    Case("run-device-mps", RUN, lambda e: [*GOOD_RUN, "--device", "mps", "--output-dir", NEW(e)], absent=_absent_new,
         needle="cpu"),
    Case("run-device-unknown", RUN, lambda e: [*GOOD_RUN, "--device", "tpu9", "--output-dir", NEW(e)], absent=_absent_new),
    Case("run-max-examples-0", RUN, lambda e: [*GOOD_RUN, "--max-examples", "0", "--output-dir", NEW(e)],
         absent=_absent_new),
    Case("run-max-examples-negative", RUN, lambda e: [*GOOD_RUN, "--max-examples", "-1", "--output-dir", NEW(e)],
         absent=_absent_new),
    Case("run-max-new-tokens-0", RUN, lambda e: [*GOOD_RUN, "--max-new-tokens", "0", "--output-dir", NEW(e)],
         absent=_absent_new),
    Case("run-batch-size-0", RUN, lambda e: [*GOOD_RUN, "--batch-size", "0", "--output-dir", NEW(e)], absent=_absent_new),
    Case("run-empty-input-file", RUN, lambda e: ["--input-file", str(e.tmp / "q.jsonl"), "--output-dir", NEW(e)],
         lambda e: (e.tmp / "q.jsonl").write_text(""), absent=_absent_new, needle="empty"),
    Case("run-missing-input-file", RUN, lambda e: ["--input-file", str(e.tmp / "none.jsonl"), "--output-dir", NEW(e)],
         absent=_absent_new),
    Case("run-corrupt-input-file", RUN, lambda e: ["--input-file", str(e.tmp / "q.jsonl"), "--output-dir", NEW(e)],
         lambda e: (e.tmp / "q.jsonl").write_text('{"id": "1", "question": "q", "answer": "1"}\n{not json\n'),
         absent=_absent_new),
    Case("run-task-matches-nothing", RUN, lambda e: ["--dataset", "mmlu", "--task", "astrology", "--data-dir", str(DATA),
                                                      "--output-dir", NEW(e)], absent=_absent_new, needle="astrology"),
    Case("run-input-task-matches-nothing", RUN, lambda e: ["--input-file", str(e.tmp / "q.jsonl"), "--task", "nope",
                                                            "--output-dir", NEW(e)],
         lambda e: (e.tmp / "q.jsonl").write_text('{"id": "1", "question": "q?", "answer": "1", "task": "t"}\n'),
         absent=_absent_new),
    Case("run-unknown-position", RUN, lambda e: [*GOOD_RUN, "--line-positions", "early,first", "--output-dir", NEW(e)],
         absent=_absent_new),
    Case("run-min-lines-1", RUN, lambda e: [*GOOD_RUN, "--min-lines", "1", "--output-dir", NEW(e)], absent=_absent_new),
    Case("run-unknown-strategy", RUN, lambda e: [*GOOD_RUN, "--strategy", "bogus", "--output-dir", NEW(e)],
         absent=_absent_new),
    Case("run-bad-int", RUN, lambda e: [*GOOD_RUN, "--max-examples", "many", "--output-dir", NEW(e)], absent=_absent_new),
    # ---------------------------------------------------------------- behavioural.labels.stage
    Case("label-missing-run", LABEL, lambda e: [str(e.tmp / "typo")]),
    Case("label-run-still-running", LABEL, lambda e: [S(e), "--labelling", "x"],
         lambda e: set_json(e.f("manifest.json"), status="running"), needle="--resume"),
    Case("label-truncated-manifest", LABEL, lambda e: [S(e), "--labelling", "x"], lambda e: truncate(e.f("manifest.json"))),
    Case("label-half-written-last-line", LABEL, lambda e: [S(e), "--labelling", "x"],
         lambda e: append(e.f("continuations.jsonl"), '{"id": "half'), needle="behavioural.run --resume"),
    Case("label-corrupt-middle-line", LABEL, lambda e: [S(e), "--labelling", "x"],
         lambda e: replace_line(e.f("continuations.jsonl"), 2, "{broken"), needle=":3"),
    Case("label-list-records", LABEL, lambda e: [S(e), "--labelling", "x"],
         lambda e: replace_line(e.f("continuations.jsonl"), 0, "[1, 2, 3]")),
    Case("label-record-missing-question-id", LABEL, lambda e: [S(e), "--labelling", "x"],
         lambda e: replace_line(e.f("continuations.jsonl"), 0, json.dumps({"id": "a"}))),
    Case("label-duplicate-ids", LABEL, lambda e: [S(e), "--labelling", "x"],
         lambda e: append(e.f("continuations.jsonl"), e.f("continuations.jsonl").read_text().splitlines()[0] + "\n")),
    Case("label-no-continuations", LABEL, lambda e: [S(e), "--labelling", "x"], lambda e: e.f("continuations.jsonl").unlink()),
    Case("label-no-baselines", LABEL, lambda e: [S(e), "--labelling", "x"], lambda e: e.f("baselines.jsonl").unlink()),
    Case("label-unknown-labeller", LABEL, lambda e: [S(e), "--labeller", "bogus"]),
    Case("label-final-judge-without-judge", LABEL, lambda e: [S(e), "--final", "judge"]),
    Case("label-odd-name", LABEL, lambda e: [S(e), "--labelling", "../x"]),
    Case("label-existing-name", LABEL, lambda e: [S(e), "--labelling", "rule"], needle="already exists"),
    Case("label-nothing-to-resume", LABEL, lambda e: [S(e), "--resume"], needle="no unfinished"),
    Case("label-judge-batch-0", LABEL, lambda e: [S(e), "--judge-batch-size", "0"]),
    Case("label-judge-non-gguf", LABEL, lambda e: [S(e), "--labeller", f"judge:{gguf(e)}"], needle="GGUF"),
    Case("label-judge-device-mps", LABEL, lambda e: [S(e), "--labeller", "judge:smollm2-135m-instruct", "--device", "mps"]),
    Case("label-export-0", LABEL, lambda e: [S(e), "--export-sheet", "0"]),
    Case("label-import-missing-sheet", LABEL, lambda e: [S(e), "--import-sheet", str(e.tmp / "none.csv"), "--key",
                                                          str(e.tmp / "none.key.json")]),
    Case("label-sheet-and-labeller", LABEL, lambda e: [S(e), "--export-sheet", "3", "--labeller", "rule"]),
    Case("label-resume-two-writers", LABEL, lambda e: [S(e), "--resume", "--labelling", "rule"],
         lambda e: (set_json(e.f("labels/rule/settings.json"), status="running"), hold_lock(e.f("labels/rule"))),
         needle="another writer"),
    # ---------------------------------------------------------------- activations.cache
    Case("cache-missing-run", CACHE, lambda e: [str(e.tmp / "typo"), "--output-file", NEW(e)], absent=_absent_new),
    Case("cache-run-still-running", CACHE, lambda e: [S(e), "--output-file", NEW(e)],
         lambda e: set_json(e.f("manifest.json"), status="running"), absent=_absent_new),
    Case("cache-half-written-last-line", CACHE, lambda e: [S(e), "--output-file", NEW(e)],
         lambda e: append(e.f("continuations.jsonl"), '{"id": "half'), absent=_absent_new),
    Case("cache-device-mps", CACHE, lambda e: [S(e), "--device", "mps", "--output-file", NEW(e)], absent=_absent_new),
    Case("cache-batch-size-0", CACHE, lambda e: [S(e), "--batch-size", "0", "--output-file", NEW(e)], absent=_absent_new),
    Case("cache-bad-layers", CACHE, lambda e: [S(e), "--layers", "banana", "--output-file", NEW(e)], absent=_absent_new),
    Case("cache-bad-positions", CACHE, lambda e: [S(e), "--token-positions", "everywhere", "--output-file", NEW(e)],
         absent=_absent_new),
    Case("cache-missing-labelling", CACHE, lambda e: [S(e), "--labelling", "nope", "--output-file", NEW(e)], absent=_absent_new),
    Case("cache-labels-list-records", CACHE, lambda e: [S(e), "--labelling", "rule", "--output-file", NEW(e)],
         lambda e: replace_line(e.f("labels/rule/labels.jsonl"), 0, "[1, 2]"), absent=_absent_new),
    Case("cache-labels-missing-id", CACHE, lambda e: [S(e), "--labelling", "rule", "--output-file", NEW(e)],
         lambda e: replace_line(e.f("labels/rule/labels.jsonl"), 0, json.dumps({"label": "C"})), absent=_absent_new),
    Case("cache-resume-corrupt-store", CACHE, lambda e: [S(e), "--resume"],
         lambda e: e.f("activations.h5").write_bytes(b"\x89HDF\r\n\x1a\n" + b"garbage" * 100)),
    Case("cache-resume-truncated-store", CACHE, lambda e: [S(e), "--resume"], lambda e: truncate(e.f("activations.h5"))),
    Case("cache-output-exists", CACHE, lambda e: [S(e)]),
    Case("cache-bad-shard", CACHE, lambda e: [S(e), "--shard", "3/2", "--output-file", NEW(e)], absent=_absent_new),
    Case("cache-output-under-a-file", CACHE, lambda e: [S(e), "--output-file", str(e.f("summary.json") / "a.h5")]),
    Case("cache-two-writers", CACHE, lambda e: [S(e), "--resume"],
         lambda e: hold_lock(e.f("activations.h5")), needle="another writer"),
    # ---------------------------------------------------------------- probes.train
    Case("probes-missing-store", PROBES, lambda e: [str(e.tmp / "none.h5"), "--output-dir", NEW(e)], absent=_absent_new),
    Case("probes-store-not-hdf5", PROBES, lambda e: [str(e.f("summary.json")), "--output-dir", NEW(e)], absent=_absent_new),
    Case("probes-corrupt-store", PROBES, lambda e: [str(e.f("activations.h5")), "--output-dir", NEW(e)],
         lambda e: e.f("activations.h5").write_bytes(b"\x89HDF\r\n\x1a\n" + b"garbage" * 100), absent=_absent_new),
    Case("probes-truncated-store", PROBES, lambda e: [str(e.f("activations.h5")), "--output-dir", NEW(e)],
         lambda e: truncate(e.f("activations.h5")), absent=_absent_new),
    Case("probes-cs-nan", PROBES, lambda e: [str(e.f("activations.h5")), "--cs", "nan", "--output-dir", NEW(e)],
         absent=_absent_new),
    Case("probes-cs-negative", PROBES, lambda e: [str(e.f("activations.h5")), "--cs", "-1", "--output-dir", NEW(e)],
         absent=_absent_new),
    Case("probes-pca-negative", PROBES, lambda e: [str(e.f("activations.h5")), "--pca", "-5", "--output-dir", NEW(e)],
         absent=_absent_new),
    Case("probes-pca-0", PROBES, lambda e: [str(e.f("activations.h5")), "--pca", "0", "--output-dir", NEW(e)],
         absent=_absent_new),
    Case("probes-pca-above-rows", PROBES, lambda e: [str(e.f("activations.h5")), "--pca", "100000", "--output-dir", NEW(e)],
         absent=_absent_new),
    Case("probes-n-directions-0", PROBES, lambda e: [str(e.f("activations.h5")), "--n-directions", "0", "--output-dir",
                                                      NEW(e)], absent=_absent_new),
    Case("probes-inner-folds-1", PROBES, lambda e: [str(e.f("activations.h5")), "--inner-folds", "1", "--output-dir", NEW(e)],
         absent=_absent_new),
    Case("probes-folds-1", PROBES, lambda e: [str(e.f("activations.h5")), "--folds", "1", "--output-dir", NEW(e)],
         absent=_absent_new),
    Case("probes-bootstrap-negative", PROBES, lambda e: [str(e.f("activations.h5")), "--bootstrap", "-1", "--output-dir",
                                                          NEW(e)], absent=_absent_new),
    Case("probes-output-exists", PROBES, lambda e: [str(e.f("activations.h5")), "--output-dir", str(e.f("probes"))]),
    Case("probes-layer-not-stored", PROBES, lambda e: [str(e.f("activations.h5")), "--layers", "99", "--output-dir", NEW(e)],
         absent=_absent_new),
    Case("probes-transfer-layer-not-stored", PROBES, lambda e: [str(e.f("activations.h5")), "--transfer-layer", "99",
                                                                 "--output-dir", NEW(e)], absent=_absent_new),
    Case("probes-unknown-position", PROBES, lambda e: [str(e.f("activations.h5")), "--token-position", "nowhere", "--output-dir",
                                                        NEW(e)], absent=_absent_new),
    # ---------------------------------------------------------------- steering.sweep
    *[Case(f"steer-{name}", STEER, _steer_argv(extra), absent=_absent_new)
      for name, extra in [("alphas-nan", ["--alphas", "nan"]), ("alphas-inf", ["--alphas", "inf"]),
                          ("alphas-empty", ["--alphas", ""]), ("max-cases-0", ["--max-cases", "0"]),
                          ("max-cases-negative", ["--max-cases", "-1"]), ("batch-size-0", ["--batch-size", "0"]),
                          ("max-new-tokens-0", ["--max-new-tokens", "0"]), ("k-0", ["--k", "0"]),
                          ("layer-not-in-directions", ["--layers", "99"]), ("device-mps", ["--device", "mps"])]],
    Case("steer-nan-bases", STEER, lambda e: [S(e), "--directions", str(e.f("probes")), "--output-dir", NEW(e)],
         lambda e: nan_bases(e.f("probes/directions.h5")), absent=_absent_new),
    Case("steer-truncated-directions", STEER, lambda e: [S(e), "--directions", str(e.f("probes")), "--output-dir", NEW(e)],
         lambda e: truncate(e.f("probes/directions.h5")), absent=_absent_new),
    Case("steer-directions-not-hdf5", STEER, lambda e: [S(e), "--directions", str(e.f("summary.json")), "--output-dir", NEW(e)],
         absent=_absent_new),
    Case("steer-missing-directions", STEER, lambda e: [S(e), "--directions", str(e.tmp / "none"), "--output-dir", NEW(e)],
         absent=_absent_new),
    Case("steer-missing-run", STEER, lambda e: [str(e.tmp / "typo"), "--directions", str(e.f("probes")), "--output-dir",
                                                NEW(e)], absent=_absent_new),
    Case("steer-run-of-another-model", STEER, lambda e: [S(e), "--directions", str(e.f("probes")), "--output-dir", NEW(e)],
         lambda e: set_json(e.f("manifest.json"), **{"model.weights_hash": "f" * 64, "model.name": "other-model"}),
         absent=_absent_new),
    Case("steer-half-written-last-line", STEER, lambda e: [S(e), "--directions", str(e.f("probes")), "--output-dir", NEW(e)],
         lambda e: append(e.f("continuations.jsonl"), '{"id": "half'), absent=_absent_new),
    Case("steer-run-still-running", STEER, lambda e: [S(e), "--directions", str(e.f("probes")), "--output-dir", NEW(e)],
         lambda e: set_json(e.f("manifest.json"), status="running"), absent=_absent_new),
    Case("steer-two-writers", STEER, lambda e: [S(e), "--directions", str(e.f("probes")), "--output-dir", str(e.f("steering")),
                                                "--resume", "--k", "1", "--alphas", "0.5", "--max-cases", "2",
                                                "--random-seeds", "1", "--max-new-tokens", "64", "--batch-size", "16",
                                                "--per-question", "1", "--seed", "42"],
         lambda e: hold_lock(e.f("steering")), needle="another writer"),
    # ---------------------------------------------------------------- study
    Case("study-resume-missing-dir", STUDY, lambda e: ["--resume", str(e.tmp / "typo")], absent=lambda e: [e.tmp / "typo"],
         needle="no such study directory"),
    Case("study-resume-truncated-study-json", STUDY, lambda e: ["--resume", S(e)], lambda e: truncate(e.f("study.json"))),
    Case("study-resume-other-settings", STUDY, lambda e: ["--resume", S(e), "--max-examples", "5"], needle="--max-examples"),
    Case("study-resume-and-output-dir-differ", STUDY, lambda e: ["--resume", S(e), "--output-dir", NEW(e)],
         absent=_absent_new),
    Case("study-output-exists", STUDY, lambda e: ["--output-dir", S(e)], needle="already exists"),
    Case("study-resume-truncated-manifest", STUDY, lambda e: ["--resume", S(e)],
         lambda e: (truncate(e.f("manifest.json")), e.f("summary.json").unlink())),
    Case("study-resume-missing-summary-other-model", STUDY, lambda e: ["--resume", S(e)],
         lambda e: (e.f("summary.json").unlink(), set_json(e.f("manifest.json"), **{"model.weights_hash": "f" * 64}))),
    *[Case(f"study-{name}", STUDY, _study_new_argv(extra), absent=_absent_new)
      for name, extra in [("alphas-nan", ["--alphas", "nan"]), ("k-0", ["--k", "0"]),
                          ("max-examples-0", ["--max-examples", "0"]), ("folds-1", ["--folds", "1"]),
                          ("device-mps", ["--device", "mps"]), ("max-new-tokens-0", ["--max-new-tokens", "0"]),
                          ("batch-size-0", ["--batch-size", "0"]), ("max-cases-negative", ["--max-cases", "-1"])]],
]

#: cases that still fail, and why (kept visible: xfail(strict) turns green when the owning stage fixes them)
KNOWN: dict[str, str] = {}


@pytest.mark.parametrize("case", [pytest.param(c, id=c.id, marks=[pytest.mark.xfail(reason=KNOWN[c.id], strict=True)]
                                               if c.id in KNOWN else []) for c in CASES])
def test_bad_input(case: Case, base: Path, tmp_path: Path, models_loaded, capsys):
    study = tmp_path / "study"
    shutil.copytree(base, study)
    e = Env(tmp=tmp_path, study=study)
    locks = []
    if case.setup:
        got = case.setup(e)
        locks = [x for x in (got if isinstance(got, tuple) else (got,)) if hasattr(x, "__exit__")]
    argv = case.argv(e)
    inputs = case.inputs(e)
    before = _hashes(inputs)
    capsys.readouterr()
    mod = importlib.import_module(case.cmd if case.cmd != STUDY else "study.driver")
    try:
        try:
            rc = mod.main(argv)
        except SystemExit as x:
            rc = x.code if isinstance(x.code, int) else 1
    finally:
        for cm in locks:
            cm.__exit__(None, None, None)
    err = capsys.readouterr().err
    lines = [ln for ln in err.splitlines() if ln.strip()]
    assert rc not in (0, None), f"accepted: exit {rc}; stderr {err!r}"
    assert "Traceback" not in err
    assert len(lines) == 1 and lines[0].startswith("error: "), f"stderr is not one 'error:' line: {err!r}"
    if case.needle:
        assert case.needle in lines[0], lines[0]
    assert _hashes(inputs) == before, "an input was modified"
    for p in case.absent(e):
        assert not p.exists(), f"partial output left: {p}"


def test_battery_size():
    cmds = {c.cmd for c in CASES}
    assert len(CASES) >= 60 and cmds == {RUN, LABEL, CACHE, PROBES, STEER, STUDY}
