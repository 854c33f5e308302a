"""Directional ablation: project a basis of directions out of the residual stream (is the direction necessary?).

    from steering.ablation import ablate
    with ablate(lm, probes.read_directions("runs/demo/probes"), k=4):     # its selected layer, first 4 rows
        out = lm.model.generate(**enc, max_new_tokens=64)
    with ablate(lm.model, basis, layers=[6], positions="all"):            # basis: [k, d_model] (or [d_model])
        ...
    handle = patch_ablation(lm.model, basis, layers=[6]); ...; handle.remove()

What: at each hook point, ``h <- h - B^T (B h)`` with ``B`` the ``[k, d_model]`` orthonormal basis of the
directions' span (:func:`orthonormal_rows`: the rows orthonormalised by QR, so a non-orthonormal or unnormalised
input ablates its span; a rank-deficient one is refused). The edited residual has no component left in the
span, so whatever a later layer reads from these directions, it reads zero from them. Steering (adding a
direction, :mod:`steering.hooks`) asks whether a direction is *sufficient* to move the outcome; ablation asks
whether it is *necessary*: if the model's error is carried along the probe's directions, removing them should
stop it propagating (more often than removing random directions of the same dimension does). Ablation has no
strength: the span is removed entirely, so there is no alpha (and no dose: the projection does not depend on
the rows' norms, so a norm-matched random control is a random subspace of the same k).

Where and which positions: exactly as :mod:`steering.hooks` (layer ``L`` = ``hidden_states[L]``'s point, the
output of block ``L-1``; ``positions=`` the one rule of :mod:`steering.positions`; pads never touched; the
prefix length learned from the prefill, with or without the KV cache). One basis shared by every row
(``[d_model]`` or ``[k, d_model]``) or one per row (``[batch, k, d_model]``, rows zero-padded to a common k).
The projection is computed in float32 and cast back to the hidden dtype.

The sweep's fast path is :func:`generate_ablated` (the shared-prefix engine of :mod:`steering.generate`, one
basis per row). Hooks: the handle owns exactly the hooks it registered, removed on exit and on error.
"""
from __future__ import annotations

import contextlib
from collections.abc import Callable, Iterable, Iterator, Sequence
from typing import TYPE_CHECKING, Any

import numpy as np

from loadbearing.engine.generation import Generation
from loadbearing.engine.hookpoints import block_hidden, replace_hidden
from loadbearing.engine.layers import unwrap_model
from steering.errors import SteeringError
from steering.generate import _RowSteer, generate_with_row_hook
from steering.hooks import SteeringHandle, attach, d_model, hook_layers, resolve
from steering.vectors import as_tensor

if TYPE_CHECKING:
    from torch import Tensor

RANK_TOL = 1e-6  # a basis whose QR diagonal falls below this (relative to its largest) is rank-deficient


def orthonormal_rows(basis: Any) -> np.ndarray:
    """The ``[k, d]`` float32 orthonormal basis (QR, float64) of the span of ``basis``'s rows (``[d]`` or
    ``[k, d]``); a :class:`SteeringError` for an empty, non-finite or rank-deficient basis."""
    b = np.asarray(basis.detach().cpu().numpy() if hasattr(basis, "detach") else basis, dtype=np.float64)
    if b.ndim == 1:
        b = b[None]
    if b.ndim != 2 or b.shape[0] == 0 or b.shape[0] > b.shape[1]:
        raise SteeringError(f"an ablation basis must be [k, d_model] with 1 <= k <= d_model, got shape {b.shape}")
    if not np.isfinite(b).all():
        raise SteeringError("the ablation basis has non-finite values")
    q, r = np.linalg.qr(b.T)  # q: [d, k]
    diag = np.abs(np.diag(r))
    if diag.max() == 0 or diag.min() <= RANK_TOL * diag.max():
        raise SteeringError(f"the {b.shape[0]} ablation directions are linearly dependent (or zero): their span has "
                            "fewer dimensions than rows; pass independent directions")
    return q.T.astype(np.float32)


