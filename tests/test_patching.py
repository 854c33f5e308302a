"""Activation patching (steering.patching.cli) on tiny in-process models; one integration test on the embedded model.

Sanity, float32: patching every position at any layer reproduces the clean run's logits (atol 1e-5), patching
nothing leaves the edited run's logits bit-for-bit; in a model without attention (MLP-only blocks: a position's
residual depends on that position alone), patching positions the scored ones cannot see changes nothing.
"""
from __future__ import annotations

import io
import json
import subprocess
import sys
from pathlib import Path
from types import SimpleNamespace

import numpy as np
import pytest
import torch
from helpers.tiny import make_tiny_lm

from loadbearing.cli import run_cli
from steering.errors import PatchingError
from steering.patching.align import Alignment, align_texts, align_tokens, answer_tokens
from steering.patching.cli import PatchConfig, main, run_patching
from steering.patching.engine import Patch, forward_logits, patched, record, score_rows

ATOL = 1e-5  # float32 tolerance for "the same logits" (the patched run recomputes the same sums)


@pytest.fixture(autouse=True, scope="module")
def _one_thread():
    n = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(n)


@pytest.fixture(scope="module")
def lm3(tokenizer):
    return make_tiny_lm(tokenizer, layers=3, hidden=64, seed=3)


# ------------------------------------------------------------------------------------------------ alignment


def test_alignment_of_mismatched_line_lengths_is_the_documented_rule():
    # before: 2 tokens; edited line: 3 tokens vs clean 2; after: the newline (1 token)
    e_ids, e_off = [1, 2, 7, 8, 9, 10], [(0, 1), (1, 2), (2, 3), (3, 4), (4, 5), (5, 6)]
    c_ids, c_off = [1, 2, 7, 11, 10], [(0, 1), (1, 2), (2, 3), (3, 4), (4, 5)]
    al = align_tokens(e_ids, e_off, (2, 5), c_ids, c_off, (2, 4))
    assert (al.n_before, al.n_line_edited, al.n_line_clean, al.n_after) == (2, 3, 2, 1)
    assert al.rule == "shorter-from-start" and al.n_line_patched == 2
    assert al.pairs() == [(0, 0), (1, 1), (2, 2), (3, 3), (5, 4)]  # line from its start; suffix right-aligned
    assert al.groups() == {"edit": [2, 3], "before": [0, 1], "last": [5], "all": [0, 1, 2, 3, 5]}
    same = align_tokens(e_ids, e_off, (2, 5), e_ids, e_off, (2, 5))
    assert same.rule == "equal-length" and same.pairs() == [(i, i) for i in range(6)]
    d = al.to_dict()
    assert d["rule"] == "shorter-from-start" and d["n_line_edited"] == 3 and d["n_line_clean"] == 2
    with pytest.raises(PatchingError, match="differ before"):
        align_tokens([5, 2, 7, 8, 9, 10], e_off, (2, 5), c_ids, c_off, (2, 4))


def test_alignment_on_real_tokens_and_answer_tokens(tokenizer):
    head = "<|im_start|>assistant\nWe start with 3.\n"
    e_text, c_text = head + "3 + 4 = 17\n", head + "3 + 4 = 7\n"
    s = len(head)
    e_ids, c_ids, al = align_texts(tokenizer, e_text, (s, len(e_text) - 1), c_text, (s, len(c_text) - 1))
    assert isinstance(al, Alignment) and al.n_line_edited == al.n_line_clean + 1 and al.rule == "shorter-from-start"
    assert e_ids[:al.n_before] == c_ids[:al.n_before] and e_ids[-1] == c_ids[-1]  # the newline, right-aligned
    assert tokenizer.convert_ids_to_tokens(e_ids[al.n_edited - 1]) == "Ċ"
    assert e_ids == tokenizer(e_text, add_special_tokens=False)["input_ids"]  # tokenised once, no second BOS
    h, a = answer_tokens(tokenizer, "12")
    assert tokenizer.convert_ids_to_tokens(h) == ["Answer", ":"] and tokenizer.convert_ids_to_tokens(a) == ["Ġ", "1", "2"]
    with pytest.raises(PatchingError, match="outside the edited line"):
        align_texts(tokenizer, e_text, (s, len(e_text) - 1), "x" + c_text, (s + 1, len(c_text)))


