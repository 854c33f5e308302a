"""What a causal test calls a step of the chain: a reasoning line, or a sentence.

* ``"lines"`` (the default): the run's visible reasoning lines (:func:`loadbearing.questions.prompts.split_trace`),
  the unit the paper edits.
* ``"sentences"``: cot-transparency's steps (``cot_transparency/formatters/transparency/trace_manipulation.py``,
  ``get_cot_steps`` l. 90-108): the text is split at line breaks (``split_on_newlines`` l. 33), each line into
  sentences (``split_on_sentences`` l. 41), and a piece that is no reasoning (blank, or a bare number such as
  ``"1."``, ``contains_reasoning`` l. 21) is glued to the next step. Their sentence splitter is nltk's punkt;
  nltk and its punkt data cannot be had offline here, so :data:`SENTENCE_END` (a split after ``.``, ``!`` or
  ``?`` followed by white space, not after a lone digit or a one-letter abbreviation) stands in for it, and
  the summary names it. On one-calculation-per-line chains the two units coincide.

A cut after ``k`` steps is the trace text through the end of step ``k``, newline-terminated, exactly as a line
cut is (:meth:`behavioural.causal.common.Chain.prefix`).
"""
from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass

UNITS = ("lines", "sentences")
#: the punkt stand-in: a sentence ends at . ! ? followed by white space (not "3." of a list, not "e.g.")
SENTENCE_END = re.compile(r"(?<![\s(]\w)(?<!^\w)(?<=[.!?])\s+(?=\S)")
SPLITTER = "regex stand-in for nltk punkt: split after [.!?] + white space, not after one letter or digit"
_NO_REASONING = re.compile(r"^\d+.?$")  # their contains_reasoning


def contains_reasoning(step: str) -> bool:
    """cot-transparency's ``contains_reasoning``: not blank and not a bare list number."""
    s = step.strip()
    return bool(s) and not _NO_REASONING.match(s)


def split_sentences(line: str) -> list[tuple[int, int]]:
    """``[start, end)`` of each sentence of one line (white space between sentences belongs to neither)."""
    out, start = [], 0
    for m in SENTENCE_END.finditer(line):
        out.append((start, m.start()))
        start = m.end()
    out.append((start, len(line)))
    return [(a, b) for a, b in out if b > a]


@dataclass(frozen=True)
class Steps:
    """A chain's steps: each one's text and the offset in the trace text where it ends."""

    unit: str
    texts: tuple[str, ...]
    ends: tuple[int, ...]

    @property
    def n(self) -> int:
        return len(self.texts)


def chain_steps(trace_text: str, lines: Sequence[str], spans: Sequence[tuple[int, int]], unit: str = "lines") -> Steps:
    """The steps of a trace whose reasoning lines are ``lines`` at ``spans`` (see the module docstring)."""
    if unit not in UNITS:
        raise ValueError(f"steps {unit!r}: choose from {', '.join(UNITS)}")
    if unit == "lines":
        return Steps(unit, tuple(lines), tuple(spans[i][0] + len(line) for i, line in enumerate(lines)))
    texts: list[str] = []
    ends: list[int] = []
    pending = ""
    for line, (start, _) in zip(lines, spans):
        for a, b in split_sentences(line):
            piece = line[a:b]
            if not contains_reasoning(piece):
                pending += piece + " "
                continue
            texts.append(pending + piece)
            ends.append(start + b)
            pending = ""
    if pending.strip() and texts:  # their "ensure we always return everything": a trailing fragment joins the last
        texts[-1] += " " + pending.strip()
        ends[-1] = spans[-1][0] + len(lines[-1])
    return Steps(unit, tuple(texts), tuple(ends))


def cut(trace_text: str, steps: Steps, k: int) -> str:
    """The trace text through step ``k`` (1-based count of steps kept), newline-terminated; "" for k = 0."""
    if not 0 <= k <= steps.n:
        raise ValueError(f"cut {k} outside 0..{steps.n}")
    return "" if k == 0 else trace_text[:steps.ends[k - 1]].rstrip() + "\n"
