"""The steering audit (which positions got the vector, hook firings per token, the KV cache) and the thinking
models' phases (``positions="think"|"answer"``), on tiny in-process models with real hooks on real passes."""
from __future__ import annotations

import numpy as np
import pytest
import torch
from helpers.thinking import think_tokenizer

from loadbearing.thinking import PhaseScan, ThinkError, ThinkTags, think_phases, think_span
from steering.audit import spans
from steering.errors import SteeringError
from steering.generate import SteeredGeneration, generate_steered
from steering.hooks import steer_vectors


@pytest.fixture(scope="module")
def think_tok(embedded_dir):
    return think_tokenizer(embedded_dir)


@pytest.fixture(scope="module")
def think_lm(think_tok):
    from helpers.tiny import make_tiny_lm

    return make_tiny_lm(think_tok, layers=2, hidden=64, seed=3, name="tiny-think")


def _prompt(tok, q: str, prefix: str = "") -> str:
    return tok.apply_chat_template([{"role": "user", "content": q}], tokenize=False, add_generation_prompt=True) + prefix


def _vec(lm, seed=0, scale=8.0):
    g = np.random.default_rng(seed)
    return (scale * g.standard_normal(lm.model.config.hidden_size)).astype(np.float32)


def test_spans_and_phase_rule(think_tok):
    assert spans([5, 3, 4, 9, 9, 10]) == [[3, 6], [9, 11]]
    tags = ThinkTags.of(think_tok)
    assert len(tags.open) == 1 and len(tags.close) == 1  # added tokens: one id each
    o, c = tags.open[0], tags.close[0]
    ids = [11, o, 12, 13, c, 14]
    # open after reading the opener (its position predicts the first thought); closed from the closer on
    assert think_phases(ids, tags) == [False, True, True, True, False, False]
    sc = PhaseScan(tags)
    sc.feed(0, ids[:3])
    assert sc.feed(2, [c, 15]) == [False, False] and sc.ids == [11, o, c, 15]  # re-fed from 2: forgets what was after
    with pytest.raises(ThinkError):
        sc.feed(9, [1])
    with pytest.raises(ThinkError, match="tokenizer"):
        ThinkTags.of(None)


def test_think_span_from_offsets(think_tok):
    text = _prompt(think_tok, "Add 1 and 2.", "1 + 2 = 3\n")
    enc = think_tok(text, add_special_tokens=False, return_offsets_mapping=True)
    a, b = think_span(text, enc["offset_mapping"])
    assert think_tok.decode(enc["input_ids"][a:b]).strip() == "1 + 2 = 3" and b == len(enc["input_ids"])
    closed = text + "</think>\nAnswer: 3"
    enc2 = think_tok(closed, add_special_tokens=False, return_offsets_mapping=True)
    a2, b2 = think_span(closed, enc2["offset_mapping"])
    assert (a2, b2) == (a, b)  # the closer and the answer are outside
    assert think_span("no block here", [(0, 2), (3, 8)]) is None


@pytest.mark.parametrize("positions", ["continuation", "all"])
def test_cache_on_and_off_same_positions_and_tokens(tiny_lm, positions):
    """model.generate with and without the KV cache under the real hooks: the same tokens, the same steered
    positions (row coordinates, left padding excluded), one firing per layer per produced token."""
    tok, model = tiny_lm.tokenizer, tiny_lm.model
    texts = ["Start with 4. Add 2. What is the result?", "Add 1."]
    enc = tok(texts, add_special_tokens=False, padding=True, padding_side="left", return_tensors="pt")
    lens = enc["attention_mask"].sum(1).tolist()
    new = 6
    got = {}
    for cache in (True, False):
        with steer_vectors(tiny_lm, _vec(tiny_lm), layers=[1, 2], alpha=1.0, positions=positions) as h:
            with torch.no_grad():
                out = model.generate(**enc, max_new_tokens=new, min_new_tokens=new, do_sample=False, use_cache=cache,
                                     pad_token_id=tok.pad_token_id)
            got[cache] = (out[:, enc["input_ids"].shape[1]:].tolist(), h.audit())
    (toks_on, aud_on), (toks_off, aud_off) = got[True], got[False]
    assert toks_on == toks_off
    for b, P in enumerate(lens):
        first = P - 1 if positions == "continuation" else 0
        want = [[first, P + new - 1]]  # the last token produced is never fed back
        assert aud_on[b]["positions"] == aud_off[b]["positions"] == want
        assert aud_on[b]["kv_cache"] is True and aud_off[b]["kv_cache"] is False
        assert aud_on[b]["forward_passes"] == aud_off[b]["forward_passes"] == new
        assert aud_on[b]["hook_fires"] == aud_off[b]["hook_fires"] == 2 * new  # two layers, every pass
        assert aud_on[b]["hook_fires_per_token"] == aud_off[b]["hook_fires_per_token"] == 1.0
    with torch.no_grad():  # the hooks really act: alpha 0 gives other tokens
        plain = model.generate(**enc, max_new_tokens=new, min_new_tokens=new, do_sample=False,
                               pad_token_id=tok.pad_token_id)[:, enc["input_ids"].shape[1]:].tolist()
    assert plain != toks_on


