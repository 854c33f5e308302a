"""HF backend on the embedded SmolLM2: fast path == simple path, stop conditions, batch invariance."""
from __future__ import annotations

import pytest

from loadbearing.engine.generation import generate, generate_simple

pytestmark = pytest.mark.integration


@pytest.fixture(scope="module")
def arith_texts(smol):
    from loadbearing.questions.data import load_questions, sample
    from loadbearing.questions.prompts import build_prompt

    qs = sample(load_questions("arith", task="s2_o5,s3_o5", seed=42), 6, 42)
    prompts = [build_prompt(smol.tokenizer, q) for q in qs]
    # protocol-like continuations: a question's prompt + an (edited / unedited) assistant prefix
    conts = [prompts[0] + "We start with 3.\n", prompts[0] + "We start with 3.\n3 - 2 = 1\n",
             prompts[0] + "We start with 3.\n3 - 2 = 5\n", prompts[1] + "We start with 2.\n"]
    return prompts + conts


def test_fast_matches_simple_and_is_batch_invariant(smol, arith_texts):
    fast = generate(smol, arith_texts, max_new_tokens=48, batch_size=32, progress=False)
    one = generate_simple(smol, arith_texts, max_new_tokens=48, batch_size=1, progress=False)
    fast1 = generate(smol, arith_texts, max_new_tokens=48, batch_size=1, progress=False)
    same = sum(a == b for a, b in zip(fast, one))
    print(f"fast batched vs simple one-at-a-time: {same}/{len(one)} identical")
    assert same == len(one), [(a, b) for a, b in zip(fast, one) if a != b]
    assert fast1 == one
    assert {g.finish_reason for g in fast} <= {"eos", "answer_line"}


def test_stop_conditions_on_the_real_model(smol, arith_texts):
    short = generate(smol, arith_texts[:2], max_new_tokens=3, progress=False)
    assert all(g.finish_reason == "length" and g.new_tokens == 3 for g in short)
    # a prefix that ends in a complete answer line's start: the model writes the number, a newline or eos
    g = generate(smol, [arith_texts[0] + "We start with 3.\n3 - 2 = 1\n1 - 1 = 0\nAnswer:"], max_new_tokens=16,
                 progress=False)[0]
    assert g.finish_reason in ("eos", "answer_line") and g.new_tokens <= 4, g


def test_lookahead_on_a_looping_real_continuation(smol, arith_texts):
    """Rows that repeat themselves until the budget (what the real model does on some edited traces): with
    prompt-lookup drafts the records equal plain one-token steps (and the simple path), in fewer forwards."""
    loops = [arith_texts[0] + "We start with 6.\nWe start with 6.\nWe start with 6.\n",
             arith_texts[1] + "We add 5, which is 10 + 5 = 15.\nWe add 5, which is 15 + 5 = 20.\n"]
    calls: list[int] = []
    model = smol.model
    forward = model.forward
    model.forward = lambda *a, **k: (calls.append(1), forward(*a, **k))[1]
    try:
        with_drafts = generate(smol, loops, max_new_tokens=64, batch_size=4, progress=False)
        n_with = len(calls)
        without = generate(smol, loops, max_new_tokens=64, batch_size=4, progress=False, lookahead=0)
        n_without = len(calls) - n_with
    finally:
        del model.forward
    simple = generate_simple(smol, loops, max_new_tokens=64, batch_size=1, progress=False)
    assert with_drafts == without == simple
    assert n_with < n_without, (n_with, n_without)
