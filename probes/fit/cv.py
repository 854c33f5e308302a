"""Question-grouped cross-validation of probes: held-out predictions, scores with intervals, the
shuffled-label control, nested layer selection and transfer checks.

All functions work on numpy arrays (``X`` [n, d], ``y`` int class indices, ``groups`` int per row), so tests
and the benchmark call them without a store.

* :func:`outer_folds` - ``StratifiedGroupKFold`` fold id per row (all rows of a question in one fold).
* :func:`cross_val_predict_grouped` - fit a fresh pipeline on each training split (groups passed to the
  probe's inner CV), predict the held-out fold; records each fold's inner CV score.
* :func:`score_predictions` - accuracy and balanced accuracy with Wilson intervals (rows), the question-clustered
  Korn-Graubard interval as the accuracy's lo/hi (rows of a question are not independent) and a question
  bootstrap (``cluster_ci``, balanced accuracy too), AUC for two classes.
* :func:`permute_by_group` - the control's labels: whole questions' label vectors exchanged between questions
  with the same design (set of strategy x position x level cells).
* :func:`nested_selection` - per outer fold, the layer whose *inner* CV score (computed on that fold's
  training split only) is best, scored on the held-out fold.
* :func:`transfer_check` - train on rows with one strategy (or edit position) from the training questions,
  test on the other values' rows of the held-out questions.
"""
from __future__ import annotations

import warnings
from typing import Any

import numpy as np
from sklearn.metrics import roc_auc_score
from sklearn.model_selection import StratifiedGroupKFold

from loadbearing.stats import cluster_sums_bootstrap, clustered_rate, rate
from probes.fit.estimators import DEFAULT_CS, make_probe_pipeline


def outer_folds(y, groups, folds: int, seed: int = 0) -> np.ndarray:
    """Fold index (0..folds-1) per row from ``StratifiedGroupKFold(shuffle=True, random_state=seed)``."""
    fold = np.full(len(y), -1, dtype=np.int64)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", UserWarning)
        cv = StratifiedGroupKFold(n_splits=folds, shuffle=True, random_state=seed)
        for k, (_, te) in enumerate(cv.split(np.zeros(len(y)), y, groups)):
            fold[te] = k
    return fold


def pipeline_for(kind: str, n_train: int, d: int, *, pca: int | None = None, seed: int = 0, inner_folds: int = 3,
                 Cs=DEFAULT_CS, class_weight=None):
    """A fresh probe pipeline; PCA capped at min(training rows, features)."""
    p = min(int(pca), n_train, d) if pca else None
    return make_probe_pipeline(kind, pca=p, seed=seed, inner_folds=inner_folds, Cs=Cs, class_weight=class_weight)


def cross_val_predict_grouped(kind: str, X, y, groups, fold_ids, *, seed: int = 0, **pipe_kw) -> dict:
    """Held-out predictions of ``kind`` over the outer folds.

    Returns ``{"pred" [n], "decision" [n] (two classes) or [n, K], "inner_score" [folds], "C" [folds] (logistic),
    "n_convergence_warnings", "skipped_folds"}``; a fold whose training split holds one class only is skipped
    (its rows get ``pred = -1`` and stay unscored).
    """
    X = np.asarray(X)
    y = np.asarray(y)
    groups = np.asarray(groups)
    n_classes = len(np.unique(y))
    pred = np.full(len(y), -1, dtype=np.int64)
    dec = np.full(len(y) if n_classes <= 2 else (len(y), n_classes), np.nan)
    inner, Cs, nwarn, skipped = [], [], 0, []
    C_per_fold: list[float | None] = []
    for k in range(int(fold_ids.max()) + 1):
        tr, te = fold_ids != k, fold_ids == k
        if not te.any() or len(np.unique(y[tr])) < 2:  # nothing to score / nothing to learn: rows unscored
            inner.append(float("nan"))
            skipped.append(k)
            C_per_fold.append(None)
            continue
        pipe = pipeline_for(kind, int(tr.sum()), X.shape[1], seed=seed, **pipe_kw)
        pipe.fit(X[tr], y[tr], probe__groups=groups[tr])
        probe = pipe.named_steps["probe"]
        pred[te] = pipe.predict(X[te])
        d = pipe.decision_function(X[te])
        if dec.ndim == 1:
            dec[te] = d
        elif d.ndim == 2 and d.shape[1] == n_classes:
            dec[te] = d
        inner.append(float(probe.inner_score_))
        C_per_fold.append(float(probe.C_) if hasattr(probe, "C_") else None)
        if hasattr(probe, "C_"):
            Cs.append(float(probe.C_))
        nwarn += int(getattr(probe, "n_convergence_warnings_", 0))
    return {"pred": pred, "decision": dec, "inner_score": inner, "C": Cs, "C_per_fold": C_per_fold,
            "n_convergence_warnings": nwarn, "skipped_folds": skipped}


