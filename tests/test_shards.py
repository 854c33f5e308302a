"""Sharded behavioural runs: a deterministic partition by question key, and ``python -m behavioural.merge``
giving back, row for row, the records of one unsharded run (scripted model, real protocol and files)."""
from __future__ import annotations

from pathlib import Path

import pytest
from fakes import fake_lm, scripted_generate

from behavioural.merge import MergeError, merge_runs
from behavioural.merge import main as merge_main
from behavioural.protocol import Settings, run_protocol
from loadbearing.questions.data import load_questions, question_key
from loadbearing.shards import ShardError, parse_shard, shard_of


def _settings(**kw):
    base = dict(model="scripted", dataset="arith", strategies=("arithmetic_change", "contradiction"), task="s2_o5",
                max_examples=None, max_new_tokens=64, n_per_level=16, batch_size=4)
    return Settings(**(base | kw))


def _run(tokenizer, path: Path, **kw):
    qs = load_questions("arith", task="s2_o5", n_per_level=16)
    run_protocol(fake_lm(tokenizer), qs, _settings(**kw), path, generate_fn=scripted_generate, echo=None, progress=False)
    return qs


def test_parse_shard_and_partition():
    assert str(parse_shard("1/4")) == "1/4" and parse_shard(None) is None
    for bad in ("4/4", "x", "1/0", "-1/2"):
        with pytest.raises(ShardError, match="--shard"):
            parse_shard(bad)
    keys = [question_key(f"question {i}") for i in range(200)]
    parts = [shard_of(k, 3) for k in keys]
    assert set(parts) == {0, 1, 2} and parts == [shard_of(k, 3) for k in keys]  # deterministic


def test_two_merged_shards_equal_one_whole_run(tokenizer, tmp_path):
    qs = _run(tokenizer, tmp_path / "whole")
    _run(tokenizer, tmp_path / "p0", shard="0/2")
    _run(tokenizer, tmp_path / "p1", shard="1/2")
    n0 = len((tmp_path / "p0" / "baselines.jsonl").read_text().splitlines())
    assert 0 < n0 < len(qs)  # each part holds some of the questions
    assert merge_main([str(tmp_path / "p1"), str(tmp_path / "p0"), "--output-dir", str(tmp_path / "merged")]) == 0
    for name in ("baselines.jsonl", "continuations.jsonl", "skipped.jsonl"):
        whole = (tmp_path / "whole" / name).read_text().splitlines()
        merged = (tmp_path / "merged" / name).read_text().splitlines()
        assert merged == whole, name  # row for row
    from loadbearing.runs import Run

    m, w = Run(tmp_path / "merged"), Run(tmp_path / "whole")
    assert m.manifest["dataset"]["sample_ids_sha256"] == w.manifest["dataset"]["sample_ids_sha256"]
    assert m.manifest["dataset"]["fingerprint"] == w.manifest["dataset"]["fingerprint"]
    assert m.manifest["settings"]["shard"] is None and len(m.manifest["merged_from"]) == 2
    ms, ws = m.summary(), w.summary()
    assert {k: v for k, v in ms.items() if k != "run_dir"} == {k: v for k, v in ws.items() if k != "run_dir"}


def test_merge_refuses_bad_parts(tokenizer, tmp_path, capsys):
    _run(tokenizer, tmp_path / "p0", shard="0/2")
    _run(tokenizer, tmp_path / "whole")
    with pytest.raises(MergeError, match="missing shard"):
        merge_runs([tmp_path / "p0"], tmp_path / "out")
    with pytest.raises(MergeError, match="not a shard|records no shard"):
        merge_runs([tmp_path / "p0", tmp_path / "whole"], tmp_path / "out")
    assert merge_main([str(tmp_path / "p0"), str(tmp_path / "p0"), "--output-dir", str(tmp_path / "out")]) == 2
    err = capsys.readouterr().err.strip()
    assert err.startswith("error:") and "given twice" in err and "\n" not in err
    assert not (tmp_path / "out").exists()
