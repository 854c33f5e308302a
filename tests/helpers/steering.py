"""The planted steering model and synthetic run / directions files for the steering tests (see
tests/test_steering.py's docstring for the planted model)."""
from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import torch

PLANT = 63  # the planted steering dimension
CHAIN = ["Ċ", "Answer", ":", "Ġ"]  # "\nAnswer: " then a digit


def planted_lm(tokenizer):
    """Identity blocks + transition-table unembedding; see tests/test_steering.py's docstring."""
    from transformers import LlamaConfig, LlamaForCausalLM

    from loadbearing.engine.models import wrap_model

    torch.manual_seed(0)
    d = 64
    cfg = LlamaConfig(vocab_size=len(tokenizer), hidden_size=d, intermediate_size=2 * d, num_hidden_layers=2,
                      num_attention_heads=4, num_key_value_heads=2, max_position_embeddings=512,
                      tie_word_embeddings=False, bos_token_id=tokenizer.bos_token_id,
                      eos_token_id=tokenizer.eos_token_id, pad_token_id=tokenizer.pad_token_id)
    model = LlamaForCausalLM(cfg).eval()
    ids = {t: tokenizer.convert_tokens_to_ids(t) for t in CHAIN + ["3", "7"]}
    slot = {t: i for i, t in enumerate(CHAIN + ["3", "7"])}
    with torch.no_grad():
        for layer in model.model.layers:
            layer.self_attn.o_proj.weight.zero_()
            layer.mlp.down_proj.weight.zero_()
        E = model.model.embed_tokens.weight
        E.zero_()
        for t, j in slot.items():
            E[ids[t], j] = 1.0
        W = model.lm_head.weight
        W.zero_()
        nxt = {"Ċ": "Answer", "Answer": ":", ":": "Ġ", "3": "Ċ", "7": "Ċ"}
        for cur, n in nxt.items():
            W[ids[n], slot[cur]] = 30.0
        W[ids["3"], slot["Ġ"]] = 10.0  # default answer 3
        W[ids["7"], slot["Ġ"]] = 6.0
        W[ids["7"], PLANT] = 10.0  # the planted direction pushes 7
    return wrap_model(model, tokenizer, name="planted")


def write_dirs(path: Path, bases: dict, resid_norm=1.0, attrs=None):
    import h5py

    path.mkdir(parents=True, exist_ok=True)
    with h5py.File(path / "directions.h5", "w") as h:
        h.attrs["kind"] = "probe_directions"
        for k, v in (attrs or {}).items():
            h.attrs[k] = v
        h.attrs["layers"] = np.array(sorted(bases), dtype=np.int64)
        for L, b in bases.items():
            g = h.create_group(f"layer_{L}")
            g.create_dataset("basis", data=np.asarray(b, dtype=np.float32))
            g.attrs["resid_norm"] = resid_norm
    return path


def unit(i, d=64):
    v = np.zeros(d, dtype=np.float32)
    v[i] = 1.0
    return v


