"""Steering hooks and the steering sweep, on tiny in-process models (whole file well under a minute).

The planted-effect test builds a Llama whose blocks are the identity and whose unembedding is a hand-written
transition table: after "Answer: " it says "3", unless the residual stream carries the planted direction
e_63, which makes it say "7". The sweep must find that effect (and not in random directions), so a null
from the same pipeline is informative.
"""
from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest
import torch

from steering.hooks import (
    SteeringError,
    combine_directions,
    mean_resid_norm,
    patch,
    steer,
    steer_vectors,
)

from conftest import make_tiny_lm

PLANT = 63  # the planted steering dimension
CHAIN = ["Ċ", "Answer", ":", "Ġ"]  # "\nAnswer: " then a digit


# ------------------------------------------------------------------------------------------------ helpers


@pytest.fixture(autouse=True, scope="module")
def _one_thread():
    """Tiny matmuls on a shared 2-core machine: one intra-op thread is ~20x faster than two under load."""
    n = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(n)


def _enc(tok, texts):
    return tok(texts, add_special_tokens=False, padding=True, padding_side="left", return_tensors="pt")


def _greedy(model, enc, n=8, **kw):
    out = model.generate(**enc, max_new_tokens=n, do_sample=False, temperature=None, top_p=None, top_k=None,
                         output_scores=True, return_dict_in_generate=True, pad_token_id=0, **kw)
    return out.sequences, torch.stack(out.scores, 1)


@pytest.fixture(scope="module")
def lm3(tokenizer):
    """A 3-layer tiny random Llama (hidden 64) whose greedy outputs react to steering."""
    return make_tiny_lm(tokenizer, layers=3, hidden=64, seed=1)


def _gen_fn():
    from behavioural.generation import generate

    return generate


def _planted_lm(tokenizer):
    """Identity blocks + transition-table unembedding; see the module docstring."""
    from transformers import LlamaConfig, LlamaForCausalLM

    from behavioural.models import wrap_model

    torch.manual_seed(0)
    d = 64
    cfg = LlamaConfig(vocab_size=len(tokenizer), hidden_size=d, intermediate_size=2 * d, num_hidden_layers=2,
                      num_attention_heads=4, num_key_value_heads=2, max_position_embeddings=512,
                      tie_word_embeddings=False, bos_token_id=tokenizer.bos_token_id,
                      eos_token_id=tokenizer.eos_token_id, pad_token_id=tokenizer.pad_token_id)
    model = LlamaForCausalLM(cfg).eval()
    ids = {t: tokenizer.convert_tokens_to_ids(t) for t in CHAIN + ["3", "7"]}
    slot = {t: i for i, t in enumerate(CHAIN + ["3", "7"])}
    with torch.no_grad():
        for layer in model.model.layers:
            layer.self_attn.o_proj.weight.zero_()
            layer.mlp.down_proj.weight.zero_()
        E = model.model.embed_tokens.weight
        E.zero_()
        for t, j in slot.items():
            E[ids[t], j] = 1.0
        W = model.lm_head.weight
        W.zero_()
        nxt = {"Ċ": "Answer", "Answer": ":", ":": "Ġ", "3": "Ċ", "7": "Ċ"}
        for cur, n in nxt.items():
            W[ids[n], slot[cur]] = 30.0
        W[ids["3"], slot["Ġ"]] = 10.0  # default answer 3
        W[ids["7"], slot["Ġ"]] = 6.0
        W[ids["7"], PLANT] = 10.0  # the planted direction pushes 7
    return wrap_model(model, tokenizer, name="planted")


def _write_dirs(path: Path, bases: dict, resid_norm=1.0):
    import h5py

    path.mkdir(parents=True, exist_ok=True)
    with h5py.File(path / "directions.h5", "w") as h:
        h.attrs["layers"] = np.array(sorted(bases), dtype=np.int64)
        for L, b in bases.items():
            g = h.create_group(f"layer_{L}")
            g.create_dataset("basis", data=np.asarray(b, dtype=np.float32))
            g.attrs["resid_norm"] = resid_norm
    return path


def _unit(i, d=64):
    v = np.zeros(d, dtype=np.float32)
    v[i] = 1.0
    return v


