"""Activation store reliability and scale-out: SIGKILL at several points then --resume gives the uninterrupted
store; damaged files are one-line errors; one writer per store; shards merge into the unsharded store row for
row; bad CLI inputs are refused before a model loads, writing nothing.

    .venv/bin/pytest -q tests/test_activations_store.py
"""
from __future__ import annotations

import json
import os
import random
import signal
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pytest

from activations import StoreError, open_store
from activations.cache import CacheConfig, CacheError, cache_activations, main
from activations.merge import MergeError, merge_stores
from activations.merge import main as merge_main
from activations.synthetic import make_run
from loadbearing.shards import shard_of

HASH = "tiny-weights-hash"
REPO = Path(__file__).resolve().parents[1]
POS = "prefix_last,edit_mean,edit_last"


@pytest.fixture(scope="module")
def lm(tokenizer):
    from helpers.tiny import make_tiny_lm

    lm = make_tiny_lm(tokenizer, layers=3, hidden=64, seed=1)
    lm.weights_hash = HASH
    return lm


@pytest.fixture(scope="module")
def run(tmp_path_factory, tokenizer):
    return make_run(tmp_path_factory.mktemp("run"), tokenizer, n_questions=6)


def _cache(run_dir, lm, out, max_batches=None, **kw):
    kw.setdefault("positions", POS)
    kw.setdefault("progress", False)
    kw.setdefault("labels", "none")
    return cache_activations(CacheConfig(run_dir, output=out, **kw), lm, max_batches=max_batches)


@pytest.fixture(scope="module")
def reference(run, lm, tmp_path_factory):
    return _cache(run[0], lm, tmp_path_factory.mktemp("ref") / "ref.h5", batch_size=2)


def assert_same_store(a_path, b_path, exact=False):
    with open_store(a_path) as a, open_store(b_path) as b:
        assert a.complete and b.complete and a.n_rows == b.n_rows
        assert a.rows.drop(columns=[]).equals(b.rows)
        for p in a.positions:
            assert np.array_equal(a.spans(p), b.spans(p))
            x, y = a.read_all(p), b.read_all(p)
            if exact:
                assert np.array_equal(x, y)
            else:
                np.testing.assert_allclose(x, y, atol=1e-5)
    a = Path(a_path)
    for p in (Path(str(a) + ".parts"), Path(str(a) + ".lock"), Path(str(a) + ".tmp")):
        assert not p.exists(), p
    assert not list(a.parent.glob(f".{a.name}*tmp"))  # no temp file of an assembly cut off by a kill


# -- crash safety ----------------------------------------------------------------------------------------------
CHILD = r"""
import os, signal, sys
sys.path.insert(0, {tests!r})
from transformers import AutoTokenizer
from helpers.tiny import make_tiny_lm
import numpy as np
import activations.assemble as assemble
from activations.cache import CacheConfig, cache_activations
mode, arg = sys.argv[1], int(sys.argv[2])
lm = make_tiny_lm(AutoTokenizer.from_pretrained({tok!r}), layers=3, hidden=64, seed=1)
lm.weights_hash = {hash!r}
die = lambda: os.kill(os.getpid(), signal.SIGKILL)
if mode == "part":  # killed half-way through writing part file number `arg`
    real, calls = np.savez, [0]
    def savez(f, **kw):
        calls[0] += 1
        if calls[0] == arg:
            f.write(b"PK\x03\x04" + b"\0" * 100); f.flush(); die()
        return real(f, **kw)
    np.savez = savez
elif mode == "rename":  # killed after writing part `arg` but before renaming it into place
    real_replace, calls = os.replace, [0]
    def replace(a, b):
        calls[0] += 1
        if calls[0] == arg:
            die()
        return real_replace(a, b)
    os.replace = replace
elif mode == "finish":  # killed while the final HDF5 file is being assembled
    real_write = assemble.write_h5
    def write_h5(f, header, n, blocks, complete=True):
        def gen():
            for i, b in enumerate(blocks):
                if i == arg:
                    f.flush(); die()
                yield b
        return real_write(f, header, n, gen(), complete=complete)
    assemble.write_h5 = write_h5
print("READY", flush=True)
cache_activations(CacheConfig({run!r}, output={out!r}, positions={pos!r}, batch_size=2, progress=False,
                              labels="none", resume=True), lm)
"""