def test_fast_path_audit_matches_the_hook_path(tiny_lm):
    """The sweep's fast path records the positions model.generate + SteeringHandle steers, and text_spans
    covers the generated text up to (not including) the last token."""
    tok = tiny_lm.tokenizer
    texts = ["Start with 4. Add 2. What is the result?", "Add 1.", "Start with 4. Add 2. What is the result?"]
    v = np.stack([_vec(tiny_lm, 0), _vec(tiny_lm, 1), _vec(tiny_lm, 0)])
    outs = generate_steered(tiny_lm, texts, v, [1.0, 1.0, 0.0], layers=[1], max_new_tokens=6, stop_at_answer=False,
                            progress=False, batch_size=3)
    for t, g, vec, a in zip(texts, outs, v, [1.0, 1.0, 0.0]):
        assert isinstance(g, SteeredGeneration)
        au = g.audit
        ids = tok(t, add_special_tokens=False, return_tensors="pt")
        P = ids["input_ids"].shape[1]
        produced = g.new_tokens + (g.finish_reason == "eos")
        assert au["prompt_tokens"] == P and au["kv_cache"] is True
        assert au["positions"] == [[P - 1, P + produced - 1]] and au["n_positions"] == produced
        assert 0 < au["hook_fires_per_token"] <= 1.0  # prompt-lookup drafts verify several tokens a pass
        gen = tok(g.text, add_special_tokens=False)["input_ids"]
        assert au["text_spans"] == [[0, len(tok.decode(gen[:-1]))]] or produced <= 1
        with steer_vectors(tiny_lm, vec, layers=[1], alpha=a) as h, torch.no_grad():
            out = tiny_lm.model.generate(**ids, max_new_tokens=produced, min_new_tokens=produced, do_sample=False,
                                         pad_token_id=tok.pad_token_id)
        assert h.audit()[0]["positions"] == au["positions"]
        assert tok.decode(out[0, P:P + g.new_tokens], skip_special_tokens=True) == g.text


def test_sweep_record_carries_the_audit_only_when_recorded():
    from loadbearing.engine.generation import Generation
    from steering.sweep.grid import Setting
    from steering.sweep.runner import generation_record

    s = Setting(key="L1/k1/a0.5/probe", layer=1, k=1, alpha_rel=0.5, alpha=1.0, basis="probe", seed=None)
    case = {"id": "c1", "question_id": "q1", "question_key": "q1", "label": "C", "dataset": "arith", "task": None,
            "gold": "3", "strategy": "arithmetic", "position": "late"}
    plain = generation_record(s, case, Generation("Answer: 3", 3, "answer_line"), {})
    audited = generation_record(s, case, SteeredGeneration("Answer: 3", 3, "answer_line", {"n_positions": 3}), {})
    assert "steer_audit" not in plain
    assert {k: v for k, v in audited.items() if k != "steer_audit"} == plain
    assert audited["steer_audit"] == {"n_positions": 3}


def test_think_and_answer_phases_on_the_fast_path(think_lm):
    """A template that opens the think block: 'think' steers the whole continuation while the block stays open
    and 'answer' none of it (the same tokens as alpha 0); after a closed block the other way round."""
    tok = think_lm.tokenizer
    open_t = _prompt(tok, "Start with 4. Add 2. What is the result?", "4 + 2 = 6\n")
    closed_t = open_t + "</think>\n"
    v = _vec(think_lm, 2)
    base = generate_steered(think_lm, [open_t, closed_t], v, 0.0, layers=[1], max_new_tokens=5,
                            stop_at_answer=False, progress=False)
    for pos in ("think", "answer"):
        outs = generate_steered(think_lm, [open_t, closed_t], v, 1.0, layers=[1], max_new_tokens=5,
                                stop_at_answer=False, progress=False, positions=pos)
        for g, b, is_open in zip(outs, base, (True, False)):
            if "</think>" in g.text or "<think>" in g.text:
                pytest.skip("the random model wrote a think tag")
            produced = g.new_tokens + (g.finish_reason == "eos")
            steered = (pos == "think") == is_open
            assert g.audit["n_positions"] == (produced if steered else 0)
            if not steered:
                assert g.audit["hook_fires"] == 0 and g.text == b.text


def test_think_phase_on_the_hook_path_mixed_sequence(think_lm):
    """One forward over a sequence that opens and closes the block: the handle steers exactly the positions
    the rule puts in the phase (from the last prompt token on)."""
    tok, model = think_lm.tokenizer, think_lm.model
    text = _prompt(tok, "Add 1 and 2.", "1 + 2 = 3\n</think>\nAnswer: 3")
    ids = tok(text, add_special_tokens=False, return_tensors="pt")["input_ids"]
    phases = think_phases(ids[0].tolist(), ThinkTags.of(tok))
    k = int(ids.shape[1]) - 12  # a prompt cut inside the think block: the rest is read as continuation
    assert phases[k - 1] and not phases[-1]
    for pos, want in (("think", True), ("answer", False)):
        with steer_vectors(think_lm, _vec(think_lm), layers=[1], positions=pos, prompt_len=k) as h, torch.no_grad():
            model(input_ids=ids)
        exp = [p for p in range(k - 1, ids.shape[1]) if phases[p] == want]
        assert h.audit()[0]["positions"] == spans(exp) and h.audit()[0]["n_positions"] == len(exp) > 0


def test_phases_need_a_tokenizer(tiny_lm):
    with pytest.raises(SteeringError, match="tokenizer"):
        with steer_vectors(tiny_lm.model, _vec(tiny_lm), layers=[1], positions="think"):
            pass