def _make_run(tmp: Path, tok, n_c=10, n_non=3, gold_c="7"):
    """A run dir whose C cases want 7 (the model says 3) and non-C cases want 3."""
    run = tmp / "run"
    run.mkdir()
    rows = []
    for i in range(n_c + n_non):
        qid = f"q{i // 2}"
        label = "C" if i < n_c else "non-C"
        prompt = tok.apply_chat_template([{"role": "user", "content": f"Question {i}: what is it?"}],
                                         tokenize=False, add_generation_prompt=True)
        rows.append({"id": f"{qid}|numeric|{'early' if i % 2 else 'late'}|perturbed|{i}", "question_id": qid,
                     "dataset": "arith", "task": None, "difficulty": None, "strategy": "numeric",
                     "position": "early" if i % 2 else "late", "condition": "perturbed",
                     "input_text": prompt + "Start = 4\n", "gold": gold_c if label == "C" else "3",
                     "label": label})
        rows.append(dict(rows[-1], id=rows[-1]["id"].replace("perturbed", "control"), condition="control",
                         label="non-C", gold="3"))
    with open(run / "continuations.jsonl", "w") as f:
        for r in rows:
            f.write(json.dumps(r) + "\n")
    (run / "manifest.json").write_text(json.dumps({"model": {"name": "planted"}}))
    return run


# ------------------------------------------------------------------------------------------------ hooks


def test_alpha_zero_is_token_identical(tiny_lm):
    tok, m = tiny_lm.tokenizer, tiny_lm.model
    enc = _enc(tok, ["The cat sat on the", "Two plus two"])
    ref, ref_s = _greedy(m, enc)
    basis = np.stack([_unit(i) for i in range(4)])
    for positions in ("continuation", "all"):
        with steer(m, basis, layers=[1, 2], alpha=0.0, positions=positions):
            got, got_s = _greedy(m, enc)
        assert torch.equal(ref, got)
        assert torch.equal(ref_s, got_s)


def test_hooks_removed_on_error_and_user_hooks_kept(tiny_lm):
    m = tiny_lm.model
    layer = m.model.layers[0]
    fired = []
    mine = layer.register_forward_hook(lambda *a: fired.append(1))
    mine_pre = m.register_forward_pre_hook(lambda *a: None)
    before = (len(layer._forward_hooks), len(m._forward_pre_hooks), len(m._forward_pre_hooks_with_kwargs))
    try:
        with pytest.raises(RuntimeError, match="boom"):
            with steer(m, _unit(0), layers=[1], alpha=1.0) as h:
                assert h.n_hooks == 2
                assert len(layer._forward_hooks) == before[0] + 1
                raise RuntimeError("boom")
        assert h.n_hooks == 0
        assert (len(layer._forward_hooks), len(m._forward_pre_hooks), len(m._forward_pre_hooks_with_kwargs)) == before
        h2 = patch(m, _unit(0), layers=[1], alpha=1.0)
        h2.remove()
        h2.remove()  # idempotent
        assert len(layer._forward_hooks) == before[0]
        m(**_enc(tiny_lm.tokenizer, ["hi"]))
        assert fired, "the user's own hook must survive"
    finally:
        mine.remove()
        mine_pre.remove()


def test_bad_hook_input(tiny_lm):
    m = tiny_lm.model
    with pytest.raises(SteeringError, match="d_model"):
        with steer(m, np.ones(32), layers=[1], alpha=1.0):
            pass
    with pytest.raises(SteeringError, match="unknown layer"):
        with steer(m, _unit(0), layers=[5], alpha=1.0):
            pass
    with pytest.raises(SteeringError, match="positions"):
        with steer(m, _unit(0), layers=[1], alpha=1.0, positions="prefix"):
            pass
    assert len(m.model.layers[0]._forward_hooks) == 0


@pytest.mark.parametrize("positions", ["continuation", "generated", "all"])
def test_kv_cache_and_no_cache_agree(lm3, positions):
    tok, m = lm3.tokenizer, lm3.model
    enc = _enc(tok, ["Once upon a time there", "Hello"])  # left-padded second row
    v = torch.randn(64, generator=torch.Generator().manual_seed(0))
    unsteered, _ = _greedy(m, enc, n=10)
    with steer(m, v, layers=[2], alpha=4.0, positions=positions) as h:
        a, sa = _greedy(m, enc, n=10, use_cache=True)
        n_cached = h.steered_positions
        b, sb = _greedy(m, enc, n=10, use_cache=False)
    assert torch.equal(a, b)
    torch.testing.assert_close(sa, sb, atol=1e-4, rtol=1e-4)
    assert not torch.equal(a, unsteered), "the test direction should change the output"
    width, real = enc["input_ids"].shape[1], enc["attention_mask"].sum(1)
    # positions steered in the cached run: the rule, counted per row (pads excluded)
    steps = 10 - 1  # the last generated token is never fed back
    expect = {"continuation": 2 * (1 + steps), "generated": 2 * steps, "all": int(real.sum()) + 2 * steps}[positions]
    assert n_cached == expect * 1  # one layer
    assert width > int(real.min())


