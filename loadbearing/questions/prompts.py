"""Prompt construction and trace splitting.

* :func:`build_prompt` - the chat-templated baseline prompt text (system format instruction, optional
  few-shot turns, the question, the generation prompt). Models whose template rejects a system role
  (Gemma) get the instruction folded into the first user turn.
* :func:`split_trace` - the visible reasoning lines of a trace with their character spans (the answer
  line and blank lines excluded; ``<think>``/``</think>`` tag lines dropped but the thinking text kept).
* :func:`assistant_prefix` - the trace cut right after line ``i``, with that line optionally replaced:
  the exact assistant prefix a forced continuation starts from.
"""
from __future__ import annotations

import math
import re
from dataclasses import dataclass

from loadbearing.answers import extract_answer
from loadbearing.questions.arith import arith_few_shot
from loadbearing.questions.exemplars import few_shot_turns as benchmark_turns

FORMAT_INSTRUCTIONS = {
    "arith": "Write one calculation per line. End with a line 'Answer: N'",
    "gsm8k": "Solve the problem step by step. Write one reasoning step per line. "
             "End with a line 'Answer: N' where N is a number.",
    "mmlu": "Think step by step. Write one reasoning step per line. "
            "End with a line 'Answer: X' where X is the letter of the correct option.",
    "bbh": "Think step by step. Write one reasoning step per line. "
           "End with a line 'Answer: X' with the final answer exactly as asked.",
    "custom": "Think step by step. Write one reasoning step per line. End with a line 'Answer: X'.",
}
#: datasets whose default prompt includes few-shot turns (measured: SmolLM2 needs them on arith; the study
#: also turns them on for the embedded model on the benchmarks, see study.settings)
DEFAULT_FEW_SHOT = {"arith": True}


def few_shot_turns(dataset: str, task: str | None = None) -> list[tuple[str, str]]:
    """The exemplar turns of a dataset: arith's own, the benchmarks' rewritten official ones
    (:mod:`loadbearing.questions.exemplars`; BBH per task), none for custom question files."""
    if dataset == "arith":
        return arith_few_shot()
    if dataset in ("gsm8k", "mmlu", "bbh"):
        return benchmark_turns(dataset, task)
    return []


def build_messages(question, *, few_shot: bool | None = None) -> list[dict[str, str]]:
    ds = question.dataset if question.dataset in FORMAT_INSTRUCTIONS else "custom"
    use_shots = DEFAULT_FEW_SHOT.get(ds, False) if few_shot is None else few_shot
    msgs = [{"role": "system", "content": FORMAT_INSTRUCTIONS[ds]}]
    for q, a in few_shot_turns(ds, getattr(question, "task", None)) if use_shots else []:
        msgs += [{"role": "user", "content": q}, {"role": "assistant", "content": a}]
    msgs.append({"role": "user", "content": question.question})
    return msgs


def render_chat(tokenizer, messages: list[dict]) -> str:
    """Apply the chat template to text (tokenise the result once, with add_special_tokens=False)."""
    try:
        return tokenizer.apply_chat_template(messages, tokenize=False, add_generation_prompt=True)
    except Exception as e:  # templates without a system role (Gemma) raise TemplateError
        if messages and messages[0]["role"] == "system" and "system" in str(e).lower():
            sys_text, rest = messages[0]["content"], [dict(m) for m in messages[1:]]
            rest[0]["content"] = f"{sys_text}\n\n{rest[0]['content']}"
            return tokenizer.apply_chat_template(rest, tokenize=False, add_generation_prompt=True)
        raise


def build_prompt(tokenizer, question, *, few_shot: bool | None = None) -> str:
    return render_chat(tokenizer, build_messages(question, few_shot=few_shot))


@dataclass(frozen=True)
class Trace:
    lines: tuple[str, ...]  # visible reasoning lines, stripped
    spans: tuple[tuple[int, int], ...]  # [start, end) of each line in the trace text (unstripped content)
    answer_line: int | None  # index into text.splitlines() of the final-answer line


_TAG_ONLY = re.compile(r"^\s*</?think>\s*$")


def split_trace(text: str, dataset: str, task: str | None = None) -> Trace:
    """Visible reasoning lines before the final-answer line (the last line that parses as an answer).

    With no answer line, every non-blank line counts (the baseline is then ineligible anyway).
    """
    raw = text.split("\n")
    starts, pos = [], 0
    for line in raw:
        starts.append(pos)
        pos += len(line) + 1
    answer_idx = None
    for i in range(len(raw) - 1, -1, -1):
        if raw[i].strip() and extract_answer(raw[i], dataset, task) is not None:
            answer_idx = i
            break
    stop = answer_idx if answer_idx is not None else len(raw)
    lines, spans = [], []
    for i in range(stop):
        s = raw[i]
        if not s.strip() or _TAG_ONLY.match(s):
            continue
        # a line that opens/closes a think block keeps its text, without the tag
        lead = len(s) - len(s.lstrip())
        content = s.strip()
        for tag in ("<think>", "</think>"):
            if content.startswith(tag):
                lead += len(tag) + (len(content[len(tag):]) - len(content[len(tag):].lstrip()))
                content = content[len(tag):].strip()
        lines.append(content)
        spans.append((starts[i] + lead, starts[i] + lead + len(content)))
    return Trace(tuple(lines), tuple(spans), answer_idx)


def assistant_prefix(text: str, trace: Trace, index: int, replacement: str | None = None) -> tuple[str, tuple[int, int]]:
    """Trace text up to and including line ``index`` (replaced by ``replacement`` if given), newline-terminated.

    Returns ``(prefix, span)`` where span is the [start, end) of the (edited) line within the prefix.
    """
    start, end = trace.spans[index]
    line = trace.lines[index] if replacement is None else replacement
    prefix = text[:start] + line + "\n"
    return prefix, (start, start + len(line))


POSITION_FRACTIONS = {"early": 0.25, "middle": 0.5, "late": 0.75}


def position_index(n_lines: int, position: str) -> int:
    """Edited line index for a position: ``min(n - 2, floor(n * f))`` (never the last reasoning line)."""
    if position not in POSITION_FRACTIONS:
        raise ValueError(f"unknown position {position!r}; choose from {', '.join(POSITION_FRACTIONS)}")
    if n_lines < 2:
        raise ValueError(f"need at least 2 reasoning lines to pick a position, got {n_lines}")
    return min(n_lines - 2, math.floor(n_lines * POSITION_FRACTIONS[position]))
