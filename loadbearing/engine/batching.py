"""Continuous batching for greedy decoding with a shared-prefix KV cache (the HF fast path's engine).

:func:`loadbearing.engine.decoding.decode_continuous` keeps up to ``batch_size`` rows decoding at once. When rows
finish, their slots
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
from typing import TYPE_CHECKING, Any

from loadbearing.engine.layers import unwrap_model

if TYPE_CHECKING:  # pragma: no cover
    import torch

#: a shared prefix shorter than this is not worth a separate forward pass
MIN_SHARED_PREFIX = 8
#: the fixed cost of one more forward pass, in token positions (a group level runs only if it saves more)
LEVEL_COST_TOKENS = 64
#: prompt-lookup drafting (see :func:`decode_continuous`): at most this many draft tokens per row, only while
#: at most LOOKAHEAD_ROWS rows are in flight, and at most LOOKAHEAD_TOKENS positions per verifying forward
LOOKAHEAD = 8
LOOKAHEAD_ROWS = 4
LOOKAHEAD_TOKENS = 16


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


@dataclass(frozen=True)
class Pass:
    """What one forward pass of the fast path computes; ``on_pass(Pass)`` is called just before it runs.

    ``kind``: ``"shared"`` - a prefix that several rows share (computed once, it belongs to no single row;
    ``rows`` is None); ``"prompt"`` - the rows' own input tokens (each row's last input token is the last
    column); ``"decode"`` - one generated token per row. ``rows``: the input row of each batch row.
    ``mask``: ``[b, width]`` bool, the real (non-padding) positions of a ``"prompt"`` pass's input.
    """

    kind: str
    rows: list[int] | None = None
    mask: torch.Tensor | None = None


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
    from transformers.cache_utils import DynamicLayer  # deferred: transformers is heavy to import

    from loadbearing.engine.fastpath import SpareLayer  # deferred: loadbearing.engine.fastpath loads torch, transformers

    layers = getattr(cache, "layers", None)
    return bool(layers) and all(type(layer) in (DynamicLayer, SpareLayer) and layer.is_initialized
                                for layer in layers or ())


def sliding_window(model) -> int | None:
    """The shortest sliding window among ``model``'s attention layers (None: every layer sees its whole context).

    Read from the (text) config: ``sliding_window`` counts when some ``layer_types`` entry is
    ``"sliding_attention"`` (Gemma-2/3, Qwen3 with ``use_sliding_window``), or, without ``layer_types``, on
    every layer (Mistral, Phi-3)."""
    cfg: Any = getattr(unwrap_model(model), "config", None)
    cfg = cfg.get_text_config() if hasattr(cfg, "get_text_config") else cfg
    w = getattr(cfg, "sliding_window", None)
    if not isinstance(w, int) or isinstance(w, bool) or w <= 0 or getattr(cfg, "use_sliding_window", True) is False:
        return None
    types = getattr(cfg, "layer_types", None)
    if types is not None and "sliding_attention" not in types:
        return None
    return w


def sharing_fits(window: int | None, width: int, horizon: int | None) -> bool:
    """Whether a prefix-shared prefill of ``width`` cache columns, decoded for up to ``horizon`` more tokens,
    stays inside a sliding window of ``window`` tokens.

    A shared prefill leaves masked padding *inside* a row (between the shared prefix, its group's segment and
    its own tokens), while a sliding-window layer counts its window in cache columns and keeps only the last
    ``window - 1`` of them: once a row's columns reach the window, it would see fewer real tokens than the
    window (Gemma-2/3, Mistral and Phi-3 gave 2/8 greedy records identical before this rule). Below the
    window no column is ever dropped or masked by the window, so sharing is exact; at or above it the
    caller prefills unshared (every row left-padded only, columns = positions + a constant)."""
    if window is None:
        return True
    if horizon is None:
        return False
    return width + horizon < window - 1


def prefix_sharing_policy(model) -> dict[str, int | str | None]:
    """What the manifest records about prefix sharing on ``model`` (see :func:`sharing_fits`)."""
    w = sliding_window(model)
    if w is None:
        return {"sliding_window": None, "prefix_sharing": "on"}
    return {"sliding_window": w, "prefix_sharing": "off for batches whose padded width plus max_new_tokens reaches "
                                                    "the sliding window (sharing would drop context there)"}


def prefix_plan(rows: Sequence[Sequence[int]], min_shared: int = MIN_SHARED_PREFIX) -> tuple[int, list[int]]:
    """How :func:`prefill` shares work: ``(G, P)`` with ``G`` the prefix every row shares (run once) and
    ``P[r] >= G`` the prefix row ``r`` shares with its group (run once per group).

    Groups are runs of rows that are neighbours in token order and share at least ``min_shared`` tokens
    beyond ``G`` (a question's continuations: the prompt and the response up to the edited line); a row in no
    group has ``P[r] == G``. Every row keeps at least one token of its own (its last input token gives the
    first logits). A shared part shorter than ``min_shared`` is not worth its own forward pass and is 0/``G``;
    the group level is dropped (every ``P[r] == G``) unless it saves more than ``LEVEL_COST_TOKENS`` padded
    token positions over running every row's tokens after ``G`` in one pass.
    """
    n = len(rows)
    shortest = min(len(r) for r in rows)
    g = min(common_prefix_len(rows), shortest - 1) if n > 1 else 0
    g = g if g >= min_shared else 0
    plan = [g] * n
    order = sorted(range(n), key=lambda i: list(rows[i]))
    i = 0
    while i < n:
        j, p = i + 1, len(rows[order[i]]) - 1
        while j < n:
            k = min(common_prefix_len([rows[order[j - 1]], rows[order[j]]]), p, len(rows[order[j]]) - 1)
            if k - g < min_shared:
                break
            p, j = k, j + 1
        if j - i > 1:
            for r in order[i:j]:
                plan[r] = p
        i = j
    groups = {(p, tuple(rows[r][:p])) for r, p in enumerate(plan) if p > g}
    if groups and g == 0 and 0 in plan:
        # rows in no group would hang off an all-padding node with nothing real to attend to: keep one level
        return g, [g] * n
    if groups:
        flat = n * max(len(r) - g for r in rows)
        own = n * max(len(r) - p for r, p in zip(rows, plan))
        lead = (len(groups) + (g in plan)) * max(p - g for p in plan)
        if own + lead + LEVEL_COST_TOKENS >= flat:
            plan = [g] * n
    return g, plan


def _plan_width(rows: Sequence[Sequence[int]], g: int, plan: list[int]) -> int:
    """Cache columns a prefill with this plan leaves: shared prefix, widest group segment, widest own part."""
    groups = [p - g for p in plan if p > g]
    return g + (max(groups) if groups else 0) + max(len(r) - p for r, p in zip(rows, plan))


def prefill(model, rows: list[list[int]], pad_id: int, *, on_pass: Callable[[Pass], None] | None = None,
            share: bool = True, ids_of_rows: list[int] | None = None, horizon: int | None = None) -> _Batch:
    """Prefill a group of token rows in up to three levels that share work (see :func:`prefix_plan`): the
    prefix all rows share (one row), each group's shared prefix (one row per group), then every row's own
    tokens. Each level's cache rows are copied out to the next level's rows; within a level, segments are
    left-padded (padding masked, positions explicit), so a row's columns are: shared prefix, its group's
    segment (or masked padding), its own tokens. ``share=False`` runs every row's whole input in one pass.
    ``on_pass`` sees each pass before it runs (see :class:`Pass`). On a model with a sliding window, sharing
    is used only where :func:`sharing_fits` (``horizon``: the most tokens the rows will still decode; None =
    unknown, so no sharing)."""
    import torch  # deferred: torch is heavy to import

    from loadbearing.engine.fastpath import new_cache  # deferred: loadbearing.engine.fastpath loads torch, transformers

    device = next(model.parameters()).device
    n = len(rows)
    if any(len(r) == 0 for r in rows):
        raise ValueError("cannot generate from an empty input (no tokens)")
    if share:
        g, plan = prefix_plan(rows)
        if g or any(plan):
            if not sharing_fits(sliding_window(model), _plan_width(rows, g, plan), horizon):
                g, plan = 0, [0] * n
    else:
        g, plan = 0, [0] * n
    # levels: (parent of each node in the previous level, token segment of each node)
    levels: list[tuple[list[int], list[list[int]]]] = []
    groups = sorted({(p, tuple(rows[r][:p])) for r, p in enumerate(plan) if p > g})
    if groups:
        node = {key: c for c, key in enumerate(groups)}
        segs = [list(key[1][g:]) for key in groups]
        if any(p == g for p in plan):
            segs.append([])  # rows in no group hang off an all-padding node (its columns are masked out)
        levels.append(([0] * len(segs), segs))
        parents = [node[(p, tuple(rows[r][:p]))] if p > g else len(groups) for r, p in enumerate(plan)]
        levels.append((parents, [rows[r][p:] for r, p in enumerate(plan)]))
    else:
        levels.append(([0] * n, [r[g:] for r in rows]))
    cache = new_cache(model)
    mask = torch.ones((1, g), dtype=torch.long, device=device)
    nxt = torch.full((1,), g, dtype=torch.long)
    if g:
        prefix = torch.tensor([rows[0][:g]], dtype=torch.long, device=device)  # [1, g]
        if on_pass is not None:
            on_pass(Pass("shared"))
        model(input_ids=prefix, past_key_values=cache, use_cache=True, logits_to_keep=1)
    for depth, (parents, segs) in enumerate(levels):
        sel = torch.tensor(parents, dtype=torch.long)
        if cache.get_seq_length() > 0:
            cache.batch_select_indices(sel.to(device))
        base = nxt[sel]
        width = max(len(s) for s in segs)
        m = len(segs)
        ids = torch.full((m, width), pad_id, dtype=torch.long)
        seg_mask = torch.zeros((m, width), dtype=torch.long)
        pos = torch.zeros((m, width), dtype=torch.long)
        for r, s in enumerate(segs):
            k = len(s)
            if k:
                ids[r, width - k:] = torch.tensor(s, dtype=torch.long)
                seg_mask[r, width - k:] = 1
                pos[r, width - k:] = torch.arange(int(base[r]), int(base[r]) + k)
        mask = torch.cat([mask[sel.to(device)], seg_mask.to(device)], dim=1)
        nxt = base + torch.tensor([len(s) for s in segs], dtype=torch.long)
        if on_pass is not None:
            own = depth == len(levels) - 1
            on_pass(Pass("prompt", list(ids_of_rows or range(n)), seg_mask.bool().to(device)) if own
                    else Pass("shared"))
        out = model(input_ids=ids.to(device), attention_mask=mask, position_ids=pos.to(device), past_key_values=cache,
                    use_cache=True, logits_to_keep=1)
    # logits of each row's last input token (segments are left-padded, so the last column)
    return _Batch(cache, mask, (nxt - 1).to(device), out.logits[:, -1, :], list(ids_of_rows or range(n)))


def _left_pad(t: torch.Tensor, k: int, dim: int) -> torch.Tensor:
    import torch  # deferred: torch is heavy to import

    if k == 0:
        return t
    shape = list(t.shape)
    shape[dim] = k
    return torch.cat([t.new_zeros(shape), t], dim=dim)


def merge(a: _Batch, b: _Batch) -> _Batch:
    """Concatenate two batches along the batch axis, left-padding the shorter cache (padding masked)."""
    import torch  # deferred: torch is heavy to import

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
        if hasattr(layer, "crop_left"):
            layer.crop_left(lead)
        else:
            layer.keys = layer.keys[:, :, lead:, :]
            layer.values = layer.values[:, :, lead:, :]
    batch.mask = batch.mask[:, lead:]
