"""A run's records as pandas DataFrames, for notebooks: continuations with their A/B/C labels joined, baselines.

    from loadbearing import Run
    run = Run("runs/demo")
    df = run.continuations_df()                     # one row per (generation, cell), labels of the newest labelling
    df[df.condition == "perturbed"].groupby("position").propagated.mean()   # propagation rate per position
    run.baselines_df().groupby("task").eligible.mean()

Units (see :mod:`loadbearing.records`): one continuation record is one *generation* (one distinct model input);
it counts in every (strategy, position) *cell* listed in its ``memberships``. ``explode_memberships=True`` (the
default) gives one row per (generation, cell), so ``df.position == "late"`` finds every late cell, and a cell's
rows are exactly the cell's; ``False`` gives one row per generation (``cells`` lists its cells). Count
generations with ``df.id.nunique()`` and questions with ``df.question_key.nunique()``.

Columns that differ from the record's fields:

* ``condition``: ``"perturbed"`` or ``"control"`` (the unedited prefix cut at the same line).
* ``strategy``: the perturbation strategy; **None for controls**, which edit nothing. ``cell_strategy`` is the
  cell's strategy on every row (for a control: the strategy whose cell it is the control of).
* ``outcome``: ``"C"`` (parseable, wrong: the error propagated), ``"non-C"`` or None (unparseable) - the
  record's ``label`` field, renamed so it cannot be mistaken for the A/B/C label.
* ``propagated``: nullable boolean, ``outcome == "C"`` where the answer parsed, ``<NA>`` where it did not, so
  ``.mean()`` is the error-propagation rate over parseable rows (a group with none gives NaN, never 0).
* ``abc``: ``"A"``/``"B"``/``"C"`` from the labelling named by ``labels`` (None: not labelled or undecided);
  ``df.attrs["labelling"]`` names the labelling joined (None when none was).
* ``cells`` / ``n_cells``: the generation's cells as ``"strategy/position"`` strings and their number.
* ``continuation_id``: the record's id, the name the activation store, ``steering.read_sweep`` and the inspect
  export's metadata give it (``id`` is kept, the same value).
"""
from __future__ import annotations

from typing import TYPE_CHECKING, Any

from loadbearing.records import Continuation
from loadbearing.runs import question_key_of

if TYPE_CHECKING:
    import pandas as pd

    from loadbearing.runs import Run

#: ``labels=NEWEST`` joins the newest complete labelling (the default)
NEWEST = "newest"

#: the leading columns of :func:`continuations_df`, in order (the other record fields follow)
LEAD_COLUMNS = ("id", "question_id", "question_key", "dataset", "task", "difficulty", "condition", "strategy",
                "cell_strategy", "position", "line_index", "n_lines", "outcome", "propagated", "abc", "correct",
                "parsed_answer", "gold", "original_line", "edited_line", "continuation", "n_cells", "cells")
_DROPPED = ("schema_version", "memberships", "label")


def _cell_name(cell: tuple[str, str]) -> str:
    return f"{cell[0]}/{cell[1]}"


def _rows(c: Continuation, labels: dict[str, str | None] | None, explode: bool) -> list[dict[str, Any]]:
    d = c.to_dict()
    for k in _DROPPED:
        d.pop(k, None)
    cells = c.cells()
    perturbed = c.condition == "perturbed"
    d.update(continuation_id=c.id, question_key=question_key_of(c), outcome=c.label,
             propagated=None if c.label is None else c.label == "C",
             abc=labels.get(c.id) if labels is not None else None,
             n_cells=len(cells), cells=[_cell_name(x) for x in cells])
    picked = cells if explode else cells[:1]
    return [{**d, "strategy": strategy if perturbed else None, "cell_strategy": strategy, "position": position}
            for strategy, position in picked]


def continuations_df(run: Run, *, explode_memberships: bool = True, labels: str | None = NEWEST,
                     condition: str = "all") -> pd.DataFrame:
    """The run's continuations as a DataFrame (see the module docstring for the columns and units).

    ``labels``: ``"newest"`` (the newest complete labelling, if any), a labelling name (``"rule"``, a judge's
    name; a missing one is an error), or None (no A/B/C join; the ``abc`` column is all None).
    ``condition``: ``"all"``, ``"perturbed"`` or ``"control"``.

    >>> df = continuations_df(Run("runs/demo"), labels="rule")          # doctest: +SKIP
    >>> df.pivot_table(index="position", columns="condition", values="propagated", aggfunc="mean")  # doctest: +SKIP
    """
    import pandas as pd  # deferred: pandas is heavy to import

    recs = run.continuations(condition)  # type: ignore[arg-type]  # Run refuses an unknown condition
    name: str | None = None
    lab: dict[str, str | None] | None = None
    if labels is not None:
        name, lab = run.labels(None if labels == NEWEST else labels)
    rows = [r for c in recs for r in _rows(c, lab, explode_memberships)]
    df = pd.DataFrame(rows)
    if df.empty:
        df = pd.DataFrame(columns=list(LEAD_COLUMNS))
    rest = [k for k in df.columns if k not in LEAD_COLUMNS]
    df = df[[*LEAD_COLUMNS, *rest]]
    for col in ("propagated", "correct"):
        df[col] = df[col].astype("boolean")
    df.attrs["labelling"] = name
    df.attrs["run"] = str(run.path)
    df.attrs["unit"] = "generation x cell" if explode_memberships else "generation"
    return df


def baselines_df(run: Run) -> pd.DataFrame:
    """One row per question's greedy baseline (``eligible``, ``reason``, ``correct``, ``n_lines``...).

    ``lines`` holds the visible reasoning lines as a list; ``correct`` is a nullable boolean (``<NA>``:
    unparseable). ``baselines_df(run).groupby("task").correct.mean()`` is the baseline accuracy over parseable
    answers per task.
    """
    import pandas as pd  # deferred: pandas is heavy to import

    rows = []
    for b in run.baselines():
        d = b.to_dict()
        d.pop("schema_version", None)
        d["question_key"] = question_key_of(b)
        d["n_lines"] = len(b.lines)
        rows.append(d)
    df = pd.DataFrame(rows)
    if not df.empty:
        df["correct"] = df["correct"].astype("boolean")
    df.attrs["run"] = str(run.path)
    return df


__all__ = ["continuations_df", "baselines_df", "NEWEST", "LEAD_COLUMNS"]
