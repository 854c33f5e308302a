"""A tiny random Llama over the embedded model's real tokenizer (built in-process, no hub)."""
from __future__ import annotations


def make_tiny_lm(tokenizer, *, layers: int = 2, hidden: int = 64, seed: int = 0, name: str = "tiny-llama"):
    """A random 2-layer Llama over the real SmolLM2 vocabulary; no hub, built in well under a second."""
    import torch
    from transformers import LlamaConfig, LlamaForCausalLM

    from loadbearing.engine.models import wrap_model

    torch.manual_seed(seed)
    cfg = LlamaConfig(
        vocab_size=len(tokenizer),
        hidden_size=hidden,
        intermediate_size=hidden * 2,
        num_hidden_layers=layers,
        num_attention_heads=4,
        num_key_value_heads=2,
        max_position_embeddings=2048,
        bos_token_id=tokenizer.bos_token_id,
        eos_token_id=tokenizer.eos_token_id,
        pad_token_id=tokenizer.pad_token_id,
        tie_word_embeddings=True,
    )
    model = LlamaForCausalLM(cfg).eval()
    return wrap_model(model, tokenizer, name=name)