def _child(tokenizer, run_dir, out, mode, arg, kill_after=None):
    code = CHILD.format(tests=str(REPO / "tests"), tok=str(Path(tokenizer.name_or_path)), hash=HASH,
                        run=str(run_dir), out=str(out), pos=POS)
    env = dict(os.environ, PYTHONPATH=str(REPO), OMP_NUM_THREADS="1")
    p = subprocess.Popen([sys.executable, "-c", code, mode, str(arg)], stdout=subprocess.PIPE,
                         stderr=subprocess.PIPE, text=True, env=env, cwd=REPO)
    if kill_after is not None:
        assert p.stdout.readline().strip() == "READY"
        time.sleep(kill_after)
        p.send_signal(signal.SIGKILL)
    _, err = p.communicate(timeout=300)
    return p.returncode, err


@pytest.mark.parametrize("mode,arg", [("part", 1), ("part", 3), ("rename", 3), ("finish", 0)])
def test_sigkill_then_resume_gives_the_uninterrupted_store(mode, arg, run, lm, reference, tokenizer, tmp_path):
    """Kills at chosen points: half-way through a part file, before a part's rename, while assembling."""
    out = tmp_path / "k.h5"
    rc, err = _child(tokenizer, run[0], out, mode, arg)
    assert rc == -signal.SIGKILL, err[-2000:]
    if mode != "finish":
        assert not out.exists()  # unfinished: parts only, never a half-written HDF5 file at the store's path
        with pytest.raises(StoreError, match="incomplete.*--resume"):
            open_store(out)
        with open_store(out, allow_incomplete=True) as st:  # the committed rows, assembled in memory
            committed = arg - 1 if mode == "part" else arg - 2  # the first rename is meta.json's
            assert not st.complete and st.n_rows == 2 * committed
    _cache(run[0], lm, out, batch_size=2, resume=True)  # the lock left by the dead process is taken over
    assert_same_store(out, reference)


def test_sigkill_at_random_moments_then_resume(run, lm, reference, tokenizer, tmp_path):
    """Three processes in a row on one store, each SIGKILLed at a random moment (fixed seed), then --resume."""
    out = tmp_path / "r.h5"
    rng = random.Random(16)
    for _ in range(3):
        rc, err = _child(tokenizer, run[0], out, "none", 0, kill_after=rng.uniform(0.0, 1.5))
        assert rc in (-signal.SIGKILL, 0), err[-2000:]  # never a crash of its own (segfault, traceback)
        if out.exists():
            break
    _cache(run[0], lm, out, batch_size=2, resume=True)
    assert_same_store(out, reference)


def test_resume_of_a_finished_store_is_a_no_op(run, lm, reference, tmp_path):
    import shutil

    out = tmp_path / "done.h5"
    shutil.copy(reference, out)
    before = out.read_bytes()
    assert _cache(run[0], lm, out, batch_size=2, resume=True) == out
    assert out.read_bytes() == before


