"""Steered greedy generation on the shared-prefix fast path, one steering vector and alpha per row.

    from steering.generate import generate_steered
    outs = generate_steered(lm, texts, vectors, alphas, layers=[6])   # vectors [n, d_model], alphas [n]

The sweep re-generates every case under every setting, so a batch holds the same few inputs many times
over with different vectors. Like :func:`behavioural.generation.generate`, rows are sorted by their token
ids (rows with the same input become neighbours), each batch's longest common token prefix is run once and
its KV cache repeated for the rows, only the rows' own suffixes are prefilled, and rows leave the batch (and
the cache) as soon as they finish; records come back in input order. Steering adds ``alpha_i * v_i`` to the
residual stream at ``layers`` (hook points as in :mod:`steering.hooks`: layer ``L`` = output of block
``L-1``), at exactly the positions :mod:`steering.hooks` steers for ``positions``:

* ``"continuation"``: each row's last input token and every generated token (the shared prefix never
  includes a row's last token, so it is computed once, unsteered, and shared);
* ``"generated"``: generated tokens only;
* ``"all"``: every non-pad position, prefix included (no prefix sharing then: the prefix is steered per row).

The stop rule is the fast path's own (``behavioural.generation``'s row stepper, the rule of
:func:`behavioural.generation.finish` that every backend uses), so a steered record with alpha 0 is the
unsteered record. No model hook outlives the call (registered in ``try``, removed in
``finally``); the model's other hooks are never touched.
"""
from __future__ import annotations

import time
from collections.abc import Sequence
from typing import Any

import numpy as np

from behavioural.batching import MIN_SHARED_PREFIX, common_prefix_len
from steering.hooks import POSITIONS, SteeringError, d_model, hook_module


class _RowSteer:
    """Forward hook state: which rows and positions the current pass steers."""

    def __init__(self) -> None:
        self.delta = None  # [b, 1, d_model] float32, rows in current batch order
        self.mode = "off"  # off | last | mask | all
        self.mask = None  # [b, cur] bool, mode "mask"
        self._cast: dict = {}

    def set(self, mode: str, delta=None, mask=None) -> None:
        self.mode = mode
        if delta is not None:
            self.delta = delta
            self._cast = {}
        self.mask = mask

    def _d(self, hidden):
        key = (hidden.dtype, hidden.device)
        got = self._cast.get(key)
        if got is None:
            got = self.delta.to(device=hidden.device, dtype=hidden.dtype)
            self._cast[key] = got
        return got

    def __call__(self, module, args, output):
        if self.mode == "off":
            return None
        hidden = output[0] if isinstance(output, tuple) else output  # [b, pos, d_model]
        delta = self._d(hidden)  # [b, 1, d_model]
        if self.mode == "all":
            new = hidden + delta
        elif self.mode == "last":
            new = hidden.clone()
            new[:, -1:, :] += delta
        else:
            new = hidden + delta * self.mask[..., None].to(hidden.dtype)
        if isinstance(output, tuple):
            return (new,) + tuple(output[1:])
        return new


def _steered_rows(model, tokenizer, rows: list[list[int]], deltas, state: _RowSteer, *, positions: str,
                  max_new_tokens: int, stop_ids: frozenset[int], stop_at_answer: bool, pad_id: int,
                  newline_ids: frozenset[int]) -> list[Any]:
    """Greedy-decode one batch with a shared-prefix KV cache and per-row steering ``deltas`` [n, d_model]."""
    import torch
    from transformers import DynamicCache

    from behavioural.generation import _row_stepper

    device = next(model.parameters()).device
    n = len(rows)
    shared = common_prefix_len(rows) if n > 1 else 0
    shared = min(shared, min(len(r) for r in rows) - 1)  # every row keeps >= 1 token of its own
    if shared < MIN_SHARED_PREFIX or positions == "all":
        shared = 0
    cache = DynamicCache(config=model.config)
    if shared:
        state.set("off")
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
        ids[r, width - k :] = torch.tensor(s, dtype=torch.long)
        mask[r, shared + width - k :] = 1
        pos[r, width - k :] = torch.arange(shared, shared + k)
    ids, mask, pos = ids.to(device), mask.to(device), pos.to(device)
    delta = deltas[:, None, :]  # [n, 1, d_model]
    if positions == "continuation":
        state.set("last", delta)
    elif positions == "generated":
        state.set("off", delta)
    else:
        state.set("mask", delta, mask[:, shared:].bool())
    logits = model(input_ids=ids, attention_mask=mask, position_ids=pos, past_key_values=cache, use_cache=True,
                   logits_to_keep=1).logits[:, -1, :]
    state.set("all", delta)
    last_pos = pos[:, -1]
    active = list(range(n))  # batch row -> input row
    generated: list[list[int]] = [[] for _ in range(n)]
    results: list[Any] = [None] * n
    step = _row_stepper(tokenizer, results, generated, max_new_tokens=max_new_tokens, stop_ids=stop_ids,
                        stop_at_answer=stop_at_answer, newline_ids=newline_ids)
    while True:
        nxt = logits.argmax(dim=-1)  # [b] greedy
        keep = [b for b, (r, t) in enumerate(zip(active, nxt.tolist())) if not step(r, t)]
        if not keep:
            break
        if len(keep) < len(active):
            sel = torch.tensor(keep, dtype=torch.long, device=device)
            cache.batch_select_indices(sel)
            mask, last_pos, nxt, delta = mask[sel], last_pos[sel], nxt[sel], delta[sel]
            state.set("all", delta)
            active = [active[b] for b in keep]
        mask = torch.cat([mask, mask.new_ones((len(active), 1))], dim=1)
        last_pos = last_pos + 1
        logits = model(input_ids=nxt[:, None], attention_mask=mask, position_ids=last_pos[:, None],
                       past_key_values=cache, use_cache=True, logits_to_keep=1).logits[:, -1, :]
    return results