# ------------------------------------------------------------------------------------------------ sanity


def test_patching_every_position_restores_clean_logits_and_none_changes_nothing(tokenizer, lm3):
    model = lm3.model
    head = "<|im_start|>user\nStart with 4. Add 3.<|im_end|>\n<|im_start|>assistant\nWe start with 4.\n"
    e_ids = tokenizer(head + "4 + 3 = 8\nAnswer: 8", add_special_tokens=False)["input_ids"]
    c_ids = tokenizer(head + "4 + 3 = 7\nAnswer: 8", add_special_tokens=False)["input_ids"]
    assert len(e_ids) == len(c_ids) and e_ids != c_ids
    n_hidden = len(model.model.layers)
    everywhere = list(range(len(c_ids)))
    with record(model, range(n_hidden + 1), everywhere) as rec:
        clean = forward_logits(model, [c_ids], 0)
    edited = forward_logits(model, [e_ids], 0)
    assert not torch.allclose(clean, edited, atol=1e-3)
    for layer in range(n_hidden + 1):
        with patched(model, [Patch(layer, everywhere, rec.values[layer])]):
            got = forward_logits(model, [e_ids], 0)
        torch.testing.assert_close(got, clean, atol=ATOL, rtol=0)
    with patched(model, [Patch(1, [], rec.values[1][:0]), None]):
        none = forward_logits(model, [e_ids, e_ids], 0)
    assert torch.equal(none[0], edited[0]) and torch.equal(none[1], edited[0])
    assert not model._forward_hooks and all(not m._forward_hooks for m in model.modules())  # hooks removed


class _MLPBlock(torch.nn.Module):
    def __init__(self, d: int):
        super().__init__()
        self.fc = torch.nn.Sequential(torch.nn.Linear(d, 2 * d), torch.nn.GELU(), torch.nn.Linear(2 * d, d))

    def forward(self, h):
        return h + self.fc(h)


class MLPOnlyLM(torch.nn.Module):
    """A causal LM without attention: each position's residual depends only on its own token."""

    def __init__(self, vocab: int = 40, d: int = 16, n: int = 3):
        super().__init__()
        torch.manual_seed(0)
        self.embed = torch.nn.Embedding(vocab, d)
        self.layers = torch.nn.ModuleList([_MLPBlock(d) for _ in range(n)])
        self.head = torch.nn.Linear(d, vocab)

    def get_input_embeddings(self):
        return self.embed

    def forward(self, input_ids, use_cache=False, logits_to_keep=0):
        h = self.embed(input_ids)
        for b in self.layers:
            h = b(h)
        return SimpleNamespace(logits=self.head(h[:, -logits_to_keep:] if logits_to_keep else h))


def test_patching_positions_the_answer_cannot_see_changes_nothing():
    model = MLPOnlyLM().eval()
    prefix, answers = [1, 5, 9, 3, 7, 2, 4], [[11, 12], [13]]
    offset = len(prefix) - 1  # the prefix's last token predicts the answer's first
    rows = [prefix + a for a in answers]
    base = score_rows(model, rows, answers, offset)
    g = torch.Generator().manual_seed(1)
    for layer in range(4):
        hidden = [0, 2, 3, 5]  # positions before the scored ones: invisible without attention
        v = torch.randn(len(hidden), 16, generator=g) * 10
        got = score_rows(model, rows, answers, offset, patches=[Patch(layer, hidden, v)] * 2)
        assert np.array_equal(got, base)
        seen = score_rows(model, rows, answers, offset, patches=[Patch(layer, [offset], v[:1])] * 2)
        assert not np.allclose(seen, base)  # the scored position itself does move the answer


