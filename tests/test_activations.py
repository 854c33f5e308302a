"""Activation caching: values vs a direct HF forward pass, engine equivalence, the leakage guard, resume after
an interruption, and clear errors on bad input. Unit tier: a tiny random Llama over the real tokenizer with
hand-built continuation records; the integration tier runs the CLI on the embedded SmolLM2."""
from __future__ import annotations

import json

import h5py
import numpy as np
import pytest
import torch

from activations import StoreError, StoreWriter, open_store
from activations.cache import CacheConfig, CacheError, cache_activations, main
from activations.inputs import prepare_item
from activations.store import sidecar_path
from activations.synthetic import make_run

HASH = "tiny-weights-hash"
# engines agree to float32 rounding: right-padded batches vs single rows, eager vs sdpa paths
ATOL = 1e-4


@pytest.fixture(scope="module")
def lm(tokenizer):
    from helpers.tiny import make_tiny_lm

    lm = make_tiny_lm(tokenizer, layers=3, hidden=64, seed=1)
    lm.weights_hash = HASH
    return lm


@pytest.fixture(scope="module")
def run(tmp_path_factory, tokenizer):
    return make_run(tmp_path_factory.mktemp("run"), tokenizer)


def _cache(run_dir, lm, out, max_batches=None, **kw):
    kw.setdefault("positions", "prefix_last,edit_mean,edit_last")
    kw.setdefault("progress", False)
    return cache_activations(CacheConfig(run_dir, output=out, **kw), lm, max_batches=max_batches)


@pytest.fixture(scope="module")
def nnsight_store(run, lm, tmp_path_factory):
    out = tmp_path_factory.mktemp("st") / "nn.h5"
    return _cache(run[0], lm, out, engine="nnsight", batch_size=4)


# -- values -------------------------------------------------------------------------------------------------
@pytest.mark.parametrize("engine", ["nnsight", "hf"])
def test_values_equal_direct_hf_forward(engine, run, lm, nnsight_store, tmp_path, tokenizer):
    path = nnsight_store if engine == "nnsight" else _cache(run[0], lm, tmp_path / "hf.h5", engine="hf", batch_size=3)
    recs = {r["id"]: r for r in run[1]}
    with open_store(path) as st:
        assert st.layers == [0, 1, 2, 3] and st.d_model == 64 and st.n_rows == len(recs)
        assert st.attrs["engine"] == engine and st.attrs["weights_hash"] == HASH and st.attrs["leaky"] is False
        rows = st.rows
        for i in (0, 3, len(recs) - 1):  # sampled rows, unpadded single-row HF forward as the reference
            rec = recs[rows.continuation_id[i]]
            # the edited line's index and the trace's line count travel with the row (the probes' metadata)
            assert (rows.line_index[i], rows.n_lines[i]) == (rec["line_index"], rec["n_lines"])
            ids = tokenizer(rec["input_text"], add_special_tokens=False, return_tensors="pt")["input_ids"]
            with torch.no_grad():
                hs = lm.model(input_ids=ids, output_hidden_states=True).hidden_states  # [1, seq, d] each
            a, b = st.spans("edit_mean")[i]
            assert tuple(st.spans("edit_last")[i]) == (b - 1, b) and b - a > 1
            assert tokenizer.decode(ids[0, a:b]).strip() == rec["edited_line"]  # the span is the edited line
            assert tuple(st.spans("prefix_last")[i]) == (rec["input_tokens"] - 1, rec["input_tokens"])
            for layer in st.layers:
                h = hs[layer][0]
                if layer == st.layers[-1]:  # stored pre-norm; HF's last hidden state is after the final norm
                    with torch.no_grad():
                        got = lm.model.model.norm(torch.from_numpy(st.read(layer, "prefix_last")[i])).numpy()
                    np.testing.assert_allclose(got, h[-1].numpy(), atol=ATOL)
                    continue
                np.testing.assert_allclose(st.read(layer, "prefix_last")[i], h[-1].numpy(), atol=ATOL)
                np.testing.assert_allclose(st.read(layer, "edit_last")[i], h[b - 1].numpy(), atol=ATOL)
                np.testing.assert_allclose(st.read(layer, "edit_mean")[i], h[a:b].mean(0).numpy(), atol=ATOL)


