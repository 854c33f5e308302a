"""Tiny random models of every architecture family the toolkit supports, for conformance checks without weights.

    from loadbearing.engine.families import FAMILIES, build_family, save_family
    model = build_family("gemma2", tokenizer)                  # 2 blocks, d_model 32, sliding window 24
    path = save_family("gemma2", tokenizer, "/tmp/tiny-gemma2")  # then load_model(path) like any model dir

Each family is ``AutoConfig.for_model(model_type, ...)`` + ``AutoModelForCausalLM.from_config`` over the real
tokenizer's vocabulary, with a large ``initializer_range`` so that logits are peaked and greedy ties are rare,
and (where the family has one) a sliding window of :data:`WINDOW` tokens, shorter than any chat prompt, so
every check runs on inputs longer than the window. The saved directory holds the tokenizer and its chat
template, so :func:`loadbearing.engine.models.load_model` loads it like a downloaded model.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

#: the sliding window of the tiny windowed families (shorter than every chat prompt of the embedded template)
WINDOW = 24
#: std of the random weights: large, so that next-token logits are peaked (greedy ties are rare)
INIT_RANGE = 0.4


@dataclass(frozen=True)
class Family:
    """One architecture family: its transformers ``model_type`` and the config fields of the tiny model."""

    name: str  # the row name in docs/support-matrix.md
    model_type: str
    extra: dict[str, Any] = field(default_factory=dict)
    note: str = ""  # what this row exercises
    style: str = "llama"  # which config field names the family uses ("llama", "neox", "gpt2", "opt", ...)

    @property
    def windowed(self) -> bool:
        return bool(self.extra.get("sliding_window"))


_W = {"sliding_window": WINDOW}
FAMILIES: dict[str, Family] = {f.name: f for f in (
    Family("llama", "llama", note="SmolLM2 / Llama-2 layout, GQA"),
    Family("llama3", "llama", {"rope_parameters": {"rope_type": "llama3", "rope_theta": 500000.0, "factor": 8.0,
                                                   "low_freq_factor": 1.0, "high_freq_factor": 4.0,
                                                   "original_max_position_embeddings": 64}},
           note="Llama-3.1 rope scaling"),
    Family("qwen2", "qwen2", note="qkv bias"),
    Family("gemma", "gemma", note="embedding scale, (1 + w) RMSNorm"),
    Family("gemma2", "gemma2", {**_W, "query_pre_attn_scalar": 16, "final_logit_softcapping": 30.0,
                                "attn_logit_softcapping": 50.0,
                                "layer_types": ["sliding_attention", "full_attention"]},
           note="soft-capping, sliding window, extra norms, embedding scale"),
    Family("gemma3", "gemma3_text", {**_W, "query_pre_attn_scalar": 16,
                                     "layer_types": ["sliding_attention", "full_attention"]},
           note="Gemma-3 text: local + global layers, q/k norm"),
    Family("mistral", "mistral", dict(_W), note="sliding window on every layer"),
    Family("phi3", "phi3", dict(_W), note="fused qkv / gate-up, sliding window"),
    Family("qwen3", "qwen3", note="q/k norm"),
    Family("olmo2", "olmo2", note="post-norms, q/k norm"),
    Family("gpt_neox", "gpt_neox", {"use_parallel_residual": True, "rotary_pct": 0.25}, style="neox",
           note="parallel attention, partial rotary (Pythia)"),
    Family("gpt2", "gpt2", style="gpt2", note="learned positions, Conv1D"),
    Family("opt", "opt", style="opt", note="learned positions, model.decoder.layers"),
)}


def _config_kwargs(fam: Family, tokenizer, hidden: int, layers: int) -> dict[str, Any]:
    ids = {"bos_token_id": tokenizer.bos_token_id, "eos_token_id": tokenizer.eos_token_id,
           "pad_token_id": tokenizer.pad_token_id if tokenizer.pad_token_id is not None else tokenizer.eos_token_id}
    vocab = len(tokenizer)
    if fam.style == "gpt2":
        return dict(ids, vocab_size=vocab, n_embd=hidden, n_layer=layers, n_head=4, n_positions=2048,
                    initializer_range=INIT_RANGE)
    if fam.style == "opt":
        return dict(ids, vocab_size=vocab, hidden_size=hidden, word_embed_proj_dim=hidden, ffn_dim=2 * hidden,
                    num_hidden_layers=layers, num_attention_heads=4, max_position_embeddings=2048, init_std=INIT_RANGE)
    kw = dict(ids, vocab_size=vocab, hidden_size=hidden, intermediate_size=2 * hidden, num_hidden_layers=layers,
              num_attention_heads=4, max_position_embeddings=2048, initializer_range=INIT_RANGE,
              tie_word_embeddings=False)
    if fam.style == "llama":
        kw.update(num_key_value_heads=2, head_dim=hidden // 4)
    return kw | fam.extra


def build_family(name: str, tokenizer, *, hidden: int = 32, layers: int = 2, seed: int = 0, dtype: Any = None):
    """The tiny random model of family ``name`` (eval mode, ``sdpa`` attention where the family has it)."""
    import torch  # deferred: torch is heavy to import
    from transformers import AutoConfig, AutoModelForCausalLM  # deferred: transformers is heavy to import

    if name not in FAMILIES:
        raise KeyError(f"unknown family {name!r}; choose one of {', '.join(FAMILIES)}")
    fam = FAMILIES[name]
    cfg = AutoConfig.for_model(fam.model_type, **_config_kwargs(fam, tokenizer, hidden, layers))
    torch.manual_seed(seed)
    model = AutoModelForCausalLM.from_config(cfg, dtype=dtype or torch.float32)
    model.generation_config.eos_token_id = tokenizer.eos_token_id
    model.generation_config.pad_token_id = cfg.pad_token_id
    return model.eval()


def save_family(name: str, tokenizer, path: str | Path, **kw) -> Path:
    """Build family ``name`` and save it with ``tokenizer`` (and its chat template) into ``path``."""
    path = Path(path)
    model = build_family(name, tokenizer, **kw)
    model.save_pretrained(path, safe_serialization=True)
    tokenizer.save_pretrained(path)
    return path