def make_steering_run(tmp: Path, tok, n_c=10, n_non=3, gold_c="7", status="ok", model="planted", per_q=1, dup=0):
    """A run dir whose C cases want 7 (the model says 3) and non-C cases want 3; ``per_q`` cases per question,
    ``dup`` extra C records that repeat an earlier C case's input under another id."""
    from loadbearing.records import Baseline, Continuation

    run = tmp / "run"
    run.mkdir()
    conts, bases = [], {}
    for i in range(n_c + n_non + dup):
        j = i if i < n_c + n_non else i - (n_c + n_non)  # duplicates repeat case j's input
        qid = f"q{j // per_q}"
        label = "C" if i < n_c or i >= n_c + n_non else "non-C"
        prompt = tok.apply_chat_template([{"role": "user", "content": f"Question {j}: what is it?"}],
                                         tokenize=False, add_generation_prompt=True)
        pos = "early" if i % 2 else "late"
        bases[qid] = Baseline(question_id=qid, dataset="arith", task=None, difficulty=None,
                              question=f"Question {qid}: what is it?", prompt=prompt, prompt_tokens=10,
                              trace="Start = 4\nAnswer: 3", lines=("Start = 4",), answer_line=1, parsed_answer="3",
                              gold="3", correct=True, eligible=True, reason="eligible", finish_reason="answer_line",
                              new_tokens=5)
        c = Continuation(id=f"{qid}|numeric|{pos}|perturbed|{i}", question_id=qid, dataset="arith", task=None,
                         difficulty=None, strategy="numeric", position=pos, line_index=0, n_lines=3,
                         original_line="Start = 4", edited_line="Start = 4", condition="perturbed",
                         prefix_text="Start = 4\n", input_text=prompt + "Start = 4\n", input_tokens=10, edit_span=(0, 1),
                         continuation="Answer: 3", new_tokens=3, finish_reason="answer_line", parsed_answer="3",
                         gold=gold_c if label == "C" else "3", correct=label != "C", label=label)
        conts.append(c.to_dict())
        conts.append(dict(conts[-1], id=conts[-1]["id"].replace("perturbed", "control"), condition="control",
                          label="non-C", gold="3", correct=True))
    with open(run / "continuations.jsonl", "w") as f:
        for r in conts:
            f.write(json.dumps(r) + "\n")
    with open(run / "baselines.jsonl", "w") as f:
        for b in bases.values():
            f.write(json.dumps(b.to_dict()) + "\n")
    (run / "manifest.json").write_text(json.dumps({"model": {"name": model}, "status": status}))
    return run


def sweep_config(run, dirs, **kw):
    from steering.sweep.cli import SweepConfig

    base = dict(run_dir=str(run), directions=str(dirs), progress=False, max_new_tokens=6)
    base.update(kw)
    return SweepConfig(**base)


def cli_case(tmp_path, tokenizer, case):
    """Set up one bad CLI input; returns (argv, paths whose bytes must not change)."""
    run = make_steering_run(tmp_path, tokenizer, n_c=2, n_non=0, status="running" if case == "incomplete" else "ok")
    dirs = write_dirs(tmp_path / "probes", {2: np.stack([unit(PLANT)])})
    argv = [str(run), "--directions", str(dirs), "--layers", "2", "--k", "1", "--quiet"]
    extra = {"alphas_nan": ["--alphas", "nan"], "alphas_inf": ["--alphas", "1,inf"], "alphas_empty": ["--alphas", ","],
             "alphas_word": ["--alphas", "big"], "max_cases_0": ["--max-cases", "0"], "max_cases_neg": ["--max-cases", "-1"],
             "batch_0": ["--batch-size", "0"], "tokens_0": ["--max-new-tokens", "0"], "per_q_0": ["--per-question", "0"],
             "sesoi_nan": ["--sesoi", "nan"], "other_model": ["--model", "some-other-model"],
             "controls_bad": ["--controls", "random,banana"], "seeds_0": ["--random-seeds", "0"],
             "exclude_missing": ["--exclude-questions", str(tmp_path / "nope.txt")]}.get(case, [])
    if case == "nan_bases":
        write_dirs(dirs, {2: np.full((2, 64), np.nan, dtype=np.float32)})
    elif case == "missing_dirs":
        (dirs / "directions.h5").unlink()
    elif case == "truncated_dirs":
        data = (dirs / "directions.h5").read_bytes()
        (dirs / "directions.h5").write_bytes(data[: len(data) // 3])
    elif case == "no_run":
        argv[0] = str(tmp_path / "not-a-run")
    elif case == "foreign_store":
        write_dirs(dirs, {2: np.stack([unit(PLANT)])},
                    attrs={"store": json.dumps({"attrs": {"model": {"weights_hash": "b" * 64}}})})
        m = json.loads((run / "manifest.json").read_text())
        m["model"]["weights_hash"] = "a" * 64
        (run / "manifest.json").write_text(json.dumps(m))
    inputs = [p for p in list(run.iterdir()) + list(dirs.iterdir()) if p.is_file()]
    return argv + extra, run, inputs
