"""Questions: the one record type, its identity (the normalised text) and seeded sampling.

    from loadbearing.questions.base import Question, question_key, sample
    q = Question("custom/0", "custom", None, "What is 2 + 3?", "5")
    question_key(q.question)        # 16 hex digits: one question, however often it is drawn
    sample(questions, 100, seed=0)  # a deterministic subset, in the original order

A question is one unit of analysis, identified by its normalised text: two draws of the same text are one
question (:func:`question_key`; the loaders drop repeats with :func:`dedupe`). Importing this module reads
no file and touches no global state.
"""

from __future__ import annotations

import hashlib
import json
import logging
from collections.abc import Iterable, Sequence
from dataclasses import dataclass

from loadbearing.errors import LoadBearingError

__all__ = [
    "DataError", "Question", "QuestionList", "dataset_fingerprint", "dedupe", "normalise_question", "question_key",
    "sample",
]

_log = logging.getLogger(__name__)


class DataError(LoadBearingError, ValueError):
    """A bad data request or a bad data file; the message names the problem and the fix."""


@dataclass(frozen=True)
class Question:
    """One benchmark question with its normalised gold answer."""

    id: str  # stable, e.g. "gsm8k/test/17", "mmlu/abstract_algebra/test/3", "bbh/navigate/12"
    dataset: str  # gsm8k | mmlu | bbh | arith | custom
    task: str | None  # MMLU subject, BBH task, arith level; None for GSM8K
    question: str  # full prompt text (MMLU: question then "A. ..." .. "D. ..." lines)
    answer: str  # gold: GSM8K/arith number string, MMLU letter, BBH target as published
    choices: tuple[str, ...] | None = None  # option texts for multiple choice, else None
    difficulty: str | None = None  # arith level name, else None

    def to_dict(self) -> dict[str, str | int | list[str] | None]:
        """Plain JSON-ready dict (choices as a list)."""
        return {
            "id": self.id,
            "dataset": self.dataset,
            "task": self.task,
            "question": self.question,
            "answer": self.answer,
            "choices": list(self.choices) if self.choices is not None else None,
            "difficulty": self.difficulty,
        }

    @classmethod
    def from_dict(cls, d: dict) -> Question:
        """Inverse of :meth:`to_dict`; unknown keys are ignored."""
        missing = [k for k in ("id", "dataset", "question", "answer") if k not in d]
        if missing:
            raise DataError(f"question record is missing key(s) {missing}; write records with Question.to_dict()")
        choices = d.get("choices")
        return cls(
            id=str(d["id"]),
            dataset=str(d["dataset"]),
            task=d.get("task"),
            question=str(d["question"]),
            answer=str(d["answer"]),
            choices=tuple(str(c) for c in choices) if choices is not None else None,
            difficulty=d.get("difficulty"),
        )


class QuestionList(list):
    """A list of :class:`Question` that remembers how many duplicate texts the loader dropped."""

    duplicates_dropped: int = 0
    dropped_ids: tuple[str, ...] = ()


def dedupe(questions: Iterable[Question], source: str = "questions") -> QuestionList:
    """Keep the first question of each normalised text; report (log) how many were dropped."""
    out, seen, dropped = QuestionList(), set(), []
    for q in questions:
        k = question_key(q.question)
        if k in seen:
            dropped.append(q.id)
            continue
        seen.add(k)
        out.append(q)
    out.duplicates_dropped = len(dropped)
    out.dropped_ids = tuple(dropped)
    if dropped:
        _log.warning("%s: dropped %d duplicate question text(s) (kept the first of each; e.g. %s)",
                     source, len(dropped), ", ".join(dropped[:3]))
    return out


def normalise_question(text: str) -> str:
    """The text that identifies a question: lowercased, whitespace runs collapsed to one space, stripped."""
    return " ".join(str(text).lower().split())


def question_key(text: str) -> str:
    """Stable key of a question: the first 16 hex digits of sha256 of its normalised text.

    Two draws of the same text are one question; grouping, cross-validation folds and bootstraps use this key.
    """
    return hashlib.sha256(normalise_question(text).encode("utf-8")).hexdigest()[:16]


def sample(questions: Sequence[Question], n: int | None, seed: int) -> list[Question]:
    """Deterministic seeded subset of ``n`` questions, returned in their original order.

    The chosen questions are those with the smallest ``sha256(f"{seed}:{id}")``, so the choice depends
    only on the ids (not on list order or on Python's hash seed), and a smaller sample is always a subset
    of a larger one with the same seed. ``n`` None or ``>= len(questions)`` returns all of them.
    """
    qs = QuestionList(questions)
    qs.duplicates_dropped = getattr(questions, "duplicates_dropped", 0)
    qs.dropped_ids = getattr(questions, "dropped_ids", ())
    if n is None or n >= len(qs):
        return qs
    if n < 0:
        raise DataError(f"sample size must be >= 0, got {n}; pass a non-negative n or None for all")

    def key(q: Question) -> str:
        return hashlib.sha256(f"{seed}:{q.id}".encode()).hexdigest()

    chosen = {q.id for q in sorted(qs, key=key)[:n]}
    out = QuestionList(q for q in qs if q.id in chosen)
    out.duplicates_dropped, out.dropped_ids = qs.duplicates_dropped, qs.dropped_ids
    return out


def dataset_fingerprint(questions: Iterable[Question]) -> str:
    """sha256 hex digest over each question's id, question text, answer and choices.

    The digest is taken over the questions sorted by id, so it identifies the *set* of questions and does
    not change when the same questions come in another order.
    """
    h = hashlib.sha256()
    for q in sorted(questions, key=lambda q: q.id):
        row = [q.id, q.question, q.answer, list(q.choices) if q.choices is not None else None]
        h.update(json.dumps(row, ensure_ascii=False).encode("utf-8"))
        h.update(b"\n")
    return h.hexdigest()
