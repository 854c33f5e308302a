"""Continuous batching for greedy decoding with a shared-prefix KV cache (the HF fast path's engine).

:func:`decode_continuous` keeps up to ``batch_size`` rows decoding at once. When rows finish, their slots
are refilled from the waiting queue: the newcomers are prefilled as a group (their longest common token
prefix is run once and its cache repeated, as in the plain fast path), their KV cache is left-padded to the
running cache's length (padding masked out; positions are explicit per row, and RoPE is already baked into
the cached keys, so padding never shifts a row), and the two caches are concatenated along the batch.
Columns that every active row masks out are cropped from the left, so a long finished row does not leave
its length behind. The batch therefore stays full until the queue is empty instead of running down to 1-2
rows.

Each row's record depends only on its own tokens (greedy argmax over its own, masked, context), so results
do not depend on batch composition beyond floating-point noise; tests compare them with the one-at-a-time
simple path.
"""
from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

if TYPE_CHECKING:  # pragma: no cover
    import torch

#: a shared prefix shorter than this is not worth a separate forward pass
MIN_SHARED_PREFIX = 8


def common_prefix_len(rows: Sequence[Sequence[int]]) -> int:
    """Length of the longest token prefix shared by every row."""
    first = rows[0]
    n = min(len(r) for r in rows)
    for r in rows[1:]:
        k = 0
        lim = min(n, len(r))
        while k < lim and r[k] == first[k]:
            k += 1
        n = k
        if n == 0:
            break
    return n


@dataclass
class _Batch:
    """The decoding state of the rows in flight (batch row b holds input row ``active[b]``)."""

    cache: object  # transformers DynamicCache, [b, heads, S, head_dim] per layer
    mask: torch.Tensor  # [b, S] 1 = real token
    last_pos: torch.Tensor  # [b] position id of each row's last token
    logits: torch.Tensor  # [b, vocab] next-token logits
    active: list[int]


def _refillable(cache) -> bool:
    """Only plain full-attention dynamic layers can be padded and concatenated (not sliding windows)."""
    from transformers.cache_utils import DynamicLayer

    layers = getattr(cache, "layers", None)
    return bool(layers) and all(type(layer) is DynamicLayer and layer.is_initialized for layer in layers or ())


def prefill(model, rows: list[list[int]], pad_id: int, *, row_hook: Callable[[list[int]], None] | None = None,
            ids_of_rows: list[int] | None = None) -> _Batch:
    """Prefill a group of token rows: shared prefix once (batch 1, repeated), then the rows' own suffixes."""
    import torch
    from transformers import DynamicCache

    device = next(model.parameters()).device
    n = len(rows)
    if any(len(r) == 0 for r in rows):
        raise ValueError("cannot generate from an empty input (no tokens)")
    shared = common_prefix_len(rows) if n > 1 else 0
    shared = min(shared, min(len(r) for r in rows) - 1)  # every row keeps >= 1 token of its own
    if shared < MIN_SHARED_PREFIX or row_hook is not None:  # per-row hooks need every row in every forward
        shared = 0
    cache = DynamicCache(config=model.config)
    if shared:
        prefix = torch.tensor([rows[0][:shared]], dtype=torch.long, device=device)  # [1, shared]
        model(input_ids=prefix, past_key_values=cache, use_cache=True, logits_to_keep=1)
        cache.batch_repeat_interleave(n)
    suffixes = [r[shared:] for r in rows]
    width = max(len(s) for s in suffixes)
    ids = torch.full((n, width), pad_id, dtype=torch.long)
    mask = torch.zeros((n, shared + width), dtype=torch.long)
    mask[:, :shared] = 1
    pos = torch.zeros((n, width), dtype=torch.long)
    for r, s in enumerate(suffixes):
        k = len(s)
        ids[r, width - k:] = torch.tensor(s, dtype=torch.long)
        mask[r, shared + width - k:] = 1
        pos[r, width - k:] = torch.arange(shared, shared + k)
    ids, mask, pos = ids.to(device), mask.to(device), pos.to(device)
    if row_hook is not None:
        row_hook(list(ids_of_rows or range(n)))
    # [n, width] suffix prefill against the shared cache; logits for the last position only
    logits = model(input_ids=ids, attention_mask=mask, position_ids=pos, past_key_values=cache, use_cache=True,
                   logits_to_keep=1).logits[:, -1, :]
    return _Batch(cache, mask, pos[:, -1], logits, list(ids_of_rows or range(n)))


