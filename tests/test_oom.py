"""Out of accelerator memory (loadbearing.engine.oom): a batch that runs out is retried at half the size, with no
record lost or duplicated, and every stage's manifest records the batch size it used. The error is injected:
the model's embedding layer (every forward pass goes through it) raises CUDA's out-of-memory error whenever a
batch holds more than N rows, so a run started at 8 must end at N and write the records of a run at N."""
from __future__ import annotations

import contextlib
import json
import shutil
from pathlib import Path

import numpy as np
import pytest
import torch
from fakes import fake_lm, scripted_generate

from behavioural.protocol import Settings, run_protocol
from loadbearing.engine.generation import Generation, generate
from loadbearing.engine.oom import BatchSize, OutOfMemory, is_oom
from loadbearing.questions.data import load_questions

N = 2  # the largest batch that "fits"


def _oom() -> torch.OutOfMemoryError:
    return torch.cuda.OutOfMemoryError("CUDA out of memory. Tried to allocate 2.00 GiB (GPU 0; 79.15 GiB total)")


@contextlib.contextmanager
def oom_above(lm, n: int = N):
    """Every forward of ``lm`` over more than ``n`` rows raises the CUDA out-of-memory error."""
    seen: list[int] = []

    def hook(module, args):
        seen.append(int(args[0].shape[0]))
        if args[0].shape[0] > n:
            raise _oom()

    handle = lm.model.get_input_embeddings().register_forward_pre_hook(hook)
    try:
        yield seen
    finally:
        handle.remove()


def oom_generate(fn=scripted_generate, n: int = N):
    """A generate function that runs out of memory whenever asked for a batch larger than ``n``."""
    sizes: list[int] = []

    def gen(lm, texts, *args, batch_size=8, **kw):
        sizes.append(batch_size)
        if batch_size > n:
            raise _oom()
        return fn(lm, texts, *args, batch_size=batch_size, **kw)

    gen.sizes = sizes  # type: ignore[attr-defined]
    return gen


def _settings(**kw):
    base = dict(model="scripted", dataset="arith", strategies=("arithmetic_change", "contradiction"), task="s2_o5",
                max_examples=None, max_new_tokens=64, n_per_level=12, batch_size=8)
    return Settings(**(base | kw))


def _always(*args, **kw):
    raise _oom()


def _records(path: Path) -> list[str]:
    return path.read_text(encoding="utf-8").splitlines() if path.is_file() else []


# ------------------------------------------------------------------------------------------------ the helper
def test_chunks_retry_only_the_failed_chunk_at_half_the_size():
    calls, said = [], []

    def fn(part):
        calls.append(list(part))
        if len(part) > 3:
            raise _oom()
        return [x * 10 for x in part]

    sizer = BatchSize(8, echo=said.append)
    got = list(sizer.chunks(list(range(11)), fn))
    parts = [p for p, _ in got]
    assert [x for p in parts for x in p] == list(range(11))  # each item once, in order: none lost, none twice
    assert [y for _, out in got for y in out] == [x * 10 for x in range(11)]
    assert calls[:3] == [list(range(8)), list(range(4)), [0, 1]]  # the failed chunk again, from its first item
    assert all(len(p) == 2 for p in parts[:-1]) and parts[-1] == [10]  # the smaller size is kept
    assert said == ["out of memory at batch 8; retrying at 4", "out of memory at batch 4; retrying at 2"]
    assert sizer.record() == {"start": 8, "used": 2, "oom_retries": 2, "retry_on_oom": True}


