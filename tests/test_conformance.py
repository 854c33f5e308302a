"""The conformance matrix: every architecture family as a tiny random model (``AutoConfig.for_model`` +
``from_config``, saved with the embedded model's tokenizer and chat template, loaded by ``load_model(DIR)``),
every toolkit path against transformers' own computation (:mod:`study.conformance`), on inputs longer than
the windowed families' sliding window (24 tokens).

Also: the Gemma-2/3 prefix-sharing bug reproduced (the check fails when sharing ignores the window), sharing
kept where the window is longer than the batch, the manifest's record of both, and bfloat16 / bitsandbytes
(reported, not asserted equal)."""
from __future__ import annotations

import pytest

from loadbearing.engine import batching
from loadbearing.engine.families import FAMILIES, WINDOW, build_family, save_family
from loadbearing.engine.generation import encode
from loadbearing.engine.models import load_model, wrap_model
from study.conformance.matrix import PATHS, chat_inputs, run_checks


@pytest.fixture(scope="module")
def family_dir(tmp_path_factory, tokenizer):
    made: dict[str, str] = {}

    def get(name: str) -> str:
        if name not in made:
            made[name] = str(save_family(name, tokenizer, tmp_path_factory.mktemp(name) / "model"))
        return made[name]

    return get


@pytest.mark.parametrize("family", list(FAMILIES))
def test_every_path_matches_transformers_on_every_family(family, family_dir, tokenizer):
    lm = load_model(family_dir(family))
    texts = chat_inputs(tokenizer, 4)
    if FAMILIES[family].windowed:  # every input is longer than the window
        assert min(len(encode(tokenizer, t)) for t in texts) > WINDOW
    results = run_checks(lm, texts)
    assert [r.path for r in results] == list(PATHS)
    bad = [r.line() for r in results if r.status == "fail"]
    assert not bad, f"{family}:\n" + "\n".join(bad)
    assert all(r.detail for r in results if r.status == "n.a."), "an n.a. path must say why"


def test_the_check_catches_prefix_sharing_that_ignores_the_window(tokenizer, monkeypatch):
    """The bug of the issue: Gemma-2 records differed from greedy from the first token when the shared
    prefill ran across the sliding window."""
    lm = wrap_model(build_family("gemma2", tokenizer), tokenizer)
    texts = chat_inputs(tokenizer, 4)
    assert run_checks(lm, texts, only=["fast"])[0].status == "pass"
    monkeypatch.setattr(batching, "sharing_fits", lambda *a: True)
    r = run_checks(lm, texts, only=["fast"])[0]
    assert r.status == "fail" and r.detail.startswith("row "), r.line()


def test_sharing_stays_on_where_the_window_is_longer_than_the_batch(tokenizer):
    from loadbearing.engine.generation import generate

    model = build_family("mistral", tokenizer)
    model.config.sliding_window = 4096
    lm = wrap_model(model, tokenizer)
    texts = chat_inputs(tokenizer, 4)
    kinds: list[str] = []
    generate(lm, texts, max_new_tokens=8, batch_size=4, progress=False, on_pass=lambda p: kinds.append(p.kind))
    assert "shared" in kinds
    assert run_checks(lm, texts, only=["fast"])[0].status == "pass"
    assert batching.sharing_fits(4096, 100, 8) and not batching.sharing_fits(24, 10, 20)
    assert not batching.sharing_fits(4096, 100, None) and batching.sharing_fits(None, 10**6, None)


def test_the_manifest_records_prefix_sharing_and_attention(family_dir):
    gemma = load_model(family_dir("gemma2")).provenance()
    assert gemma["sliding_window"] == WINDOW and gemma["prefix_sharing"].startswith("off for batches")
    assert gemma["attn_implementation"] == "eager"  # sdpa would drop Gemma-2's attention soft-capping
    llama = load_model(family_dir("llama")).provenance()
    assert llama["sliding_window"] is None and llama["prefix_sharing"] == "on"
    assert batching.sliding_window(load_model(family_dir("qwen3")).model) is None  # use_sliding_window=False


def _agreement(a, b) -> float:
    return sum(x.text == y.text for x, y in zip(a, b)) / len(a)


