"""The plain sections of the probes' results.json (no fitting here): JSON conversion, the data summary, the
headline of each probe and the directions entry.

    from probes.sections import jsonable, headline
"""
from __future__ import annotations

from typing import Any

import numpy as np

from loadbearing.runs import DIRECTIONS
from probes.config import TRANSFER_BY
from probes.steer_layer import METHOD, choose_layer


def jsonable(o: Any) -> Any:
    """``o`` with numpy values as Python ones, tuples as lists, keys as strings and non-finite floats as None."""
    if isinstance(o, dict):
        return {str(k): jsonable(v) for k, v in o.items()}
    if isinstance(o, (list, tuple)):
        return [jsonable(v) for v in o]
    if isinstance(o, np.ndarray):
        return [jsonable(v) for v in o.tolist()]
    if isinstance(o, np.generic):
        o = o.item()
    if isinstance(o, float) and not np.isfinite(o):
        return None
    return o


def data_section(data: Any, qgroups: np.ndarray, fold_ids: np.ndarray, folds: int) -> dict[str, Any]:
    """The ``data`` section of results.json: rows, questions, classes, per-fold and per-value class counts."""
    y, names = data.y, data.class_names
    fold_counts = [{names[i]: int(np.sum((fold_ids == k) & (y == i))) for i in range(len(names))}
                   for k in range(folds)]
    breakdown = {}
    for b in TRANSFER_BY + ("dataset", "task", "condition"):
        vals = [("(none)" if v is None else str(v)) for v in data.meta[b]]
        breakdown[b] = {v: {names[i]: int(sum(1 for a, yy in zip(vals, y) if a == v and yy == i))
                            for i in range(len(names))} for v in sorted(set(vals))}
    return {"n_rows": data.n, "n_questions": int(len(np.unique(qgroups))), "group_key": data.group_key,
            "class_names": names, "class_counts": data.class_counts(), "per_fold_class_counts": fold_counts,
            "breakdown": breakdown, "notes": data.notes}


def headline(probes_out: dict[str, dict[str, Any]]) -> dict[str, dict[str, Any]]:
    keys = ("accuracy", "balanced_accuracy", "gain_over_metadata", "control_p_value", "gain_p_value",
            "chosen_layer_counts")
    out = {}
    for pk, p in probes_out.items():
        n = p["nested"]
        out[pk] = {k: (n[k]["value"] if k == "balanced_accuracy" else n.get(k)) for k in keys}
    return out


def directions_section(dirs: dict, split: dict[str, Any] | None, steer_holdout: float,
                        steer_scores: dict) -> dict[str, Any] | None:
    if not dirs:
        return None
    sel = choose_layer(steer_scores) if steer_scores else None
    fitted_on = (f"labelled rows of the questions outside the held-out fraction {steer_holdout}: for steering on the "
                 "held-out questions, not scored") if split else \
        "all labelled rows (no held-out split): for steering, not scored"
    return {"file": DIRECTIONS, "layers": sorted(dirs), "target": "C vs non-C", "fitted_on": fitted_on,
            "question_split": split,
            **({"selected_layer": sel, "selected_layer_method": METHOD, "layer_scores": steer_scores} if sel is not None
               else {})}


__all__ = ["jsonable", "data_section", "headline", "directions_section"]
