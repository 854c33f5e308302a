"""Synthetic finished run directories for the paired comparisons (tests/test_compare.py, test_export_inspect_groups.py)."""
from __future__ import annotations

import json
from pathlib import Path

POSITIONS = ("early", "middle", "late")


def write_run(d: Path, *, n_q: int, propagate, correct=lambda i: True, strategy: str = "arithmetic",
              control_wrong=lambda i, p: False, model: str = "m", dataset: str = "arith", offset: int = 0,
              aoc=None) -> Path:
    """A finished run directory: ``n_q`` questions (ids offset by ``offset``), one perturbed continuation and
    one control per position; ``propagate(i, pos)`` says whether question i's edit at pos propagated."""
    from loadbearing.records import Baseline, Continuation

    d.mkdir(parents=True)
    bases, recs, ea = [], [], []
    for j in range(n_q):
        i = j + offset
        qid, text = f"{dataset}/t/{i}", f"Start with {i}. Add 1. What is the result?"
        b = Baseline(question_id=qid, dataset=dataset, task="t", difficulty=f"L{i % 2}", question=text, prompt="p",
                     prompt_tokens=1, trace="a\nb\nc\nAnswer: 1", lines=("a", "b", "c"), answer_line=3,
                     parsed_answer="1", gold="1", correct=correct(i), eligible=True, reason="eligible",
                     finish_reason="answer_line", new_tokens=4)
        bases.append(b)
        for k, pos in enumerate(POSITIONS):
            for cond, wrong in (("perturbed", propagate(i, pos)), ("control", control_wrong(i, pos))):
                recs.append(Continuation(
                    id=f"{qid}|{strategy}|{pos}|{cond}", question_id=qid, dataset=dataset, task="t",
                    difficulty=f"L{i % 2}", strategy=strategy, position=pos, line_index=k, n_lines=3,
                    original_line="a", edited_line="x" if cond == "perturbed" else "a", condition=cond,
                    prefix_text="x\n", input_text="px\n", input_tokens=2, edit_span=(1, 2), continuation="Answer: 2",
                    new_tokens=2, finish_reason="eos", parsed_answer="2" if wrong else "1", gold="1",
                    correct=not wrong, label="C" if wrong else "non-C", question_key=b.question_key))
        if aoc is not None:  # early answering at k = 0..3; same answer from k = aoc(i) on
            for k in range(4):
                ea.append({"id": f"{qid}|k={k}", "question_id": qid, "question_key": b.question_key, "dataset": dataset,
                           "task": "t", "difficulty": f"L{i % 2}", "n_lines": 3, "steps": "lines", "n_steps": 3,
                           "k": k, "fraction": k / 3, "parsed_answer": "1" if k >= aoc(i) else "9",
                           "baseline_answer": "1"})
    (d / "baselines.jsonl").write_text("".join(json.dumps(b.to_dict()) + "\n" for b in bases))
    (d / "continuations.jsonl").write_text("".join(json.dumps(c.to_dict()) + "\n" for c in recs))
    (d / "manifest.json").write_text(json.dumps({"status": "ok", "model": {"name": model}}))
    if ea:
        (d / "early_answer").mkdir()
        (d / "early_answer" / "records.jsonl").write_text("".join(json.dumps(r) + "\n" for r in ea))
    return d