def _cluster_boot(groups, y, correct, n_classes: int, n_boot: int, seed: int, level: float):
    """Percentile bootstrap over clusters (questions) for accuracy and balanced accuracy
    (:func:`loadbearing.stats.cluster_sums_bootstrap` of per-class row and correct counts)."""
    onehot = np.eye(n_classes)[y]  # [n, classes]
    counts = np.stack([onehot, onehot * correct[:, None]], axis=1)  # [n, 2, classes]: rows, correct rows
    present = onehot.sum(0) > 0

    def acc_and_balanced(sums: np.ndarray) -> list[np.ndarray]:  # sums [B, 2, classes]
        N, C = sums[:, 0], sums[:, 1]
        with np.errstate(invalid="ignore", divide="ignore"):
            rec = np.where(N > 0, C / np.where(N > 0, N, 1), np.nan)
        return [C.sum(1) / N.sum(1), np.nanmean(rec[:, present], axis=1)]

    ci = cluster_sums_bootstrap(groups, counts, acc_and_balanced, n_boot=n_boot, seed=seed, level=level)
    return ci if ci is not None else ([None, None], [None, None])


def score_predictions(y, pred, class_names, *, groups=None, decision=None, n_boot: int = 1000, seed: int = 0,
                      level: float = 0.95) -> dict:
    """Accuracy / balanced accuracy of held-out predictions (rows with ``pred < 0`` are unscored)."""
    y = np.asarray(y)
    pred = np.asarray(pred)
    ok = pred >= 0
    y, p = y[ok], pred[ok]
    correct = (y == p)
    out: dict[str, Any] = {"accuracy": rate(int(correct.sum()), int(len(y)), level)}
    recalls = {}
    vals = []
    for i, c in enumerate(class_names):
        m = y == i
        recalls[c] = rate(int(correct[m].sum()), int(m.sum()), level)
        if m.any():
            vals.append(correct[m].mean())
    out["balanced_accuracy"] = {"value": float(np.mean(vals)) if vals else None, "recall": recalls}
    if groups is not None and len(y):
        acc_ci, bal_ci = _cluster_boot(np.asarray(groups)[ok], y, correct, len(class_names), n_boot, seed, level)
        out["accuracy"]["cluster_ci"] = acc_ci
        out["balanced_accuracy"]["cluster_ci"] = bal_ci
        cr = clustered_rate(correct.tolist(), np.asarray(groups)[ok].astype(str).tolist())
        if cr.lo is not None:  # lead with the question-clustered interval (loadbearing.stats.Rate form)
            out["accuracy"].update(lo=cr.lo, hi=cr.hi, method=cr.method, few_clusters=cr.few_clusters)
        out["accuracy"]["n_questions"] = int(len(np.unique(np.asarray(groups)[ok].astype(str))))
    if decision is not None and len(class_names) == 2 and len(np.unique(y)) == 2:
        d = np.asarray(decision)[ok]
        if d.ndim == 1 and np.all(np.isfinite(d)):
            out["auc"] = float(roc_auc_score(y, d))
    return out


def majority_baseline(y, fold_ids, class_names, level: float = 0.95) -> dict:
    """Predict each training split's majority class on its held-out fold (ties -> lower class index)."""
    y = np.asarray(y)
    pred = np.full(len(y), -1, dtype=np.int64)
    for k in range(int(fold_ids.max()) + 1):
        tr, te = fold_ids != k, fold_ids == k
        pred[te] = int(np.argmax(np.bincount(y[tr], minlength=len(class_names))))
    out = score_predictions(y, pred, class_names)
    out["overall_majority"] = {"class": class_names[int(np.argmax(np.bincount(y, minlength=len(class_names))))],
                               **rate(int(np.bincount(y).max()), len(y), level)}
    return out


