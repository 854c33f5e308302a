"""Continuous batching (behavioural.batching): refilled slots, left-padded cache merges and left crops give
each row exactly the tokens it gets when decoded alone. Tiny random Llama over the real SmolLM2 tokenizer."""
from __future__ import annotations

import pytest

from behavioural.batching import decode_continuous


def _rows(tok, n=11):
    qs = [f"Start with {a}. Add {b}. What is the result? " + "pad " * (a * 7 % 13) for a, b in
          zip(range(1, n + 1), range(n, 0, -1))]
    return [tok(q, add_special_tokens=False)["input_ids"] for q in qs]


def _decode(model, rows, order, batch_size, refill, lengths):
    out: dict[int, list[int]] = {i: [] for i in range(len(rows))}
    sizes: list[int] = []

    def step(r, t):
        out[r].append(t)
        return len(out[r]) >= lengths[r]

    decode_continuous(model, rows, order, batch_size=batch_size, step=step, pad_id=0, refill=refill,
                      on_step=sizes.append)
    return out, sizes


@pytest.mark.parametrize("batch_size", [2, 3, 5])
def test_refilled_batches_match_rows_decoded_alone(varied_tiny, tokenizer, batch_size):
    rows = _rows(tokenizer)
    lengths = [1 + (i * 5) % 9 for i in range(len(rows))]  # rows finish at very different steps
    order = list(range(len(rows)))
    got, sizes = _decode(varied_tiny, rows, order, batch_size, True, lengths)
    alone = {i: _decode(varied_tiny, [rows[i]], [0], 1, False, [lengths[i]])[0][0] for i in range(len(rows))}
    assert got == alone
    assert all(len(got[i]) == lengths[i] for i in got)
    # slots were refilled: the batch never ran with fewer rows than it could hold while rows were waiting
    static, static_sizes = _decode(varied_tiny, rows, order, batch_size, False, lengths)
    assert static == alone
    assert len(sizes) < len(static_sizes)  # fewer forward passes with refill


@pytest.fixture(scope="module")
def varied_tiny(tokenizer):
    import torch
    from transformers import LlamaConfig, LlamaForCausalLM

    torch.manual_seed(3)
    cfg = LlamaConfig(vocab_size=len(tokenizer), hidden_size=64, intermediate_size=128, num_hidden_layers=2,
                      num_attention_heads=4, num_key_value_heads=2, max_position_embeddings=2048,
                      tie_word_embeddings=False, initializer_range=0.5)
    return LlamaForCausalLM(cfg).eval()


def test_row_hook_sees_every_row_in_batch_order(tiny_lm):
    from behavioural.generation import generate

    texts = [f"Question {i}: " + "x " * i for i in range(7)]
    seen: list[list[int]] = []
    a = generate(tiny_lm, texts, max_new_tokens=4, batch_size=3, progress=False, row_hook=seen.append)
    b = generate(tiny_lm, texts, max_new_tokens=4, batch_size=3, progress=False)
    assert a == b
    assert sorted({i for rows in seen for i in rows}) == list(range(7))
    assert max(len(rows) for rows in seen) <= 3
