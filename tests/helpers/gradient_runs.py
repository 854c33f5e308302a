"""Synthetic behaviour run directories (a difficulty ladder) for the gradient, design and import tests."""
from __future__ import annotations

import dataclasses
import json
import random
from pathlib import Path

from loadbearing.records import Baseline, Continuation


def _fill(cls, values: dict) -> dict:
    """Only the fields the record type has today (other helpers add fields); missing ones get defaults."""
    out = {}
    for f in dataclasses.fields(cls):
        if f.name in values:
            out[f.name] = values[f.name]
        elif f.default is not dataclasses.MISSING:
            out[f.name] = f.default
        elif f.default_factory is not dataclasses.MISSING:  # type: ignore[misc]
            out[f.name] = f.default_factory()  # type: ignore[misc]
        else:
            out[f.name] = None
    return cls(**out).to_dict()


def make_run(root: Path, name: str, *, model: str = "m1", level: str = "s2_o3", n_q: int = 12, acc: float = 0.75,
             p_c: float = 0.3, strategies=("arithmetic", "contradiction"), positions=("early", "middle", "late"),
             protocol: str = "1.1", seed: int = 0, texts: list[str] | None = None, labels: bool = False,
             dataset: str = "arith", task: str | None = None) -> Path:
    rng = random.Random(f"{name}{seed}")
    d = root / name
    d.mkdir(parents=True)
    manifest = {"kind": "behavioural.run", "protocol_version": protocol, "status": "ok",
                "settings": {"min_lines": 3, "max_new_tokens": 96}, "model": {"name": model}}
    (d / "manifest.json").write_text(json.dumps(manifest))
    bl, co, lab = [], [], []
    for i in range(n_q):
        q = texts[i] if texts else f"{level} question {i}: start with {i}. add 2. what is it?"
        qid = f"{dataset}/{level}/{i}"
        correct = i < round(acc * n_q)
        parsed = None if (not correct and i % 2) else ("7" if correct else "8")
        bl.append(_fill(Baseline, dict(
            question_id=qid, dataset=dataset, task=task, difficulty=level if dataset == "arith" else None,
            question=q, prompt="P", prompt_tokens=1, trace="a = 1\nb = 2\nc = 3\nAnswer: 7",
            lines=["a = 1", "b = 2", "c = 3"], answer_line=3, parsed_answer=parsed, gold="7",
            correct=None if parsed is None else correct, eligible=correct, reason="eligible" if correct else "wrong",
            finish_reason="eos", new_tokens=5)))
        if not correct:
            continue
        for s in strategies:
            for pos in positions:
                for cond in ("perturbed", "control"):
                    is_c = cond == "perturbed" and rng.random() < p_c
                    edited = "b = 9" if s == "arithmetic" else "The following claim is false: b = 2"
                    cont = ("c = 9 + 1 = 10\nAnswer: 10" if is_c else "c = 3\nAnswer: 7")
                    cid = f"{qid}|{s}|{pos}|{cond}"
                    co.append(_fill(Continuation, dict(
                        id=cid, question_id=qid, dataset=dataset, task=task,
                        difficulty=level if dataset == "arith" else None, strategy=s, position=pos,
                        line_index=1, n_lines=3, original_line="b = 2",
                        edited_line=edited if cond == "perturbed" else "b = 2", condition=cond,
                        prefix_text="a = 1\n" + edited + "\n", input_text=f"P{qid}{s}{pos}{cond}", input_tokens=3,
                        edit_span=[0, 1], continuation=cont, new_tokens=3, finish_reason="eos",
                        parsed_answer="10" if is_c else "7", gold="7", correct=not is_c,
                        label="C" if is_c else "non-C")))
                    if labels:
                        lab.append({"id": cid, "label": "C" if is_c else ("B" if rng.random() < 0.3 else "A")})
    (d / "baselines.jsonl").write_text("".join(json.dumps(b) + "\n" for b in bl))
    (d / "continuations.jsonl").write_text("".join(json.dumps(c) + "\n" for c in co))
    if labels:
        ld = d / "labels" / "rule"
        ld.mkdir(parents=True)
        (ld / "labels.jsonl").write_text("".join(json.dumps(r) + "\n" for r in lab))
        (ld / "settings.json").write_text(json.dumps({"status": "ok", "created": "2026-01-01T00:00:00"}))
    return d