def permute_by_group(y, groups, rng: np.random.Generator, cells=None, info: dict | None = None) -> np.ndarray:
    """Shuffled-label control: whole questions' label vectors exchanged between questions of the same design.

    ``cells`` (one key per row, e.g. strategy x position x level; default one cell) define each question's
    design: the sorted list of its rows' cells. Questions with the same design form a block and exchange
    their label vectors within it, row for row in cell order, so every row keeps its metadata, each
    question's labels stay together and the label-metadata link is kept (class counts exact). Questions
    whose design no other question shares fall back to a row-level permutation within each cell across
    those questions (the label-metadata link kept, within-question structure not). ``info``, when given, is
    filled with the counts: ``n_questions``, ``n_blocks``, ``n_exchanged`` (questions in blocks of two or
    more), ``n_fallback_questions``, ``n_fallback_rows``. With one row per question and no cells this is a
    plain permutation.
    """
    y = np.asarray(y)
    groups = np.asarray(groups)
    cell = np.zeros(len(y), dtype=np.int64) if cells is None else np.unique(np.asarray(cells).astype(str),
                                                                           return_inverse=True)[1].reshape(-1)
    uniq, inv = np.unique(groups, return_inverse=True)
    inv = np.asarray(inv).reshape(-1)
    order = np.lexsort((np.arange(len(y)), cell, inv))  # rows by question, then cell, then position
    bounds = np.flatnonzero(np.diff(inv[order])) + 1
    members = np.split(order, bounds) if len(order) else []
    blocks: dict[tuple, list[int]] = {}
    for i, m in enumerate(members):
        blocks.setdefault(tuple(cell[m].tolist()), []).append(i)
    out = y.copy()
    orphans: list[int] = []
    for qs in blocks.values():
        if len(qs) < 2:
            orphans.extend(qs)
            continue
        for r, dnr in zip(qs, rng.permutation(qs)):
            out[members[r]] = y[members[dnr]]
    rows = np.concatenate([members[i] for i in orphans]) if orphans else np.zeros(0, dtype=np.int64)
    if len(orphans) >= 2:
        for c in np.unique(cell[rows]):
            rc = rows[cell[rows] == c]
            out[rc] = y[rng.permutation(rc)]
    if info is not None:
        info.update(n_questions=len(members), n_blocks=sum(1 for qs in blocks.values() if len(qs) >= 2),
                    n_exchanged=len(members) - len(orphans), n_fallback_questions=len(orphans) if len(orphans) >= 2
                    else 0, n_fallback_rows=int(len(rows)) if len(orphans) >= 2 else 0,
                    n_fixed_questions=1 if len(orphans) == 1 else 0)
    return out


def nested_selection(per_layer: dict, layers: list[int], y, fold_ids) -> dict:
    """Honest layer selection: for each outer fold, pick the layer with the best inner-CV score on that
    fold's training split, and take that layer's predictions on the held-out fold.

    ``per_layer[L]`` is a :func:`cross_val_predict_grouped` result. Ties -> the earlier layer; a fold with
    no inner score at any layer falls back to the first layer (recorded).
    """
    y = np.asarray(y)
    pred = np.full(len(y), -1, dtype=np.int64)
    dec = None
    chosen, fallback = [], []
    for k in range(int(fold_ids.max()) + 1):
        te = fold_ids == k
        s = np.array([per_layer[L]["inner_score"][k] for L in layers], dtype=float)
        if np.all(np.isnan(s)):
            j = 0
            fallback.append(k)
        else:
            j = int(np.nanargmax(s))
        L = layers[j]
        chosen.append(int(L))
        pred[te] = per_layer[L]["pred"][te]
        d = per_layer[L]["decision"]
        if d.ndim == 1:
            if dec is None:
                dec = np.full(len(y), np.nan)
            dec[te] = d[te]
    return {"pred": pred, "decision": dec, "chosen_layers": chosen, "fallback_folds": fallback}


def transfer_check(kind: str, X, y, groups, fold_ids, values, class_names, *, seed: int = 0, n_boot: int = 1000,
                   **pipe_kw) -> list[dict]:
    """Train on one value of ``values`` (e.g. strategy) and test on the other values, grouped by question.

    For each outer fold k: train on rows with value ``v`` whose question is outside fold k; test on rows of
    fold k's questions with any other value ("others") and, for reference, with value ``v`` ("within"). No
    question is ever on both sides. Folds whose training rows hold a single class are skipped (counted).
    """
    X = np.asarray(X)
    y = np.asarray(y)
    groups = np.asarray(groups)
    values = np.asarray([("(none)" if v is None or v == "" else str(v)) for v in values], dtype=object)
    uniq = sorted(set(values))
    out = []
    for v in uniq:
        pred = np.full(len(y), -1, dtype=np.int64)
        skipped = []
        n_train = []
        for k in range(int(fold_ids.max()) + 1):
            tr = (values == v) & (fold_ids != k)
            te = (fold_ids == k)
            if len(np.unique(y[tr])) < 2:
                skipped.append(k)
                continue
            pipe = pipeline_for(kind, int(tr.sum()), X.shape[1], seed=seed, **pipe_kw)
            pipe.fit(X[tr], y[tr], probe__groups=groups[tr])
            n_train.append(int(tr.sum()))
            pred[te] = pipe.predict(X[te])
        other = values != v
        res = {
            "train_on": v,
            "n_train_rows_per_fold": n_train,
            "skipped_folds": skipped,
            "others": score_predictions(y[other], pred[other], class_names, groups=groups[other], n_boot=n_boot,
                                        seed=seed),
            "within": score_predictions(y[~other], pred[~other], class_names, groups=groups[~other], n_boot=n_boot,
                                        seed=seed),
            "per_value": {},
        }
        for w in uniq:
            if w == v:
                continue
            m = values == w
            res["per_value"][w] = score_predictions(y[m], pred[m], class_names)["accuracy"]
        out.append(res)
    return out
