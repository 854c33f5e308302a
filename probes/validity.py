"""What a probe's accuracy means: the metadata-only baseline, the probe's gain over it with a question-
clustered interval, accuracy inside each strategy x position cell, and transfer across strategies.

    from probes.validity import metadata_baseline, paired_gain, within_cell
    meta = metadata_baseline(data.meta, y, groups, fold_ids, Cs=(0.01, 1, 100))   # same outer folds
    gain = paired_gain(probe_pred == y, meta["pred"] == y, questions)             # question bootstrap

The metadata baseline sees no activations: one-hot strategy, edit position, edited line index, number of
reasoning lines and task/level (whichever the store has, with at least two values), in a scikit-learn
``Pipeline(OneHotEncoder, LogisticProbe)`` fitted inside each outer training fold, its C chosen by the same
grouped inner CV as the probe. A probe that only re-reads the design (which strategy and line were edited)
scores as well as this baseline; the headline is the probe's gain over it.
"""
from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

import numpy as np

from loadbearing.stats import cluster_sums_bootstrap

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
                      Cs: Sequence[float], inner_folds: int = 3, seed: int = 0) -> dict[str, Any]:
    """Held-out predictions of the metadata-only pipeline over the outer folds (``pred`` -1 where unscored).

    With no usable metadata column it predicts the training fold's majority class (recorded in ``note``)."""
    from sklearn.pipeline import Pipeline
    from sklearn.preprocessing import OneHotEncoder

    from probes.estimators import LogisticProbe

    y = np.asarray(y)
    F, used = metadata_features(meta)
    pred = np.full(len(y), -1, dtype=np.int64)
    Cs_chosen: list[float | None] = []
    for k in range(int(fold_ids.max()) + 1):
        tr, te = fold_ids != k, fold_ids == k
        if not te.any():
            Cs_chosen.append(None)
            continue
        if not used or len(np.unique(y[tr])) < 2:
            pred[te] = int(np.argmax(np.bincount(y[tr], minlength=int(y.max()) + 1)))
            Cs_chosen.append(None)
            continue
        pipe = Pipeline([("onehot", OneHotEncoder(handle_unknown="ignore", sparse_output=False)),
                         ("probe", LogisticProbe(Cs=tuple(Cs), inner_folds=inner_folds, random_state=seed))])
        pipe.fit(F[tr], y[tr], probe__groups=np.asarray(groups)[tr])
        pred[te] = pipe.predict(F[te])
        Cs_chosen.append(float(pipe.named_steps["probe"].C_))
    return {"pred": pred, "features": used, "C_per_fold": Cs_chosen,
            "note": ("" if used else "no metadata column with two or more values: the baseline is the "
                     "training-fold majority class")}


def paired_gain(correct_a: np.ndarray, correct_b: np.ndarray, groups: np.ndarray, *, n_boot: int = 1000,
                seed: int = 0, level: float = 0.95, scored: np.ndarray | None = None) -> dict[str, Any]:
    """Accuracy of A minus accuracy of B on the same rows, with a percentile bootstrap over questions of the
    per-row correctness difference (rows of one question resampled together)."""
    a = np.asarray(correct_a, dtype=float)
    b = np.asarray(correct_b, dtype=float)
    ok = np.ones(len(a), bool) if scored is None else np.asarray(scored, bool)
    a, b, g = a[ok], b[ok], np.asarray(groups)[ok]
    out: dict[str, Any] = {"value": None, "lo": None, "hi": None, "n_rows": int(len(a)), "n_questions": 0,
                           "method": "paired cluster bootstrap over questions", "n_boot": int(n_boot)}
    if not len(a):
        return out
    gs = g.astype(str)
    d = a - b
    out["n_questions"] = int(len(np.unique(gs)))
    out["value"] = float(d.sum() / len(d))
    ci = cluster_sums_bootstrap(gs, np.stack([d, np.ones(len(d))], axis=1), lambda s: [s[:, 0] / s[:, 1]],
                                n_boot=n_boot, seed=seed, level=level)
    if ci is not None:
        out["lo"], out["hi"] = ci[0]
    return out


def within_cell(y: np.ndarray, pred: np.ndarray, fold_ids: np.ndarray, strategy: Sequence[Any],
                position: Sequence[Any], groups: np.ndarray) -> dict[str, Any]:
    """Inside each strategy x position cell: the probe's held-out accuracy against the cell's majority class
    (the majority of that cell's rows in each training fold, predicted on the cell's held-out rows; the
    fold's overall majority where the cell has no training rows). ``pooled`` sums over cells: the probe's
    gain over a per-cell lookup table."""
    y = np.asarray(y)
    pred = np.asarray(pred)
    cells = np.array([f"{as_str(s)} x {as_str(p)}" for s, p in zip(strategy, position)], dtype=object)
    K = int(y.max()) + 1
    base = np.full(len(y), -1, dtype=np.int64)
    for k in range(int(fold_ids.max()) + 1):
        tr, te = fold_ids != k, fold_ids == k
        overall = int(np.argmax(np.bincount(y[tr], minlength=K))) if tr.any() else 0
        for c in np.unique(cells[te]):
            m_tr = tr & (cells == c)
            base[te & (cells == c)] = int(np.argmax(np.bincount(y[m_tr], minlength=K))) if m_tr.any() else overall
    ok = pred >= 0
    out: dict[str, Any] = {"cells": {}}
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
    from probes.cv import score_predictions

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
