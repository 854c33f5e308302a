"""What a probe's accuracy means: the metadata-only baseline, the probe's gain over it with a question-
clustered interval, accuracy inside each strategy x position cell, and transfer across strategies.

    from probes.validity import metadata_baseline, paired_gain, within_cell
    meta = metadata_baseline(data.meta, y, groups, fold_ids, Cs=(0.01, 1, 100))   # same outer folds
    gain = paired_gain(probe_pred == y, meta["pred"] == y, questions)             # question bootstrap

The metadata baseline sees no activations: per outer fold the better (by inner CV on the training split) of a
one-hot logistic model (strategy, edit position, edited line index, number of reasoning lines, task/level:
whichever the store has with at least two values; C by the same grouped inner CV as the probe) and a smoothed
lookup table of the strategy x position x level cells (:mod:`probes.baseline`). A probe that only re-reads the
design (which strategy and line were edited) scores as well as this baseline; the headline is the probe's
gain over it.
"""
from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

import numpy as np

from loadbearing.stats import paired_interval

# candidate row columns per metadata feature (first present wins); the activations store writes these
META_FEATURES: dict[str, tuple[str, ...]] = {
    "strategy": ("strategy",),
    "position": ("edit_position", "position"),
    "line_index": ("edit_line", "line_index", "edit_line_index", "edited_line"),
    "n_lines": ("n_lines", "n_reasoning_lines", "num_lines"),
    "task": ("task",),
    "level": ("difficulty", "level"),
    "dataset": ("dataset",),
}


def as_str(v: Any) -> str:
    if v is None or (isinstance(v, float) and np.isnan(v)):
        return "(none)"
    return str(v)


def metadata_features(meta: Any) -> tuple[np.ndarray, list[str]]:
    """``(features [n, m] object, used column names)``: the metadata columns with >= 2 distinct values."""
    cols, used = [], []
    for _, cands in META_FEATURES.items():
        for c in cands:
            if c in getattr(meta, "columns", ()):
                vals = np.array([as_str(v) for v in meta[c]], dtype=object)
                if len(set(vals)) >= 2:
                    cols.append(vals)
                    used.append(c)
                break
    n = len(meta)
    return (np.stack(cols, axis=1) if cols else np.zeros((n, 0), dtype=object)), used


def metadata_baseline(meta: Any, y: np.ndarray, groups: np.ndarray, fold_ids: np.ndarray, *,
                      Cs: Sequence[float], inner_folds: int = 3, seed: int = 0, device: str = "cpu") -> dict[str, Any]:
    """Held-out predictions of the metadata-only baseline over the outer folds (``pred`` -1 where unscored): per
    fold the better of the one-hot logistic model and the smoothed cell lookup, by inner CV on the training
    split (:func:`probes.baseline.metadata_predictions`). ``chosen_per_fold`` says which won."""
    from probes.baseline import metadata_predictions  # deferred: import cycle probes.baseline -> probes.validity
    from probes.fit.permuted import inner_masks  # deferred: probes.fit.permuted loads sklearn, torch

    y = np.asarray(y)
    Y = y[None]
    r = metadata_predictions(meta, Y, fold_ids, inner_masks(Y, np.asarray(groups), fold_ids, inner_folds, seed),
                             Cs=tuple(Cs), device=device)
    return baseline_entry(r, 0)


def baseline_entry(r: dict[str, Any], p: int) -> dict[str, Any]:
    """Row ``p`` of a :func:`probes.baseline.metadata_predictions` result in the shape results.json records."""
    chosen = [str(c) or None for c in r["chosen"][p]]
    counts = {c: chosen.count(c) for c in ("logistic", "lookup") if c in chosen}
    return {"pred": r["pred"][p], "features": r["features"], "cells": r["cells"],
            "merged_columns": list(r.get("merged_columns") or []),
            "C_per_fold": [None if (c != "logistic" or not np.isfinite(v)) else float(v)
                           for c, v in zip(chosen, r["C"][p])],
            "chosen_per_fold": chosen, "chosen_counts": counts,
            "inner_score_per_fold": {"logistic": r["inner_logistic"][p].tolist(),
                                     "lookup": r["inner_lookup"][p].tolist()},
            "note": ("" if r["features"] else "no metadata column with two or more values: the baseline is the "
                     "training-fold majority class")}