def _left_pad(t: torch.Tensor, k: int, dim: int) -> torch.Tensor:
    import torch

    if k == 0:
        return t
    shape = list(t.shape)
    shape[dim] = k
    return torch.cat([t.new_zeros(shape), t], dim=dim)


def merge(a: _Batch, b: _Batch) -> _Batch:
    """Concatenate two batches along the batch axis, left-padding the shorter cache (padding masked)."""
    import torch

    sa, sb = a.mask.shape[1], b.mask.shape[1]
    s = max(sa, sb)
    for la, lb in zip(a.cache.layers, b.cache.layers):  # type: ignore[attr-defined]
        la.keys = torch.cat([_left_pad(la.keys, s - sa, -2), _left_pad(lb.keys, s - sb, -2)], dim=0)
        la.values = torch.cat([_left_pad(la.values, s - sa, -2), _left_pad(lb.values, s - sb, -2)], dim=0)
    mask = torch.cat([_left_pad(a.mask, s - sa, 1), _left_pad(b.mask, s - sb, 1)], dim=0)
    return _Batch(a.cache, mask, torch.cat([a.last_pos, b.last_pos]), torch.cat([a.logits, b.logits]),
                  a.active + b.active)


def _crop_left(batch: _Batch) -> None:
    """Drop leading cache columns that every active row masks out."""
    lead = int((batch.mask.cumsum(1) == 0).sum(1).min())
    if lead <= 0 or lead >= batch.mask.shape[1]:
        return
    for layer in batch.cache.layers:  # type: ignore[attr-defined]
        layer.keys = layer.keys[:, :, lead:, :]
        layer.values = layer.values[:, :, lead:, :]
    batch.mask = batch.mask[:, lead:]


def decode_continuous(model, rows: list[list[int]], order: Sequence[int], *, batch_size: int,
                      step: Callable[[int, int], bool], pad_id: int, refill: bool = True,
                      min_refill: int | None = None, row_hook: Callable[[list[int]], None] | None = None,
                      on_step: Callable[[int], None] | None = None) -> None:
    """Greedy-decode ``rows`` (token lists) in the given ``order`` with at most ``batch_size`` in flight.

    ``step(row, token) -> done`` receives each row's next greedy token and says whether the row is finished
    (the caller owns stop rules and records). ``row_hook(active_rows)`` is called before every forward with
    the input rows in batch-row order (steering uses it to set per-row vectors). ``refill=False`` gives the
    classic static batches. Slots are refilled once at least ``min_refill`` (default ``batch_size // 4``,
    at least 1) are free, or when the batch has emptied.
    """
    import torch

    device = next(model.parameters()).device
    queue = list(order)
    min_refill = max(1, batch_size // 4) if min_refill is None else max(1, min_refill)
    batch: _Batch | None = None

    def admit(k: int) -> _Batch:
        idx, queue[:] = queue[:k], queue[k:]
        return prefill(model, [rows[i] for i in idx], pad_id, row_hook=row_hook, ids_of_rows=idx)

    with torch.inference_mode():
        while queue or batch is not None:
            if batch is None:
                batch = admit(batch_size)
            elif refill and queue and batch_size - len(batch.active) >= min(min_refill, len(queue)) \
                    and _refillable(batch.cache):
                batch = merge(batch, admit(batch_size - len(batch.active)))
            nxt = batch.logits.argmax(dim=-1)  # [b] greedy
            keep = [b for b, (r, t) in enumerate(zip(batch.active, nxt.tolist())) if not step(r, t)]
            if on_step is not None:
                on_step(len(batch.active))
            if not keep:
                batch = None
                continue
            if len(keep) < len(batch.active):
                sel = torch.tensor(keep, dtype=torch.long, device=device)
                batch.cache.batch_select_indices(sel)  # type: ignore[attr-defined]
                batch.mask, batch.last_pos, nxt = batch.mask[sel], batch.last_pos[sel], nxt[sel]
                batch.active = [batch.active[b] for b in keep]
                if _refillable(batch.cache):
                    _crop_left(batch)
            batch.mask = torch.cat([batch.mask, batch.mask.new_ones((len(batch.active), 1))], dim=1)
            batch.last_pos = batch.last_pos + 1
            if row_hook is not None:
                row_hook(list(batch.active))
            batch.logits = model(input_ids=nxt[:, None], attention_mask=batch.mask,
                                 position_ids=batch.last_pos[:, None], past_key_values=batch.cache, use_cache=True,
                                 logits_to_keep=1).logits[:, -1, :]