def generate_steered(lm, texts: Sequence[str], vectors, alphas, *, layers: Sequence[int],
                     positions: str = "continuation", max_new_tokens: int = 128, batch_size: int = 32,
                     stop_at_answer: bool = True, progress: bool = True, desc: str = "steer") -> list[Any]:
    """Greedy continuations of ``texts`` with ``alphas[i] * vectors[i]`` added at ``layers`` for row ``i``.

    ``vectors``: ``[n, d_model]`` (or one ``[d_model]`` shared by all rows); ``alphas``: ``[n]`` or a float.
    Returns :class:`behavioural.generation.Generation` records in input order (see the module docstring).
    """
    import torch
    from tqdm.auto import tqdm

    from behavioural.generation import _newline_ids, _pad_id, _stop_ids, encode

    if positions not in POSITIONS:
        raise SteeringError(f"unknown positions {positions!r}; choose one of {', '.join(POSITIONS)}")
    if batch_size < 1:
        raise SteeringError(f"batch_size must be >= 1, got {batch_size}")
    if max_new_tokens < 1:
        raise SteeringError(f"max_new_tokens must be >= 1, got {max_new_tokens}")
    model = getattr(lm, "model", lm)
    tok = lm.tokenizer
    n = len(texts)
    if n == 0:
        return []
    width = d_model(model)
    v = torch.as_tensor(np.asarray(vectors, dtype=np.float32))
    if v.ndim == 1:
        v = v[None].expand(n, -1)
    if v.ndim != 2 or v.shape[0] != n or v.shape[1] != width:
        raise SteeringError(f"steering vectors have shape {tuple(v.shape)}; expected [{n}, {width}] (one per text, "
                            "the model's d_model wide)")
    a = torch.as_tensor(np.broadcast_to(np.asarray(alphas, dtype=np.float32), (n,)).copy())
    if not torch.isfinite(a).all() or not torch.isfinite(v).all():
        raise SteeringError("steering vectors and alphas must be finite")
    deltas = a[:, None] * v  # [n, d_model]
    layers = [int(x) for x in ([layers] if isinstance(layers, (int, np.integer)) else layers)]
    if not layers:
        raise SteeringError("no layers to steer; pass layers=[L, ...]")
    mods = [hook_module(model, L) for L in layers]  # validates the layers
    encoded = [encode(tok, t) for t in texts]
    if any(len(e) == 0 for e in encoded):
        raise SteeringError("cannot generate from an empty input (no tokens)")
    order = sorted(range(n), key=lambda i: (encoded[i], i))
    stop_ids = frozenset(_stop_ids(tok, model))
    pad_id = _pad_id(tok, stop_ids)
    nl_ids = _newline_ids(tok) if stop_at_answer else frozenset()
    results: list[Any] = [None] * n
    state = _RowSteer()
    handles = []
    bar = tqdm(total=n, desc=desc, unit="seq", disable=not progress, dynamic_ncols=True)
    n_tok, t0 = 0, time.perf_counter()
    try:
        for m in mods:
            handles.append(m.register_forward_hook(state))
        with torch.inference_mode():
            for b in range(0, n, batch_size):
                idx = order[b : b + batch_size]
                gens = _steered_rows(model, tok, [encoded[i] for i in idx], deltas[idx], state,
                                     positions=positions, max_new_tokens=max_new_tokens, stop_ids=stop_ids,
                                     stop_at_answer=stop_at_answer, pad_id=pad_id, newline_ids=nl_ids)
                for i, g in zip(idx, gens):
                    results[i] = g
                    n_tok += g.new_tokens
                bar.update(len(idx))
                bar.set_postfix(tok_s=f"{n_tok / max(time.perf_counter() - t0, 1e-9):.1f}")
    finally:
        for h in handles:
            h.remove()
        bar.close()
    return results


__all__ = ["generate_steered", "MIN_SHARED_PREFIX"]