def paired_gain(correct_a: np.ndarray, correct_b: np.ndarray, groups: np.ndarray, *, n_boot: int = 0,
                seed: int = 0, level: float = 0.95, scored: np.ndarray | None = None) -> dict[str, Any]:
    """Accuracy of A minus accuracy of B on the same rows, with the question-clustered paired interval of
    :func:`loadbearing.stats.paired_interval` (MOVER on the two Korn-Graubard intervals; rows of a question
    are one unit). ``n_boot`` / ``seed`` are accepted for old callers and unused."""
    del seed
    a = np.asarray(correct_a, dtype=float)
    b = np.asarray(correct_b, dtype=float)
    ok = np.ones(len(a), bool) if scored is None else np.asarray(scored, bool)
    a, b, g = a[ok], b[ok], np.asarray(groups)[ok]
    out: dict[str, Any] = {"value": None, "lo": None, "hi": None, "n_rows": int(len(a)), "n_questions": 0,
                           "method": "question-clustered paired interval (MOVER on Korn-Graubard)",
                           "n_boot": int(n_boot)}
    if not len(a):
        return out
    _, gi = np.unique(g.astype(str), return_inverse=True)
    gi = np.asarray(gi).reshape(-1)
    K = int(gi.max()) + 1
    out["n_questions"] = K
    out["value"] = float((a - b).sum() / len(a))
    if K >= 2:
        sums = [np.bincount(gi, weights=w, minlength=K) for w in (a, b, np.ones(len(a)), (a != b).astype(float))]
        _, lo, hi = paired_interval(sums[0], sums[1], sums[2], sums[3], level)
        out["lo"], out["hi"] = float(lo[0]), float(hi[0])
    return out


def within_cell(y: np.ndarray, pred: np.ndarray, fold_ids: np.ndarray, strategy: Sequence[Any],
                position: Sequence[Any], groups: np.ndarray, level: Sequence[Any] | None = None) -> dict[str, Any]:
    """Inside each strategy x position (x level, when given with two or more values) cell: the probe's held-out
    accuracy against the cell's lookup table, the smoothed majority of the cell's training-fold rows
    (:func:`probes.baseline.cell_lookup`: a small cell leans on its strategy x position parent, an empty one
    is its parent). ``pooled`` sums over cells: the probe's gain over a per-cell lookup table."""
    from probes.baseline import cell_lookup  # deferred: import cycle probes.baseline -> probes.validity

    y = np.asarray(y)
    pred = np.asarray(pred)
    coarse = np.array([f"{as_str(s)} x {as_str(p)}" for s, p in zip(strategy, position)], dtype=object)
    lv = None if level is None else np.array([as_str(v) for v in level], dtype=object)
    cells = coarse if lv is None or len(set(lv)) < 2 else np.array([f"{c} x {v}" for c, v in zip(coarse, lv)],
                                                                    dtype=object)
    K = int(y.max()) + 1
    base = np.full(len(y), -1, dtype=np.int64)
    for k in range(int(fold_ids.max()) + 1):
        tr, te = fold_ids != k, fold_ids == k
        if tr.any() and te.any():
            base[te] = cell_lookup(cells, coarse, y, tr, K)[te]
    ok = pred >= 0
    out: dict[str, Any] = {"cells": {}, "smoothing": "cell counts + 2 pseudo-rows of the strategy x position parent"}
    for c in sorted(set(cells)):
        m = (cells == c) & ok
        n = int(m.sum())
        out["cells"][c] = {
            "n_rows": n, "n_questions": int(len(np.unique(np.asarray(groups)[m].astype(str)))),
            "class_counts": np.bincount(y[m], minlength=K).tolist(),
            "probe_k": int(np.sum(pred[m] == y[m])), "cell_majority_k": int(np.sum(base[m] == y[m])),
            "probe": float(np.mean(pred[m] == y[m])) if n else None,
            "cell_majority": float(np.mean(base[m] == y[m])) if n else None,
        }
    n = int(ok.sum())
    out["pooled"] = {"n_rows": n,
                     "probe": float(np.mean(pred[ok] == y[ok])) if n else None,
                     "cell_majority": float(np.mean(base[ok] == y[ok])) if n else None}
    out["cell_majority_pred"] = base
    return out


