"""Shared fixtures: the real benchmark files, a tiny random Llama built in-process (with the embedded
model's real tokenizer and chat template), and the embedded SmolLM2 model for the integration tier."""
from __future__ import annotations

import os
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
DATA_DIR = Path(os.environ.get("LOADBEARING_DATA", REPO.parent / "shared" / "data"))

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("HF_DATASETS_OFFLINE", "1")
os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")


@pytest.fixture(scope="session")
def data_dir() -> Path:
    if not DATA_DIR.is_dir():
        pytest.fail(f"benchmark data not found at {DATA_DIR}; the tests need ../shared/data beside the checkout")
    return DATA_DIR


@pytest.fixture(scope="session")
def embedded_dir() -> Path:
    """The embedded model's cached safetensors directory (converted from the GGUF on first use)."""
    from loadbearing.engine.models import dequantised_gguf_dir, embedded_gguf_path

    d, _ = dequantised_gguf_dir(embedded_gguf_path())
    return d


@pytest.fixture(scope="session")
def tokenizer(embedded_dir):
    from transformers import AutoTokenizer

    tok = AutoTokenizer.from_pretrained(str(embedded_dir))
    if tok.pad_token is None:
        tok.pad_token = tok.eos_token
    return tok


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


@pytest.fixture(scope="session")
def tiny_lm(tokenizer):
    return make_tiny_lm(tokenizer)


@pytest.fixture(scope="session")
def smol():
    """The real embedded model (integration tier)."""
    from loadbearing.engine.models import load_model

    return load_model("smollm2-135m-instruct")


def pytest_collection_modifyitems(items):
    """Mark integration tests in the JUnit XML (a ``integration`` property), so bench/test_budget.py can hold
    them to their own time budget."""
    for item in items:
        if item.get_closest_marker("integration") is not None:
            item.user_properties.append(("integration", "1"))
