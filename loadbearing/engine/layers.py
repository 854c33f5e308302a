"""The layer convention: where a causal LM's decoder blocks live, and which hidden state is which block's output.

    from loadbearing.engine.layers import decoder_layers, n_layers, d_model, hidden_state_module
    path, blocks = decoder_layers(model)     # e.g. ("model.layers", ModuleList[30]); ("gpt_neox.layers", ...)
    n_layers(model), d_model(model)          # 30, 576 for SmolLM2-135M

This is the one home for the convention; the activation engines (``activations/engines.py``) and the steering
hooks (``steering/hooks.py``) both use it, and the resolved ``path`` is recorded in the activation store's and
``directions.h5``'s attributes (``decoder_layers_path``).

Hidden-states index convention (that of Hugging Face ``output_hidden_states=True``): a *layer index* ``L`` runs
over ``0..n_layers``; ``L = 0`` is the embedding output (the input of block 0) and ``L = i`` (``i >= 1``) is the
output of decoder block ``i - 1``. For the last block (``L = n_layers``) we mean the block's own output, *before*
the final norm (HF's ``hidden_states[-1]`` is taken after the final norm for some architectures).
:func:`block_for_layer` maps ``L`` to the block index (``L - 1``) and :func:`layer_for_block` back.

Model resolution: accepts a bare HF model, a ``LoadedModel`` (``.model`` + ``.tokenizer``), an nnsight
``LanguageModel``/``Envoy`` (``._module``) and a transformer-lens ``TransformerBridge`` (``.original_model``):
each is unwrapped to the underlying ``torch.nn.Module`` first. One search order covers Llama, Mistral,
Qwen2, Gemma/Gemma-2 (``model.layers``), multimodal wrappers (``model.language_model.layers``), GPT-2
(``transformer.h``), GPT-NeoX/Pythia (``gpt_neox.layers``), OPT (``model.decoder.layers``), and a bare base
model (``layers``, ``h``).
"""
from __future__ import annotations

from typing import TYPE_CHECKING, Any

from loadbearing.errors import LoadBearingError

if TYPE_CHECKING:
    from torch.nn import Module, ModuleList, Sequential

__all__ = [
    "LAYER_PATHS",
    "LayerError",
    "block_for_layer",
    "check_layer",
    "d_model",
    "decoder_layers",
    "hidden_state_module",
    "layer_for_block",
    "n_layers",
    "unwrap_model",
]

# The search order: the first path that resolves to a non-empty sequence of modules wins.
LAYER_PATHS: tuple[str, ...] = (
    "model.layers",  # Llama, Mistral, Qwen2, Gemma, Gemma-2, Phi-3, SmolLM
    "model.language_model.layers",  # Gemma-3 / multimodal wrappers
    "model.model.layers",  # PEFT-style double wrapping
    "language_model.model.layers",
    "transformer.h",  # GPT-2, GPT-J, Falcon, Bloom
    "gpt_neox.layers",  # GPT-NeoX, Pythia
    "model.decoder.layers",  # OPT
    "language_model.layers",
    "layers",  # a bare base model (LlamaModel, Qwen2Model, GPTNeoXModel)
    "h",  # a bare GPT2Model
    "decoder.layers",
)


class LayerError(LoadBearingError, ValueError):
    """The model's decoder layers cannot be resolved, or a layer index is out of range."""


def unwrap_model(model: Any) -> Any:
    """The underlying ``torch.nn.Module`` of a LoadedModel, nnsight LanguageModel/Envoy or TransformerBridge."""
    for _ in range(4):  # wrappers may nest (a LoadedModel holding an nnsight model...)
        if hasattr(model, "tokenizer") and hasattr(model, "model") and not hasattr(model, "forward"):
            model = model.model  # LoadedModel (a dataclass, not a Module)
            continue
        inner = model.__dict__.get("original_model") if hasattr(model, "__dict__") else None
        if inner is not None:  # transformer-lens TransformerBridge
            model = inner
            continue
        inner = model.__dict__.get("_module") if hasattr(model, "__dict__") else None
        if inner is not None and inner is not model:  # nnsight Envoy / LanguageModel
            model = inner
            continue
        break
    return model


def _resolve(root: Any, path: str) -> Any:
    obj = root
    for part in path.split("."):
        obj = getattr(obj, part, None) if not isinstance(obj, dict) else obj.get(part)
        if obj is None:
            return None
    return obj


def decoder_layers(model: Any) -> tuple[str, ModuleList | Sequential]:
    """``(path, blocks)``: the dotted module path (relative to the unwrapped model) of its decoder blocks and
    the ``ModuleList`` itself, found by :data:`LAYER_PATHS` in order."""
    import torch  # deferred: torch is heavy to import

    m = unwrap_model(model)
    for path in LAYER_PATHS:
        obj = _resolve(m, path)
        if isinstance(obj, (torch.nn.ModuleList, torch.nn.Sequential)) and len(obj) > 0:
            return path, obj
    raise LayerError(f"cannot find the decoder layers of {type(m).__name__} (tried {', '.join(LAYER_PATHS)}); "
                     "supported: HF causal LMs such as Llama, Qwen2, Gemma-2, GPT-NeoX, GPT-2")


def n_layers(model: Any) -> int:
    """Number of decoder blocks (hidden-state layer indices run over ``0..n_layers``)."""
    return len(decoder_layers(model)[1])


def d_model(model: Any) -> int:
    """Residual-stream width (the embedding width)."""
    m = unwrap_model(model)
    emb = m.get_input_embeddings() if hasattr(m, "get_input_embeddings") else None
    if emb is not None and getattr(emb, "weight", None) is not None:
        return int(emb.weight.shape[1])
    cfg = getattr(m, "config", None)
    cfg = cfg.get_text_config() if hasattr(cfg, "get_text_config") else cfg  # type: ignore[union-attr]
    for k in ("hidden_size", "n_embd", "d_model"):
        if getattr(cfg, k, None):
            return int(getattr(cfg, k))
    raise LayerError(f"cannot find d_model of {type(m).__name__}")


def block_for_layer(layer: int) -> int:
    """The decoder block whose output is hidden-state ``layer`` (``-1`` for 0 = the embeddings)."""
    return int(layer) - 1


def layer_for_block(block: int) -> int:
    """The hidden-state index of block ``block``'s output."""
    return int(block) + 1


def check_layer(model: Any, layer: int) -> int:
    n = n_layers(model)
    if isinstance(layer, bool) or not hasattr(layer, "__index__") or not 0 <= int(layer) <= n:
        raise LayerError(f"unknown layer {layer!r}: this model has hidden-state layers 0..{n} (0 = embeddings)")
    return int(layer)


def hidden_state_module(model: Any, layer: int) -> Module:
    """The module whose forward output is hidden state ``layer``: the input embedding module for 0 (GPT-2 adds
    position embeddings after it; Gemma-2's embedding module applies its sqrt(d_model) scale itself), decoder
    block ``layer - 1`` otherwise."""
    layer = check_layer(model, layer)
    m = unwrap_model(model)
    return m.get_input_embeddings() if layer == 0 else decoder_layers(m)[1][layer - 1]