def test_damaged_stores_are_one_line_errors(reference, tmp_path):
    data = Path(reference).read_bytes()
    cases = {"truncated": data[: len(data) // 2], "garbage": b"not an hdf5 file at all" * 10,
             "empty": b"", "zeroed_middle": data[:4096] + b"\0" * (len(data) - 8192) + data[-4096:]}
    for name, blob in cases.items():
        p = tmp_path / f"{name}.h5"
        p.write_bytes(blob)
        code = ("import sys; from activations import open_store, StoreError\n"
                "try:\n    st = open_store(sys.argv[1]); [st.read(l, p) for p in st.positions for l in st.layers]; "
                "st.rows\nexcept StoreError as e:\n    print('ERR', e); sys.exit(2)\n")
        res = subprocess.run([sys.executable, "-c", code, str(p)], capture_output=True, text=True, cwd=REPO,
                             env=dict(os.environ, PYTHONPATH=str(REPO)))
        assert res.returncode == 2, (name, res.returncode, res.stderr[-500:])  # never a segfault or traceback
        assert res.stdout.startswith("ERR") and len(res.stdout.strip().splitlines()) == 1, res.stdout
    parts = tmp_path / "x.h5.parts"
    parts.mkdir()
    (parts / "meta.json").write_text("{cut")
    with pytest.raises(StoreError, match="damaged"):
        open_store(tmp_path / "x.h5", allow_incomplete=True)


# -- corruption: checksums (fletcher32 per chunk, sha256 of the whole file) -----------------------------------------
def _probe_store(path):
    from helpers.probe_stores import lab, write_store

    rng = np.random.default_rng(3)
    n = 512
    return write_store(path, rng.normal(size=(n, 2, 256)).astype(np.float32), lab(np.arange(n) % 2), np.arange(n) // 4)


def test_random_bytes_in_the_middle_are_refused_before_probe_work(tmp_path, capsys, monkeypatch):
    """256 KiB of random bytes in the middle of a real store: probes.train's reading path refuses it in one
    line naming the file and the fix, before any training work."""
    import probes.train as train
    from activations.integrity import read_sidecar

    p = _probe_store(tmp_path / "a.h5")
    record = read_sidecar(p)
    from activations import STORE_PATH_KEY
    from loadbearing.files import file_sha256

    assert record is not None and record["sha256"] == file_sha256(p) and record[STORE_PATH_KEY] == str(p.resolve())
    data = bytearray(p.read_bytes())
    assert len(data) > 3 * 256 * 1024
    mid = len(data) // 2 - 128 * 1024
    data[mid : mid + 256 * 1024] = np.random.default_rng(0).bytes(256 * 1024)
    p.write_bytes(bytes(data))

    def no_work(*a, **k):
        raise AssertionError("training work started on a corrupt store")

    import importlib

    for name in ("probes.train", "probes.stage", "probes.experiment", "probes.data"):  # wherever the work lives
        try:
            mod = importlib.import_module(name)
        except ModuleNotFoundError:
            continue
        for fn in ("load_probe_data", "train_probes"):
            if hasattr(mod, fn):
                monkeypatch.setattr(mod, fn, no_work)
    out = tmp_path / "probes"
    assert train.main([str(p), "--output-dir", str(out), "--quiet"]) == 2
    err = capsys.readouterr().err
    lines = [x for x in err.splitlines() if x.strip()]
    assert len(lines) == 1 and lines[0].startswith("error: ") and "Traceback" not in err, err
    assert str(p) in lines[0] and "python -m activations.cache" in lines[0], lines[0]
    assert not out.exists()
    with pytest.raises(StoreError, match="corrupt or was changed") as e:
        open_store(p)
    assert "\n" not in str(e.value)


def test_fletcher32_catches_a_damaged_chunk_without_the_sidecar(tmp_path):
    import h5py

    from activations.store import sidecar_path

    p = _probe_store(tmp_path / "b.h5")
    with h5py.File(p, "r") as f:
        numeric = ["acts/prefix_last", "spans/prefix_last", "rows/correct", "rows/input_tokens", "rows/source_index",
                   "rows/line_index", "rows/n_lines"]
        assert all(f[n].fletcher32 for n in numeric)
        assert not f["rows/continuation_id"].fletcher32  # h5py cannot filter variable-length strings
        info = f["acts/prefix_last"].id.get_chunk_info(0)  # rows 0..63 of layer 0
    sidecar_path(p).unlink()  # no whole-file sha256: the chunk checksum alone must catch it
    with open(p, "r+b") as fh:
        fh.seek(info.byte_offset + info.size // 2)
        fh.write(b"\xff" * 64)
    with open_store(p) as st:
        np.testing.assert_equal(st.read(1).shape, (512, 256))  # layer 1's chunks are intact
        with pytest.raises(StoreError, match=f"{p.name} is damaged.*python -m activations.cache"):
            st.read(0)


def test_continuations_checksum_when_the_reader_is_given_the_run(run, reference, tmp_path):
    with open_store(reference, run_dir=run[0]) as st:
        assert st.attrs["source_continuations_sha256"]
    other = tmp_path / "run"
    other.mkdir()
    text = (run[0] / "continuations.jsonl").read_text()
    (other / "continuations.jsonl").write_text(text.replace("q1|", "q1x|", 1))
    with pytest.raises(StoreError, match="continuations.jsonl.*changed after the activation store.*activations.cache"):
        open_store(reference, run_dir=other)


def test_one_writer_per_store(run, lm, tmp_path):
    from loadbearing.locks import output_lock

    out = tmp_path / "locked.h5"
    with output_lock(out):
        with pytest.raises(CacheError, match="in use by another writer"):
            _cache(run[0], lm, out)
    assert not out.exists() and not Path(str(out) + ".parts").exists()


# -- shards -----------------------------------------------------------------------------------------------------
def test_shards_merge_into_the_unsharded_store(run, lm, tmp_path, capsys):
    whole = _cache(run[0], lm, tmp_path / "whole.h5", batch_size=1)
    keys = sorted({r["question_id"] for r in run[1]})
    assert {shard_of(k, 2) for k in keys} == {0, 1}  # both shards non-empty on this run
    s0 = _cache(run[0], lm, None, batch_size=1, shard="0/2")  # default name beside the run
    assert s0 == run[0] / "activations.shard-0-of-2.h5"
    s1 = _cache(run[0], lm, tmp_path / "s1.h5", batch_size=1, shard="1/2")
    with open_store(s0) as a, open_store(s1) as b:
        assert a.attrs["shard"] == "0/2" and a.n_rows + b.n_rows == 12
        assert not set(a.rows.question_key) & set(b.rows.question_key)  # a partition by question
    assert merge_main([str(s1), str(s0), "--output-file", str(tmp_path / "merged.h5")]) == 0
    assert_same_store(tmp_path / "merged.h5", whole, exact=True)
    with open_store(tmp_path / "merged.h5") as m:
        assert m.attrs["shard"] == "" and len(m.attrs["merged_from"]) > 0
    with pytest.raises(MergeError, match="shard.* 1/2 missing"):
        merge_stores([s0], tmp_path / "m2.h5")
    with pytest.raises(MergeError, match="both shard 0/2"):
        merge_stores([s0, _copy(s0, tmp_path)], tmp_path / "m3.h5")
    with pytest.raises(MergeError, match="not a shard"):
        merge_stores([whole], tmp_path / "m4.h5")
    assert merge_main([str(s0), str(s1), "--output-file", str(tmp_path / "merged.h5")]) == 2
    assert "already exists" in capsys.readouterr().err
    assert not (tmp_path / "m2.h5").exists() and not (tmp_path / "m3.h5").exists()


def _copy(p, d):
    import shutil

    q = Path(d) / "copy.h5"
    shutil.copy(p, q)
    return q


# -- bad inputs: one line, exit 2, before a model loads, nothing written ---------------------------------------------
def _snapshot(d: Path) -> dict:
    return {str(p): p.read_bytes() for p in sorted(d.rglob("*")) if p.is_file()}


@pytest.mark.parametrize("case", ["missing_run", "no_manifest", "incomplete_run", "half_line", "engine", "positions",
                                  "layers", "layer_range", "batch0", "batch_text", "device", "shard", "conditions",
                                  "corrupt_line", "outcome"])
def test_bad_cli_inputs(case, tokenizer, tmp_path, capsys, monkeypatch):
    import loadbearing.engine.models as models

    def no_load(*a, **k):
        raise AssertionError("a model was loaded for a refused command")

    monkeypatch.setattr(models, "load_model", no_load)
    run_dir, recs = make_run(tmp_path / "r", tokenizer, n_questions=2)
    args = [str(run_dir), "--quiet"]
    if case == "missing_run":
        args[0] = str(tmp_path / "nope")
    elif case == "no_manifest":
        (run_dir / "manifest.json").unlink()
    elif case == "incomplete_run":
        m = json.loads((run_dir / "manifest.json").read_text())
        (run_dir / "manifest.json").write_text(json.dumps(dict(m, status="running")))
    elif case == "half_line":
        with open(run_dir / "continuations.jsonl", "a") as f:
            f.write(json.dumps(recs[0])[:40])
    elif case == "corrupt_line":
        lines = (run_dir / "continuations.jsonl").read_text().splitlines(True)
        lines[1] = "{not json\n"
        (run_dir / "continuations.jsonl").write_text("".join(lines))
    else:
        args += {"engine": ["--engine", "pyvene"], "positions": ["--token-positions", "answer"],
                 "layers": ["--layers", "abc"], "layer_range": ["--layers", "5-2"], "batch0": ["--batch-size", "0"],
                 "batch_text": ["--batch-size", "x"], "device": ["--device", "mps"], "shard": ["--shard", "2/2"],
                 "conditions": ["--conditions", "edited"],
                 "outcome": ["--token-positions", "continuation_mean"]}[case]
    before = _snapshot(tmp_path)
    try:
        rc = main(args)
    except SystemExit as e:
        rc = e.code
    err = capsys.readouterr().err
    assert rc == 2
    lines = [x for x in err.splitlines() if x.strip()]
    assert len(lines) == 1 and lines[0].startswith("error: ") and "Traceback" not in err, err
    expect = {"missing_run": "does not exist", "no_manifest": "manifest.json", "incomplete_run": "--resume",
              "half_line": "half-written.*--resume", "engine": "pyvene", "positions": "unknown position",
              "layers": "unknown layer 'abc'", "layer_range": "empty", "batch0": "batch-size", "batch_text": "batch-size",
              "device": "mps.*available", "shard": "--shard", "conditions": "conditions",
              "corrupt_line": ":2: corrupt record", "outcome": "allow-outcome-tokens"}[case]
    import re

    assert re.search(expect, lines[0]), lines[0]
    assert _snapshot(tmp_path) == before  # nothing written, nothing modified
