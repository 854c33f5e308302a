"""Which C cases are patched: type-C perturbed continuations paired with the clean control at the same cut.

A pair is a perturbed continuation labelled C (a parseable wrong answer: the error propagated) and the control
continuation of the same question (:func:`loadbearing.runs.question_key_of`) cut at the same line
(``line_index``). Distinct model inputs only (a C input shared by several cells is one case). The sample takes
at most ONE case per question (so a mean over cases is a mean over questions), seeded: questions are visited in
a seeded random order, each contributing one of its C cases drawn with the same generator, up to ``max_cases``.
"""
from __future__ import annotations

from collections import defaultdict
from dataclasses import dataclass
from typing import Any

import numpy as np

from loadbearing.records import LABEL_C, Continuation
from loadbearing.runs import Run, question_key_of
from steering.errors import PatchingError


@dataclass(frozen=True)
class Case:
    edited: Continuation  # the perturbed continuation labelled C
    clean: Continuation  # the control at the same cut

    @property
    def question_key(self) -> str:
        return question_key_of(self.edited)


def select_cases(run: Run, *, max_cases: int | None = None, seed: int = 0) -> tuple[list[Case], dict[str, Any]]:
    """The seeded sample of (C case, control) pairs, one per question; raises :class:`PatchingError` when the run
    has no controls, no C cases, or no C case with a control at its cut."""
    perturbed = run.continuations("perturbed")
    controls = run.continuations("control")
    if not controls:
        raise PatchingError(f"run {str(run.path)!r} has no control continuations, so there is no clean prefix to patch "
                            "from; re-run python -m behavioural.run (it writes an unedited control at every cut)")
    c_cases = [c for c in perturbed if c.label == LABEL_C and c.parsed_answer is not None]
    if not c_cases:
        raise PatchingError(f"run {str(run.path)!r} has no type-C (wrong-answer) perturbed continuations to patch; use a "
                            "harder level or more questions in python -m behavioural.run")
    by_cut: dict[tuple[str, int], Continuation] = {}
    for c in sorted(controls, key=lambda c: c.id):
        by_cut.setdefault((question_key_of(c), c.line_index), c)
    seen: set[str] = set()
    by_q: dict[str, list[Case]] = defaultdict(list)
    n_dup = n_unpaired = 0
    for c in sorted(c_cases, key=lambda c: c.id):
        if c.input_text in seen:
            n_dup += 1
            continue
        seen.add(c.input_text)
        ctl = by_cut.get((question_key_of(c), c.line_index))
        if ctl is None:
            n_unpaired += 1
            continue
        by_q[question_key_of(c)].append(Case(c, ctl))
    if not by_q:
        raise PatchingError(f"run {str(run.path)!r}: none of its {len(c_cases)} C cases has a control continuation of "
                            "the same question at the same line; re-run python -m behavioural.run to write the controls")
    rng = np.random.default_rng(seed)
    keys = sorted(by_q)
    keys = [keys[i] for i in rng.permutation(len(keys))]
    sample = [by_q[k][int(rng.integers(len(by_q[k])))] for k in keys][:max_cases]
    stats = {"n_c_records": len(c_cases), "n_duplicate_inputs_dropped": n_dup, "n_without_control": n_unpaired,
             "n_c_questions_available": len(by_q), "n_cases": len(sample), "max_cases": max_cases, "seed": seed,
             "per_question": 1}
    return sample, stats


__all__ = ["Case", "select_cases"]
