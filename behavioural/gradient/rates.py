"""The gradient's rates: pooled over distinct generations or over (generation, membership) rows, always
with the question as the cluster (:mod:`loadbearing.stats`).

    from behavioural.gradient.rates import crate
    crate([True, False, True], ["q1", "q1", "q2"])   # 2/3 with a bootstrap-over-questions interval
"""
from __future__ import annotations

from collections.abc import Sequence

from loadbearing.stats import clustered_rate, wilson_rate

POSITIONS = ("early", "middle", "late")


def crate(success: Sequence[bool], groups: Sequence, gens: Sequence | None = None, *, seed: int = 0,
          n_boot: int = 2000) -> dict:
    """Pooled rate with a bootstrap-over-questions interval (``loadbearing.stats.clustered_rate``)."""
    n_gen = len(set(gens)) if gens is not None else None
    return clustered_rate([bool(s) for s in success], list(groups), seed=seed, n_boot=n_boot,
                          n_generations=n_gen).to_dict()


def wrate(k: int, n: int, n_questions: int | None = None) -> dict:
    """Row-level Wilson rate (each row its own question)."""
    return wilson_rate(k, n, n_questions=n_questions).to_dict()


def scored(rows: Sequence[dict]) -> list[dict]:
    """The rows with a C / non-C label (parseable answers)."""
    return [r for r in rows if r["label"] is not None]


def propagation(rows: Sequence[dict], *, seed: int = 0) -> dict:
    """Propagation over (generation, membership) rows: used for strategy / position / family cells."""
    s = scored(rows)
    return crate([r["label"] == "C" for r in s], [r["qkey"] for r in s], [r["gen"] for r in s], seed=seed)


def pooled(rows: Sequence[dict], *, seed: int = 0) -> dict:
    """Propagation over distinct generations (first membership only), clustered by question."""
    return propagation([r for r in scored(rows) if r["first"]], seed=seed)
