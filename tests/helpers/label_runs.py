"""A fake run directory for the labelling stage's tests (tests/test_label*.py): seven perturbed continuations (one
per A/B/C case, one unparseable) and two controls of the arith question "Start with 4. Add 1. Add 5."."""
from __future__ import annotations

import json
from pathlib import Path

from loadbearing.records import Baseline, Continuation

Q = "Start with 4. Add 1. Add 5. What is the result?"
PROMPT = f"<|im_start|>user\n{Q}<|im_end|>\n<|im_start|>assistant\n"
ORIG, EDIT = "4 + 1 = 5", "4 + 1 = 13"


def make_cont(i: int, text: str, correct: bool | None, *, condition: str = "perturbed", position: str = "middle",
              strategy: str = "arithmetic_change", original: str = ORIG, edited: str = EDIT,
              question_id: str | None = None) -> dict:
    qid = question_id or f"arith/s2_o5/{i}"
    edited = original if condition == "control" else edited
    prefix = f"We start with 4.\n{edited}\n"
    inp = PROMPT + prefix
    start = inp.index(edited, len(PROMPT))
    parsed = None if correct is None else ("10" if correct else "18")
    c = Continuation(
        id=f"{qid}|{strategy}|{position}|{condition}", question_id=qid, dataset="arith", task="s2_o5", difficulty="s2_o5",
        strategy=strategy, position=position, line_index=1, n_lines=3, original_line=original, edited_line=edited,
        condition=condition, prefix_text=prefix, input_text=inp, input_tokens=len(inp.split()),
        edit_span=(start, start + len(edited)), continuation=text, new_tokens=len(text.split()), finish_reason="eos",
        parsed_answer=parsed, gold="10", correct=correct, label=None if correct is None else ("non-C" if correct else "C"),
    )
    return c.to_dict()


A_TEXT = "5 + 5 = 10\nAnswer: 10"
B_PHRASE = "Wait, that's wrong.\n5 + 5 = 10\nAnswer: 10"
B_RECOMPUTE = "4+1 = 5\n5 + 5 = 10\nAnswer: 10"
B_CONTRA = "The sum is 5, not 13.\n5 + 5 = 10\nAnswer: 10"
C_TEXT = "13 + 5 = 18\nAnswer: 18"
NOANSWER = "13 + 5 = 18"


def fake_run(tmp_path: Path) -> tuple[Path, list[dict]]:
    conts = [
        make_cont(0, A_TEXT, True, position="early"),
        make_cont(1, B_PHRASE, True, position="early"),
        make_cont(2, B_RECOMPUTE, True),
        make_cont(3, B_CONTRA, True, position="late"),
        make_cont(4, C_TEXT, False),
        make_cont(5, C_TEXT, False, position="late"),
        make_cont(6, NOANSWER, None),
        make_cont(0, A_TEXT, True, condition="control", position="early"),
        make_cont(4, A_TEXT, True, condition="control"),
    ]
    rd = tmp_path / "run"
    rd.mkdir()
    with open(rd / "continuations.jsonl", "w") as f:
        for c in conts:
            f.write(json.dumps(c) + "\n")
    with open(rd / "baselines.jsonl", "w") as f:
        for i in range(7):
            b = Baseline(question_id=f"arith/s2_o5/{i}", dataset="arith", task="s2_o5", difficulty="s2_o5", question=Q,
                         prompt=PROMPT, prompt_tokens=10, trace="We start with 4.\n4 + 1 = 5\n5 + 5 = 10\nAnswer: 10",
                         lines=("We start with 4.", "4 + 1 = 5", "5 + 5 = 10"), answer_line=3, parsed_answer="10",
                         gold="10", correct=True, eligible=True, reason="eligible", finish_reason="eos", new_tokens=12)
            f.write(json.dumps(b.to_dict()) + "\n")
    (rd / "manifest.json").write_text(json.dumps({"kind": "behavioural.run", "status": "ok",
                                                  "model": {"name": "smollm2-135m-instruct"}}))
    return rd, conts
