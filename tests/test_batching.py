"""Continuous batching (loadbearing.engine.batching): refilled slots, left-padded cache merges and left crops give
each row exactly the tokens it gets when decoded alone. Tiny random Llama over the real SmolLM2 tokenizer."""
from __future__ import annotations

import pytest

from loadbearing.engine.decoding import decode_continuous


def _rows(tok, n=11):
    qs = [f"Start with {a}. Add {b}. What is the result? " + "pad " * (a * 7 % 13) for a, b in
          zip(range(1, n + 1), range(n, 0, -1))]
    return [tok(q, add_special_tokens=False)["input_ids"] for q in qs]


def _decode(model, rows, order, batch_size, refill, lengths, lookahead=None):
    out: dict[int, list[int]] = {i: [] for i in range(len(rows))}
    sizes: list[int] = []

    def step(r, t):
        out[r].append(t)
        return len(out[r]) >= lengths[r]

    decode_continuous(model, rows, order, batch_size=batch_size, step=step, pad_id=0, refill=refill,
                      on_step=sizes.append, lookahead=lookahead)
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


@pytest.mark.parametrize("share", [True, False])
def test_on_pass_sees_every_pass_and_row_in_batch_order(tiny_lm, share):
    from loadbearing.engine.generation import generate

    texts = [f"A shared system prompt that is long enough to share. Question {i}: " + "x " * i for i in range(7)]
    seen = []
    a = generate(tiny_lm, texts, max_new_tokens=4, batch_size=3, progress=False, on_pass=seen.append, share=share)
    b = generate(tiny_lm, texts, max_new_tokens=4, batch_size=3, progress=False)
    assert a == b
    kinds = [p.kind for p in seen]
    assert ("shared" in kinds) == share
    prompts = [p for p in seen if p.kind == "prompt"]
    assert sorted(i for p in prompts for i in p.rows) == list(range(7))  # every row's input exactly once
    for p in prompts:
        assert p.mask.shape[0] == len(p.rows) and bool(p.mask[:, -1].all())  # last column: each row's last token
        if not share:  # the whole input is in the row's own pass
            assert [int(x) for x in p.mask.sum(1)] == [len(tiny_lm.tokenizer(texts[i], add_special_tokens=False)
                                                           ["input_ids"]) for i in p.rows]
    assert all(p.rows is None for p in seen if p.kind == "shared")
    assert max(len(p.rows) for p in seen if p.rows is not None) <= 3


def test_prefix_plan_groups_neighbours_and_keeps_one_token_per_row():
    from loadbearing.engine.batching import LEVEL_COST_TOKENS, MIN_SHARED_PREFIX, prefix_plan

    sysp = list(range(100, 120))  # shared by all rows
    qa, qb = list(range(200, 260)), list(range(300, 360))  # two questions' long shared parts
    rows = [sysp + qa + [1, 2, 3], sysp + qa + [1, 2, 4, 5], sysp + qb + [7], sysp + qa + [9] * 30,
            sysp + [42] * 5, sysp + qb + [8, 8]]
    g, plan = prefix_plan(rows)
    assert g == len(sysp)
    assert plan[0] == plan[1] == plan[3] == len(sysp) + len(qa)  # group of question a (in any input order)
    assert plan[2] == plan[5] == len(sysp) + len(qb)
    assert plan[4] == g  # alone
    assert all(len(r) - p >= 1 for r, p in zip(rows, plan))
    # identical rows still keep their last token of their own
    g, plan = prefix_plan([sysp + qa, sysp + qa, sysp + qa])
    assert plan == [len(sysp) + len(qa) - 1] * 3
    # without a prefix shared by every row, a row in no group turns the group level off
    g, plan = prefix_plan([qa + [1, 2], qa + [3], qb + [4], [9] * 30])
    assert g == 0 and plan == [0] * 4
    g, plan = prefix_plan([qa + [1, 2], qa + [3], qb + [4], qb + [5]])
    assert g == 0 and plan == [len(qa)] * 2 + [len(qb)] * 2
    # a group level that saves less than a forward pass costs is dropped
    g, plan = prefix_plan([sysp + [1] * MIN_SHARED_PREFIX + [2], sysp + [1] * MIN_SHARED_PREFIX + [3],
                           sysp + [5] * (LEVEL_COST_TOKENS * 2)])
    assert plan == [g] * 3


