"""Shared fixtures: the real benchmark files, a tiny random Llama built in-process (with the embedded
model's real tokenizer and chat template), and the embedded SmolLM2 model for the integration tier."""
from __future__ import annotations

import os
from pathlib import Path

import pytest
from helpers.tiny import make_tiny_lm

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


@pytest.fixture(scope="module")
def one_thread():
    """Tiny matmuls on a shared 2-core machine: one intra-op thread is ~20x faster than two under load (a module
    opts in with ``pytestmark = pytest.mark.usefixtures("one_thread")``)."""
    import torch

    n = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(n)


@pytest.fixture
def fake_models(monkeypatch, tiny_lm):
    """Every stage loads the tiny Llama; the behavioural stage generates with the scripted model."""
    import functools

    from fakes import scripted_generate

    import behavioural.protocol as protocol
    import loadbearing.engine.models as models

    monkeypatch.setattr(models, "load_model", lambda *a, **k: tiny_lm)
    monkeypatch.setattr(protocol, "generate", functools.partial(scripted_generate))
    return tiny_lm