def test_out_of_memory_at_batch_1_is_one_line_naming_the_fix_and_yields_nothing():
    said = []
    sizer = BatchSize(4, echo=said.append)
    yielded = []
    with pytest.raises(OutOfMemory) as e:
        for part, _ in sizer.chunks(list(range(5)), _always):
            yielded.append(part)
    assert yielded == []
    msg = str(e.value)
    assert "\n" not in msg and msg.startswith("out of memory at batch size 1 (generation)")
    assert "--quantize" in msg and "--max-new-tokens" in msg and "--dtype" in msg
    assert said == ["out of memory at batch 4; retrying at 2", "out of memory at batch 2; retrying at 1"]
    assert not is_oom(e.value)  # an outer stage does not retry the inner one's final error
    assert sizer.record()["used"] == 1


def test_what_counts_as_out_of_memory():
    assert is_oom(_oom()) and is_oom(torch.OutOfMemoryError("boom"))
    assert is_oom(RuntimeError("MPS backend out of memory (MPS allocated: 17.00 GB, other allocations: 1 GB)"))
    assert is_oom(RuntimeError("[enforce fail at alloc_cpu.cpp:117] DefaultCPUAllocator: can't allocate memory"))
    wrapped = ValueError("the tracing library failed")
    wrapped.__cause__ = _oom()
    assert is_oom(wrapped)  # an error a library raised from an out-of-memory error
    assert not is_oom(RuntimeError("shape mismatch")) and not is_oom(KeyError("x"))


def test_other_errors_and_a_backend_that_manages_its_memory_are_not_retried():
    calls = []

    def bad(b):
        calls.append(b)
        raise ValueError("not a memory problem")

    with pytest.raises(ValueError):
        BatchSize(8).run(bad)
    assert calls == [8]
    fixed = BatchSize(8, retry=False)  # vLLM: errors pass through unchanged, the size stays
    with pytest.raises(torch.OutOfMemoryError):
        fixed.run(_always)
    assert fixed.record() == {"start": 8, "used": 8, "oom_retries": 0, "retry_on_oom": False}
    from loadbearing.engine.oom import for_generate_fn
    from loadbearing.engine.vllm_backend import VLLMGenerate

    assert for_generate_fn(VLLMGenerate, 8).retry is False and for_generate_fn(generate, 8).retry is True
    with pytest.raises(ValueError, match="whole number >= 1"):
        BatchSize(0)


# ------------------------------------------------------------------------------------------------ HF generation
def test_generation_out_of_memory_gives_the_records_of_batch_n(tiny_lm, tokenizer):
    texts = [tokenizer.apply_chat_template([{"role": "user", "content": f"What is {i} + {i % 3}?"}], tokenize=False,
                                           add_generation_prompt=True) for i in range(7)]
    kw = dict(max_new_tokens=12, progress=False, stop_at_answer=False)
    want = generate(tiny_lm, texts, batch_size=N, **kw)
    said: list[str] = []
    sizer = BatchSize(8, echo=said.append)
    with oom_above(tiny_lm) as seen:
        got = sizer.call(generate, tiny_lm, texts, **kw)
    assert got == want  # the same tokens, text and finish reason for every row
    assert max(seen) > N and sizer.size == N and said[-1] == f"out of memory at batch 4; retrying at {N}"


def test_behavioural_run_out_of_memory_writes_the_records_of_batch_n(tiny_lm, tmp_path):
    qs = load_questions("arith", task="s2_o5", n_per_level=6)
    s = dict(model="tiny-llama", max_new_tokens=16)
    run_protocol(tiny_lm, qs, _settings(batch_size=N, **s), tmp_path / "at2", chunk=4, echo=None, progress=False)
    with oom_above(tiny_lm):
        run_protocol(tiny_lm, qs, _settings(batch_size=8, **s), tmp_path / "at8", chunk=4, echo=None, progress=False)
    want, got = _records(tmp_path / "at2" / "baselines.jsonl"), _records(tmp_path / "at8" / "baselines.jsonl")
    assert len(want) == len(qs) and got == want  # byte for byte
    m = json.loads((tmp_path / "at8" / "manifest.json").read_text())
    assert m["batching"] == {"start": 8, "used": N, "oom_retries": 2, "retry_on_oom": True}
    assert m["settings"]["batch_size"] == 8 and m["status"] in ("ok", "insufficient_data")