def stack_bases(bases: Sequence[Any]) -> np.ndarray:
    """Per-row bases (each ``[d]`` or ``[k_i, d]``; all-zero rows are padding and dropped) as one
    ``[n, max k, d]`` float32 array of orthonormal rows, zero-padded (a zero row projects nothing out)."""
    rows = []
    for b in bases:
        a = np.asarray(b.detach().cpu().numpy() if hasattr(b, "detach") else b, dtype=np.float64)
        a = a[None] if a.ndim == 1 else a
        rows.append(orthonormal_rows(a[np.abs(a).sum(axis=-1) > 0] if a.ndim == 2 else a))
    if not rows:
        raise SteeringError("no ablation bases")
    widths = {r.shape[1] for r in rows}
    if len(widths) != 1:
        raise SteeringError(f"ablation bases of different widths {sorted(widths)}")
    out = np.zeros((len(rows), max(r.shape[0] for r in rows), widths.pop()), dtype=np.float32)
    for i, r in enumerate(rows):
        out[i, : r.shape[0]] = r
    return out


def project_out(hidden: Any, basis: Any) -> Tensor:
    """``hidden - (hidden B^T) B`` (``hidden``: ``[b, pos, d]``; ``basis``: ``[b | 1, k, d]`` float32 on its
    device), in float32, returned in ``hidden``'s dtype."""
    import torch  # deferred: torch is heavy to import

    h = hidden.float()
    coef = torch.einsum("bpd,bkd->bpk", h, basis.expand(h.shape[0], -1, -1))  # [b, pos, k]
    return (h - torch.einsum("bpk,bkd->bpd", coef, basis.expand(h.shape[0], -1, -1))).to(hidden.dtype)


def _cast(cache: dict, basis: Any, device: Any) -> Tensor:
    got = cache.get(device)
    if got is None:
        got = basis.to(device=device, dtype=basis.dtype)
        cache[device] = got
    return got


# ------------------------------------------------------------------------------------------------ hook path


class AblationHandle(SteeringHandle):
    """Owns the hooks one :func:`patch_ablation` call registered (``remove()``, or use it as a context
    manager). ``basis``: the orthonormal ``[1 | batch, k, d_model]`` float32 tensor projected out; the rest as
    :class:`steering.hooks.SteeringHandle` (``layers``, ``positions``, ``prompt_len``, ``calls``,
    ``steered_positions``)."""

    def __init__(self, model: Any, basis: Any, *, layers: Sequence[int], positions: str,
                 prompt_len: int | None = None) -> None:
        super().__init__(model, basis, layers=layers, alpha=0.0, positions=positions, prompt_len=prompt_len)
        self.basis = basis  # [1 | batch, k, d_model]
        self._on: dict = {}

    def _edit(self, hidden: Any) -> Callable[[Tensor | None], Tensor]:
        import torch  # deferred: torch is heavy to import

        basis = _cast(self._on, self.basis, hidden.device)
        if basis.shape[0] not in (1, hidden.shape[0]):
            raise SteeringError(f"ablation has {basis.shape[0]} per-row bases but the batch has {hidden.shape[0]} rows")
        return lambda m: (project_out(hidden, basis) if m is None
                          else torch.where(m[..., None], project_out(hidden, basis), hidden))


def _basis_tensor(directions: Any, width: int) -> Tensor:
    """``[d]`` / ``[k, d]`` (one basis) or ``[batch, k, d]`` / a list of bases (one per row) as the
    orthonormal ``[1 | batch, k, d]`` float32 tensor."""
    import torch  # deferred: torch is heavy to import

    per_row = isinstance(directions, (list, tuple)) and directions and not np.isscalar(directions[0])
    arr = None if per_row else as_tensor(directions)
    if per_row or (arr is not None and arr.ndim == 3):
        b = stack_bases(list(directions) if per_row else list(arr))  # type: ignore[arg-type]
    else:
        b = orthonormal_rows(arr)[None]
    if b.shape[-1] != width:
        raise SteeringError(f"ablation directions have width {b.shape[-1]} but the model's d_model is {width}; use "
                            "directions computed from this model's residual stream")
    return torch.as_tensor(b)


def patch_ablation(model: Any, directions: Any, *, layers: Iterable[int] | int | None = None, k: int | None = None,
                   positions: str = "continuation", prompt_len: int | None = None) -> AblationHandle:
    """Like :func:`ablate` but returns the handle directly (call ``handle.remove()``)."""
    basis, layers, _ = resolve(directions, layers, None, None, k)
    model = unwrap_model(model)
    layer_list, mods = hook_layers(model, layers, positions)
    b = _basis_tensor(basis, d_model(model))
    return attach(AblationHandle(model, b, layers=layer_list, positions=positions, prompt_len=prompt_len), mods)


