"""Record types written by the protocol stage (one frozen dataclass per JSONL file).

Every later stage reads these files, never Python objects, so the fields are the contract:

* :class:`Baseline` - one line of ``baselines.jsonl`` per question.
* :class:`Continuation` - one line of ``continuations.jsonl`` per forced continuation (perturbed or
  control). ``input_text`` is the exact text the model saw before it wrote ``continuation``
  (chat-templated prompt + assistant prefix), tokenised once with ``add_special_tokens=False``; its
  token count is ``input_tokens``. ``edit_span`` is the [start, end) character span of the edited line
  inside ``input_text`` (activations use it to find the edited line's tokens).

Units: ``question_key`` (:func:`loadbearing.questions.data.question_key`, a hash of the normalised question text) is
the question every grouping, fold and bootstrap uses. One Continuation record is one *distinct model input*
(one generation): when several (strategy, position) cells share an input (the unedited control is the same
for every strategy; two positions may cut at the same line), the record lists every cell in
``memberships`` and ``strategy``/``position``/``id`` are those of the first. Use :meth:`Continuation.cells`.

Labels on a continuation: ``"C"`` (parseable and wrong: the error propagated), ``"non-C"`` (correct), or
``None`` (unparseable, unscored). The labelling stage splits non-C into A/B in a file of its own.
"""
from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from typing import Any

from loadbearing.questions.data import question_key

#: 2: question_key on every record, Continuation.memberships (one record per distinct model input)
SCHEMA_VERSION = 2
LABEL_C = "C"
LABEL_NON_C = "non-C"


class Record:
    def to_dict(self) -> dict[str, Any]:
        d = dataclasses.asdict(self)  # type: ignore[call-overload]
        for k, v in d.items():
            if isinstance(v, tuple):
                d[k] = list(v)
        return d

    @classmethod
    def from_dict(cls, d: dict):
        names = {f.name: f for f in dataclasses.fields(cls)}  # type: ignore[arg-type]
        unknown = set(d) - set(names)
        if unknown:
            raise ValueError(f"{cls.__name__}: unknown fields {sorted(unknown)} (written by a newer schema?)")
        kw = {}
        for k, v in d.items():
            if isinstance(v, list) and names[k].type.startswith("tuple"):
                v = tuple(tuple(x) if isinstance(x, list) else x for x in v)
            kw[k] = v
        return cls(**kw)


@dataclass(frozen=True)
class Baseline(Record):
    question_id: str
    dataset: str
    task: str | None
    difficulty: str | None
    question: str
    prompt: str  # the chat-templated prompt text (generation prompt included)
    prompt_tokens: int
    trace: str  # the model's full greedy answer
    lines: tuple[str, ...]  # visible reasoning lines (answer line excluded)
    answer_line: int | None  # index in trace.splitlines() of the final-answer line, if any
    parsed_answer: str | None
    gold: str
    correct: bool | None
    eligible: bool
    reason: str  # "eligible" or why not: unparseable / wrong / too_few_lines(n<k)
    finish_reason: str  # answer_line | eos | length
    new_tokens: int
    schema_version: int = SCHEMA_VERSION
    question_key: str | None = None  # hash of the normalised question text (filled from ``question`` if absent)

    def __post_init__(self) -> None:
        if self.question_key is None:
            object.__setattr__(self, "question_key", question_key(self.question))


@dataclass(frozen=True)
class Continuation(Record):
    id: str  # f"{question_id}|{strategy}|{position}|{condition}"
    question_id: str
    dataset: str
    task: str | None
    difficulty: str | None
    strategy: str
    position: str  # early | middle | late
    line_index: int  # index into Baseline.lines of the edited line
    n_lines: int
    original_line: str
    edited_line: str  # == original_line for the control
    condition: str  # perturbed | control
    prefix_text: str  # assistant prefix: lines[:line_index] + [edited_line], newline-terminated
    input_text: str  # prompt + prefix_text: exactly what the model saw before continuing
    input_tokens: int
    edit_span: tuple[int, int]  # [start, end) chars of the edited line within input_text
    continuation: str
    new_tokens: int
    finish_reason: str
    parsed_answer: str | None
    gold: str
    correct: bool | None
    label: str | None  # "C" | "non-C" | None (unparseable)
    schema_version: int = SCHEMA_VERSION
    question_key: str | None = None  # hash of the normalised question text (None only in schema-1 runs)
    #: every (strategy, position) cell this generation belongs to; the first is (strategy, position).
    #: Empty only in schema-1 runs (one record per cell).
    memberships: tuple[tuple[str, str], ...] = ()

    def cells(self) -> tuple[tuple[str, str], ...]:
        """The (strategy, position) cells this generation counts in (at least its own)."""
        return self.memberships or ((self.strategy, self.position),)


@dataclass(frozen=True)
class Skipped(Record):
    """A (question, strategy, position) where the strategy was not applicable: recorded, never dropped."""

    question_id: str
    strategy: str
    position: str
    line_index: int
    reason: str
    schema_version: int = SCHEMA_VERSION


def label_for(correct: bool | None) -> str | None:
    if correct is None:
        return None
    return LABEL_NON_C if correct else LABEL_C


__all__ = ["SCHEMA_VERSION", "Baseline", "Continuation", "Skipped", "label_for", "LABEL_C", "LABEL_NON_C"]

#: deprecated private name, kept for callers written before ``Record`` was public
_Record = Record