def test_out_of_memory_and_resume_lose_and_duplicate_nothing(tokenizer, tmp_path):
    qs = load_questions("arith", task="s2_o5", n_per_level=12)
    run_protocol(fake_lm(tokenizer), qs, _settings(batch_size=N), tmp_path / "clean", generate_fn=scripted_generate,
                 echo=None, progress=False, chunk=4)
    calls = {"n": 0}

    def killed(lm, texts, **kw):  # interrupted in its 3rd chunk, after the first two were written
        calls["n"] += 1
        if calls["n"] == 3:
            raise KeyboardInterrupt
        return scripted_generate(lm, texts, **kw)

    out = tmp_path / "oom"
    gen = oom_generate(killed)
    with pytest.raises(KeyboardInterrupt):
        run_protocol(fake_lm(tokenizer), qs, _settings(), out, generate_fn=gen, echo=None, progress=False, chunk=4)
    assert len(_records(out / "baselines.jsonl")) == 8  # two chunks of 4 (the first after two step-downs)
    again = oom_generate()
    run_protocol(fake_lm(tokenizer), qs, _settings(), out, resume=True, generate_fn=again, echo=None, progress=False,
                 chunk=4)
    for name in ("baselines.jsonl", "continuations.jsonl"):
        want, got = _records(tmp_path / "clean" / name), _records(out / name)
        assert got == want and len(want) > 8  # byte for byte, in the same order
        ids = [json.loads(x).get("id") or json.loads(x)["question_id"] for x in got]
        assert len(ids) == len(set(ids))
    assert again.sizes[:3] == [8, 4, 2] and set(again.sizes[3:]) == {2}
    m = json.loads((out / "manifest.json").read_text())
    assert m["batching"] == {"start": 8, "used": N, "oom_retries": 2, "retry_on_oom": True} and m["resumed"] == 1


def test_out_of_memory_at_batch_1_one_error_line_and_no_record(tokenizer, tmp_path, capsys):
    from behavioural.run import RunConfig, run_stage
    from loadbearing.cli import run_cli

    out = tmp_path / "run"
    config = RunConfig(settings=_settings(batch_size=4), output_dir=out, progress=False)
    rc = run_cli(lambda: run_stage(config, lm=fake_lm(tokenizer), generate_fn=oom_generate(n=0), echo=None,
                                   log=lambda m: None))
    err = capsys.readouterr().err.strip().splitlines()
    assert rc == 2
    assert err[:2] == ["out of memory at batch 4; retrying at 2", "out of memory at batch 2; retrying at 1"]
    assert len(err) == 3 and err[2].startswith("error: out of memory at batch size 1 (generation): even one row")
    assert "--quantize 4bit" in err[2]
    assert _records(out / "baselines.jsonl") == [] and not (out / "continuations.jsonl").exists()
    m = json.loads((out / "manifest.json").read_text())
    assert m["status"] == "failed" and m["batching"]["used"] == 1 and "OutOfMemory" in m["error"]


# ------------------------------------------------------------------------------------------------ other stages
def test_causal_stage_out_of_memory_writes_the_rows_of_batch_n(tokenizer, tmp_path):
    from behavioural.causal.early_answer import EarlyAnswerConfig, run_early_answer

    qs = load_questions("arith", task="s2_o5,s3_o5", n_per_level=6)
    run_protocol(fake_lm(tokenizer), qs, _settings(task="s2_o5,s3_o5", n_per_level=6), tmp_path / "run",
                 generate_fn=scripted_generate, echo=None, progress=False)

    def answer(lm, texts, **kw):  # a forced answer that depends on the input alone
        return [Generation(f" {len(t) % 7}\n", 3, "eos") for t in texts]

    rows = {}
    for b, gen in ((N, answer), (8, oom_generate(answer))):
        run = tmp_path / f"run{b}"
        shutil.copytree(tmp_path / "run", run)
        run_early_answer(EarlyAnswerConfig(run, batch_size=b, n_boot=20, quiet=True), fake_lm(tokenizer),
                         generate_fn=gen, echo=None)
        rows[b] = _records(run / "early_answer" / "records.jsonl")
        manifest = json.loads((run / "early_answer" / "manifest.json").read_text())
    assert rows[8] == rows[N] and len(rows[N]) > 4
    assert manifest["batching"] == {"start": 8, "used": N, "oom_retries": 2, "retry_on_oom": True}


