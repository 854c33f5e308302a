"""The behaviour stage's results as types: ``summary.json`` (:class:`BehaviourSummary`) and a labelling's
``labels/<name>/summary.json`` (:class:`LabelSummary`).

    from behavioural.results import BehaviourSummary, read_summary
    s = read_summary("runs/demo")                      # checked; None while the stage has not finished
    s["overall"]["propagation"]["rate"], s["by"]["strategy"]["contradiction"]["questions"]

The types describe the JSON the stage writes (:func:`behavioural.summary.summarise`, completed by the protocol
with ``status``, ``protocol_version``, ``run_dir`` and, when there is nothing to score, ``message``); they do
not change it. Read them with :func:`loadbearing.results.read_result`, which checks the required keys.
"""
from __future__ import annotations

import os
import sys
from pathlib import Path
from typing import Any, TypedDict

from loadbearing.results.check import RateJSON, read_result
from loadbearing.runs import SUMMARY

if sys.version_info >= (3, 11):
    from typing import NotRequired
else:  # pragma: no cover - Python 3.10 (typing_extensions comes with torch and transformers)
    from typing_extensions import NotRequired


class PairedDifference(TypedDict, total=False):
    """Perturbed minus control, paired by question and line (:func:`loadbearing.stats.paired_difference_ci`)."""

    estimate: float | None
    ci: list[float | None]
    n_clusters: int
    n_pairs: int
    n_dropped: int
    level: float
    method: str


class GroupRates(TypedDict):
    """The rates of one group of generations (the overall row, or one row of ``by``)."""

    perturbed: int
    controls: int
    coverage: RateJSON
    propagation: RateJSON
    control_error: RateJSON
    paired_difference: PairedDifference
    questions: int
    generations: int


class Generations(TypedDict):
    distinct: int
    records: int
    perturbed: int
    control: int
    cells: int
    shared: int


class CollapsedPositions(TypedDict):
    """Questions where two positions edit the same line (so they share one generation)."""

    questions: int
    of: int
    pairs: dict[str, int]


class LevelBaseline(TypedDict):
    questions: int
    accuracy: RateJSON
    accuracy_parseable: RateJSON
    coverage: RateJSON
    eligible: int


class BehaviourSummary(TypedDict):
    """``summary.json`` of a behaviour run."""

    questions: int
    distinct_questions: int
    baseline_accuracy: RateJSON
    baseline_accuracy_parseable: RateJSON
    baseline_coverage: RateJSON
    eligible: int
    eligible_questions: int
    ineligible_reasons: dict[str, int]
    continuations: int
    generations: Generations
    collapsed_positions: CollapsedPositions
    not_applicable: int
    overall: GroupRates
    #: breakdown (position, strategy, task, difficulty) -> group -> its rates
    by: dict[str, dict[str, GroupRates]]
    baseline_by_level: dict[str, LevelBaseline]
    status: NotRequired[str]
    protocol_version: NotRequired[str]
    run_dir: NotRequired[str]
    message: NotRequired[str]


class LabelCounts(TypedDict):
    A: int
    B: int
    C: int
    null: int


class GroupLabels(TypedDict):
    n: int
    counts: LabelCounts


class ConditionLabels(TypedDict):
    """One condition's labels (``perturbed`` adds ``by``: group key -> group -> its counts)."""

    n: int
    counts: LabelCounts
    propagation: RateJSON | None
    B_among_correct_labelled: RateJSON | None
    by: NotRequired[dict[str, dict[str, GroupLabels]]]


class KappaPair(TypedDict):
    a: str
    b: str
    n: int
    kappa: float | None


class LabelSummary(TypedDict):
    """``labels/<name>/summary.json`` of a labelling."""

    schema_version: NotRequired[int]
    labelling: NotRequired[str]
    final_labeller: str
    final_rule: NotRequired[str]
    perturbed: ConditionLabels
    control: ConditionLabels
    labeller_agreement: NotRequired[list[KappaPair]]
    #: judge -> condition -> its variants' agreement (``unanimous``, ``mean_pairwise_kappa``, ...)
    judge_variant_agreement: NotRequired[dict[str, dict[str, dict[str, Any]]]]


def read_summary(run_dir: str | os.PathLike[str]) -> BehaviourSummary | None:
    """A run's ``summary.json``, checked; None when it has none yet."""
    p = Path(run_dir) / SUMMARY
    return read_result(p, BehaviourSummary) if p.is_file() else None


__all__ = ["BehaviourSummary", "CollapsedPositions", "ConditionLabels", "Generations", "GroupLabels", "GroupRates",
           "KappaPair", "LabelCounts", "LabelSummary", "LevelBaseline", "PairedDifference", "read_summary"]