FitPredict = Callable[[list[np.ndarray], list[np.ndarray]], list[np.ndarray | None]]


def transfer(y: np.ndarray, fold_ids: np.ndarray, values: Sequence[Any], fit_predict: FitPredict, *,
             mode: str = "leave_one_out") -> list[dict[str, Any]]:
    """Transfer across the values of a metadata column (e.g. strategy), grouped by question.

    ``mode="leave_one_out"``: for each value v and outer fold k, train on the rows with any *other* value
    from the training questions, test on fold k's rows with value v. ``mode="train_on_one"``: train on the
    rows with value v, test on fold k's rows with the other values ("others") and with v ("within").
    ``fit_predict(train_masks, test_masks)`` fits one probe per training mask and returns the predictions
    on its test mask (``None`` when the training rows hold one class). No question is on both sides."""
    y = np.asarray(y)
    vals = np.array([as_str(v) for v in values], dtype=object)
    uniq = sorted(set(vals))
    F = int(fold_ids.max()) + 1
    trains, tests, owner = [], [], []
    for v in uniq:
        for k in range(F):
            tr = ((vals != v) if mode == "leave_one_out" else (vals == v)) & (fold_ids != k)
            te = fold_ids == k
            if mode == "leave_one_out":
                te = te & (vals == v)
            trains.append(tr)
            tests.append(te)
            owner.append((v, k))
    preds = fit_predict(trains, tests)
    out = []
    for v in uniq:
        pred = np.full(len(y), -1, dtype=np.int64)
        skipped, n_train = [], []
        for (w, k), tr, te, p in zip(owner, trains, tests, preds):
            if w != v:
                continue
            if p is None or not te.any():
                skipped.append(k)
                continue
            pred[te] = p
            n_train.append(int(tr.sum()))
        out.append({"value": v, "pred": pred, "skipped_folds": skipped, "n_train_rows_per_fold": n_train})
    return out


def summarise_transfer(res: list[dict[str, Any]], y: np.ndarray, groups: np.ndarray, values: np.ndarray,
                       names: list[str], mode: str, boot: dict[str, int], ref_pred: np.ndarray | None
                       ) -> list[dict[str, Any]]:
    """Scores of :func:`transfer` results: per held-out value (``leave_one_out``, against the in-distribution
    predictions ``ref_pred`` when given) or per training value (``train_on_one``: others, within, per value)."""
    from probes.fit.cv import score_predictions  # deferred: probes.fit.cv loads sklearn

    vals = np.array([as_str(v) for v in values], dtype=object)
    out = []
    for r in res:
        v, pred = r["value"], r["pred"]
        if mode == "leave_one_out":
            m = vals == v
            e = {"held_out": v, "skipped_folds": r["skipped_folds"], "n_train_rows_per_fold": r["n_train_rows_per_fold"],
                 "transfer": score_predictions(y[m], pred[m], names, groups=groups[m], **boot)}
            if ref_pred is not None:
                e["in_distribution"] = score_predictions(y[m], ref_pred[m], names, groups=groups[m], **boot)
                ok = (pred[m] >= 0) & (ref_pred[m] >= 0)
                e["transfer_minus_in_distribution"] = paired_gain(pred[m] == y[m], ref_pred[m] == y[m], groups[m],
                                                                  scored=ok, **boot)
            out.append(e)
        else:
            other = vals != v
            e = {"train_on": v, "skipped_folds": r["skipped_folds"], "n_train_rows_per_fold": r["n_train_rows_per_fold"],
                 "others": score_predictions(y[other], pred[other], names, groups=groups[other], **boot),
                 "within": score_predictions(y[~other], pred[~other], names, groups=groups[~other], **boot),
                 "per_value": {w: score_predictions(y[vals == w], pred[vals == w], names)["accuracy"]
                               for w in sorted(set(vals)) if w != v}}
            out.append(e)
    return out
