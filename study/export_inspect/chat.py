"""The chat turns of one continuation's input, for the inspect export (:mod:`study.export_inspect`; issue #32).

    from study.export_inspect.chat import chat_turns, edit_description, sample_position
    turns = chat_turns(record, baseline, settings)   # [{"role": "system", ...}, ..., {"role": "assistant", ...}]

The protocol's input is a chat-templated string: the system line, the few-shot turns, the question, then the
assistant prefix that ends with the edited line. Shown as one user message, every sample opens the same way
and the edited line is hidden at its end. :func:`chat_turns` rebuilds the turns with the protocol's own
:func:`loadbearing.questions.prompts.build_messages` (the baseline's question, the run's few-shot setting) and
the record's ``prefix_text`` as the final assistant turn, and keeps them only when they are the input: every
turn's text appears in ``input_text`` in order and the input ends with the prefix. Otherwise it returns None
and the export falls back to the templated text as it is.
"""
from __future__ import annotations

from types import SimpleNamespace
from typing import Any

from loadbearing.questions.prompts import build_messages
from loadbearing.records import Baseline, Continuation
from loadbearing.stats.design import merged_position


def chat_turns(c: Continuation, baseline: Baseline | None, settings: dict[str, Any]) -> list[dict[str, str]] | None:
    """The input as chat turns ending with the assistant prefix, or None where they cannot be checked against
    ``input_text`` (no baseline, another prompt builder, a template that rewrites the text)."""
    if baseline is None or not c.prefix_text:
        return None
    q = SimpleNamespace(dataset=baseline.dataset, task=baseline.task, question=baseline.question)
    try:
        turns = build_messages(q, few_shot=settings.get("few_shot"))
    except Exception:  # noqa: BLE001 - exemplars missing for this task: fall back to the raw text
        return None
    turns = [dict(t) for t in turns] + [{"role": "assistant", "content": c.prefix_text}]
    text, at = c.input_text, 0
    for t in turns:
        found = text.find(t["content"].strip(), at)
        if found < 0:
            return None
        at = found + len(t["content"].strip())
    if not text.endswith(c.prefix_text):
        return None
    return turns


def sample_position(c: Continuation) -> str:
    """The position this generation fills for its strategy, merged where it fills several (``middle=late``)."""
    own = [p for s, p in c.cells() if s == c.strategy] or [c.position]
    return merged_position(own)


def edit_description(c: Continuation) -> str:
    """One line for the viewer's first screen: where the edit is and what it did."""
    where = f"line {c.line_index + 1} of {c.n_lines}" if c.line_index is not None and c.n_lines else "the cut"
    pos = sample_position(c)
    if c.condition != "perturbed":
        return f"control ({pos}, {where}): unedited prefix cut after: {c.original_line}"
    return f"{c.strategy} edit ({pos}, {where}): {c.original_line} -> {c.edited_line}"


__all__ = ["chat_turns", "edit_description", "sample_position"]