def test_engines_agree_and_model_restored(run, lm, nnsight_store, tmp_path):
    model = lm.model
    layer_type, attn = type(model.model.layers[0]), model.config._attn_implementation
    ref = _cache(run[0], lm, tmp_path / "hf.h5", engine="hf", batch_size=10)
    tl = _cache(run[0], lm, tmp_path / "tl.h5", engine="transformer-lens", batch_size=3)
    # the wrappers patch the caller's model in place (TransformerBridge swaps blocks, forces eager attention;
    # nnsight patches forward): all undone
    assert type(model.model.layers[0]) is layer_type and model.config._attn_implementation == attn
    assert "forward" not in model.__dict__ and "forward" not in model.model.layers[0].__dict__
    with open_store(ref) as a, open_store(nnsight_store) as b, open_store(tl) as c:
        assert list(a.rows.continuation_id) == list(b.rows.continuation_id) == list(c.rows.continuation_id)
        for pos in a.positions:
            for layer in a.layers:
                x = a.read(layer, pos)
                np.testing.assert_allclose(b.read(layer, pos), x, atol=ATOL, err_msg=f"nnsight {layer} {pos}")
                np.testing.assert_allclose(c.read(layer, pos), x, atol=ATOL, err_msg=f"tl {layer} {pos}")
            assert np.array_equal(a.spans(pos), c.spans(pos))


def test_row_table_and_layout(nnsight_store, run):
    with open_store(nnsight_store) as st:
        rows = st.rows
        first = rows.iloc[0]
        assert first.question_id == "q0" and first.strategy == "arithmetic" and first.edit_position == "late"
        assert first.condition == "perturbed" and first.dataset == "arith" and first.difficulty == "easy"
        unscored = rows[rows.question_id == "q4"]
        assert unscored.label.isna().all() and unscored.correct.isna().all()
        assert set(rows.label.dropna()) == {"C", "non-C"} and rows.label3.isna().all()
        assert st.attrs["settings"]["positions"] == ["prefix_last", "edit_mean", "edit_last"]
        assert st.attrs["source_manifest_sha256"] and st.attrs["schema_version"] == 1
    with h5py.File(nnsight_store) as f:
        ds = f["acts/prefix_last"]
        assert ds.shape == (10, 4, 64) and ds.chunks == (10, 1, 64) and ds.compression == "lzf"
        assert ds.maxshape[0] is None and f["spans/edit_mean"].dtype == np.int32


def test_subset_layers_float16_and_labels(run, lm, tmp_path):
    ldir = run[0] / "labels" / "rule"
    ldir.mkdir(parents=True)
    with open(ldir / "labels.jsonl", "w") as f:
        for r in run[1]:
            f.write(json.dumps({"id": r["id"], "label": {"C": "C", "non-C": "A"}.get(r["label"])}) + "\n")
    (ldir / "settings.json").write_text(json.dumps({"status": "ok", "created": "2026-01-01"}))
    try:
        p = _cache(run[0], lm, tmp_path / "s.h5", layers="0,-1", dtype="float16", conditions="perturbed",
                   positions="edit_last")
        with open_store(p) as st:
            assert st.layers == [0, 3] and st.attrs["dtype"] == "float16" and st.n_rows == 5
            assert st.read(3, "edit_last").dtype == np.float32
            assert set(st.rows.condition) == {"perturbed"} and st.attrs["label_source"] == "labels/rule"
            assert list(st.rows.label3) == [{"C": "C", "non-C": "A"}.get(x) for x in st.rows.label]
        p2 = _cache(run[0], lm, tmp_path / "n.h5", layers="1", labels="none", conditions="control")
        with open_store(p2) as st:
            assert st.rows.label3.isna().all() and st.attrs["label_source"] == ""
        with pytest.raises(CacheError, match="labelling .* not found"):
            _cache(run[0], lm, tmp_path / "x.h5", labels="judge")
    finally:
        import shutil

        shutil.rmtree(run[0] / "labels")