# ------------------------------------------------------------------------------------------------ run-level


def _make_run(tmp: Path, tok, *, n_q=3, controls=True, c_label="C", status="ok") -> Path:
    from loadbearing.records import Baseline, Continuation

    run = tmp / "run"
    run.mkdir(parents=True)
    bases, conts = [], []
    for i in range(n_q):
        qid, start, add = f"arith/t/{i}", 3 + i, 4
        q = f"Start with {start}. Add {add}. Add 1. What is the result?"
        prompt = tok.apply_chat_template([{"role": "user", "content": q}], tokenize=False, add_generation_prompt=True)
        lines = (f"We start with {start}.", f"{start} + {add} = {start + add}", f"{start + add} + 1 = {start + add + 1}")
        gold = str(start + add + 1)
        bases.append(Baseline(question_id=qid, dataset="arith", task="t", difficulty="t", question=q, prompt=prompt,
                              prompt_tokens=20, trace="\n".join(lines) + f"\nAnswer: {gold}", lines=lines, answer_line=3,
                              parsed_answer=gold, gold=gold, correct=True, eligible=True, reason="eligible",
                              finish_reason="answer_line", new_tokens=20))
        edited = f"{start} + {add} = {2 * (start + add) + 3}" if i % 2 else f"{start} + {add} = {start + add + 2}"
        for cond, line, label, ans in (("perturbed", edited, c_label, str(int(gold) + 2)), ("control", lines[1], "non-C", gold)):
            pre = lines[0] + "\n" + line + "\n"
            conts.append(Continuation(id=f"{qid}|arithmetic|middle|{cond}", question_id=qid, dataset="arith", task="t",
                                      difficulty="t", strategy="arithmetic", position="middle", line_index=1, n_lines=3,
                                      original_line=lines[1], edited_line=line, condition=cond, prefix_text=pre,
                                      input_text=prompt + pre, input_tokens=30,
                                      edit_span=(len(prompt) + len(lines[0]) + 1, len(prompt) + len(pre) - 1),
                                      continuation=f"Answer: {ans}", new_tokens=4, finish_reason="answer_line",
                                      parsed_answer=ans, gold=gold, correct=label != "C", label=label))
    with open(run / "baselines.jsonl", "w") as f:
        f.writelines(json.dumps(b.to_dict()) + "\n" for b in bases)
    with open(run / "continuations.jsonl", "w") as f:
        f.writelines(json.dumps(c.to_dict()) + "\n" for c in conts if controls or c.condition != "control")
    (run / "manifest.json").write_text(json.dumps({"model": {"name": "tiny"}, "status": status}))
    return run


def test_run_patching_writes_json_heatmap_and_markdown(tmp_path, tokenizer, lm3):
    run = _make_run(tmp_path, tokenizer)
    cfg = PatchConfig(run_dir=str(run), layers="0,1,3", max_cases=3, flip=True, flip_tokens=4, n_boot=200,
                      progress=False, command="python -m steering.patching run")
    obj = run_patching(cfg, lm3, echo=lambda s: None)
    out = run / "patching"
    assert {p.name for p in out.iterdir()} == {"patching.json", "patching.png", "patching.md"}
    saved = json.loads((out / "patching.json").read_text())
    assert saved["engine"] == "hf-hooks" and saved["schema_version"] == 1 and saved["settings"]["layers"] == [0, 1, 3]
    assert len(saved["cases"]) == 3 == saved["summary"]["n_questions"]  # one case per question
    case = saved["cases"][0]
    assert case["alignment"]["rule"] in ("equal-length", "shorter-from-start") and "n_line_edited" in case["alignment"]
    assert len([r for r in case["results"] if r["kind"] == "sweep"]) == 3 * 4
    assert {r["kind"] for r in case["results"]} == {"sweep", "random-position", "random-layer"}
    assert len(case["flips"]) == 1 + 3 * 4
    for c in saved["cases"]:
        if c["alignment"]["rule"] == "equal-length":  # layer 0, every prefix position = the clean run
            assert c["check_layer0_all_abs_diff"] < 1e-4
            r0 = next(r for r in c["results"] if r["kind"] == "sweep" and r["layer"] == 0 and r["group"] == "all")
            assert c["excluded"] or abs(r0["restored"] - 1) < 1e-3
    cells = saved["summary"]["cells"]
    assert len(cells) == 12 and all(set(c) >= {"layer", "group", "mean", "ci", "n_questions"} for c in cells)
    assert len(saved["summary"]["flips"]) == 12 and all("rate" in f for f in saved["summary"]["flips"])
    md = (out / "patching.md").read_text()
    assert "## Activation patching" in md and "Greedy answer flips" in md and "random-layer control" in md
    assert obj["summary"] == saved["summary"]
    err = io.StringIO()
    assert _cli(cfg, lm3, err) == 2  # exists: refused without --force
    assert err.getvalue().count("\n") == 1 and "--force" in err.getvalue()
    cfg.force, cfg.flip = True, False
    run_patching(cfg, lm3, echo=lambda s: None)
    assert "flips" not in json.loads((out / "patching.json").read_text())["cases"][0]


