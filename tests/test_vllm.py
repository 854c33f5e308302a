"""vLLM backend. The unavailable-vLLM error runs everywhere; the rest needs vllm (`make vllm`, then
`.venv-vllm/bin/pytest -m vllm`) and is skipped with that reason elsewhere."""
from __future__ import annotations

import importlib.util
import sys

import pytest

from loadbearing.engine.generation import generate

HAVE_VLLM = importlib.util.find_spec("vllm") is not None
needs_vllm = pytest.mark.skipif(not HAVE_VLLM, reason="vllm is not installed here; run `make vllm` "
                                "(bash scripts/install_vllm.sh) "
                                "and `.venv-vllm/bin/pytest -m vllm`")


def test_unavailable_vllm_gives_clear_error(monkeypatch, tiny_lm):
    from loadbearing.engine.models import ModelError
    from loadbearing.engine.vllm_backend import VLLMUnavailableError, make_vllm_generate

    monkeypatch.setitem(sys.modules, "vllm", None)  # import vllm -> ImportError
    with pytest.raises(VLLMUnavailableError) as e:
        make_vllm_generate(tiny_lm)
    msg = str(e.value)
    assert isinstance(e.value, ModelError) and "\n" not in msg
    assert "make vllm" in msg and "scripts/install_vllm.sh" in msg


@pytest.mark.integration
def test_run_cli_reports_missing_vllm(monkeypatch, capsys, tmp_path):
    from behavioural import run

    monkeypatch.setitem(sys.modules, "vllm", None)
    rc = run.main(["--dataset", "arith", "--max-examples", "2", "--backend", "vllm", "--output-dir", str(tmp_path / "r"),
                   "--quiet"])
    err = capsys.readouterr().err
    assert rc == 2 and "make vllm" in err


@pytest.fixture(scope="module")
def smol_vllm(smol):
    from loadbearing.engine.vllm_backend import make_vllm_generate

    gen = make_vllm_generate(smol)
    yield gen
    gen.shutdown()


@pytest.fixture(scope="module")
def texts(smol):
    from loadbearing.questions.data import load_questions, sample
    from loadbearing.questions.prompts import build_prompt

    qs = sample(load_questions("arith", task="s2_o5,s3_o5", seed=42), 12, 42)
    prompts = [build_prompt(smol.tokenizer, q) for q in qs]
    return prompts + [prompts[0] + "We start with 3.\n", prompts[0] + "We start with 3.\n3 - 2 = 5\n"]


@pytest.mark.vllm
@pytest.mark.integration
@needs_vllm
def test_vllm_parity_with_hf_and_input_order(smol, smol_vllm, texts):
    v = smol_vllm(smol, texts, max_new_tokens=64, batch_size=32, progress=False)
    h = generate(smol, texts, max_new_tokens=64, batch_size=32, progress=False)
    same = sum(a == b for a, b in zip(v, h))
    print(f"vLLM vs HF identical records: {same}/{len(h)}; vLLM stats {smol_vllm.stats()}")
    for a, b in zip(v, h):
        if a != b:
            print("differs:", repr(a), "| HF:", repr(b))
    # order: 14 requests (> 10, so a string sort of ids "10" < "2" would show); every output is its own prompt's
    assert len({g.text for g in v}) > 6
    alone = [smol_vllm(smol, [t], max_new_tokens=64, batch_size=1, progress=False)[0] for t in texts[9:12]]
    assert alone == v[9:12]
    assert same >= len(h) - 2  # float noise may flip a near-tie; the report above says which


@pytest.mark.vllm
@pytest.mark.integration
@needs_vllm
def test_vllm_stop_conditions(smol, smol_vllm, texts):
    short = smol_vllm(smol, texts[:2], max_new_tokens=3, progress=False)
    assert all(g.finish_reason == "length" and g.new_tokens == 3 for g in short)
    g = smol_vllm(smol, [texts[0] + "We start with 3.\n3 - 2 = 1\n1 - 1 = 0\nAnswer:"], max_new_tokens=16, progress=False)[0]
    assert g.finish_reason in ("eos", "answer_line") and g.new_tokens <= 4, g
    with pytest.raises(ValueError):
        smol_vllm(smol, texts[:1], max_new_tokens=4, batch_context=lambda idx: None)