def test_activation_cache_out_of_memory_stores_the_values_of_batch_n(tokenizer, tmp_path):
    from helpers.tiny import make_tiny_lm

    from activations import open_store
    from activations.cache import CacheConfig, cache_activations
    from activations.synthetic import make_run
    from study.config import STUDY_FILE, record_batching

    lm = make_tiny_lm(tokenizer, layers=2, hidden=64, seed=3)
    lm.weights_hash = "tiny-weights-hash"
    run_dir, _ = make_run(tmp_path / "run", tokenizer, n_questions=4)
    kw = dict(positions="prefix_last,edit_mean", progress=False, engine="hf")
    cache_activations(CacheConfig(run_dir, output=tmp_path / "at2.h5", batch_size=N, **kw), lm)
    with oom_above(lm):
        cache_activations(CacheConfig(run_dir, output=tmp_path / "at8.h5", batch_size=8, **kw), lm)
    with open_store(tmp_path / "at2.h5") as a, open_store(tmp_path / "at8.h5") as b:
        assert list(a.rows.continuation_id) == list(b.rows.continuation_id) and b.n_rows == 8
        for layer in a.layers:
            assert np.array_equal(a.read(layer), b.read(layer))  # same batches, same values
        record = json.loads(b.attrs["batching"])
    assert record == {"start": 8, "used": N, "oom_retries": 2, "retry_on_oom": True}
    # the study copies each stage's record into study.json
    study = tmp_path / "study"
    study.mkdir()
    (study / STUDY_FILE).write_text(json.dumps({"kind": "study", "settings": {"batch_size": 8}}))
    assert record_batching(study, "activations", tmp_path / "at8.h5") == record
    assert record_batching(study, "probes", tmp_path / "nothing-here") is None
    stored = json.loads((study / STUDY_FILE).read_text())
    assert stored["batching"] == {"activations": record} and stored["settings"] == {"batch_size": 8}


def test_steering_sweep_out_of_memory_writes_the_generations_of_batch_n(tokenizer, tmp_path):
    from helpers.steering import PLANT, make_steering_run, planted_lm, sweep_config, unit, write_dirs

    from steering.generate import generate_steered
    from steering.sweep.cli import run_sweep

    lm = planted_lm(tokenizer)
    out = {}
    for b in (N, 8):
        root = tmp_path / f"b{b}"
        root.mkdir()
        run = make_steering_run(root, tokenizer, n_c=4, n_non=1)
        dirs = write_dirs(root / "probes", {2: np.stack([unit(PLANT)])})
        with oom_above(lm) if b > N else contextlib.nullcontext():
            run_sweep(sweep_config(run, dirs, layers=[2], ks=[1], alphas=[1.0], random_seeds=1, batch_size=b), lm=lm,
                      generate_fn=generate_steered, echo=lambda m: None)
        out[b] = _records(run / "steering" / "generations.jsonl")
        cfg = json.loads((run / "steering" / "config.json").read_text())
    pairs = [(json.loads(x)["setting"], json.loads(x)["case_id"]) for x in out[8]]
    assert out[8] == out[N] and len(pairs) == len(set(pairs)) >= 4 * 3
    assert cfg["status"] == "complete" and cfg["batching"]["used"] == N and cfg["batching"]["start"] == 8
