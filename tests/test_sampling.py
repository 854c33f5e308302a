"""Seeded sampling on the fast path (loadbearing.engine.sampling): a fixed seed reproduces its tokens across
runs, batch sizes and batch orders; different seeds differ; temperature 0 (and a vanishing one) is greedy;
top-p keeps the nucleus. Tiny random Llama over the real SmolLM2 tokenizer."""
from __future__ import annotations

import pytest

from loadbearing.engine.generation import generate
from loadbearing.engine.sampling import Sampling, default_keys, draw, row_seed


@pytest.fixture(scope="module")
def varied_lm(tokenizer):
    import torch
    from transformers import LlamaConfig, LlamaForCausalLM

    from loadbearing.engine.models import wrap_model

    torch.manual_seed(1)
    cfg = LlamaConfig(vocab_size=len(tokenizer), hidden_size=64, intermediate_size=128, num_hidden_layers=2,
                      num_attention_heads=4, num_key_value_heads=2, max_position_embeddings=2048,
                      bos_token_id=tokenizer.bos_token_id, eos_token_id=tokenizer.eos_token_id,
                      pad_token_id=tokenizer.pad_token_id, tie_word_embeddings=False, initializer_range=0.5)
    return wrap_model(LlamaForCausalLM(cfg).eval(), tokenizer, name="tiny-varied")


def _texts(tok):
    chat = tok.apply_chat_template([{"role": "user", "content": "Start with 3. Add 4. What is the result?"}],
                                   tokenize=False, add_generation_prompt=True)
    return [chat] * 4 + [chat + "We start with 3.\n"] * 3 + [chat + "We start with 3.\n3 + 4 = 7\n"] * 2


def _gen(lm, texts, **kw):
    return [g.text for g in generate(lm, texts, max_new_tokens=6, progress=False, stop_at_answer=False, **kw)]


S = Sampling(temperature=1.0, top_p=0.95, seed=44)


def test_fixed_seed_reproduces_across_runs_batch_sizes_and_orders(varied_lm, tokenizer):
    texts = _texts(tokenizer)
    ref = _gen(varied_lm, texts, sampling=S, batch_size=4)
    assert _gen(varied_lm, texts, sampling=S, batch_size=4) == ref  # same run again
    for bs in (1, 3, 9):
        assert _gen(varied_lm, texts, sampling=S, batch_size=bs) == ref, bs
    assert _gen(varied_lm, texts, sampling=S, batch_size=4, refill=False) == ref
    # order: a row's key is its text and occurrence number, so the prefix families in another order (copies of
    # one text keeping their relative order) give each row its tokens back
    perm = [7, 8, 4, 5, 6, 0, 1, 2, 3]
    assert _gen(varied_lm, [texts[i] for i in perm], sampling=S, batch_size=4) == [ref[i] for i in perm]
    # a row sampled alone (explicit key) equals the same row inside a batch
    keys = default_keys(texts)
    assert _gen(varied_lm, [texts[5]], sampling=S, sample_keys=[keys[5]], batch_size=1) == [ref[5]]


def test_copies_of_one_prefix_are_different_rollouts_and_seeds_differ(varied_lm, tokenizer):
    texts = _texts(tokenizer)
    a = _gen(varied_lm, texts, sampling=S)
    assert len(set(a[:4])) > 1  # four rollouts of one prompt are not one generation repeated
    b = _gen(varied_lm, texts, sampling=Sampling(temperature=1.0, top_p=0.95, seed=45))
    assert a != b


def test_temperature_zero_and_vanishing_temperature_are_greedy(varied_lm, tokenizer):
    texts = _texts(tokenizer)
    greedy = _gen(varied_lm, texts)
    assert _gen(varied_lm, texts, sampling=Sampling(temperature=0.0, seed=3)) == greedy
    assert _gen(varied_lm, texts, sampling=Sampling(temperature=1e-6, top_p=0.95, seed=3)) == greedy
    assert _gen(varied_lm, texts, sampling=Sampling(temperature=1.0, top_p=1e-6, seed=3)) == greedy  # nucleus of one


def test_draw_respects_top_p_and_the_distribution():
    import torch

    logits = torch.log(torch.tensor([[0.5, 0.3, 0.15, 0.05]]))
    g = torch.Generator().manual_seed(0)
    picks = [int(draw(logits, [g], Sampling(1.0, top_p=0.8))[0]) for _ in range(2000)]
    assert set(picks) <= {0, 1}  # mass before token 2 is 0.8: outside the nucleus
    frac = picks.count(0) / len(picks)
    assert abs(frac - 0.5 / 0.8) < 0.04
    g2 = torch.Generator().manual_seed(0)
    full = [int(draw(logits, [g2], Sampling(1.0, top_p=1.0))[0]) for _ in range(4000)]
    assert abs(full.count(3) / 4000 - 0.05) < 0.015


def test_row_seed_and_keys_are_stable():
    assert row_seed(44, "a") == row_seed(44, "a") != row_seed(45, "a")
    assert 0 <= row_seed(1, "x") < 2 ** 63
    k = default_keys(["t", "u", "t"])
    assert k[0] != k[2] and k[0].startswith("0:") and k[2].startswith("1:")


def test_bad_sampling_settings_and_keys(varied_lm, tokenizer):
    with pytest.raises(ValueError, match="temperature"):
        Sampling(temperature=-1)
    with pytest.raises(ValueError, match="top_p"):
        Sampling(top_p=0)
    with pytest.raises(ValueError, match="sample_keys"):
        generate(varied_lm, ["a", "b"], sampling=S, sample_keys=["x"], progress=False)
