"""The default steering layer, chosen without the held-out steering questions.

    from probes.steer_layer import steer_folds, layer_score, choose_layer
    f = steer_folds(data.y_c, groups, fit_rows, folds=5, seed=0)     # grouped folds of the fit questions only
    scores = {L: layer_score(be, data.X(L), data.y_c, groups, fit_rows, f) for L in layers}
    choose_layer(scores)                                              # best C-vs-non-C accuracy, ties -> earlier

With ``--steer-holdout`` the steering stage steers only the held-out questions, so the layer it steers by default
must not be picked with their labels (the nested-CV choice of the headline uses every question). The score of
a layer is the logistic probe's grouped cross-validated C-vs-non-C accuracy over the rows of the questions the
directions are fitted on (the same probe, C rule and inner CV as the headline).
"""
from __future__ import annotations

from typing import Any

import numpy as np

METHOD = ("the layer with the best grouped cross-validated C-vs-non-C accuracy of the logistic probe over the "
          "direction-fitting questions only (the held-out steering questions unseen), ties -> earlier layer")


def steer_folds(y_c: np.ndarray, groups: np.ndarray, fit_rows: np.ndarray, folds: int, seed: int) -> np.ndarray | None:
    """Outer fold ids over the fit rows (fewer folds when a class is in too few questions; None below two)."""
    from probes.fit.cv import outer_folds  # deferred: probes.fit.cv loads sklearn
    from probes.fit.estimators import max_group_folds  # deferred: probes.fit.estimators loads sklearn

    y, g = np.asarray(y_c)[fit_rows], np.asarray(groups)[fit_rows]
    if len(np.unique(y)) < 2:
        return None
    k = min(int(folds), max_group_folds(y, g))
    return outer_folds(y, g, k, seed) if k >= 2 else None


def layer_score(be: Any, X: np.ndarray, y_c: np.ndarray, groups: np.ndarray, fit_rows: np.ndarray,
                fold_ids: np.ndarray) -> float:
    """Held-out C-vs-non-C accuracy of the logistic probe over the fit rows (NaN when nothing was scored)."""
    y = np.asarray(y_c)[fit_rows]
    run = be.cv("logistic", np.asarray(X)[fit_rows], y, np.asarray(groups)[fit_rows], fold_ids)
    ok = run["pred"] >= 0
    return float(np.mean(run["pred"][ok] == y[ok])) if ok.any() else float("nan")


def choose_layer(scores: dict[int, float]) -> int | None:
    """The best-scoring layer (ties -> the earlier layer); None without a finite score."""
    live = [(L, s) for L, s in sorted(scores.items()) if np.isfinite(s)]
    return max(live, key=lambda t: (t[1], -t[0]))[0] if live else None


__all__ = ["steer_folds", "layer_score", "choose_layer", "METHOD"]
