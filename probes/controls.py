"""The shuffled-label control: question-level permutations, batched refits, permutation p-values.

    from probes.controls import question_permutations, permutation_p
    Yp = question_permutations(y, questions, n_permutations=100, seed=1)     # [P, n]

Scheme (documented in results.json as ``control_method``):

* Labels are permuted at the question level (:func:`probes.cv.permute_by_group`): each question receives
  another question's label vector, so label structure within a question is kept and any link between a
  question's activations and its labels is broken.
* For every permutation and outer fold the probe is refitted on the permuted training split and scored on
  the held-out fold (same folds as the real probe). Mass-mean has no hyperparameter and is refitted
  exactly. The logistic probe is refitted at the C the real labels chose for that fold instead of
  repeating the inner C search per permutation: the held-out score of a fixed-C fit is still an honest
  held-out score, and this keeps 100+ permutations cheap (one batched solve per layer).
* Per layer: ``p = (1 + #{perm accuracy >= real accuracy}) / (1 + P)``.
* Headline (nested layer selection): the null statistic per permutation is the held-out accuracy of the
  best layer *on each held-out fold* (sum over folds of the per-fold maximum over layers). No selection
  rule can beat that maximum, so comparing the real nested accuracy with it gives a valid, conservative p.
"""
from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from probes.cv import permute_by_group

CONTROL_METHOD = ("question-level label permutations; every permutation refitted on each outer training split "
                  "and scored on the held-out fold; logistic at the C chosen on the real labels for that fold; "
                  "p = (1 + #null >= real) / (1 + P); headline p against the per-fold best layer (conservative)")


def question_permutations(y: np.ndarray, groups: np.ndarray, n_permutations: int, seed: int) -> np.ndarray:
    """``[P, n]`` label vectors, each a question-level permutation of ``y``."""
    rng = np.random.default_rng(seed)
    if n_permutations <= 0:
        return np.zeros((0, len(y)), dtype=np.asarray(y).dtype)
    return np.stack([permute_by_group(y, groups, rng) for _ in range(int(n_permutations))])


def permutation_correct_sklearn(kind: str, X: np.ndarray, y_perms: np.ndarray, fold_ids: np.ndarray,
                                C_per_fold: Sequence[float | None], *, pca: int | None = None,
                                seed: int = 0) -> np.ndarray:
    """The reference (one scikit-learn pipeline per permutation and fold) of
    :func:`probes.fast.permutation_correct`: int ``[P, F]`` correct held-out counts, -1 where skipped."""
    from probes.cv import pipeline_for

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


def null_summary(accs: np.ndarray, level: float = 0.95) -> dict:
    """Mean and central interval of a permutation null (accuracies)."""
    a = np.asarray([v for v in accs if np.isfinite(v)], dtype=float)
    if not len(a):
        return {"rate": None, "wilson": [None, None], "null_interval": [None, None]}
    al = (1 - level) / 2
    iv = [float(np.quantile(a, al)), float(np.quantile(a, 1 - al))]
    # "wilson" kept as the plotted band for readers of schema 1 (it is the null's central interval here)
    return {"rate": float(a.mean()), "wilson": iv, "null_interval": iv, "n_permutations": int(len(a))}


def max_over_layers_null(correct: np.ndarray, n_scored: int) -> np.ndarray:
    """``correct`` int [L, P, F] held-out correct counts -> per-permutation accuracy of the per-fold best layer."""
    c = np.where(correct < 0, 0, correct)
    return c.max(axis=0).sum(axis=1) / max(1, n_scored)
