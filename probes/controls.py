"""The shuffled-label control: question-level label exchanges within designs, refits that choose C as the real
fit does, and permutation p-values for the per-layer accuracy, the nested headline and its gain over metadata.

    from probes.controls import question_permutations, layer_control, nested_null, permutation_p
    Yp, info = question_permutations(y, questions, n_permutations=100, seed=1, cells=cells, with_info=True)

Scheme (documented in results.json as ``control_method``):

* Labels are exchanged at the question level between questions with the same design, the sorted list of
  their rows' (strategy, position, level) cells (:func:`probes.fit.cv.permute_by_group`): each row keeps its
  metadata, each question's labels stay together and the label-metadata link is kept, so the null is "the
  activations carry nothing about the label beyond the design". Questions whose design is unique fall back
  to a row-level permutation within each cell across them; the counts are reported (``info``).
* Every permuted label vector is cross-validated on the same outer folds as the real labels are
  (:func:`layer_control`): inner grouped splits of that vector, C chosen by the inner CV along the same C path
  up to the largest C the real labels chose at that layer (:func:`control_cs`; logistic), mass-mean in
  closed form; the inner scores drive the same nested layer selection.
* A fold a refit skips (one class in its training split) is left out of both the numerator and the
  denominator of that permutation's accuracy.
* Per layer: ``p = (1 + #{perm accuracy >= real accuracy}) / (1 + P)``. Headline: each permutation's nested
  accuracy (:func:`nested_null`, the same layer rule on the permuted inner scores). Gain: each permutation's
  nested probe minus its own metadata baseline (refitted on the permuted labels, :mod:`probes.baseline`),
  against the real gain (:func:`gain_null`).
"""
from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np

from probes.fit.cv import permute_by_group, pipeline_for

CONTROL_METHOD = ("question-level label exchanges between questions with the same (strategy, position, level) "
                  "design (row-level within cells where a design is unique); every permutation cross-validated "
                  "like the real labels (inner-CV C per refit on the C path up to the largest C the real labels "
                  "chose at that layer, same outer folds, skipped folds left out); nested "
                  "layer selection and the metadata baseline refitted per permutation; "
                  "p = (1 + #null >= real) / (1 + P)")


def question_permutations(y: np.ndarray, groups: np.ndarray, n_permutations: int, seed: int, cells=None,
                          with_info: bool = False) -> Any:
    """``[P, n]`` label vectors, each a question-level exchange of ``y`` within designs (``cells`` per row);
    with ``with_info`` also the exchange counts of :func:`probes.fit.cv.permute_by_group`."""
    rng = np.random.default_rng(seed)
    info: dict[str, Any] = {}
    if n_permutations <= 0:
        Yp = np.zeros((0, len(y)), dtype=np.asarray(y).dtype)
        permute_by_group(y, groups, np.random.default_rng(seed), cells, info)
    else:
        Yp = np.stack([permute_by_group(y, groups, rng, cells, info) for _ in range(int(n_permutations))])
    if with_info:
        info["fallback"] = ("none" if not info.get("n_fallback_questions") else
                            f"{info['n_fallback_questions']} questions with a unique design permuted row by row "
                            f"within cells ({info['n_fallback_rows']} rows)")
        return Yp, info
    return Yp


def layer_control(be: Any, kind: str, X: np.ndarray, Yp: np.ndarray, groups: np.ndarray, fold_ids: np.ndarray,
                  splits: list | None, C_per_fold: Sequence[float | None]) -> tuple[np.ndarray, np.ndarray | None]:
    """The permuted refits of probe ``kind`` at one layer: ``(correct [P', F] (-1 skipped), inner [P', F] or None)``.

    Logistic and mass-mean are cross-validated exactly as the real labels are: batched on the torch backend
    (:func:`probes.fit.permuted.cv_many`, with the inner splits ``splits`` of :func:`probes.fit.permuted.inner_masks`),
    or through ``be.cv`` once per permutation on the scikit-learn backend (the very function that fitted the
    real labels). Any other probe (e.g. ``mlp``) goes through ``be.permutations`` (its own refits, which may
    cover only the first P' permutations) and has no inner scores (``None``: the nested null then falls back to
    the per-fold best layer, conservative)."""
    from probes.fit.permuted import cv_many, fold_correct  # deferred: probes.fit.permuted loads torch

    F = int(fold_ids.max()) + 1
    if len(Yp) == 0:
        return np.zeros((0, F), dtype=np.int64), np.zeros((0, F))
    if kind not in ("logistic", "mass_mean"):
        return np.asarray(be.permutations(kind, X, Yp, fold_ids, list(C_per_fold))), None
    if getattr(be, "solver", None) == "torch" and splits is not None:
        r = cv_many(kind, X, Yp, fold_ids, splits, Cs=control_cs(be.Cs, C_per_fold), device=be.device)
        return fold_correct(r["pred"], Yp, fold_ids), r["inner"]
    pred = np.full(Yp.shape, -1, dtype=np.int64)
    inner = np.full((len(Yp), F), np.nan)
    for p, yp in enumerate(Yp):
        run = be.cv(kind, X, yp, groups, fold_ids)
        pred[p] = run["pred"]
        inner[p, : len(run["inner_score"])] = run["inner_score"]
    return fold_correct(pred, Yp, fold_ids), inner


