"""The typed results of the stages after behaviour, as their files hold them (the behaviour stage's are in
:mod:`behavioural.results`): the activation store's summary, ``probes/results.json``, ``steering/summary.json``
and ``gradient/gradient.json``.

    from loadbearing.results.check import read_result
    from loadbearing.results.stages import ProbeResults, SweepSummary
    r = read_result("runs/demo/probes/results.json", ProbeResults)     # checked: r["data"]["n_rows"], r["headline"]

The required keys are those each stage always writes (and the report reads); the others are ``NotRequired``
(written for some settings only). Nested parts are typed where a reader relies on their shape and left as
JSON objects otherwise; the types describe the files, they do not change them. They live in the base (which
knows no stage's code) so that a reader of any stage's files, the study included, can name them.
"""
from __future__ import annotations

import sys
from typing import Any, TypedDict

from loadbearing.results.check import RateJSON

if sys.version_info >= (3, 11):
    from typing import NotRequired
else:  # pragma: no cover - Python 3.10 (typing_extensions comes with torch and transformers)
    from typing_extensions import NotRequired

#: a JSON object whose inner shape no reader relies on
JSONObject = dict[str, Any]


class StoreSummary(TypedDict):
    """``activations.cache.summarize``: the activation store's headline numbers."""

    path: str
    n_rows: int
    layers: list[int]
    positions: list[str]
    d_model: int
    engine: str | None
    dtype: str | None
    leaky: bool
    decoder_layers_path: str | None
    n_questions: int
    labels: dict[str, int]


class ProbeData(TypedDict):
    n_rows: int
    n_questions: int
    group_key: NotRequired[str]
    class_names: NotRequired[list[str]]
    class_counts: dict[str, dict[str, int]]


class Baseline(TypedDict):
    accuracy: RateJSON


class ProbeResults(TypedDict):
    """``probes/results.json``."""

    schema_version: int
    kind: NotRequired[str]
    data: ProbeData
    majority_baseline: Baseline
    metadata_baseline: NotRequired[JSONObject]
    #: probe -> its nested-CV headline (accuracy, gain over metadata, p-values)
    headline: NotRequired[dict[str, JSONObject]]
    #: probe -> per-layer scores (``layers``), ``nested``, ``within_cell``
    probes: dict[str, JSONObject]
    transfer: NotRequired[dict[str, JSONObject]]
    control_scheme: NotRequired[JSONObject]
    directions: NotRequired[JSONObject]
    settings: JSONObject


class SweepSummary(TypedDict):
    """``steering/summary.json``."""

    schema_version: int
    status: str
    verdict: str
    verdict_code: NotRequired[str]
    n_c_cases: int
    n_c_questions: int
    n_non_c_cases: NotRequired[int]
    n_generations: int
    n_random_directions: NotRequired[int | None]
    #: one entry per (operator, layer, k, alpha) setting
    settings: list[JSONObject]
    baseline: NotRequired[JSONObject | None]
    verdicts: NotRequired[dict[str, JSONObject]]
    cases: NotRequired[JSONObject]
    split: NotRequired[JSONObject]
    controls_note: NotRequired[str]


class GradientCell(TypedDict):
    model: str
    cell: str
    baseline_accuracy: RateJSON | None
    baseline_coverage: RateJSON | None
    propagation: RateJSON
    control_error: RateJSON | None
    n_questions: int
    n_generations: int


class GradientSummary(TypedDict):
    """``gradient/gradient.json``."""

    schema: str
    status: str
    runs: list[JSONObject]
    axis: str
    axis_description: str
    cells: list[GradientCell]
    regression: JSONObject
    within_dataset: dict[str, JSONObject]
    position: JSONObject
    type_by_difficulty: JSONObject
    uptake: dict[str, JSONObject]
    cross_model: JSONObject
    taxonomy: JSONObject
    notes: NotRequired[list[str]]
    mixed: NotRequired[list[str]]
    difficulty_test: NotRequired[JSONObject]
    position_merges: NotRequired[JSONObject]


__all__ = ["GradientCell", "GradientSummary", "JSONObject", "ProbeData", "ProbeResults", "StoreSummary", "SweepSummary"]