# -- leakage guard ------------------------------------------------------------------------------------------
def test_leakage_guard(run, lm, tmp_path):
    with pytest.raises(CacheError, match="allow-outcome-tokens"):
        _cache(run[0], lm, tmp_path / "leak.h5", positions="prefix_last,continuation_mean")
    assert not (tmp_path / "leak.h5").exists()
    p = _cache(run[0], lm, tmp_path / "leak.h5", positions="prefix_last,continuation_mean", layers="2",
               allow_outcome_tokens=True)
    with open_store(p) as st, open_store(p) as _:
        assert st.leaky is True and st.attrs["settings"]["allow_outcome_tokens"] is True
        sp = st.spans("continuation_mean")
        assert np.array_equal(sp[:, 0], st.rows.input_tokens.to_numpy())  # starts right after the input
        assert (sp[:, 1] > sp[:, 0]).all()


# -- resume ---------------------------------------------------------------------------------------------------
def test_resume_after_interruption(run, lm, nnsight_store, tmp_path):
    out = tmp_path / "r.h5"
    _cache(run[0], lm, out, batch_size=4, max_batches=1)  # "crash" after the first flushed batch
    with pytest.raises(StoreError, match="incomplete.*--resume"):
        open_store(out)
    with open_store(out, allow_incomplete=True) as st:
        assert st.n_rows == 4 and not st.complete
    # a torn second batch: its part file was being written when the crash hit (never renamed into place)
    parts = out.with_name(out.name + ".parts")
    assert not out.exists() and (parts / "part-000000.npz").is_file()
    (parts / ".part-000001.npz.tmp").write_bytes(b"PK\x03\x04 torn")
    with pytest.raises(CacheError, match="already exists.*--resume"):
        _cache(run[0], lm, out, batch_size=4)
    _cache(run[0], lm, out, batch_size=3, resume=True)
    with open_store(out) as a, open_store(nnsight_store) as b:
        assert a.complete and a.n_rows == b.n_rows == 10
        assert list(a.rows.continuation_id) == list(b.rows.continuation_id)
        for layer in a.layers:
            np.testing.assert_allclose(a.read(layer), b.read(layer), atol=ATOL)
    with pytest.raises(StoreError, match="different settings.*engine"):
        _cache(run[0], lm, out, engine="hf", resume=True)


# -- bad input -------------------------------------------------------------------------------------------------
def test_bad_input_errors(run, lm, tmp_path, tokenizer, capsys):
    empty = tmp_path / "empty"
    empty.mkdir()
    with pytest.raises(CacheError, match="manifest.json.*not found"):
        _cache(empty, lm, tmp_path / "e.h5")
    (empty / "manifest.json").write_text(json.dumps({"status": "ok", "model": {"name": "tiny"}}))
    (empty / "continuations.jsonl").write_text("")
    with pytest.raises(CacheError, match="no continuations"):
        _cache(empty, lm, tmp_path / "e.h5")
    assert main([str(empty), "--quiet"]) == 2 and "no continuations" in capsys.readouterr().err
    with pytest.raises(CacheError, match=r"unknown layer 9, out of range; valid layers are 0\.\.3"):
        _cache(run[0], lm, tmp_path / "b.h5", layers="0,9")
    with pytest.raises(CacheError, match="unknown position 'answer'"):
        _cache(run[0], lm, tmp_path / "b.h5", positions="answer")
    other, _ = make_run(tmp_path / "other", tokenizer, n_questions=1, weights_hash="f" * 64, name="gemma-2-9b-it")
    with pytest.raises(CacheError, match="mismatched model"):
        _cache(other, lm, tmp_path / "b.h5")
    assert not (tmp_path / "b.h5").exists()
    with pytest.raises(CacheError, match="already exists.*--resume"):
        _cache(run[0], lm, nnsight_path(run))
    bad = dict(run[1][2], input_tokens=run[1][2]["input_tokens"] + 1)
    with pytest.raises(CacheError, match=r"q1\|arithmetic\|late\|perturbed.*tokenises to"):
        prepare_item(bad, tokenizer, ["prefix_last"])
    broken, recs = make_run(tmp_path / "broken", tokenizer, n_questions=2)
    with open(broken / "continuations.jsonl", "a") as f:
        f.write(json.dumps(dict(recs[0], id="q9|x|late|perturbed", input_tokens=3)) + "\n")
    with pytest.raises(CacheError, match=r"q9\|x\|late\|perturbed.*input_tokens=3"):
        _cache(broken, lm, tmp_path / "broken.h5")
    assert not (tmp_path / "broken.h5").exists()  # refused before any file is written
    with open_store(_cache(run[0], lm, tmp_path / "ok.h5", layers="1", positions="prefix_last")) as st:
        with pytest.raises(StoreError, match=r"unknown layer 2; this store has layers \[1\]"):
            st.read(2)
        with pytest.raises(StoreError, match="unknown position 'edit_mean'"):
            st.read(1, "edit_mean")


