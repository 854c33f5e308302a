"""Steering hooks (steering.hooks) on tiny in-process models: alpha 0 is token-identical, hooks are removed on
error, KV cache and no cache agree, left padding is never steered, dose matching, per-row alphas and vectors; the
residual norm; the positions rule."""
from __future__ import annotations

import numpy as np
import pytest
import torch
from helpers.steering import unit
from helpers.tiny import make_tiny_lm

from steering.hooks import (
    SteeringError,
    combine_directions,
    patch,
    steer,
    steer_vectors,
)
from steering.norms import mean_resid_norm

# ------------------------------------------------------------------------------------------------ helpers

pytestmark = pytest.mark.usefixtures("one_thread")


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
    from loadbearing.engine.generation import generate

    return generate


# ------------------------------------------------------------------------------------------------ hooks


def test_alpha_zero_is_token_identical(tiny_lm):
    tok, m = tiny_lm.tokenizer, tiny_lm.model
    enc = _enc(tok, ["The cat sat on the", "Two plus two"])
    ref, ref_s = _greedy(m, enc)
    basis = np.stack([unit(i) for i in range(4)])
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
            with steer(m, unit(0), layers=[1], alpha=1.0) as h:
                assert h.n_hooks == 2
                assert len(layer._forward_hooks) == before[0] + 1
                raise RuntimeError("boom")
        assert h.n_hooks == 0
        assert (len(layer._forward_hooks), len(m._forward_pre_hooks), len(m._forward_pre_hooks_with_kwargs)) == before
        h2 = patch(m, unit(0), layers=[1], alpha=1.0)
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
        with steer(m, unit(0), layers=[5], alpha=1.0):
            pass
    with pytest.raises(SteeringError, match="positions"):
        with steer(m, unit(0), layers=[1], alpha=1.0, positions="prefix"):
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
                grab = m.model.layers[0].register_forward_hook(lambda mod, a, out, outs=outs: outs.append(out.clone()))
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
    bases = [v[None].numpy(), np.stack([unit(0), unit(1)]), np.stack([unit(i) for i in range(4)])]
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


def test_positions_rule_has_one_home():
    from steering.positions import POSITIONS, first_steered, prompt_steering

    assert [first_steered(p, 5) for p in POSITIONS] == [4, 5, 0, 4, 4]  # think / answer: the continuation's, one phase
    assert [prompt_steering(p) for p in POSITIONS] == ["last", "none", "all", "last", "last"]
    with pytest.raises(SteeringError, match="unknown positions"):
        first_steered("prefix", 5)