def test_left_padding_never_steered(lm3):
    tok, m = lm3.tokenizer, lm3.model
    texts = ["A much longer prompt that forces padding of the other row", "Short one"]
    enc = _enc(tok, texts)
    assert enc["attention_mask"][1, 0] == 0
    v = torch.randn(64, generator=torch.Generator().manual_seed(1))
    seen = {}
    layer = m.model.layers[1]
    for name, ctx in (("ref", None), ("steered", steer(m, v, layers=[2], alpha=5.0, positions="all"))):
        with ctx if ctx is not None else torch.no_grad():
            # registered after the steering hook: sees the steered output
            grab = layer.register_forward_hook(lambda mod, a, out, name=name: seen.__setitem__(name, out.clone()))
            try:
                m(**enc)
            finally:
                grab.remove()
    pad = ~enc["attention_mask"].bool()
    diff = (seen["steered"] - seen["ref"]).norm(dim=-1)  # [batch, pos]
    assert torch.all(diff[pad] == 0)
    torch.testing.assert_close(diff[~pad], torch.full_like(diff[~pad], 5.0 * float(v.norm())), rtol=1e-4, atol=1e-4)
    # a row generated alone == the same row left-padded in a batch, both steered (per-row alphas)
    with steer(m, v, layers=[2], alpha=[3.0, 3.0]):
        both, sb = _greedy(m, enc, n=8)
    with steer(m, v, layers=[2], alpha=3.0):
        alone, sa = _greedy(m, _enc(tok, texts[1:]), n=8)
    n_pad = int(pad[1].sum())
    assert torch.equal(both[1, n_pad:], alone[0])
    torch.testing.assert_close(sb[1], sa[0], atol=1e-4, rtol=1e-4)


def test_dose_matching():
    q, _ = np.linalg.qr(np.random.default_rng(0).standard_normal((64, 8)))
    basis = q.T
    n1 = float(combine_directions(basis[:1]).norm())
    n8 = float(combine_directions(basis[:8]).norm())
    assert n1 == pytest.approx(1.0, abs=1e-5) and n8 == pytest.approx(1.0, abs=1e-5)
    assert float(combine_directions(basis[:8], dose="sum").norm()) == pytest.approx(np.sqrt(8), rel=1e-5)
    with pytest.raises(SteeringError):
        combine_directions(basis[:2], dose="double")


def test_dose_matching_in_the_residual(tiny_lm):
    tok, m = tiny_lm.tokenizer, tiny_lm.model
    q, _ = np.linalg.qr(np.random.default_rng(0).standard_normal((64, 8)))
    enc = _enc(tok, ["Hello there"])
    got = {}
    for k in (1, 8):
        outs = []
        for ctx in (None, steer(m, q.T[:k], layers=[1], alpha=2.5, positions="all")):
            with ctx if ctx is not None else torch.no_grad():
                grab = m.model.layers[0].register_forward_hook(lambda mod, a, out: outs.append(out.clone()))
                try:
                    m(**enc)
                finally:
                    grab.remove()
        got[k] = (outs[1] - outs[0]).norm(dim=-1)
    torch.testing.assert_close(got[1], got[8])
    torch.testing.assert_close(got[1], torch.full_like(got[1], 2.5), rtol=1e-4, atol=1e-4)