def test_bfloat16_runs_every_path_and_reports_its_difference(family_dir, tokenizer, record_property, capsys):
    """bfloat16 on CPU: every path runs; its difference from float32 is reported, not asserted equal."""
    import torch

    from loadbearing.engine.generation import generate

    texts = chat_inputs(tokenizer, 4)
    for family in ("gemma2",):
        f32 = load_model(family_dir(family))
        b16 = load_model(family_dir(family), dtype="bfloat16")
        assert b16.dtype == "bfloat16"
        results = run_checks(b16, texts)
        crashed = [r.line() for r in results if r.status == "fail" and r.detail.startswith("raised")]
        assert not crashed, "\n".join(crashed)  # a path that raises is a failure; a different token is reported
        ids = torch.tensor([encode(tokenizer, texts[0])])
        with torch.inference_mode():
            h32 = f32.model(ids, output_hidden_states=True).hidden_states
            h16 = b16.model(ids, output_hidden_states=True).hidden_states
        diff = max(float((a.float() - b.float()).abs().max() / a.float().abs().max()) for a, b in zip(h32, h16))
        agree = _agreement(generate(b16, texts, max_new_tokens=16, progress=False),
                           generate(f32, texts, max_new_tokens=16, progress=False))
        line = (f"{family} bfloat16: max relative hidden-state difference {diff:.3g}, greedy agreement with "
                f"float32 {agree:.0%}; paths: " + ", ".join(f"{r.path} {r.status}" for r in results))
        record_property(f"{family}_bfloat16", line)
        with capsys.disabled():
            print("\n" + line)
        assert 0 < diff < 0.5


@pytest.mark.parametrize("quantize", ["8bit", "4bit"])
def test_bitsandbytes_on_cpu(quantize, tmp_path_factory, tokenizer, capsys):
    """bitsandbytes on this machine's CPU: load, generate through the fast and simple paths, report agreement
    with float32; a skip says why where bitsandbytes cannot run here. d_model 64: bitsandbytes' CPU 4-bit
    kernel packs blocks of 64 input features, so the matrix's d_model 32 cannot be quantised to 4 bits."""
    from loadbearing.engine.generation import generate, generate_simple
    from loadbearing.engine.models import ModelError

    path = str(save_family("llama", tokenizer, tmp_path_factory.mktemp("bnb") / "llama64", hidden=64))
    try:
        q = load_model(path, quantize=quantize)
    except (ModelError, ImportError, RuntimeError, ValueError) as e:
        pytest.skip(f"bitsandbytes {quantize} does not load on this CPU: {str(e).splitlines()[0][:200]}")
    texts = chat_inputs(tokenizer, 4)
    fast = generate(q, texts, max_new_tokens=12, progress=False)
    simple = generate_simple(q, texts, max_new_tokens=12, progress=False, batch_size=1)
    f32 = generate(load_model(path), texts, max_new_tokens=12, progress=False)
    assert all(g.new_tokens > 0 for g in fast)
    with capsys.disabled():
        print(f"\nllama {quantize}: fast == one-at-a-time simple on {_agreement(fast, simple):.0%} of rows, "
              f"greedy agreement with float32 {_agreement(fast, f32):.0%}")


def test_selfcheck_passes_on_a_tiny_saved_model_and_fails_on_a_planted_fault(family_dir, capsys, monkeypatch):
    import re

    from study.conformance.selfcheck import main

    rc = main(["--model", family_dir("gemma2"), "--prompts", "4", "--max-new-tokens", "8"])
    out = capsys.readouterr().out
    assert rc == 0, out
    for path in PATHS:
        assert re.search(rf"^{re.escape(path)}\s+pass\b", out, re.M), f"{path} line missing:\n{out}"
    assert "prefix sharing off for batches" in out.splitlines()[0]
    monkeypatch.setattr(batching, "sharing_fits", lambda *a: True)  # the bug, planted back
    rc = main(["--model", family_dir("gemma2"), "--prompts", "4", "--max-new-tokens", "8", "--only", "fast,simple"])
    out = capsys.readouterr().out
    assert rc == 1
    assert re.search(r"^fast\s+fail: row \d+: got ", out, re.M) and re.search(r"^simple\s+pass", out, re.M), out
    assert "failing: fast" in out.splitlines()[-1]


def test_selfcheck_bad_input_is_one_error_line(tmp_path, capsys):
    from study.conformance.selfcheck import main

    assert main(["--model", str(tmp_path / "missing")]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and err[0].startswith("error: model path") and "does not exist" in err[0]
    assert main(["--only", "fast,warp"]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and err[0].startswith("error: --only names unknown paths warp")


def test_the_support_matrix_in_docs_covers_every_family_and_path():
    from pathlib import Path

    text = (Path(__file__).resolve().parents[1] / "docs" / "support-matrix.md").read_text(encoding="utf-8")
    header = next(line for line in text.splitlines() if line.startswith("| family |"))
    assert [c.strip() for c in header.strip("|").split("|")][2:] == list(PATHS)
    for name, fam in FAMILIES.items():
        assert f"| {name} (`{fam.model_type}`) |" in text, f"{name} missing from docs/support-matrix.md"
    assert "make support-matrix" in text


@pytest.mark.integration
def test_selfcheck_on_the_embedded_model(capsys):
    from study.conformance.selfcheck import main

    rc = main(["--prompts", "3", "--batch-size", "2", "--max-new-tokens", "6"])
    out = capsys.readouterr().out
    assert rc == 0, out
    assert out.splitlines()[0].startswith("model smollm2-135m-instruct on cpu, float32")
    assert f"{len(PATHS)}/{len(PATHS)} paths pass" in out.splitlines()[-1]
