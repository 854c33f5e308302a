"""The decode-time pieces of the HF fast path (loadbearing.engine.fastpath): folded grouped-query attention equals
transformers' own sdpa path under padding masks, the spare-column KV layer equals the concatenating one while
appending in place, packed float32 linears equal the plain layers and leave nothing behind, and a whole
generation gives the same records with the pieces on and off."""
from __future__ import annotations

import pytest
import torch

from loadbearing.engine import fastpath
from loadbearing.engine.fastpath import SpareLayer, fast_decoding, folded_gqa_sdpa, new_cache, packed_linears, plain


class _Attn(torch.nn.Module):
    num_key_value_groups = 3
    is_causal = True


def _padding_mask(b: int, q: int, s: int, per_head: int = 1) -> torch.Tensor:
    """A bool [b, per_head, q, s] mask: causal over the last q columns, rows left-padded by different amounts."""
    cols = torch.arange(s)
    rows = torch.arange(s - q, s)
    causal = cols[None, :] <= rows[:, None]  # [q, s]
    pad = torch.stack([cols >= (3 * i) % 7 for i in range(b)])  # [b, s]
    m = causal[None, None] & pad[:, None, None, :]
    return m.expand(b, per_head, q, s).clone()


@pytest.mark.parametrize("q", [1, 5])
@pytest.mark.parametrize("per_head", [1, 6])
def test_folded_gqa_equals_transformers_sdpa_with_padding(q, per_head):
    from transformers.integrations.sdpa_attention import sdpa_attention_forward

    torch.manual_seed(0)
    b, hkv, rep, s, d = 4, 2, 3, 11, 8
    query = torch.randn(b, hkv * rep, q, d)
    key, value = torch.randn(b, hkv, s, d), torch.randn(b, hkv, s, d)
    mask = _padding_mask(b, q, s, per_head)
    ref, _ = sdpa_attention_forward(_Attn(), query, key, value, mask, scaling=0.3)
    got, _ = folded_gqa_sdpa(_Attn(), query, key, value, mask, scaling=0.3)
    assert got.shape == ref.shape == (b, q, hkv * rep, d)
    torch.testing.assert_close(got, ref, rtol=1e-5, atol=1e-5)
    # no mask: transformers' own path (enable_gqa) is used unchanged
    ref, _ = sdpa_attention_forward(_Attn(), query, key, value, None, scaling=0.3)
    got, _ = folded_gqa_sdpa(_Attn(), query, key, value, None, scaling=0.3)
    torch.testing.assert_close(got, ref)


def test_spare_layer_appends_in_place_and_equals_concatenation():
    from transformers.cache_utils import DynamicLayer

    torch.manual_seed(0)
    spare, ref = SpareLayer(), DynamicLayer()
    k, v = torch.randn(3, 2, 5, 4), torch.randn(3, 2, 5, 4)
    for layer in (spare, ref):
        layer.update(k, v)
    ptr = spare.keys.data_ptr()
    for _ in range(4):
        k1, v1 = torch.randn(3, 2, 1, 4), torch.randn(3, 2, 1, 4)
        a, b = spare.update(k1, v1), ref.update(k1, v1)
        torch.testing.assert_close(a, b, rtol=0, atol=0)
    assert spare.keys.data_ptr() == ptr  # the same buffer: no copy per appended token
    sel = torch.tensor([2, 0])
    for layer in (spare, ref):
        layer.batch_select_indices(sel)
    spare.crop_left(2)
    ref.keys, ref.values = ref.keys[:, :, 2:], ref.values[:, :, 2:]
    for _ in range(fastpath.SPARE_COLUMNS + 3):  # past the spare room: buffers re-allocated, values kept
        k1, v1 = torch.randn(2, 2, 1, 4), torch.randn(2, 2, 1, 4)
        a, b = spare.update(k1, v1), ref.update(k1, v1)
        torch.testing.assert_close(a, b, rtol=0, atol=0)
    assert spare.get_seq_length() == ref.get_seq_length() == 5 + 4 - 2 + fastpath.SPARE_COLUMNS + 3