def test_per_row_alpha_and_vectors_match_separate_runs(lm3):
    tok, m = lm3.tokenizer, lm3.model
    enc1 = _enc(tok, ["The weather today is"])
    enc3 = {k: v.repeat(3, 1) for k, v in enc1.items()}
    v = torch.randn(64, generator=torch.Generator().manual_seed(2))
    alphas = [0.0, 3.0, 6.0]
    with steer(m, v, layers=[2], alpha=alphas):
        batch, sb = _greedy(m, enc3, n=8)
    singles = []
    for i, a in enumerate(alphas):
        with steer(m, v, layers=[2], alpha=a):
            s, ss = _greedy(m, enc1, n=8)
        assert torch.equal(batch[i], s[0])
        torch.testing.assert_close(sb[i], ss[0], atol=1e-4, rtol=1e-4)
        singles.append(s[0])
    assert not torch.equal(singles[0], singles[2])
    # per-row direction sets of different k, and the [batch, d_model] vector form
    bases = [v[None].numpy(), np.stack([_unit(0), _unit(1)]), np.stack([_unit(i) for i in range(4)])]
    with steer(m, bases, layers=[2], alpha=4.0):
        rows, _ = _greedy(m, enc3, n=8)
    vecs = torch.stack([combine_directions(b) for b in bases])
    with steer_vectors(m, vecs, layers=[2], alpha=4.0):
        rows2, _ = _greedy(m, enc3, n=8)
    assert torch.equal(rows, rows2)
    for i, b in enumerate(bases):
        with steer(m, b, layers=[2], alpha=4.0):
            s, _ = _greedy(m, enc1, n=8)
        assert torch.equal(rows[i], s[0])
    with pytest.raises(SteeringError, match="rows"):
        with steer(m, v, layers=[2], alpha=[1.0, 2.0]):
            m(**enc3)


def test_mean_resid_norm_matches_hidden_states(tiny_lm):
    tok, m = tiny_lm.tokenizer, tiny_lm.model
    texts = ["Hello there", "A longer sentence here"]
    enc = _enc(tok, texts)
    hs = m(**enc, output_hidden_states=True).hidden_states[1]
    want = float(hs.detach().norm(dim=-1)[enc["attention_mask"].bool()].mean())
    assert mean_resid_norm(tiny_lm, texts, 1, positions="all") == pytest.approx(want, rel=1e-5)
    last = float(hs.detach()[:, -1].norm(dim=-1).mean())
    assert mean_resid_norm(tiny_lm, texts, 1, batch_size=1) == pytest.approx(last, rel=1e-5)


# ------------------------------------------------------------------------------------------------ sweep


def test_planted_direction_is_found_and_random_is_not(tokenizer, tmp_path):
    from steering.sweep import run_sweep

    lm = _planted_lm(tokenizer)
    run = _make_run(tmp_path, tokenizer, n_c=8, n_non=2)
    dirs = _write_dirs(tmp_path / "probes", {2: np.stack([_unit(PLANT), _unit(62)])})
    s = run_sweep(run, dirs, lm=lm, layers=[2], ks=[1, 2], alphas=[0.5, 1.0], random_seeds=2, cases="all",
                  max_new_tokens=6, batch_size=32, progress=False, generate_fn=_gen_fn(), n_boot=200, echo=lambda m: None)
    assert s["status"] == "ok" and s["verdict_code"] == "effect", s["verdict"]
    by = {d["key"]: d for d in s["settings"]}
    assert s["baseline"]["reproduced_c"]["rate"] == 1.0 and s["baseline"]["moved"]["k"] == 0
    top = by["L2|k1|a1|probe"]
    assert top["moved"]["k"] == 8 and top["moved"]["n"] == 8
    assert top["control"]["kind"] == "random" and top["control"]["moved"]["k"] == 0
    assert top["beats_control"] and top["p_holm"] < 0.05
    assert top["broken"]["k"] == 2  # side effect: the non-C cases (gold 3) now say 7
    assert by["L2|k1|a0.5|probe"]["moved"]["k"] == 8
    # dose matched: at alpha 0.5 the k=2 vector puts only 0.5/sqrt(2) on the planted axis: too weak to flip
    assert by["L2|k2|a0.5|probe"]["moved"]["k"] == 0 and not by["L2|k2|a0.5|probe"]["beats_control"]
    assert sum(d["strongest"] for d in s["settings"]) == 1
    out = run / "steering"
    assert (out / "sweep.png").stat().st_size > 1000
    summ = json.loads((out / "summary.json").read_text())
    assert summ["verdict"].startswith("effect:") and "Holm" in summ["verdict"]
    recs = [json.loads(x) for x in (out / "generations.jsonl").read_text().splitlines()]
    assert len(recs) == 10 * (1 + 4 * 3)
    assert {"setting", "case_id", "question_id", "text", "parsed_answer", "correct"} <= set(recs[0])


def test_null_verdict_when_nothing_moves(tokenizer, tmp_path):
    from steering.sweep import run_sweep

    lm = _planted_lm(tokenizer)
    run = _make_run(tmp_path, tokenizer, n_c=4, n_non=0)
    dirs = _write_dirs(tmp_path / "probes", {2: np.stack([_unit(60)])})
    s = run_sweep(run, dirs, lm=lm, layers=[2], ks=[1], alphas=[1.0], random_seeds=1, max_new_tokens=6,
                  progress=False, generate_fn=_gen_fn(), n_boot=100, echo=lambda m: None)
    assert s["verdict_code"] == "null"
    assert s["verdict"].startswith("null: no setting beats its random control") and "0/4" in s["verdict"]


