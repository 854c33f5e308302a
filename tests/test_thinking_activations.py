"""The activation cache's think-block positions (think_mean, think_last) and its post-outcome continuation
positions (continuation[:N]), and the post-outcome probe target read there, on a tiny in-process model whose
chat template opens a think block (real forward passes, a real HDF5 store)."""
from __future__ import annotations

import numpy as np
import pandas as pd
import pytest
import torch
from helpers.thinking import think_tokenizer

from activations.cache import CacheConfig, cache_activations
from activations.inputs import OUTCOME_POSITIONS, SAFE_POSITIONS, CacheError, expand_continuation, prepare_item
from activations.store import open_store
from activations.synthetic import HASH, make_run
from loadbearing.options import parse_token_positions
from probes.data import ProbeError, is_post_outcome_read, load_probe_data


@pytest.fixture(scope="module")
def think_tok(embedded_dir):
    return think_tokenizer(embedded_dir)


@pytest.fixture(scope="module")
def think_lm(think_tok):
    from helpers.tiny import make_tiny_lm

    lm = make_tiny_lm(think_tok, layers=2, hidden=64, seed=5)
    lm.weights_hash = HASH
    return lm


def parse_positions(spec, allow_outcome_tokens=False):
    """The cache's reading of --token-positions (activations.cache: the one parser, with the continuation entries)."""
    return parse_token_positions(spec, safe=SAFE_POSITIONS, outcome=OUTCOME_POSITIONS, error=CacheError,
                                 allow_outcome_tokens=allow_outcome_tokens, expand=expand_continuation,
                                 expand_name="continuation[:N]")


def test_parse_continuation_positions():
    assert parse_positions("prefix_last,continuation:3", allow_outcome_tokens=True) == [
        "prefix_last", "continuation_0", "continuation_1", "continuation_2"]
    assert len(parse_positions("continuation", allow_outcome_tokens=True)) == 8
    with pytest.raises(CacheError, match="post-outcome.*--allow-outcome-tokens"):
        parse_positions("continuation:3")
    for bad in ("continuation:0", "continuation:x", "continuation:65"):
        with pytest.raises(CacheError, match="continuation:8"):
            parse_positions(bad, allow_outcome_tokens=True)
    assert parse_positions("think_mean,think_last") == ["think_mean", "think_last"]


def test_spans_of_think_and_continuation(think_tok):
    _, recs = make_run_tmp(think_tok)
    rec = recs[0]
    it = prepare_item(rec, think_tok, ["prefix_last", "think_mean", "think_last", "continuation_0", "continuation_1"])
    n = rec["input_tokens"]
    a, b = it.spans["think_mean"]
    assert b == n and it.spans["think_last"] == (n - 1, n)  # the cut is inside the open block
    assert think_tok.decode(it.ids[a:b]).strip() == rec["prefix_text"].strip()  # the block's text: the prefix
    assert it.spans["continuation_0"] == (n, n + 1) and it.spans["continuation_1"] == (n + 1, n + 2)
    assert len(it.ids) == n + 2  # only the first N continuation tokens are fed
    short = dict(rec, continuation="7")
    names = [f"continuation_{i}" for i in range(4)]
    it2 = prepare_item(short, think_tok, names)
    assert [it2.spans[p] for p in names] == [(n, n + 1)] * 4  # shorter than N: its last token, said by the span


def make_run_tmp(tok):
    import tempfile
    from pathlib import Path

    return make_run(Path(tempfile.mkdtemp()) / "run", tok, n_questions=5)


def test_no_think_block_is_one_error(tokenizer):
    _, recs = make_run_tmp(tokenizer)  # the embedded template: no think block
    with pytest.raises(CacheError, match="no think block.*prefix_last"):
        prepare_item(recs[0], tokenizer, ["think_mean"])


