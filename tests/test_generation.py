"""HF generation backend: the stop rule, the fast (prefix-sharing) path against the simple path, input order,
dedupe and batch_context. Tiny random Llama over the real SmolLM2 tokenizer; the embedded-model checks are
in test_generation_integration.py."""
from __future__ import annotations

import contextlib

import pytest

from loadbearing.engine.generation import Generation, finish, generate, generate_simple, has_complete_answer_line


def _ids(tok, text):
    return tok(text, add_special_tokens=False)["input_ids"]


def _chat(tok, q, prefix=""):
    return tok.apply_chat_template([{"role": "system", "content": "Write one calculation per line. End with a line 'Answer: N'"},
                                    {"role": "user", "content": q}], tokenize=False, add_generation_prompt=True) + prefix


# ---- the stop rule (pure function of a row's own tokens) ----

def test_finish_stops_at_complete_answer_line(tokenizer):
    ids = _ids(tokenizer, "2 + 3 = 5\nAnswer: 5\nMore text")
    g = finish(tokenizer, ids, {tokenizer.eos_token_id}, True)
    assert g == Generation("2 + 3 = 5\nAnswer: 5\n", len(_ids(tokenizer, "2 + 3 = 5\nAnswer: 5\n")), "answer_line")
    assert has_complete_answer_line(g.text)
    # without stop_at_answer the tokens are taken as they are
    assert finish(tokenizer, ids, {tokenizer.eos_token_id}, False).finish_reason == "length"


def test_finish_eos_excluded_and_padding_after_stop_ignored(tokenizer):
    eos = tokenizer.eos_token_id
    ids = _ids(tokenizer, "1 + 1 = 2\nAnswer: 2") + [eos, eos, eos]
    g = finish(tokenizer, ids, {eos}, True)
    assert (g.text, g.finish_reason, g.new_tokens) == ("1 + 1 = 2\nAnswer: 2", "eos", len(ids) - 3)
    # a row that stopped on its answer line then got an end-of-turn id as batch padding: still answer_line
    ids2 = _ids(tokenizer, "Answer: 2\n") + [eos, eos]
    assert finish(tokenizer, ids2, {eos}, True).finish_reason == "answer_line"


def test_finish_length_and_running(tokenizer):
    ids = _ids(tokenizer, "1 + 1 = 2\n2 + 2 = 4\n")
    assert finish(tokenizer, ids[:3], {tokenizer.eos_token_id}, True, max_new_tokens=3).finish_reason == "length"
    assert finish(tokenizer, ids[:3], {tokenizer.eos_token_id}, True, max_new_tokens=10) is None


# ---- fast path vs simple path, order, dedupe ----

@pytest.fixture(scope="module")
def varied_lm(tokenizer):
    """The tiny random Llama with large embeddings, so different prompts give different greedy outputs."""
    import torch
    from transformers import LlamaConfig, LlamaForCausalLM

    from loadbearing.engine.models import wrap_model

    torch.manual_seed(1)
    cfg = LlamaConfig(vocab_size=len(tokenizer), hidden_size=64, intermediate_size=128, num_hidden_layers=2,
                      num_attention_heads=4, num_key_value_heads=2, max_position_embeddings=2048,
                      bos_token_id=tokenizer.bos_token_id, eos_token_id=tokenizer.eos_token_id,
                      pad_token_id=tokenizer.pad_token_id, tie_word_embeddings=False, initializer_range=0.5)
    return wrap_model(LlamaForCausalLM(cfg).eval(), tokenizer, name="tiny-varied")


def _prompts(tok, n=12):
    qs = [f"Start with {a}. Add {b}. Subtract {c}. What is the result?" for a, b, c in
          [(1, 2, 1), (3, 4, 2), (5, 1, 3), (2, 2, 2), (4, 5, 1), (3, 3, 3), (1, 5, 4), (2, 4, 1), (5, 5, 5),
           (4, 1, 2), (3, 1, 1), (2, 5, 3)]][:n]
    out = [_chat(tok, q) for q in qs]
    # continuations: same prompt, different assistant prefixes (a shared-prefix family)
    out += [_chat(tok, qs[0], "We start with 1.\n"), _chat(tok, qs[0], "We start with 1.\n1 + 2 = 3\n"),
            _chat(tok, qs[0], "We start with 1.\n1 + 2 = 7\n")]
    return out


@pytest.mark.parametrize("which", ["tiny_lm", "varied_lm"])
def test_fast_path_matches_simple_one_at_a_time(which, request):
    lm = request.getfixturevalue(which)
    texts = _prompts(lm.tokenizer)
    fast = generate(lm, texts, max_new_tokens=12, batch_size=32, progress=False)
    ref = generate_simple(lm, texts, max_new_tokens=12, batch_size=1, progress=False)
    same = sum(a == b for a, b in zip(fast, ref))
    assert same == len(texts), [(a, b) for a, b in zip(fast, ref) if a != b][:3]


def test_order_preserved_with_more_than_ten_requests(varied_lm):
    texts = _prompts(varied_lm.tokenizer)  # 15 inputs, sorted internally by token ids
    outs = generate(varied_lm, texts, max_new_tokens=6, batch_size=4, progress=False)
    alone = [generate(varied_lm, [t], max_new_tokens=6, batch_size=1, progress=False)[0] for t in texts]
    assert outs == alone
    assert len({g.text for g in outs}) > len(texts) // 2  # the outputs differ, so a shuffle would show


def test_dedupe_and_batch_context(tiny_lm):
    texts = _prompts(tiny_lm.tokenizer, 3)[:3]
    texts = [texts[0], texts[1], texts[0], texts[2]]
    seen = []

    @contextlib.contextmanager
    def ctx(indices):
        seen.append(list(indices))
        yield

    a = generate(tiny_lm, texts, max_new_tokens=5, batch_size=8, progress=False)
    assert a[0] == a[2]
    b = generate(tiny_lm, texts, max_new_tokens=5, batch_size=2, progress=False, batch_context=ctx, dedupe=False)
    assert sorted(i for s in seen for i in s) == [0, 1, 2, 3]  # every input row, duplicates included
    assert b == a


def test_bad_arguments(tiny_lm):
    with pytest.raises(ValueError):
        generate(tiny_lm, ["x"], batch_size=0, progress=False)
    with pytest.raises(ValueError):
        generate(tiny_lm, ["x"], max_new_tokens=0, progress=False)
    assert generate(tiny_lm, [], progress=False) == []


def test_generate_plain_is_generate_without_the_fast_kernels_or_drafts(varied_lm):
    from loadbearing.engine import fastpath
    from loadbearing.engine.generation import generate_plain

    texts = _prompts(varied_lm.tokenizer)
    seen = []
    real = fastpath.new_cache

    def spy(model):
        cache = real(model)
        seen.append({type(layer).__name__ for layer in cache.layers})
        return cache

    fastpath.new_cache = spy
    try:
        plain = generate_plain(varied_lm, texts, max_new_tokens=10, batch_size=4, progress=False)
    finally:
        fastpath.new_cache = real
    assert seen and all(kinds == {"DynamicLayer"} for kinds in seen)  # plain transformers cache layers
    assert plain == generate(varied_lm, texts, max_new_tokens=10, batch_size=4, progress=False)
