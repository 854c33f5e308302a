"""The layer convention (behavioural/layers.py) on tiny in-process models of five architectures.

    .venv/bin/pytest -q tests/test_layers.py
"""
from __future__ import annotations

import pytest

torch = pytest.importorskip("torch")
transformers = pytest.importorskip("transformers")

from loadbearing.engine.layers import (  # noqa: E402
    LayerError,
    block_for_layer,
    d_model,
    decoder_layers,
    hidden_state_module,
    layer_for_block,
    n_layers,
    unwrap_model,
)

D, N, V = 32, 3, 101


def _llama():
    return transformers.LlamaForCausalLM(transformers.LlamaConfig(
        vocab_size=V, hidden_size=D, intermediate_size=64, num_hidden_layers=N, num_attention_heads=4,
        num_key_value_heads=2))


def _qwen2():
    return transformers.Qwen2ForCausalLM(transformers.Qwen2Config(
        vocab_size=V, hidden_size=D, intermediate_size=64, num_hidden_layers=N, num_attention_heads=4,
        num_key_value_heads=2))


def _gemma2():
    return transformers.Gemma2ForCausalLM(transformers.Gemma2Config(
        vocab_size=V, hidden_size=D, intermediate_size=64, num_hidden_layers=N, num_attention_heads=4,
        num_key_value_heads=2, head_dim=8))


def _neox():
    return transformers.GPTNeoXForCausalLM(transformers.GPTNeoXConfig(
        vocab_size=V, hidden_size=D, intermediate_size=64, num_hidden_layers=N, num_attention_heads=4))


def _gpt2():
    return transformers.GPT2LMHeadModel(transformers.GPT2Config(
        vocab_size=V, n_embd=D, n_layer=N, n_head=4, n_positions=64))


ARCHS = {
    "llama": (_llama, "model.layers"),
    "qwen2": (_qwen2, "model.layers"),
    "gemma2": (_gemma2, "model.layers"),
    "gpt-neox": (_neox, "gpt_neox.layers"),
    "gpt2": (_gpt2, "transformer.h"),
}


@pytest.fixture(scope="module", params=sorted(ARCHS))
def arch(request):
    torch.manual_seed(0)
    build, path = ARCHS[request.param]
    return request.param, build().eval(), path


def test_resolution(arch):
    _, model, path = arch
    got, blocks = decoder_layers(model)
    assert got == path
    assert isinstance(blocks, torch.nn.ModuleList) and len(blocks) == N
    assert n_layers(model) == N and d_model(model) == D


def test_hidden_state_index_convention(arch):
    """hidden_states[i] (HF) == output of block i-1 for i < n; hidden_states[0] is the embedding output
    (Gemma-2's embedding module scales by sqrt(d_model) itself in transformers 5)."""
    name, model, _ = arch
    _, blocks = decoder_layers(model)
    outs: dict[int, torch.Tensor] = {}
    handles = []
    for i in range(N + 1):
        def hook(mod, args, out, i=i):
            outs[i] = (out[0] if isinstance(out, tuple) else out).detach()
        handles.append(hidden_state_module(model, i).register_forward_hook(hook))
    try:
        ids = torch.randint(0, V, (2, 7))
        with torch.no_grad():
            hs = model(input_ids=ids, output_hidden_states=True).hidden_states
    finally:
        for h in handles:
            h.remove()
    assert len(hs) == N + 1
    for i in range(1, N):
        torch.testing.assert_close(outs[i], hs[i])
    if name == "gpt2":  # GPT-2 adds position embeddings after the token embedding module
        assert outs[0].shape == hs[0].shape
    else:
        torch.testing.assert_close(outs[0], hs[0])
    assert block_for_layer(3) == 2 and layer_for_block(2) == 3


def test_wrapped_models(arch):
    _, model, path = arch

    class Loaded:  # the LoadedModel shape: .model + .tokenizer, not a Module
        def __init__(self, m):
            self.model, self.tokenizer = m, None

    assert unwrap_model(Loaded(model)) is model
    assert decoder_layers(Loaded(model)) == (path, decoder_layers(model)[1])
    base = getattr(model, model.base_model_prefix)  # the bare base model (LlamaModel, GPT2Model...)
    assert n_layers(base) == N and d_model(base) == D


def test_nnsight_wrapped():
    nnsight = pytest.importorskip("nnsight")
    from nnsight import NNsight

    model = _llama().eval()
    wrapped = NNsight(model)
    assert unwrap_model(wrapped) is model
    assert decoder_layers(wrapped)[0] == "model.layers" and n_layers(wrapped) == N
    assert nnsight is not None


def test_bridge_shape():
    class Bridge:  # transformer-lens TransformerBridge keeps the HF model in __dict__["original_model"]
        pass

    b = Bridge()
    model = _gpt2().eval()
    b.__dict__["original_model"] = model
    assert decoder_layers(b)[0] == "transformer.h" and n_layers(b) == N


def test_errors():
    with pytest.raises(LayerError, match="cannot find the decoder layers"):
        decoder_layers(torch.nn.Linear(3, 3))
    model = _llama().eval()
    for bad in (-1, N + 1, 1.5, "2", True):
        with pytest.raises(LayerError, match="unknown layer"):
            hidden_state_module(model, bad)
