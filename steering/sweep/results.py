"""A steering sweep's generations as a DataFrame, one row per (setting, case), with the setting's parameters.

    import steering
    g = steering.read_sweep("runs/demo/steering")       # or the run directory itself
    g[g.case_label == "C"].groupby(["basis", "k", "alpha_rel"]).moved.mean()   # moved-of-all per setting
    g[(g.case_label == "C") & (g.operator == "ablate")].groupby(["basis", "k"]).moved.mean()   # ablation

Columns: the fields of ``generations.jsonl`` (``setting``, ``operator`` = ``add`` (directions added at
``alpha``) | ``ablate`` (their span projected out, :mod:`steering.ablation`; ``alpha`` is empty) | ``none``
(the alpha-0 rerun), ``basis`` = ``probe`` | ``random`` | ``random_cov`` | ``none`` (the alpha-0 rerun),
``layer``, ``k``, ``alpha_rel`` (relative to the layer's mean residual norm), ``alpha`` (absolute), ``seed``
(of a random basis), ``case_id``, ``question_key``, ``case_label`` (the case's unsteered label), ``strategy``,
``position``, ``text``, ``parsed_answer``, ``gold``, ``correct`` (nullable boolean: ``<NA>`` = the steered
answer did not parse)...) plus:

* ``moved``: for a type-C case, True when the steered answer is correct, False otherwise (an unparsed answer
  counts as not moved: the sweep's *moved-of-all*); ``<NA>`` for a non-C case.
* ``in_summary``: False for generations of cases outside the sweep's current case sample (``config.json``
  ``case_ids``); ``summary.json`` counts only the True rows.
* ``direction_seed``: the random direction's seed as an exact unsigned 64-bit integer (``UInt64``; ``<NA>`` for
  the probe's and the unsteered rows), so ``steering.sweep.controls`` can regenerate the direction.
* ``continuation_id`` and ``outcome``: the same values as ``case_id`` and ``case_label``, under the names
  ``continuations_df`` and the inspect export use (the old names are kept).

``df.attrs`` holds ``config`` (the sweep's ``config.json``) and ``summary`` (``summary.json``, None while the
sweep is unfinished). Rates here are per generation; lead with the question-clustered intervals of
``summary.json`` when a question gives several cases.
"""
from __future__ import annotations

import os
from pathlib import Path
from typing import TYPE_CHECKING, Any

from loadbearing.files import read_json, read_jsonl
from steering.errors import SteeringError
from steering.sweep.config import CONFIG_FILE, GENERATIONS, SUMMARY

if TYPE_CHECKING:
    import pandas as pd

LEAD_COLUMNS = ("setting", "operator", "basis", "layer", "k", "alpha_rel", "alpha", "seed", "case_id", "question_id",
                "question_key", "case_label", "strategy", "position", "correct", "moved", "parsed_answer", "gold", "text")


def sweep_dir(path: str | os.PathLike[str]) -> Path:
    """The sweep's output directory: ``path`` itself, or ``path/steering`` for a run directory."""
    p = Path(path)
    for cand in (p, p / "steering"):
        if (cand / GENERATIONS).is_file():
            return cand
    raise SteeringError(f"no steering generations at {str(p)!r}: expected {GENERATIONS} there or in its steering/ "
                        "directory; run python -m steering.sweep RUN_DIR --directions RUN_DIR/probes")


def read_sweep(path: str | os.PathLike[str]) -> pd.DataFrame:
    """The sweep's generations with their settings (see the module docstring for the columns).

    >>> g = read_sweep("runs/demo/steering")                                               # doctest: +SKIP
    >>> g.pivot_table(index=["k", "alpha_rel"], columns="basis", values="moved", aggfunc="mean")  # doctest: +SKIP
    """
    import pandas as pd  # deferred: pandas is heavy to import

    d = sweep_dir(path)
    recs = read_jsonl(d / GENERATIONS)
    config: dict[str, Any] | None = read_json(d / CONFIG_FILE) if (d / CONFIG_FILE).is_file() else None
    summary = read_json(d / SUMMARY) if (d / SUMMARY).is_file() else None
    keep = set((config or {}).get("case_ids") or []) or None
    rows = []
    for i, r in enumerate(recs, 1):
        if not isinstance(r, dict) or "setting" not in r or "case_id" not in r:
            raise SteeringError(f"{d / GENERATIONS}:{i}: not a steering generation record; fix or delete that line, "
                                "or re-run the sweep with --resume")
        row = {k: v for k, v in r.items() if k != "schema_version"}
        row["operator"] = r.get("operator") or ("none" if r.get("basis") == "none" else "add")  # older sweeps: add
        row["moved"] = (r.get("correct") is True) if r.get("case_label") == "C" else None
        row["in_summary"] = keep is None or r["case_id"] in keep
        rows.append(row)
    df = pd.DataFrame(rows)
    if df.empty:
        df = pd.DataFrame(columns=[*LEAD_COLUMNS, "in_summary"])
    for col in LEAD_COLUMNS:
        if col not in df.columns:  # a field an older sweep did not write
            df[col] = None
    df = df[[*LEAD_COLUMNS, *[c for c in df.columns if c not in LEAD_COLUMNS]]]
    for col in ("correct", "moved", "in_summary"):
        df[col] = df[col].astype("boolean")
    for col in ("layer", "seed"):
        df[col] = df[col].astype("Int64")
    # the random directions' seeds are uint64 (up to 2**64 - 1): from the records, exactly, never via float64
    # (which altered 287 of 288 seeds, so a random control could not be regenerated from the frame)
    seeds = [r.get("direction_seed") if isinstance(r, dict) else None for r in recs]
    df["direction_seed"] = pd.array([int(x) if isinstance(x, int) and not isinstance(x, bool) else None
                                     for x in seeds] if len(df) else [], dtype="UInt64")
    # one name per field across the APIs (issue #32): continuation_id (continuations_df's id, the store's and
    # the inspect export's), outcome (continuations_df's, the inspect score's); case_id and case_label are kept
    df["continuation_id"] = df["case_id"]
    df["outcome"] = df["case_label"]
    df.attrs.update(config=config, summary=summary, path=str(d))
    return df


__all__ = ["read_sweep", "sweep_dir", "LEAD_COLUMNS"]
