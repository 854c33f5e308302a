"""The metadata-only baseline: the better of a regularised one-hot logistic model and a smoothed lookup table
of the strategy x position x level cells, chosen inside each training fold; for the real labels and for
every permuted label vector alike (the gain's permutation p-value refits it on each).

    from probes.baseline import metadata_predictions, cell_lookup
    mb = metadata_predictions(meta, Y, fold_ids, splits, Cs=(0.01, 1, 100))   # Y [P, n]: real labels first
    mb["pred"][0], mb["chosen"][0]      # held-out predictions, "logistic" / "lookup" per outer fold

Candidates (neither sees activations):

* ``logistic``: one-hot strategy, edit position, edited line index, number of lines, task/level (the columns
  of :func:`probes.validity.metadata_features`) -> L2 logistic regression with C by the grouped inner CV
  (:func:`probes.fit.permuted.cv_many`, the same batched solver and C rule as the probes);
* ``lookup``: per cell, the class with the most smoothed training votes (:func:`cell_lookup`): a cell's
  counts plus ``SMOOTH`` pseudo-rows distributed as its strategy x position parent, whose counts are in
  turn smoothed toward the overall class mix; a small cell leans on its parent, an empty one is its parent.

Per outer fold the candidate with the higher mean inner-CV accuracy on that fold's training split wins
(ties and no inner split -> the lookup table, the simpler model); ``chosen`` records it.
"""
from __future__ import annotations

from typing import Any

import numpy as np

from loadbearing.stats.design import distinct_columns
from probes.validity import as_str, baseline_entry, metadata_features

SMOOTH = 2.0  # pseudo-rows of the parent distribution added to each cell
LEVEL_COLUMNS = ("difficulty", "level")
POSITION_COLUMNS = ("edit_position", "position")


def column(meta: Any, names: tuple[str, ...]) -> np.ndarray | None:
    """The first of ``names`` that ``meta`` has, as strings (None when none)."""
    for c in names:
        if c in getattr(meta, "columns", ()):
            return np.array([as_str(v) for v in meta[c]], dtype=object)
    return None


def cell_columns(meta: Any) -> tuple[np.ndarray, np.ndarray, list[str]]:
    """``(fine, coarse, used)``: per-row cell keys strategy x position x level and strategy x position (the
    columns the metadata has; missing ones are one value), and the column names used."""
    n = len(meta)
    parts, used = [], []
    for names in (("strategy",), POSITION_COLUMNS, LEVEL_COLUMNS):
        v = column(meta, names)
        if v is not None and len(set(v)) >= 2:
            used.append(next(c for c in names if c in meta.columns))
        parts.append(v if v is not None else np.full(n, "", dtype=object))
    coarse = np.array([f"{a} x {b}" for a, b in zip(parts[0], parts[1])], dtype=object)
    fine = np.array([f"{c} x {lv}" for c, lv in zip(coarse, parts[2])], dtype=object)
    return fine, coarse, used


def design_cells(meta: Any) -> np.ndarray:
    """Per-row (strategy, position, level) key: the cells whose sets define a question's design."""
    return cell_columns(meta)[0]


def cell_lookup(fine: np.ndarray, coarse: np.ndarray, y: np.ndarray, train: np.ndarray, K: int,
                smooth: float = SMOOTH) -> np.ndarray:
    """Predictions for every row of the smoothed cell lookup fitted on the rows ``train`` (ties -> lower class).
    ``fine`` / ``coarse``: cell keys per row, or their integer codes (:func:`codes`)."""
    fi, co = codes(fine), codes(coarse)
    yt = y[train]
    root = np.bincount(yt, minlength=K).astype(float)
    root = root / max(1.0, root.sum())
    cc = np.zeros((co.max() + 1, K))
    np.add.at(cc, (co[train], yt), 1.0)
    parent = (cc + smooth * root) / (cc.sum(1, keepdims=True) + smooth)
    fc = np.zeros((fi.max() + 1, K))
    np.add.at(fc, (fi[train], yt), 1.0)
    par_of = np.zeros(fi.max() + 1, dtype=np.int64)
    par_of[fi] = co
    score = (fc + smooth * parent[par_of]) / (fc.sum(1, keepdims=True) + smooth)
    return np.argmax(score[fi], axis=1)


def codes(keys: np.ndarray) -> np.ndarray:
    """Integer codes 0..m-1 of per-row keys (integer input is returned as it is)."""
    keys = np.asarray(keys)
    if keys.dtype.kind in "iu":
        return keys
    return np.unique(keys.astype(str), return_inverse=True)[1].reshape(-1)


def one_hot(F: np.ndarray) -> np.ndarray:
    """One-hot float columns of an object feature matrix ``[n, m]``."""
    cols = []
    for j in range(F.shape[1]):
        u, inv = np.unique(F[:, j].astype(str), return_inverse=True)
        cols.append(np.eye(len(u))[np.asarray(inv).reshape(-1)])
    return np.concatenate(cols, axis=1) if cols else np.zeros((F.shape[0], 0))


