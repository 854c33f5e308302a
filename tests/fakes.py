"""A scripted stand-in for a model on the arith ladder, so protocol logic is tested exactly and fast.

Baselines: the correct worked solution (``We start with N.`` then one ``a op b = c`` line per step).
Continuations copy the chain from the last prefix line (so a numerical edit propagates to the answer),
except after a line that opens with "The following claim is false:", where the scripted model notices
and recomputes from the question (so the answer stays correct). Questions that start with 5 get a wrong
baseline, and those that start with 1 get a trace with too few lines, to exercise eligibility.
"""
from __future__ import annotations

import re
import time

from loadbearing.engine.generation import Generation
from loadbearing.engine.models import LoadedModel

_Q = re.compile(r"(?:Start|Begin) with (?:the number )?(\d+)(?: [a-z]+)?\. ((?:(?:Add|Subtract) \d+\. )+)(?:What|How)[^?]*\?")


def _ops(text: str):
    m = list(_Q.finditer(text))[-1]
    start = int(m.group(1))
    ops = [("+" if w == "Add" else "-", int(x)) for w, x in re.findall(r"(Add|Subtract) (\d+)", m.group(2))]
    return start, ops


def _chain(start: int, ops, cur=None, from_step=0) -> list[str]:
    lines = []
    cur = start if cur is None else cur
    for op, x in ops[from_step:]:
        nxt = cur + x if op == "+" else cur - x
        lines.append(f"{cur} {op} {x} = {nxt}")
        cur = nxt
    return lines + [f"Answer: {cur}"]


def scripted_generate(lm, texts, *, max_new_tokens=512, batch_size=8, progress=False, desc="", delay=0.0, **kw):
    out = []
    for t in texts:
        if delay:
            time.sleep(delay)
        start, ops = _ops(t)
        head, _, tail = t.rpartition("<|im_start|>assistant\n")
        if not tail:  # baseline
            lines = [f"We start with {start}."] + _chain(start, ops)
            if start == 5:  # a deliberately wrong baseline
                lines[-1] = "Answer: 999"
            if start == 1:  # too few lines
                lines = lines[-1:]
            text = "\n".join(lines)
        else:
            prefix_lines = tail.rstrip("\n").split("\n")
            last = prefix_lines[-1]
            done_steps = len(prefix_lines) - 1  # the restating line is not a step
            if last.startswith("The following claim is false:"):  # noticed: recompute from the question
                text = "\n".join(_chain(start, ops, cur=_value_after(start, ops, done_steps), from_step=done_steps))
            else:
                m = re.search(r"(-?\d+)\.?$", last)
                text = "\n".join(_chain(start, ops, cur=int(m.group(1)), from_step=done_steps))
        out.append(Generation(text=text, new_tokens=len(lm.tokenizer(text)["input_ids"]), finish_reason="eos"))
    return out


def _value_after(start, ops, steps):
    cur = start
    for op, x in ops[:steps]:
        cur = cur + x if op == "+" else cur - x
    return cur


def fake_lm(tokenizer) -> LoadedModel:
    return LoadedModel(model=None, tokenizer=tokenizer, name="scripted", model_id="scripted", weights_hash="0" * 64)