def control_cs(Cs: Sequence[float], C_per_fold: Sequence[float | None]) -> tuple[float, ...]:
    """The C path of the permuted logistic refits at one layer: the study's path (ascending) up to the largest C
    the real labels chose at that layer (at least its three smallest values). Larger Cs lost every real inner
    CV and cost most of the solver's time (weak regularisation converges slowly); on permuted labels the inner
    CV favours strong regularisation further still. The calibration bench measures the size with this path."""
    cs = sorted(float(c) for c in Cs)
    chosen = [float(c) for c in C_per_fold if c is not None and np.isfinite(c)]
    top = max(chosen + [cs[min(2, len(cs) - 1)]])
    return tuple(c for c in cs if c <= top * (1 + 1e-9))


def fold_accuracy(correct: np.ndarray, sizes: np.ndarray) -> np.ndarray:
    """Per permutation accuracy from ``correct`` [P, F] (-1 = skipped fold, left out of both sides)."""
    c = np.asarray(correct)
    n = ((c >= 0) * sizes[None, :]).sum(1)
    return np.where(n > 0, np.where(c < 0, 0, c).sum(1) / np.maximum(n, 1), np.nan)


def nested_null(correct: np.ndarray, inner: np.ndarray) -> np.ndarray:
    """``[P, F]`` correct counts of nested layer selection on permuted labels: per permutation and fold the layer
    with the best inner score (ties -> earlier; no score at any layer -> the first layer), as
    :func:`probes.fit.cv.nested_selection` does for the real labels. ``correct`` / ``inner``: ``[L, P, F]``."""
    s = np.where(np.isnan(inner), -np.inf, inner)
    j = np.argmax(s, axis=0)  # [P, F]; all -inf -> 0 (the first layer)
    return np.take_along_axis(correct, j[None], axis=0)[0]


def gain_null(probe_correct: np.ndarray, meta_correct: np.ndarray, sizes: np.ndarray) -> np.ndarray:
    """Per permutation: (probe correct - metadata correct) / rows, over folds both scored (``[P, F]`` each)."""
    both = (probe_correct >= 0) & (meta_correct >= 0)
    n = (both * sizes[None, :]).sum(1)
    d = np.where(both, probe_correct - meta_correct, 0).sum(1)
    return np.where(n > 0, d / np.maximum(n, 1), np.nan)


def permutation_correct_sklearn(kind: str, X: np.ndarray, y_perms: np.ndarray, fold_ids: np.ndarray,
                                C_per_fold: Sequence[float | None], *, pca: int | None = None,
                                seed: int = 0) -> np.ndarray:
    """Fixed-C refits (one scikit-learn pipeline per permutation and fold; the reference of
    :func:`probes.fit.fast.permutation_correct`): int ``[P, F]`` correct held-out counts, -1 where skipped. Not the
    study's control any more (that chooses C inside every refit, :func:`layer_control`)."""
    X = np.asarray(X)
    Yp = np.atleast_2d(np.asarray(y_perms))
    F = int(fold_ids.max()) + 1
    out = np.full((len(Yp), F), -1, dtype=np.int64)
    for p, yp in enumerate(Yp):
        for k in range(F):
            tr, te = fold_ids != k, fold_ids == k
            if len(np.unique(yp[tr])) < 2 or not te.any():
                continue
            if kind == "logistic":
                Ck = C_per_fold[k]
                if Ck is None:
                    continue
                pipe = pipeline_for(kind, int(tr.sum()), X.shape[1], pca=pca, seed=seed, inner_folds=0, Cs=(float(Ck),))
            else:
                pipe = pipeline_for(kind, int(tr.sum()), X.shape[1], pca=pca, seed=seed, inner_folds=0)
            pipe.fit(X[tr], yp[tr])
            out[p, k] = int(np.sum(pipe.predict(X[te]) == yp[te]))
    return out


def permutation_p(real: float | None, null: Sequence[float] | np.ndarray) -> float | None:
    """``(1 + #{null >= real}) / (1 + P)``; None without a real value or a null."""
    vals = [float(v) for v in null if v is not None and np.isfinite(v)]
    if real is None or not vals:
        return None
    return float((1 + sum(v >= real - 1e-12 for v in vals)) / (1 + len(vals)))


def null_summary(accs: np.ndarray, level: float = 0.95) -> dict[str, Any]:
    """Mean and central interval of a permutation null (accuracies)."""
    a = np.asarray([v for v in accs if np.isfinite(v)], dtype=float)
    if not len(a):
        return {"rate": None, "wilson": [None, None], "null_interval": [None, None]}
    al = (1 - level) / 2
    iv = [float(np.quantile(a, al)), float(np.quantile(a, 1 - al))]
    # "wilson" kept as the plotted band for readers of schema 1 (it is the null's central interval here)
    return {"rate": float(a.mean()), "wilson": iv, "null_interval": iv, "n_permutations": int(len(a))}


def max_over_layers_null(correct: np.ndarray, n_scored: int) -> np.ndarray:
    """``correct`` int [L, P, F] held-out correct counts -> per-permutation accuracy of the per-fold best layer
    (an upper bound on any layer-selection rule; the study now uses the exact rule, :func:`nested_null`)."""
    c = np.where(correct < 0, 0, correct)
    return c.max(axis=0).sum(axis=1) / max(1, n_scored)