def metadata_design(F: np.ndarray, used: list[str]) -> tuple[np.ndarray, list[str]]:
    """The logistic candidate's one-hot design of the metadata features ``F`` (columns named ``used``) with each
    column that duplicates an earlier one merged (:func:`loadbearing.stats.design.distinct_columns`: e.g. an arith
    ``difficulty`` one-hot equals its ``task`` one-hot; a duplicate would halve its own penalty), and the notes
    naming each merge."""
    import pandas as pd  # deferred: pandas is heavy to import

    names = [f"{c}={u}" for j, c in enumerate(used) for u in np.unique(F[:, j].astype(str))]
    X, notes = distinct_columns(pd.DataFrame(one_hot(F), columns=names))
    return np.array(X, dtype=float), notes  # a writable copy (the solver hands it to torch)


def metadata_predictions(meta: Any, Y: np.ndarray, fold_ids: np.ndarray, splits: list, *, Cs: tuple[float, ...],
                         device: str = "cpu") -> dict[str, Any]:
    """Held-out predictions of the metadata baseline for every label vector ``Y[p]`` (``[P, n]``) over the outer
    folds, with ``splits`` from :func:`probes.fit.permuted.inner_masks` of the same ``Y``.

    Returns ``{"pred" [P, n] (-1 unscored), "chosen" [P, F] ("logistic" / "lookup" / "" skipped),
    "inner_logistic" / "inner_lookup" [P, F], "C" [P, F], "features", "cells", "merged_columns" (notes naming the
    one-hot columns merged as duplicates)}``."""
    from probes.fit.permuted import cv_many  # deferred: probes.fit.permuted loads sklearn, torch

    Y = np.atleast_2d(np.asarray(Y))
    P, n = Y.shape
    Fo = int(fold_ids.max()) + 1
    K = int(Y.max()) + 1
    feats, used = metadata_features(meta)
    fine, coarse, cells_used = cell_columns(meta)
    fine, coarse = codes(fine), codes(coarse)
    merged: list[str] = []
    if used:
        X, merged = metadata_design(feats, used)
        lg = cv_many("logistic", X, Y, fold_ids, splits, Cs=Cs, device=device)
    else:
        lg = {"pred": np.full((P, n), -1, dtype=np.int64), "inner": np.full((P, Fo), np.nan),
              "C": np.full((P, Fo), np.nan)}
    pred = np.full((P, n), -1, dtype=np.int64)
    chosen = np.full((P, Fo), "", dtype=object)
    inner_lk = np.full((P, Fo), np.nan)
    for k in range(Fo):
        tr, te = fold_ids != k, fold_ids == k
        if not te.any() or not tr.any():
            continue
        for p in range(P):
            y = Y[p]
            sc = [float(np.mean(cell_lookup(fine, coarse, y, a, K)[b] == y[b])) for a, b in splits[p][k]]
            inner_lk[p, k] = float(np.mean(sc)) if sc else np.nan
            use_lg = used and lg["pred"][p, te][0] >= 0 and np.isfinite(lg["inner"][p, k]) and \
                (not np.isfinite(inner_lk[p, k]) or lg["inner"][p, k] > inner_lk[p, k] + 1e-12)
            if use_lg:
                pred[p, te] = lg["pred"][p, te]
                chosen[p, k] = "logistic"
            else:
                pred[p, te] = cell_lookup(fine, coarse, y, tr, K)[te]
                chosen[p, k] = "lookup"
    return {"pred": pred, "chosen": chosen, "inner_logistic": lg["inner"], "inner_lookup": inner_lk, "C": lg["C"],
            "features": used, "cells": cells_used, "merged_columns": merged}




def study_baselines(meta: Any, y: np.ndarray, Yp: np.ndarray, groups: np.ndarray, fold_ids: np.ndarray, *,
                    inner_folds: int, seed: int, Cs: tuple[float, ...], device: str = "cpu"
                    ) -> tuple[dict[str, Any], np.ndarray, list]:
    """The metadata baseline of a study on the real labels and on every permutation, in one batch:
    ``(real entry (:func:`probes.validity.baseline_entry`), correct [P, F] per permutation (-1 unscored),
    the permutations' inner splits)`` (the splits are reused by the probes' permuted refits)."""
    from probes.fit.permuted import fold_correct, inner_masks  # deferred: probes.fit.permuted loads sklearn, torch

    Y = np.vstack([np.asarray(y)[None], np.asarray(Yp).reshape(-1, len(y))])
    splits = inner_masks(Y, groups, fold_ids, inner_folds, seed)
    r = metadata_predictions(meta, Y, fold_ids, splits, Cs=Cs, device=device)
    return baseline_entry(r, 0), fold_correct(r["pred"][1:], Y[1:], fold_ids), splits[1:]


__all__ = ["metadata_predictions", "metadata_design", "study_baselines", "cell_lookup", "cell_columns", "design_cells",
           "one_hot", "SMOOTH"]