def test_sweep_resume_has_no_duplicates(tokenizer, tmp_path):
    from steering.sweep import run_sweep

    lm = _planted_lm(tokenizer)
    run = _make_run(tmp_path, tokenizer, n_c=4, n_non=0)
    dirs = _write_dirs(tmp_path / "probes", {2: np.stack([_unit(PLANT)])})
    calls = []
    gen = _gen_fn()

    def counting(lm_, texts, **kw):
        calls.append(len(texts))
        return gen(lm_, texts, **kw)

    kw = dict(lm=lm, layers=[2], ks=[1], alphas=[1.0], random_seeds=1, max_new_tokens=6, progress=False,
              generate_fn=counting, n_boot=50, echo=lambda m: None)
    run_sweep(run, dirs, max_cases=2, **kw)  # "killed" after two cases
    assert sum(calls) == 2 * 3
    # a torn last line (killed mid-write) is repaired, not duplicated
    gpath = run / "steering" / "generations.jsonl"
    with open(gpath, "a") as f:
        f.write('{"setting": "half')
    from steering.sweep import SweepError

    with pytest.raises(SweepError, match="resume"):
        run_sweep(run, dirs, **kw)
    s = run_sweep(run, dirs, resume=True, **kw)
    assert sum(calls) == 4 * 3
    recs = [json.loads(x) for x in gpath.read_text().splitlines()]
    pairs = [(r["setting"], r["case_id"]) for r in recs]
    assert len(pairs) == len(set(pairs)) == 4 * 3
    assert s["settings"][0]["moved"]["n"] == 4
    calls.clear()
    run_sweep(run, dirs, resume=True, **kw)
    assert sum(calls) == 0


def test_bad_input_errors_and_nothing_written(tokenizer, tmp_path, capsys):
    from steering.sweep import SweepError, main, run_sweep

    lm = _planted_lm(tokenizer)
    run = _make_run(tmp_path, tokenizer, n_c=2, n_non=0)
    kw = dict(lm=lm, ks=[1], alphas=[1.0], random_seeds=1, max_new_tokens=4, progress=False,
              generate_fn=_gen_fn(), echo=lambda m: None)
    wide = _write_dirs(tmp_path / "wide", {2: np.ones((2, 32), dtype=np.float32)})
    with pytest.raises(SweepError, match="width 32 .* d_model is 64"):
        run_sweep(run, wide, layers=[2], **kw)
    ok = _write_dirs(tmp_path / "ok", {2: np.stack([_unit(PLANT)])})
    with pytest.raises(SweepError, match="unknown layer 7"):
        run_sweep(run, ok, layers=[7], **kw)
    with pytest.raises(SweepError, match="k must be between 1 and 1"):
        run_sweep(run, ok, layers=[2], **dict(kw, ks=[2]))
    with pytest.raises(SweepError, match="no directions file"):
        run_sweep(run, tmp_path / "nowhere", layers=[2], **kw)
    assert not (run / "steering").exists()
    # the CLI: one line on stderr, exit 2, the existing output untouched
    out = run / "steering"
    out.mkdir()
    (out / "keep.txt").write_text("x")
    rc = main([str(run), "--directions", str(ok), "--model", "planted-not-loaded", "--no-progress"])
    assert rc == 2
    err = capsys.readouterr().err.strip()
    assert err.startswith("error: ") and "already exists" in err and "\n" not in err
    assert (out / "keep.txt").read_text() == "x" and len(list(out.iterdir())) == 1


def test_no_c_cases_is_insufficient_data(tokenizer, tmp_path):
    from steering.sweep import run_sweep

    lm = _planted_lm(tokenizer)
    run = _make_run(tmp_path, tokenizer, n_c=0, n_non=3)
    dirs = _write_dirs(tmp_path / "probes", {2: np.stack([_unit(PLANT)])})
    msgs = []
    s = run_sweep(run, dirs, lm=lm, layers=[2], ks=[1], alphas=[1.0], progress=False, generate_fn=_gen_fn(),
                  echo=msgs.append)
    assert s["status"] == "insufficient_data" and s["verdict"].startswith("insufficient_data")
    assert json.loads((run / "steering" / "summary.json").read_text())["status"] == "insufficient_data"
    assert any("no type-C" in m for m in msgs)