def nnsight_path(run):
    """An existing file in the run dir standing in for a previous store."""
    p = run[0] / "activations.h5"
    if not p.exists():
        with StoreWriter(p, layers=[0], positions=["prefix_last"], d_model=4, attrs={}) as w:
            w.finish()
    return p


def test_store_writer_contract(tmp_path):
    p = tmp_path / "w.h5"
    with StoreWriter(p, layers=[0, 2], positions=["prefix_last"], d_model=3, dtype="float16",
                     attrs={"model_name": "m", "settings": {"x": 1}}) as w:
        rows = [{"continuation_id": "a", "correct": True, "input_tokens": 5},
                {"continuation_id": "b", "correct": None, "label": "C", "input_tokens": 7}]
        w.append(rows, {"prefix_last": np.ones((2, 2, 3))}, {"prefix_last": np.array([[4, 5], [6, 7]])})
        assert w.n_rows == 2 and w.done_ids() == {"a", "b"}
        with pytest.raises(StoreError, match="already in the store"):
            w.append(rows[:1], {"prefix_last": np.ones((1, 2, 3))}, {"prefix_last": np.zeros((1, 2))})
        with pytest.raises(StoreError, match="shape"):
            w.append([{"continuation_id": "c"}], {"prefix_last": np.ones((1, 3, 3))}, {"prefix_last": np.zeros((1, 2))})
        w.finish()
    with pytest.raises(StoreError, match="already exists"):
        StoreWriter(p, layers=[0, 2], positions=["prefix_last"], d_model=3, attrs={})
    with open_store(p) as st:
        assert list(st.rows.correct) == [True, None] and list(st.rows.label) == [None, "C"]
        assert st.attrs["settings"] == {"x": 1} and st.read(2).dtype == np.float32
    with h5py.File(p, "r+") as f:
        f.attrs["kind"] = "probes"
    with pytest.raises(StoreError, match="changed after it was cached"):  # the sidecar's sha256 sees the edit
        open_store(p)
    sidecar_path(p).unlink()
    with pytest.raises(StoreError, match="not an activation store"):
        open_store(p)


# -- integration: the CLI on the embedded model ----------------------------------------------------------------
@pytest.mark.integration
def test_cli_on_embedded_model(tmp_path, tokenizer, smol, capsys):
    run_dir, recs = make_run(tmp_path / "run", tokenizer, n_questions=2, weights_hash=smol.weights_hash,
                             name="smollm2-135m-instruct")
    assert main([str(run_dir), "--layers", "0,15,30", "--token-positions", "prefix_last,edit_mean", "--quiet"]) == 0
    assert "4 rows" in capsys.readouterr().out
    with open_store(run_dir / "activations.h5") as st:
        assert st.layers == [0, 15, 30] and st.d_model == 576 and st.attrs["settings"]["model_check"] == "verified"
        ids = tokenizer(recs[0]["input_text"], add_special_tokens=False, return_tensors="pt")["input_ids"]
        with torch.no_grad():
            hs = smol.model(input_ids=ids, output_hidden_states=True).hidden_states
        np.testing.assert_allclose(st.read(15)[0], hs[15][0, -1].numpy(), atol=1e-3, rtol=1e-4)
    assert main([str(run_dir), "--quiet"]) == 2 and "--resume" in capsys.readouterr().err