def test_cache_think_and_continuation_positions_equal_hf_forward(think_tok, think_lm, tmp_path):
    run_dir, recs = make_run(tmp_path / "run", think_tok, n_questions=5)
    out = cache_activations(CacheConfig(run_dir, output=tmp_path / "a.h5", engine="hf", batch_size=3, progress=False,
                                        positions="prefix_last,think_mean,think_last,continuation:3",
                                        allow_outcome_tokens=True), think_lm)
    by_id = {r["id"]: r for r in recs}
    with open_store(out) as st:
        assert st.positions == ["prefix_last", "think_mean", "think_last", "continuation_0", "continuation_1",
                                "continuation_2"]
        assert st.leaky is True
        for i in (0, len(recs) - 1):
            rec = by_id[st.rows.continuation_id[i]]
            ids = think_tok(rec["input_text"] + rec["continuation"], add_special_tokens=False,
                            return_tensors="pt")["input_ids"]
            with torch.no_grad():
                hs = think_lm.model(input_ids=ids, output_hidden_states=True).hidden_states
            a, b = st.spans("think_mean")[i]
            for j in range(3):
                s0, _ = st.spans(f"continuation_{j}")[i]
                np.testing.assert_allclose(st.read(1, f"continuation_{j}")[i], hs[1][0, s0].numpy(), atol=1e-4)
            np.testing.assert_allclose(st.read(1, "think_mean")[i], hs[1][0, a:b].mean(0).numpy(), atol=1e-4)
            np.testing.assert_allclose(st.read(1, "think_last")[i], hs[1][0, b - 1].numpy(), atol=1e-4)


class _Store:
    """The parts of an activation store that load_probe_data reads."""

    def __init__(self, labels3):
        self.positions = ["prefix_last", "continuation_0"]
        self.layers = [0, 1]
        self.attrs = {"label_source": "test"}
        self.path = "mem.h5"
        self.rows = pd.DataFrame({"condition": ["perturbed"] * len(labels3), "label": ["C" if x == "C" else "non-C"
                                                                                     for x in labels3],
                                  "label3": labels3, "question_id": [f"q{i}" for i in range(len(labels3))]})
        self.n_rows = len(labels3)


def test_repair_target_is_read_after_the_outcome_only():
    st = _Store(["A", "B", "C", "B", "A", "C"])
    assert is_post_outcome_read("repair_post_outcome", "continuation_0")
    assert not is_post_outcome_read("repair_post_outcome", "prefix_last")
    assert not is_post_outcome_read("propagation", "continuation_0")
    with pytest.raises(ProbeError, match="after the outcome.*--token-position continuation_0"):
        load_probe_data(st, target="repair_post_outcome", position="prefix_last")
    d = load_probe_data(st, target="repair_post_outcome", position="continuation_0")
    assert d.class_names == ["A", "B"] and d.y.tolist() == [0, 1, 1, 0]  # the C rows are not A-vs-B rows
    assert d.idx.tolist() == [0, 1, 3, 4]


def test_probes_cli_on_a_leaky_store(think_tok, think_lm, tmp_path, capsys):
    """A continuation store is leaky: propagation is refused (one error line); the post-outcome target passes
    the leak gate at a continuation position and is refused at prefix_last."""
    from probes.train import main

    run_dir, _ = make_run(tmp_path / "run", think_tok, n_questions=5)
    out = cache_activations(CacheConfig(run_dir, output=tmp_path / "a.h5", engine="hf", progress=False,
                                        positions="prefix_last,continuation:2", allow_outcome_tokens=True), think_lm)
    for args, msg in ((["--target", "propagation"], "marked leaky"),
                      (["--target", "repair_post_outcome"], "after the outcome"),
                      (["--target", "repair_post_outcome", "--token-position", "continuation_0"], "no label3")):
        assert main([str(out), "--output-dir", str(tmp_path / "p"), "--quiet", *args]) != 0
        err = capsys.readouterr().err.strip().splitlines()
        assert len(err) == 1 and err[0].startswith("error:") and msg in err[0], err


def test_r1_distill_preset_and_study_settings():
    """The preset reads into a valid study config that steers the think block and caches its positions; the
    settings added for it stay out of study.json while they hold their defaults."""
    from study.config import StudyConfig, StudyError
    from study.files import read_config_file

    (run,) = read_config_file("r1-distill")
    c = StudyConfig(**run)
    c.validate()
    assert c.steer_positions == "think" and "think_mean" in c.token_positions
    assert c.to_dict()["steer_positions"] == "think"
    plain = StudyConfig(output_dir="x")
    assert "steer_positions" not in plain.to_dict() and "token_positions" not in plain.to_dict()
    for bad, msg in (({"steer_positions": "thinking"}, "--steer-positions"), ({"token_positions": "think"},
                                                                              "--token-positions")):
        with pytest.raises(StudyError, match=msg):
            StudyConfig(output_dir="x", **bad).validate()
