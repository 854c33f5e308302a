"""Whether a study stage has enough data to run, in one line; the record of the stages skipped for that.

    python -m study --output-dir DIR     # a stage with too little data: "==== probes: skipped: <reason> ===="

Each check reads only the files the earlier stages wrote. A stage that is skipped is recorded in
``DIR/stages.json`` (``{"skipped": {stage: reason}}``) with its reason; every stage that needs it is skipped
with "needs <stage>, which was skipped: <reason>", and the report prints the reason in the stage's place.
"""
from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

from loadbearing.files import read_json, write_json
from loadbearing.runs import Run, question_key_of

if TYPE_CHECKING:
    from loadbearing.records import Continuation

STAGES_FILE = "stages.json"


def behaviour_reason(out: Path) -> str | None:
    """The behavioural stage's own insufficient-data message (no eligible baseline), or None."""
    s = Run(out).summary() or {}
    if s.get("status") != "insufficient_data":
        return None
    return str(s.get("message") or "no eligible baselines: no propagation rate can be estimated")


def _perturbed(out: Path) -> list[Continuation]:
    return Run(out).continuations("perturbed")


def labels_check(out: Path, c) -> str | None:
    if not _perturbed(out):
        return ("no perturbed continuation was generated (every edit was not applicable to these traces: see "
                "skipped.jsonl); nothing to label")
    return None


def probes_check(out: Path, c) -> str | None:
    """Probes need both outcomes (C and non-C among the scored perturbed continuations), each from at least
    two questions, and at least ``folds`` questions for the grouped cross-validation."""
    rows = [r for r in _perturbed(out) if r.correct is not None]
    c_q = {question_key_of(r) for r in rows if r.correct is False}
    n_q = {question_key_of(r) for r in rows if r.correct is True}
    n_c = sum(r.correct is False for r in rows)
    if len(c_q) < 2 or len(n_q) < 2:
        return (f"too few of one outcome to train a probe: {n_c} C (wrong answer) from {len(c_q)} question(s), "
                f"{len(rows) - n_c} non-C from {len(n_q)} question(s) among {len(rows)} scored perturbed "
                "continuations (each needs >= 2 questions)")
    qs = c_q | n_q
    if len(qs) < c.folds:
        return f"{len(qs)} questions with scored continuations, fewer than the {c.folds} cross-validation folds"
    return None


def read_skipped(out: Path) -> dict[str, str]:
    p = Path(out) / STAGES_FILE
    if not p.is_file():
        return {}

    d = read_json(p)
    return dict(d.get("skipped") or {}) if isinstance(d, dict) else {}


def write_skipped(out: Path, skipped: dict[str, str]) -> None:
    exists = (Path(out) / STAGES_FILE).is_file()
    if (skipped or exists) and (not exists or skipped != read_skipped(out)):
        write_json(Path(out) / STAGES_FILE, {"kind": "study.stages", "skipped": skipped})


__all__ = ["STAGES_FILE", "behaviour_reason", "labels_check", "probes_check", "read_skipped", "write_skipped"]
