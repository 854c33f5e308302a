"""The inspect export's grouped view (issue #36): viewer columns, a per-sample ``cell`` score and the
question-clustered rate of every group in the log's results.

    from study.export_inspect.groups import cell_score, grouped_score, viewer_config
    scores["cell"] = cell_score(strategy="arithmetic", position="late", level="s2_o5", label="C", moved=True)
    results.scores.append(grouped_score("propagated", rows))   # rows: (flag, question, {"strategy": ...})
    EvalSpec(..., viewer=viewer_config(["outcome", "abc"]))

inspect_ai 0.3.285's sample list has built-in columns and score columns only (no metadata columns:
``inspect_ai/viewer/_config.py``, ``TaskSamplesColumn``; the viewer's ``getScorersFromSamples`` makes one
column per key of a dictionary-valued score, id ``score__<scorer>__<key>``). So the grouping fields are one
dictionary score, ``cell`` = ``{strategy, position, level, label, moved}``; :func:`viewer_config` puts its
columns first, sorted by level, strategy and position. ``moved`` is True where the sample's parsed answer
differs from the unedited chain's answer (None where unparsed); ``label`` is the A/B/C label where the sample
has one. The ``cell`` score is a grouping, not a measurement: the log's results leave it out of any metric.

:func:`grouped_score` gives a scorer's rate per group value (``EvalMetric(group="level", name="s2_o5")``),
each with its question-clustered Korn-Graubard interval, counts and question count in the metric's metadata
(:func:`loadbearing.stats.clustered_rate`); a group with no scored row is left out (never 0).
"""
from __future__ import annotations

from collections import defaultdict
from collections.abc import Hashable, Sequence
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from inspect_ai.log import EvalScore
    from inspect_ai.scorer import Score
    from inspect_ai.viewer import ViewerConfig

#: the grouping fields, in column order
CELL_FIELDS = ("strategy", "position", "level", "label", "moved")
CELL = "cell"


def cell_score(**fields: Any) -> Score:
    """The sample's ``cell`` score: a dictionary of :data:`CELL_FIELDS` (None where a field does not apply)."""
    from inspect_ai.scorer import Score  # deferred: inspect_ai is heavy

    value = {k: fields.get(k) for k in CELL_FIELDS}
    return Score(value=value, explanation="grouping fields (not a measurement): " +
                 ", ".join(f"{k}={v}" for k, v in value.items() if v is not None))


def moved(answer: str | None, reference: str | None) -> bool | None:
    """Did the answer move away from the unedited chain's? None where either is unparsed."""
    return None if answer is None or reference is None else answer != reference


def viewer_config(scores: Sequence[str], *, name: str = "by cell") -> ViewerConfig:
    """The viewer's sample list: the id, the ``cell`` columns, then ``scores`` (scalar scorers), input and
    target; sorted by level, strategy, position."""
    # deferred: inspect_ai is heavy
    from inspect_ai.viewer import TaskSamplesColumn, TaskSamplesSort, TaskSamplesView, ViewerConfig

    cols = [TaskSamplesColumn(id="sampleId"), *[TaskSamplesColumn.score(CELL, f) for f in CELL_FIELDS],
            *[TaskSamplesColumn.score(s) for s in scores], TaskSamplesColumn(id="input"),
            TaskSamplesColumn(id="target"), TaskSamplesColumn(id="answer")]
    sort = [TaskSamplesSort.score(CELL, f) for f in ("level", "strategy", "position")]
    return ViewerConfig(task_samples_view=TaskSamplesView(
        name=name, columns=cols, sort=sort, score_labels={f: f for f in CELL_FIELDS}))


def grouped_score(scorer: str, rows: Sequence[tuple[bool | None, Hashable, dict[str, Any]]], *,
                  name: str | None = None, unit: str = "generation") -> EvalScore:
    """An ``EvalScore`` holding the pooled rate of ``rows`` (``(flag, question, groups)``; a None flag is
    unscored) and one metric per group value, each question-clustered."""
    from inspect_ai.log import EvalMetric, EvalScore  # deferred: inspect_ai is heavy

    from loadbearing.stats import clustered_rate  # deferred: loadbearing.stats loads numpy

    scored = [r for r in rows if r[0] is not None]

    def metric(sub: list, group: str | None, label: str) -> EvalMetric | None:
        if not sub:
            return None
        r = clustered_rate([bool(x[0]) for x in sub], [x[1] for x in sub])
        md = {"k": r.k, "n": r.n, "lo": r.lo, "hi": r.hi, "n_questions": r.n_questions, "method": r.method}
        return EvalMetric(name=label, group=group, value=float(r.value or 0.0), metadata=md)

    metrics: dict[str, EvalMetric] = {}
    m = metric(scored, None, "all")
    if m is not None:
        metrics["all"] = m
    fields = sorted({k for r in scored for k, v in r[2].items() if v is not None})
    for f in fields:
        by: dict[str, list] = defaultdict(list)
        for r in scored:
            if r[2].get(f) is not None:
                by[str(r[2][f])].append(r)
        for v in sorted(by):
            m = metric(by[v], f, v)
            if m is not None:
                metrics[f"{f}={v}"] = m
    return EvalScore(name=name or f"{scorer}_by_group", scorer=scorer, scored_samples=len(scored),
                     unscored_samples=len(rows) - len(scored), metrics=metrics,
                     metadata={"unit": unit, "interval": "question-clustered Korn-Graubard (metric metadata lo, hi)",
                               "groups": fields})


__all__ = ["CELL", "CELL_FIELDS", "cell_score", "grouped_score", "moved", "viewer_config"]