def _cli(cfg: PatchConfig, lm, err: io.StringIO) -> int:
    def body() -> None:
        run_patching(cfg, lm, echo=lambda s: None)

    return run_cli(body, stderr=err)


def _one_error(capsys, rc, *words):
    err = capsys.readouterr().err
    assert rc == 2 and err.startswith("error: ") and err.count("\n") == 1, err
    for w in words:
        assert w in err, err


def test_bad_input_gives_one_error_line_and_writes_nothing(tmp_path, tokenizer, lm3, capsys):
    _one_error(capsys, main([str(tmp_path / "nope")]), "does not exist")
    no_ctl = _make_run(tmp_path / "a", tokenizer, controls=False)
    _one_error(capsys, main([str(no_ctl), "--quiet"]), "no control continuations")
    no_c = _make_run(tmp_path / "b", tokenizer, c_label="non-C")
    _one_error(capsys, main([str(no_c), "--quiet"]), "no type-C")
    good = _make_run(tmp_path / "c", tokenizer)
    _one_error(capsys, main([str(good), "--layers", "1,x"]), "--layers")
    err = io.StringIO()
    rc = _cli(PatchConfig(str(good), layers="0,99", progress=False), lm3, err)
    assert rc == 2 and err.getvalue().count("\n") == 1 and "out of range" in err.getvalue() and "0..3" in err.getvalue()
    for d in (no_ctl, no_c, good):
        assert not (d / "patching").exists() and not any(p.name.startswith(".patching") for p in d.iterdir())


# ------------------------------------------------------------------------------------------------ integration


@pytest.mark.integration
@pytest.mark.timeout(240)
def test_patching_on_the_embedded_model(tmp_path, smol):
    run = tmp_path / "run"
    cmd = [sys.executable, "-m", "behavioural.run", "--dataset", "arith", "--task", "s2_o5", "--max-examples", "12",
           "--strategy", "arithmetic", "--line-positions", "middle,late", "--max-new-tokens", "64", "--batch-size", "16",
           "--output-dir", str(run), "--quiet"]
    r = subprocess.run(cmd, capture_output=True, text=True, timeout=200)
    assert r.returncode == 0, r.stderr[-2000:]
    cfg = PatchConfig(run_dir=str(run), layers="0,15,30", max_cases=3, n_boot=200, progress=False)
    obj = run_patching(cfg, smol, echo=lambda s: None)
    assert 1 <= len(obj["cases"]) <= 3 and obj["engine"] == "hf-hooks"
    for c in obj["cases"]:
        assert c["ld_clean"] != c["ld_edited"]
        if c["alignment"]["rule"] == "equal-length":
            assert c["check_layer0_all_abs_diff"] < 1e-3
    assert (run / "patching" / "patching.png").is_file()