@contextlib.contextmanager
def ablate(model: Any, directions: Any, *, layers: Iterable[int] | int | None = None, k: int | None = None,
           positions: str = "continuation", prompt_len: int | None = None) -> Iterator[AblationHandle]:
    """Project the span of ``directions`` out of the residual stream at ``layers`` while active.

    ``directions``: a :class:`probes.directions.Directions` (one layer: ``layers=L``, default its selected
    layer; ``k`` its first k basis rows, default all) or an array (``[d_model]``, ``[k, d_model]``, or one basis
    per row ``[batch, k, d_model]`` / a list), e.g.::

        dirs = probes.read_directions("runs/demo/probes")
        with ablate(lm, dirs, k=4):
            out = lm.model.generate(**enc, max_new_tokens=64)

    Yields the :class:`AblationHandle`; its hooks are removed on exit, also when the body raises.
    """
    handle = patch_ablation(model, directions, layers=layers, k=k, positions=positions, prompt_len=prompt_len)
    with handle:  # removed on exit, also on error
        yield handle


# ------------------------------------------------------------------------------------------------ fast path


class RowAblate(_RowSteer):
    """Fast-path forward hook (:func:`steering.generate.generate_with_row_hook`): projects each row's basis out
    at the pass's steered positions (``set(mode, basis, mask)``; ``basis``: ``[b, k, d_model]`` float32)."""

    def __call__(self, module, args, output):
        import torch  # deferred: torch is heavy to import

        if self.mode == "off":
            return None
        hidden = block_hidden(output)  # [b, pos, d_model]
        basis = _cast(self._cast, self.delta, hidden.device)  # [b, k, d_model], float32
        if self.mode == "all":
            new = project_out(hidden, basis)
        elif self.mode == "last":
            new = hidden.clone()
            new[:, -1:, :] = project_out(hidden[:, -1:, :], basis)
        else:
            new = torch.where(self.mask[..., None].to(hidden.device), project_out(hidden, basis), hidden)
        return replace_hidden(output, new)


def row_bases(bases: Any, n: int, width: int) -> np.ndarray:
    """Each of ``n`` rows' orthonormal basis, ``[n, k, width]`` float32 (zero rows pad shorter bases): one basis
    for every row (``[d_model]`` / ``[k, d_model]``) or one per row (``[n, k, d_model]`` or a list); a wrong
    count or width is a SteeringError (the HF fast path's and the vLLM path's one reading)."""
    arr = bases if isinstance(bases, (list, tuple)) else np.asarray(bases, dtype=np.float32)
    if isinstance(arr, np.ndarray) and arr.ndim == 3:
        arr = list(arr)  # one basis per row (zero rows: padding)
    if isinstance(arr, (list, tuple)):
        if len(arr) != n:
            raise SteeringError(f"{len(arr)} ablation bases for {n} texts; pass one per text (or one for all)")
        b = stack_bases(arr)
    else:
        one = orthonormal_rows(arr)
        b = np.broadcast_to(one[None], (n, *one.shape)).copy()
    if b.shape[-1] != width:
        raise SteeringError(f"ablation bases have width {b.shape[-1]}; the model's d_model is {width} (use directions "
                            "computed from this model's residual stream)")
    return b


def generate_ablated(lm, texts: Sequence[str], bases: Any, *, layers: Sequence[int] | int,
                     positions: str = "continuation", max_new_tokens: int = 128, batch_size: int = 32,
                     stop_at_answer: bool = True, progress: bool = True, desc: str = "ablate") -> list[Generation]:
    """Greedy continuations of ``texts`` with row ``i``'s basis projected out at ``layers``.

    ``bases``: one basis for every row (``[d_model]`` / ``[k, d_model]``), or one per row (``[n, k, d_model]``,
    zero-padded rows allowed, or a list of ``[k_i, d_model]``). The fast path, stop rule and positions are
    :func:`steering.generate.generate_steered`'s. Returns Generation records in input order.
    """
    import torch  # deferred: torch is heavy to import

    n = len(texts)
    model = getattr(lm, "model", lm)
    if n == 0:
        return generate_with_row_hook(lm, texts, RowAblate(), None, layers=layers, positions=positions,
                                      max_new_tokens=max_new_tokens, batch_size=batch_size)
    b = row_bases(bases, n, d_model(model))
    return generate_with_row_hook(lm, texts, RowAblate(), torch.as_tensor(b), layers=layers, positions=positions,
                                  max_new_tokens=max_new_tokens, batch_size=batch_size, stop_at_answer=stop_at_answer,
                                  progress=progress, desc=desc)


__all__ = ["AblationHandle", "RANK_TOL", "RowAblate", "ablate", "generate_ablated", "orthonormal_rows",
           "patch_ablation", "project_out", "row_bases", "stack_bases"]
