"""The labelling's record and its final-label rule: one :class:`LabelRecord` per continuation in
``labels/<name>/labels.jsonl``, its label from :data:`FINAL_RULE` (:func:`final_label`)."""
from __future__ import annotations

from dataclasses import dataclass

from loadbearing.errors import LoadBearingError
from loadbearing.records import Record
from loadbearing.runs import SUMMARY

SCHEMA_VERSION = 1
LABELS = ("A", "B", "C")
GROUP_KEYS = ("position", "strategy", "task", "difficulty")
SUMMARY_FILE = SUMMARY
FINAL_RULE = (
    "C if the answer is parseable and wrong; null if the answer is unparseable; for a correct answer the final "
    "labeller decides: noticed -> B (noticed and repaired), not noticed -> A (bypass), undecided -> null. "
    "Controls follow the same rule and are reported separately."
)

__all__ = ["FINAL_RULE", "GROUP_KEYS", "LABELS", "SCHEMA_VERSION", "SUMMARY_FILE", "LabelError", "LabelRecord",
           "final_label", "make_record"]


class LabelError(LoadBearingError, ValueError):
    """A labelling request that cannot be carried out; the message names the problem and the fix."""


@dataclass(frozen=True)
class LabelRecord(Record):
    """One line of ``labels/<name>/labels.jsonl``."""

    id: str  # the continuation id
    question_id: str
    condition: str  # perturbed | control
    dataset: str
    task: str | None
    difficulty: str | None
    strategy: str
    position: str
    correct: bool | None
    outcome: str | None  # "C" | "non-C" | None (unparseable), from correctness alone
    label: str | None  # final "A" | "B" | "C" | None
    reason: str
    final_labeller: str
    labellers: dict  # labeller name -> {"label", "noticed", ...evidence / variants}
    schema_version: int = SCHEMA_VERSION


def final_label(correct: bool | None, noticed: bool | None) -> tuple[str | None, str]:
    """Apply :data:`FINAL_RULE`: (label, reason)."""
    if correct is None:
        return None, "unparseable answer"
    if correct is False:
        return "C", "wrong answer"
    if noticed is None:
        return None, "correct answer, notice undecided"
    return ("B", "correct answer, error noticed") if noticed else ("A", "correct answer, error not noticed")


def make_record(c: dict, per_lab: dict[str, dict], names: list[str], final_name: str) -> LabelRecord:
    """The label record of continuation ``c`` from each labeller's verdict (``per_lab``: name -> result)."""
    per = {}
    for n in names:
        r = dict(per_lab[n])
        r["label"], _ = final_label(c.get("correct"), r.get("noticed"))
        per[n] = r
    lab, reason = final_label(c.get("correct"), per[final_name].get("noticed"))
    if c.get("correct") is True and per[final_name].get("noticed") is not None:
        reason += f" ({final_name})"
    correct = c.get("correct")
    return LabelRecord(
        id=c["id"], question_id=c["question_id"], condition=c["condition"], dataset=c.get("dataset", ""),
        task=c.get("task"), difficulty=c.get("difficulty"), strategy=c.get("strategy", ""),
        position=c.get("position", ""), correct=correct,
        outcome=None if correct is None else ("non-C" if correct else "C"),
        label=lab, reason=reason, final_labeller=final_name, labellers=per,
    )
