"""Design matrices for a fit: positions that share one generation merged into one level, and columns that
duplicate or depend on others removed, each with a note naming what was merged or dropped.

    from loadbearing.stats.design import merged_position, position_index, full_rank
    merged_position(["late", "middle"])   # "middle=late": the positions one generation fills, in order
    position_index("middle=late")         # 1.5 (early=0, middle=1, late=2; a merged level: the mean of its parts)
    X, notes = full_rank(X)               # X without duplicate / dependent columns; the notes name each one

Why: the edited line of a position is ``min(n - 2, floor(n * f))`` (:mod:`loadbearing.questions.prompts`),
so with 3 or 4 reasoning lines *middle* and *late* edit the same line and share one generation. Coded as two
positions, that generation enters a model twice with the same outcome, and the two position coefficients come
out identical: one estimate printed twice. Every fit therefore codes a generation by the positions it fills
together (``middle=late``), and checks the rank of its design matrix before fitting: a column equal to an
earlier one is merged into it (its coefficient would not be identified), a column that is a linear
combination of earlier ones (or zero) is dropped. Earlier columns are kept, so the intercept and main effects
win over interactions. Penalised fits (the probes' one-hot metadata model) use :func:`distinct_columns`,
which removes only exact duplicates: a penalty identifies the rest, but a duplicate column halves its own
penalty.
"""
from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import Any

import numpy as np

from loadbearing.questions.prompts import POSITION_FRACTIONS

__all__ = ["POSITION_ORDER", "SEP", "distinct_columns", "full_rank", "merged_position", "position_index",
           "position_parts", "position_sort_key"]

#: the protocol's positions, earliest first (their index is the position trend's x)
POSITION_ORDER: tuple[str, ...] = tuple(POSITION_FRACTIONS)
#: joins the positions one generation fills: ``middle=late``
SEP = "="


def position_parts(label: str) -> tuple[str, ...]:
    """The positions a (possibly merged) label stands for: ``"middle=late"`` -> ``("middle", "late")``."""
    return tuple(p for p in str(label).split(SEP) if p)


def position_sort_key(label: str) -> tuple[float, str]:
    """Order labels by :func:`position_index` (unknown positions last, by name)."""
    i = position_index(label)
    return (float("inf") if i is None else i, str(label))


def merged_position(positions: Iterable[str]) -> str:
    """One label for the positions one generation fills: the distinct parts in protocol order joined by ``=``
    (``["late", "middle"]`` -> ``"middle=late"``; a single position is itself; unknown names after, by name)."""
    parts = {q for p in positions for q in position_parts(p)}
    known = [p for p in POSITION_ORDER if p in parts]
    return SEP.join(known + sorted(parts - set(known)))


def position_index(label: str) -> float | None:
    """The trend test's x: early 0, middle 1, late 2; a merged label the mean of its parts (``middle=late`` 1.5,
    the one index of a generation that is both); None when any part is not a protocol position."""
    parts = position_parts(label)
    if not parts or any(p not in POSITION_ORDER for p in parts):
        return None
    return float(np.mean([POSITION_ORDER.index(p) for p in parts]))


def _matrix(X: Any) -> tuple[np.ndarray, list[str]]:
    names = [str(c) for c in getattr(X, "columns", range(np.shape(X)[1]))]
    return np.asarray(X, dtype=float), names


def _duplicates(A: np.ndarray, names: Sequence[str]) -> tuple[list[int], list[str]]:
    """(indices of the columns kept, notes): each column equal in every row to an earlier kept one is merged."""
    keep: list[int] = []
    notes: list[str] = []
    for j in range(A.shape[1]):
        same = next((k for k in keep if np.array_equal(A[:, k], A[:, j])), None)
        if same is None:
            keep.append(j)
        else:
            notes.append(f"{names[j]} equals {names[same]} in every row: merged into {names[same]} (one coefficient)")
    return keep, notes


def distinct_columns(X: Any) -> tuple[Any, list[str]]:
    """``(X without columns that duplicate an earlier one, notes naming each merge)``; ``X`` a DataFrame or an
    array (returned as the same type)."""
    A, names = _matrix(X)
    keep, notes = _duplicates(A, names)
    return _take(X, A, keep), notes


def full_rank(X: Any, *, tol: float | None = None) -> tuple[Any, list[str]]:
    """``(X of full column rank, notes)``: duplicates of earlier columns merged (:func:`distinct_columns`), then
    each column that adds no rank to the columns before it (zero, or a linear combination of them) dropped,
    checked with :func:`numpy.linalg.matrix_rank`. The notes name every column merged or dropped and why."""
    A, names = _matrix(X)
    keep, notes = _duplicates(A, names)
    if keep and np.linalg.matrix_rank(A[:, keep], tol=tol) < len(keep):
        kept: list[int] = []
        for j in keep:
            if np.linalg.matrix_rank(A[:, kept + [j]], tol=tol) > len(kept):
                kept.append(j)
            elif not np.any(A[:, j]):
                notes.append(f"{names[j]} is zero in every row: dropped")
            else:
                shown = ", ".join(names[k] for k in kept[:6]) + (", ..." if len(kept) > 6 else "")
                notes.append(f"{names[j]} is a linear combination of the columns before it ({shown}): dropped "
                             f"(not identified)")
        keep = kept
    return _take(X, A, keep), notes


def _take(X: Any, A: np.ndarray, keep: list[int]) -> Any:
    if len(keep) == A.shape[1]:
        return X
    if hasattr(X, "iloc"):
        return X.iloc[:, keep]
    return A[:, keep]
