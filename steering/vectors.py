"""Steering vectors: combining a basis of directions into the one vector a setting adds (dose-matched).

    from steering.vectors import combine_directions
    v = combine_directions(basis)            # basis [k, d_model] -> [d_model], norm of one direction

For a basis of k directions ``d_1..d_k``, ``dose="matched"`` gives ``v = (sum_i d_i) * mean_i ||d_i|| /
||sum_i d_i||``, the sum rescaled to the norm of one direction (for orthonormal rows ``||v|| = 1`` whatever k),
so k = 8 is not a sqrt(8)-times bigger push than k = 1; ``dose="sum"`` is the paper's unmatched ``sum_i d_i``.
Torch is imported only when a vector is built.
"""
from __future__ import annotations

from typing import TYPE_CHECKING, Any

import numpy as np

from steering.errors import SteeringError

if TYPE_CHECKING:
    from torch import Tensor

DOSES = ("matched", "sum")


def as_tensor(x: Any, dtype: Any = None) -> Tensor:
    """``x`` (tensor, array or sequence) as a detached torch tensor of ``dtype`` (default float32)."""
    import torch  # deferred: torch is heavy to import

    if isinstance(x, torch.Tensor):
        t = x.detach()
    else:
        t = torch.as_tensor(np.asarray(x))
    return t.to(dtype or torch.float32)


def combine_directions(directions: Any, dose: str = "matched") -> Tensor:
    """Combine a basis ``[k, d_model]`` (or one ``[d_model]`` direction) into one vector ``[d_model]``.

    ``dose="matched"``: the sum rescaled to the mean norm of one direction (unit for orthonormal rows);
    ``dose="sum"``: the plain sum (norm sqrt(k) for orthonormal rows; the paper's choice).
    """
    import torch  # deferred: torch is heavy to import

    if dose not in DOSES:
        raise SteeringError(f"unknown dose {dose!r}; choose one of {', '.join(DOSES)}")
    d = as_tensor(directions, torch.float64)
    if d.ndim == 1:
        d = d[None]
    if d.ndim != 2 or d.shape[0] == 0:
        raise SteeringError(f"a basis must be [k, d_model] with k >= 1, got shape {tuple(d.shape)}")
    total = d.sum(0)
    if dose == "sum":
        return total.float()
    norm = total.norm()
    if norm == 0:
        raise SteeringError("the directions sum to the zero vector; dose matching is undefined")
    return (total * (d.norm(dim=1).mean() / norm)).float()


def row_vectors(directions: Any, dose: str) -> Tensor:
    """directions -> [d_model] (one basis shared by all rows) or [batch, d_model] (one basis per row: a
    ``[batch, k, d_model]`` array or a list of ``[d_model]`` / ``[k_i, d_model]`` arrays)."""
    import torch  # deferred: torch is heavy to import

    if isinstance(directions, (list, tuple)) and directions and not np.isscalar(directions[0]):
        rows = [combine_directions(d, dose) for d in directions]
        return torch.stack(rows)
    d = as_tensor(directions)
    if d.ndim == 3:
        return torch.stack([combine_directions(b, dose) for b in d])
    if d.ndim in (1, 2):
        return combine_directions(d, dose)
    raise SteeringError(f"directions must be [d_model], [k, d_model], [batch, k, d_model] or a list of bases; "
                        f"got shape {tuple(d.shape)}")


__all__ = ["DOSES", "as_tensor", "combine_directions", "row_vectors"]
