"""The gradient's rates: each distinct generation once in a group (pooled, or a strategy / position / family
cell), always with the question as the cluster (:mod:`loadbearing.stats`).

    from behavioural.gradient.rates import crate
    crate([True, False, True], ["q1", "q1", "q2"])   # 2/3 with a bootstrap-over-questions interval
"""
from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from loadbearing.results.check import RateJSON
from loadbearing.stats import clustered_rate, wilson_rate

POSITIONS = ("early", "middle", "late")


def crate(success: Sequence[bool], groups: Sequence, gens: Sequence | None = None, *, seed: int = 0,
          n_boot: int = 2000) -> RateJSON:
    """Pooled rate with a bootstrap-over-questions interval (``loadbearing.stats.clustered_rate``)."""
    n_gen = len(set(gens)) if gens is not None else None
    return clustered_rate([bool(s) for s in success], list(groups), seed=seed, n_boot=n_boot,
                          n_generations=n_gen).to_dict()


def wrate(k: int, n: int, n_questions: int | None = None) -> RateJSON:
    """Row-level Wilson rate (each row its own question)."""
    return wilson_rate(k, n, n_questions=n_questions).to_dict()


def scored(rows: Sequence[dict]) -> list[dict]:
    """The rows with a C / non-C label (parseable answers)."""
    return [r for r in rows if r["label"] is not None]


def distinct_generations(rows: Sequence[dict]) -> list[dict]:
    """Each distinct generation once (the first of its rows): a generation one run recorded once for several
    (strategy, position) cells (one continuation record, expanded into one row per cell) is one outcome in any
    group it falls in; keyed by ``(run, id)`` of the record (a row without an id is its own generation)."""
    seen: set = set()
    out = []
    for i, r in enumerate(rows):
        key = (r.get("run"), r["id"]) if r.get("id") is not None else ("row", i)
        if key not in seen:
            seen.add(key)
            out.append(r)
    return out


def propagation(rows: Sequence[dict[str, Any]], *, seed: int = 0) -> RateJSON:
    """Propagation in a group of rows (a strategy, position or family cell), each distinct generation counted
    once in the group, as the behaviour summary counts a group row (issue #32: section 1's position=early and
    the gradient's were two counts of one quantity when two strategies shared an edit)."""
    s = distinct_generations(scored(rows))
    return crate([r["label"] == "C" for r in s], [r["qkey"] for r in s], [r["gen"] for r in s], seed=seed)


def pooled(rows: Sequence[dict[str, Any]], *, seed: int = 0) -> RateJSON:
    """Propagation over distinct generations (first membership only), clustered by question."""
    return propagation([r for r in scored(rows) if r["first"]], seed=seed)