def test_crop_left_of_a_replaced_tensor_does_not_write_into_old_buffers():
    spare = SpareLayer()
    spare.update(torch.zeros(2, 1, 4, 2), torch.zeros(2, 1, 4, 2))
    spare.batch_select_indices(torch.tensor([1]))  # keys replaced by a 1-row copy
    spare.crop_left(1)
    k, v = spare.update(torch.ones(1, 1, 1, 2), torch.ones(1, 1, 1, 2))
    assert k.shape == (1, 1, 4, 2) and float(k[0, 0, -1].sum()) == 2.0


def test_packed_linears_equal_plain_and_restore(tiny_lm):
    model = tiny_lm.model
    x = torch.randint(0, 100, (2, 7))
    with torch.inference_mode():
        ref = model(input_ids=x).logits
    fired: list[int] = []
    hook = model.model.layers[0].mlp.down_proj.register_forward_hook(lambda *a: fired.append(1))
    try:
        with torch.inference_mode(), packed_linears(model) as on:
            assert on
            assert "forward" in vars(model.model.layers[0].self_attn.q_proj)
            got = model(input_ids=x).logits
    finally:
        hook.remove()
    assert fired  # forward hooks on a packed layer still run
    torch.testing.assert_close(got, ref, rtol=1e-4, atol=1e-4)
    assert not any("forward" in vars(m) for m in model.modules() if isinstance(m, torch.nn.Linear))
    with plain(), packed_linears(model) as on:
        assert not on


def test_packed_weights_follow_weight_changes(tokenizer):
    from helpers.tiny import make_tiny_lm

    model = make_tiny_lm(tokenizer, seed=5).model
    x = torch.randint(0, 100, (1, 4))
    with torch.inference_mode(), packed_linears(model):
        before = model(input_ids=x).logits
    with torch.no_grad():
        model.lm_head.weight.mul_(2.0)  # tied to the embeddings: the packed copy must be rebuilt
    with torch.inference_mode():
        ref = model(input_ids=x).logits
        with packed_linears(model):
            after = model(input_ids=x).logits
    assert not torch.allclose(before, after)
    torch.testing.assert_close(after, ref, rtol=1e-4, atol=1e-4)


def test_fast_decoding_switches_attention_and_restores_it_on_error(tiny_lm):
    model = tiny_lm.model
    assert model.config._attn_implementation == "sdpa"
    with pytest.raises(RuntimeError, match="boom"), fast_decoding(model):
        assert model.config._attn_implementation == fastpath.ATTN_NAME
        raise RuntimeError("boom")
    assert model.config._attn_implementation == "sdpa"
    assert not any("forward" in vars(m) for m in model.modules() if isinstance(m, torch.nn.Linear))
    with plain(), fast_decoding(model):
        assert model.config._attn_implementation == "sdpa"
        assert all(type(layer) is not SpareLayer for layer in new_cache(model).layers)


def test_generation_records_identical_with_fast_path_on_and_off(tiny_lm):
    from loadbearing.engine.generation import generate

    texts = [f"System prompt shared by all. Question {i}: what is {i} plus {i * 3}?" + " more" * (i % 4)
             for i in range(9)]
    fast = generate(tiny_lm, texts, max_new_tokens=12, batch_size=4, progress=False, stop_at_answer=False)
    with plain():
        slow = generate(tiny_lm, texts, max_new_tokens=12, batch_size=4, progress=False, stop_at_answer=False)
    assert fast == slow


def test_packed_weights_follow_a_dtype_cast(tokenizer):
    from helpers.tiny import make_tiny_lm

    model = make_tiny_lm(tokenizer, seed=6).model
    x = torch.randint(0, 100, (1, 4))
    with torch.inference_mode(), packed_linears(model):
        model(input_ids=x)
    model.to(torch.bfloat16)
    with torch.inference_mode():
        ref = model(input_ids=x).logits
        with packed_linears(model):
            got = model(input_ids=x).logits
    assert got.dtype == torch.bfloat16
    torch.testing.assert_close(got.float(), ref.float(), rtol=2e-2, atol=2e-2)
