"""A synthetic run directory for tests and benchmarks: hand-built continuation records (perturbed and control)
whose ``input_text`` is a real chat-templated prompt plus an assistant prefix, exactly as
``behavioural.run`` writes them, without generating anything.

    from activations.synthetic import make_run
    run_dir, records = make_run(tmp_path / "run", tokenizer, n_questions=5, weights_hash=lm.weights_hash)
"""
from __future__ import annotations

import json
from pathlib import Path

from loadbearing.records import Continuation
from loadbearing.runs import CONTINUATIONS, MANIFEST

HASH = "tiny-weights-hash"


def _input_text(tokenizer, question: str, prefix: str) -> str:
    msgs = [{"role": "system", "content": "Write one calculation per line. End with a line 'Answer: N'"},
            {"role": "user", "content": question}]
    return tokenizer.apply_chat_template(msgs, tokenize=False, add_generation_prompt=True) + prefix


def make_run(root: Path, tokenizer, *, n_questions: int = 5, pad_lines: int = 0, weights_hash: str | None = HASH,
             name: str = "tiny-llama"):
    """Write ``root/continuations.jsonl`` (2 records per question: perturbed and control, varied lengths;
    every fifth question unscored) and a ``manifest.json`` naming the model and its weights hash."""
    root = Path(root)
    root.mkdir(parents=True, exist_ok=True)
    recs = []
    for q in range(n_questions):
        lines = [f"We start with {q + 1}."] + [f"{q + k} + {k} = {q + 2 * k}" for k in range(1, 2 + q % 3)]
        li = len(lines) - 1
        for cond, edited in (("perturbed", f"{q + li} + {li} = {2 * (q + 2 * li) + 3}"), ("control", lines[li])):
            prefix = "\n".join(lines[:li] + [edited]) + "\n"
            filler = "".join(f" Then add 0 (step {j})." for j in range(pad_lines))  # longer prompts for benchmarks
            text = _input_text(tokenizer, f"Start with {q + 1}. Add 1.{filler} What is the result?", prefix)
            start = text.rindex(edited)
            correct = None if q % 5 == 4 else (cond == "control" or q % 2 == 0)
            label = None if correct is None else ("non-C" if correct else "C")
            recs.append(Continuation(
                id=f"q{q}|arithmetic|late|{cond}", question_id=f"q{q}", dataset="arith", task="s2_o5",
                difficulty="easy", strategy="arithmetic", position="late", line_index=li, n_lines=len(lines),
                original_line=lines[li], edited_line=edited, condition=cond, prefix_text=prefix, input_text=text,
                input_tokens=len(tokenizer(text, add_special_tokens=False)["input_ids"]),
                edit_span=(start, start + len(edited)), continuation=f"{q} + 1 = {q + 1}\nAnswer: {q + 1}",
                new_tokens=9, finish_reason="answer_line", parsed_answer=str(q + 1), gold=str(q + 1),
                correct=correct, label=label).to_dict())
    with open(root / CONTINUATIONS, "w") as f:
        for r in recs:
            f.write(json.dumps(r) + "\n")
    (root / MANIFEST).write_text(json.dumps({"kind": "behavioural.run", "status": "ok", "model": {
        "name": name, "revision": None, "quantize": None, "weights_hash": weights_hash}}))
    return root, recs


__all__ = ["make_run"]
