"""The patching engine: plain Hugging Face forward hooks that record or overwrite the residual stream.

    from steering.patching.engine import Patch, record, score_rows
    with record(model, layers=[0, 4], positions=[3, 4, 5]) as rec:          # capture (clean run)
        clean = score_rows(model, rows, answers, offset)                    # log P(answer) per row
    patches = [Patch(4, [3, 4, 5], rec.values[4]), None, ...]                # one per row (None: unpatched)
    patched = score_rows(model, rows, answers, offset, patches=patches)     # batched patched runs

Layer ``L`` is the hidden-state index (``hidden_states[L]``, :mod:`loadbearing.engine.layers`): 0 is the
embedding output, ``L >= 1`` the output of decoder block ``L - 1``; the hook sits on
:func:`loadbearing.engine.layers.hidden_state_module`. A patch replaces, in its batch row, the residual at its
positions with the given values (``[n_positions, d_model]``); every row of a batch may patch another layer and
other positions. Each context manager owns exactly the ``RemovableHandle``s it registered and removes them in
``finally``. Engine name recorded in outputs: :data:`ENGINE` (``"hf-hooks"``; nnsight 0.8 wraps the same
modules, but one batch with a different intervention per row is a plain index-put here, with no tracing
overhead, and it is what the sanity tests pin down).
"""
from __future__ import annotations

import contextlib
from collections import defaultdict
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import torch

from loadbearing.engine.hookpoints import block_hidden, layer_hooks

ENGINE = "hf-hooks"


@dataclass(frozen=True)
class Patch:
    """Overwrite hidden state ``layer`` at ``positions`` of one row with ``values`` ``[n_positions, d_model]``."""

    layer: int
    positions: Sequence[int]
    values: torch.Tensor


@dataclass
class Recorder:
    """Hidden states recorded by :func:`record`: ``values[layer]`` is ``[n_positions, d_model]`` (batch row 0)."""

    positions: list[int]
    values: dict[int, torch.Tensor] = field(default_factory=dict)


@contextlib.contextmanager
def record(model: Any, layers: Sequence[int], positions: Sequence[int]) -> Iterator[Recorder]:
    """Record batch row 0's hidden states at ``layers`` x ``positions`` in the first forward that runs inside."""
    rec = Recorder(list(positions))
    pos = torch.as_tensor(rec.positions, dtype=torch.long)

    def grab(layer: int) -> Any:
        def hook(module, args, output):
            if layer not in rec.values:
                h = block_hidden(output)  # [batch, pos, d_model]
                rec.values[layer] = h[0, pos.to(h.device)].detach().clone()
        return hook

    with layer_hooks(model, {layer: grab(layer) for layer in sorted(set(int(x) for x in layers))}):
        yield rec


@contextlib.contextmanager
def patched(model: Any, patches: Sequence[Patch | None], *, seq_len: int | None = None) -> Iterator[None]:
    """Apply ``patches[r]`` to batch row ``r`` in every forward inside (with ``seq_len``, only in forwards over
    that many positions: a generation's prefill, not its one-token decode steps)."""
    by_layer: dict[int, tuple[list[int], list[int], list[torch.Tensor]]] = defaultdict(lambda: ([], [], []))
    for r, p in enumerate(patches):
        if p is None or len(p.positions) == 0:
            continue
        rows, pos, vals = by_layer[int(p.layer)]
        rows += [r] * len(p.positions)
        pos += [int(x) for x in p.positions]
        vals.append(p.values)

    def put(ri: torch.Tensor, pi: torch.Tensor, v: torch.Tensor) -> Any:
        def hook(module, args, output):
            h = block_hidden(output)  # [batch, pos, d_model]
            if seq_len is None or h.shape[1] == seq_len:
                h[ri.to(h.device), pi.to(h.device)] = v.to(h.device, h.dtype)  # in place: the block's output
            return output
        return hook

    with layer_hooks(model, {layer: put(torch.as_tensor(rows), torch.as_tensor(pos), torch.cat(vals))
                             for layer, (rows, pos, vals) in by_layer.items()}):
        yield


def _device(model: Any) -> torch.device:
    return next(model.parameters()).device


def forward_logits(model: Any, rows: Sequence[Sequence[int]], offset: int, *, pad_id: int = 0) -> torch.Tensor:
    """Logits ``[batch, width - offset, vocab]`` of right-padded rows from position ``offset`` on.

    Right padding is harmless in a causal LM: pad tokens come after every scored position."""
    width = max(len(r) for r in rows)
    ids = torch.full((len(rows), width), pad_id, dtype=torch.long)
    for i, r in enumerate(rows):
        ids[i, :len(r)] = torch.as_tensor(list(r), dtype=torch.long)
    with torch.inference_mode():
        out = model(input_ids=ids.to(_device(model)), use_cache=False, logits_to_keep=width - offset)
    return out.logits


def score_rows(model: Any, rows: Sequence[Sequence[int]], answers: Sequence[Sequence[int]], offset: int, *,
               patches: Sequence[Patch | None] | None = None, batch_size: int = 32, pad_id: int = 0,
               progress: Any = None) -> np.ndarray:
    """Teacher-forced ``log P(answers[r])`` of each row (float64 sums of float32 log-probs).

    ``rows[r]`` is ``prefix + head + answers[r]`` and ``offset = len(prefix) + len(head) - 1`` (the position
    whose logits predict the answer's first token); ``patches[r]`` is applied to row ``r`` (batched, ``batch_size``
    rows per forward). ``progress``: a tqdm bar updated by rows.
    """
    out = np.zeros(len(rows), dtype=np.float64)
    for b in range(0, len(rows), batch_size):
        idx = list(range(b, min(b + batch_size, len(rows))))
        ctx = patched(model, [patches[i] for i in idx]) if patches is not None else contextlib.nullcontext()
        with ctx:
            logits = forward_logits(model, [rows[i] for i in idx], offset, pad_id=pad_id)
        logp = torch.log_softmax(logits.float(), dim=-1)
        for j, i in enumerate(idx):
            a = torch.as_tensor(list(answers[i]), dtype=torch.long, device=logp.device)
            out[i] = float(logp[j, torch.arange(len(a), device=logp.device), a].double().sum())
        if progress is not None:
            progress.update(len(idx))
    return out


def greedy_patched(model: Any, prefix: Sequence[int], patches: Sequence[Patch | None], *, max_new_tokens: int,
                   eos_ids: Sequence[int], pad_id: int, batch_size: int = 32) -> list[list[int]]:
    """Greedy continuations of one prefix, one per patch, the patch held on the prefix (applied in the prefill;
    the decode steps read the patched keys and values from the cache). Returns the new token ids per row."""
    out: list[list[int]] = []
    n = len(prefix)
    for b in range(0, len(patches), batch_size):
        chunk = list(patches[b:b + batch_size])
        ids = torch.as_tensor([list(prefix)] * len(chunk), dtype=torch.long, device=_device(model))
        with patched(model, chunk, seq_len=n), torch.inference_mode():
            gen = model.generate(input_ids=ids, attention_mask=torch.ones_like(ids), max_new_tokens=max_new_tokens,
                                 do_sample=False, temperature=None, top_p=None, top_k=None,
                                 eos_token_id=list(eos_ids), pad_token_id=pad_id)
        for r in range(len(chunk)):
            new = gen[r, n:].tolist()
            cut = next((i for i, t in enumerate(new) if t in eos_ids), len(new))
            out.append(new[:cut])
    return out


__all__ = ["ENGINE", "Patch", "Recorder", "forward_logits", "greedy_patched", "patched", "record", "score_rows"]