@pytest.mark.parametrize("system", [True, False])
def test_grouped_prefill_matches_rows_decoded_alone(varied_tiny, tokenizer, system):
    """Rows shaped like the protocol's continuations (shared system prompt, per-question prompt and response
    prefix, then a different edited line each) decode exactly as they do alone, with and without a prefix
    shared by every row (without one the group level starts from an empty cache)."""
    from loadbearing.engine.batching import prefix_plan

    enc = lambda s: tokenizer(s, add_special_tokens=False)["input_ids"]  # noqa: E731
    head = enc("You are a careful assistant. Solve the problem step by step and end with Answer: N. " * 2)
    rows = []
    for q in range(3):
        body = enc(f"Question {q}: Tom has {q + 3} apples and buys {q * 7 + 2} more. How many? "
                   f"Step 1: start with {q + 3}. Step 2: add the bought ones.")
        for k, line in enumerate(["Step 3: that is 5.", "Step 3: so the total is twelve apples.", "Step 3: hmm"]):
            rows.append((head if system else []) + body + enc(line * (k + 1)))
    if system:  # (without a shared prefix, a row in no group turns the group level off: tested below)
        rows.append(head + enc("An unrelated short question?"))
    g, plan = prefix_plan(rows)
    assert (g > 0) == system
    assert sum(p > g for p in plan) >= 6  # groups were used
    lengths = [3 + i % 4 for i in range(len(rows))]
    order = sorted(range(len(rows)), key=lambda i: rows[i])
    got, _ = _decode(varied_tiny, rows, order, 5, True, lengths)
    alone = {i: _decode(varied_tiny, [rows[i]], [0], 1, False, [lengths[i]])[0][0] for i in range(len(rows))}
    assert got == alone


def test_lookup_draft_copies_what_followed_the_latest_ngram():
    from loadbearing.engine.decoding import lookup_draft

    assert lookup_draft([1, 2, 3, 9, 1, 2, 3, 7, 8, 5, 1, 2, 3], 3) == [7, 8, 5]  # latest occurrence wins
    assert lookup_draft([5, 6, 7, 5, 6], 8) == [7, 5, 6]  # runs up to the end of the context
    assert lookup_draft([4, 4, 4, 4], 2) == [4]  # a repeated token
    assert lookup_draft([1, 2, 3, 4], 4) == []  # nothing repeats
    assert lookup_draft([1, 2, 9, 1], 4) == []  # single-token matches are too weak to draft from
    assert lookup_draft([], 4) == [] and lookup_draft([3], 4) == []


def test_lookahead_gives_the_greedy_tokens_with_fewer_forwards(varied_tiny, tokenizer, monkeypatch):
    """Drafts that are right for 0, 1 or 2 tokens and then wrong (a random model never repeats itself, so the
    drafter is replaced by one that knows each row's greedy tokens): the kept tokens are exactly the greedy
    ones - rejected columns masked out, positions and next-token logits right - in fewer forward passes."""
    import loadbearing.engine.decoding as batching  # the decoder's prompt-lookup drafts

    rows = _rows(tokenizer, n=6)
    lengths = [30, 25, 3, 34, 8, 28]
    order = list(range(len(rows)))
    plain, plain_sizes = _decode(varied_tiny, rows, order, 3, True, lengths, lookahead=0)
    alone = {i: _decode(varied_tiny, [rows[i]], [0], 1, False, [lengths[i]], lookahead=0)[0][0]
             for i in range(len(rows))}
    assert plain == alone
    calls = []

    def draft(tokens, k, **_):
        r = next(i for i, row in enumerate(rows) if list(tokens[:len(row)]) == row)
        done = len(tokens) - len(rows[r])  # tokens emitted so far, the next one included
        right = plain[r][done:done + min(k, done % 3)]
        calls.append(len(right))
        return right + [(t + 7) % 1000 for t in plain[r][done + len(right):done + k]]

    monkeypatch.setattr(batching, "lookup_draft", draft)
    fast, fast_sizes = _decode(varied_tiny, rows, order, 3, True, lengths)
    assert fast == plain
    assert sum(calls) > 0 and len(fast_sizes) < len(plain_sizes)
