"""The steered fast path (steering.generate) against the hook-based simple path, on a tiny in-process Llama."""
from __future__ import annotations

import numpy as np
import pytest
from helpers.tiny import make_tiny_lm

pytestmark = pytest.mark.usefixtures("one_thread")


@pytest.fixture(scope="module")
def lm3(tokenizer):
    return make_tiny_lm(tokenizer, layers=3, hidden=64, seed=1)


def _texts(tok, n_inputs=4, reps=5):
    base = [tok.apply_chat_template([{"role": "user", "content": f"Question {i}: start with {i}. add 3."}],
                                    tokenize=False, add_generation_prompt=True) + "Start = 4\n" for i in range(n_inputs)]
    return [t for t in base for _ in range(reps)]


@pytest.mark.parametrize("positions", ["continuation", "generated", "all"])
def test_fast_path_matches_hooked_simple_path(lm3, positions):
    from loadbearing.engine.generation import generate_simple
    from steering.generate import generate_steered
    from steering.hooks import steer_vectors

    texts = _texts(lm3.tokenizer)
    V = np.random.default_rng(0).standard_normal((len(texts), 64)).astype(np.float32)
    A = np.array([0.0, 1.0, 3.0, 6.0, 10.0] * 4, dtype=np.float32)
    fast = generate_steered(lm3, texts, V, A, layers=[2], positions=positions, max_new_tokens=12, batch_size=7,
                            progress=False)

    def ctx(ix):
        return steer_vectors(lm3.model, V[ix], layers=[2], alpha=A[ix], positions=positions)

    simple = generate_simple(lm3, texts, max_new_tokens=12, batch_size=7, progress=False, batch_context=ctx,
                             dedupe=False)
    assert fast == simple
    assert len({g.text for g in fast}) > 4, "steering should change some outputs"
    assert sum(len(h) for m in lm3.model.modules() for h in (m._forward_hooks,)) == 0


def test_alpha_zero_is_the_unsteered_fast_path(lm3):
    from loadbearing.engine.generation import generate
    from steering.generate import generate_steered

    texts = _texts(lm3.tokenizer, 3, 3)
    plain = generate(lm3, texts, max_new_tokens=10, batch_size=4, progress=False, dedupe=False)
    z = generate_steered(lm3, texts, np.ones((len(texts), 64), np.float32), 0.0, layers=[1, 2], max_new_tokens=10,
                         batch_size=4, progress=False)
    assert z == plain


def test_bad_inputs(lm3):
    from steering.generate import generate_steered
    from steering.hooks import SteeringError

    texts = _texts(lm3.tokenizer, 1, 2)
    with pytest.raises(SteeringError, match="shape"):
        generate_steered(lm3, texts, np.ones((2, 32)), 1.0, layers=[1], progress=False)
    with pytest.raises(SteeringError, match="finite"):
        generate_steered(lm3, texts, np.ones((2, 64)), [1.0, float("nan")], layers=[1], progress=False)
    with pytest.raises(SteeringError, match="unknown layer"):
        generate_steered(lm3, texts, np.ones((2, 64)), 1.0, layers=[9], progress=False)
    with pytest.raises(SteeringError, match="positions"):
        generate_steered(lm3, texts, np.ones((2, 64)), 1.0, layers=[1], positions="prefix", progress=False)
    assert generate_steered(lm3, [], np.ones((0, 64)), 1.0, layers=[1], progress=False) == []
