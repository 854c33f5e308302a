"""Steering on the real embedded model (integration tier: loads SmolLM2-135M-Instruct)."""
from __future__ import annotations

import numpy as np
import pytest
import torch

from steering.hooks import steer
from steering.norms import mean_resid_norm

pytestmark = pytest.mark.integration


def _greedy(lm, texts, n, **kw):
    tok = lm.tokenizer
    enc = tok(texts, add_special_tokens=False, padding=True, padding_side="left", return_tensors="pt")
    out = lm.model.generate(**enc, max_new_tokens=n, do_sample=False, temperature=None, top_p=None, top_k=None,
                            pad_token_id=tok.pad_token_id, output_scores=True, return_dict_in_generate=True, **kw)
    return out.sequences, torch.stack(out.scores, 1)


def test_smol_steering_alpha0_cache_and_dose(smol):
    tok = smol.tokenizer
    texts = [tok.apply_chat_template([{"role": "user", "content": q}], tokenize=False, add_generation_prompt=True)
             for q in ("Start with 3. Add 2. What is the result?", "What is 2 + 2?")]
    layer = 15
    norm = mean_resid_norm(smol, texts, layer)
    assert norm > 0
    q, _ = np.linalg.qr(np.random.default_rng(0).standard_normal((smol.model.config.hidden_size, 8)))
    ref, ref_s = _greedy(smol, texts, 8)
    with steer(smol, q.T, layers=[layer], alpha=0.0):
        z, z_s = _greedy(smol, texts, 8)
    assert torch.equal(ref, z) and torch.equal(ref_s, z_s)
    with steer(smol, q.T, layers=[layer], alpha=2.0 * norm) as h:
        a, sa = _greedy(smol, texts, 8, use_cache=True)
        b, sb = _greedy(smol, texts, 8, use_cache=False)
    assert torch.equal(a, b)
    torch.testing.assert_close(sa, sb, atol=2e-3, rtol=1e-3)
    assert not torch.equal(a, ref)
    assert h.n_hooks == 0


def test_smol_steered_fast_path_matches_hooked_generate(smol):
    """The sweep's steered fast path (shared prefix, per-row vectors) gives the hooked model.generate records."""
    from loadbearing.engine.generation import generate_simple
    from steering.generate import generate_steered
    from steering.hooks import steer_vectors

    tok = smol.tokenizer
    base = [tok.apply_chat_template([{"role": "user", "content": q}], tokenize=False, add_generation_prompt=True)
            + "We start with 3.\n" for q in ("Start with 3. Add 2. What is the result?",
                                              "Start with 3. Add 4. Subtract 1. What is the result?")]
    texts = [t for t in base for _ in range(3)]
    layer = 15
    norm = mean_resid_norm(smol, base, layer)
    v = np.random.default_rng(0).standard_normal((len(texts), smol.model.config.hidden_size)).astype(np.float32)
    v /= np.linalg.norm(v, axis=1, keepdims=True)
    a = np.array([0.0, 0.25, 0.5] * 2, dtype=np.float32) * norm
    fast = generate_steered(smol, texts, v, a, layers=[layer], max_new_tokens=16, batch_size=6, progress=False)

    def ctx(ix):
        return steer_vectors(smol, v[ix], layers=[layer], alpha=a[ix])

    ref = generate_simple(smol, texts, max_new_tokens=16, batch_size=6, progress=False, batch_context=ctx, dedupe=False)
    assert sum(f.text == r.text for f, r in zip(fast, ref)) >= len(texts) - 1  # fp noise may flip one greedy tie
