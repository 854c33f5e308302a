"""Scoring a parsed answer against a question's gold: :func:`score`, the ONE scorer of every stage.

An answer that cannot be scored (None, or a BBH option text that matches none of the options) gives
``correct=None``; unscored answers are never counted wrong.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from types import SimpleNamespace
from typing import Any, NamedTuple

from loadbearing.answers.parse import (
    BBH_LETTERS,
    BBH_MC_TASKS,
    BBH_NUMBER_TASKS,
    BBH_WORD_TASKS,
    BRACKETS,
    MINUS,
    MMLU_LETTERS,
    extract_answer,
    normalize_number,
    tokens,
)

__all__ = ["Score", "as_question", "choices_from_text", "is_correct", "score"]

_ALL_WORDS = ("True", "False", "Yes", "No", "valid", "invalid")
_WORD_SYNONYMS = {"plausible": "yes", "implausible": "no", "not plausible": "no"}


def is_correct(pred: str | None, question: Any) -> bool | None:
    """Whether ``pred`` (from :func:`~loadbearing.answers.extract_answer`) matches ``question.answer``.

    Returns None when ``pred`` is None, and also when a BBH option text matches none of the question's
    options (it cannot be scored); unscored answers are never counted wrong.
    """
    if pred is None:
        return None
    gold = str(question.answer).strip()
    kind = _kind(question.dataset, question.task, gold)
    pred = str(pred).strip()
    if kind == "number":
        p, g = normalize_number(pred), normalize_number(gold)
        return p is not None and p == g
    if kind == "letter":
        return _compare_letter(pred, gold, getattr(question, "choices", None))
    if kind == "word":
        pred = _WORD_SYNONYMS.get(pred.lower(), pred) if gold.lower() in ("yes", "no") else pred
        return pred.lower() == gold.lower()
    if kind == "dyck":
        p, g = _squash(pred), _squash(gold)
        start = _dyck_input(question.question)
        return p == g or (bool(start) and p == start + g)
    return tokens(pred) == tokens(gold)


class Score(NamedTuple):
    """The one verdict on a text: the parsed answer (None = unparseable) and whether it is right (None = unscored).

    A named tuple: ``s.parsed, s.correct`` or ``parsed, correct = score(text, q)``."""

    parsed: str | None
    correct: bool | None


def score(text: str, question_like: Any) -> Score:
    """Parse ``text`` and score it against ``question_like`` - the ONE scorer of every stage.

    ``question_like`` is a :class:`~loadbearing.questions.data.Question`, a record (``Baseline``/``Continuation``) or a
    dict with ``dataset``, ``task``, the gold (``answer`` or ``gold``) and optionally ``choices`` and
    ``question``. Missing choices are read back from the question text (MMLU ``A. ...`` lines, BBH
    ``Options:`` block), so a record scores exactly like the question it came from.
    """
    q = as_question(question_like)
    parsed = extract_answer(text, q.dataset, q.task, choices=q.choices)
    return Score(parsed, is_correct(parsed, q))


def as_question(question_like: Any) -> SimpleNamespace:
    """``dataset``, ``task``, ``answer``, ``question``, ``choices`` of a question, record or dict."""
    def get(name: str, default: Any = None) -> Any:
        if isinstance(question_like, dict):
            return question_like.get(name, default)
        return getattr(question_like, name, default)

    answer = get("answer")
    if answer is None:
        answer = get("gold")
    question = get("question") or ""
    choices = get("choices") or choices_from_text(str(question), get("dataset"))
    return SimpleNamespace(dataset=get("dataset"), task=get("task"), answer="" if answer is None else str(answer),
                           question=str(question), choices=tuple(choices) if choices else None)


def choices_from_text(question: str, dataset: str | None = None) -> tuple[str, ...] | None:
    """Option texts written in a question: a BBH ``Options:`` block of ``(A) ...`` lines, or MMLU's trailing
    ``A. ...`` .. ``D. ...`` lines; None when there are none."""
    lines = [ln.strip() for ln in (question or "").splitlines()]
    if "Options:" in lines:
        opts: list[str] = []
        for ln in lines[lines.index("Options:") + 1:]:
            m = re.match(r"\(([A-Z])\)\s*(.*)$", ln)
            if not m or m.group(1) != BBH_LETTERS[len(opts)]:
                break
            opts.append(m.group(2).strip())
        return tuple(opts) or None
    if dataset in (None, "mmlu") and len(lines) >= 4:
        tail = lines[-4:]
        ms = [re.match(rf"{L}\.\s(.*)$", ln) for L, ln in zip(MMLU_LETTERS, tail)]
        if all(ms):
            return tuple(m.group(1).strip() for m in ms)  # type: ignore[union-attr]
    return None


# ----------------------------------------------------------------------------------------------------
# scoring helpers


def _kind(dataset: str, task: str | None, gold: str) -> str:
    if dataset in ("gsm8k", "arith"):
        return "number"
    if dataset == "mmlu":
        return "letter"
    if dataset == "bbh" and task is not None:
        if task in BBH_MC_TASKS:
            return "letter"
        if task in BBH_NUMBER_TASKS:
            return "number"
        if task in BBH_WORD_TASKS:
            return "word"
        if task == "dyck_languages":
            return "dyck"
        if task == "word_sorting":
            return "text"
    if _letter_of(gold):
        return "letter"
    if re.fullmatch(r"-?[\d,]*\.?\d+", gold.replace(MINUS, "-")):
        return "number"
    if gold.lower() in {w.lower() for w in _ALL_WORDS}:
        return "word"
    return "text"


def _letter_of(s: str) -> str | None:
    m = re.fullmatch(r"\(?([A-Z])\)?", s.strip())
    return m.group(1) if m else None


def _compare_letter(pred: str, gold: str, choices: Sequence[str] | None) -> bool | None:
    p, g = _letter_of(pred), _letter_of(gold)
    if p is not None:
        return p == g
    if g is None:  # published target is an option text (e.g. "Monsters, Inc")
        return tokens(pred) == tokens(gold)
    if not choices:
        return None
    texts = [tokens(c) for c in choices]
    idx = ord(g) - ord("A")
    if idx < len(texts) and tokens(pred) == texts[idx]:
        return True
    return False if tokens(pred) in texts else None


def _squash(s: str) -> str:
    return "".join(c for c in s if c in BRACKETS)


def _dyck_input(question: str) -> str:
    m = re.search(r"Input:\s*(.*)$", question or "", re.S)
    return _squash(m.group(1)) if m else ""
