"""Decoding with continuous batching (the engine of :mod:`loadbearing.engine.batching`): rows decode until they
finish, freed slots are refilled from the queue (prefilled as a group, their caches merged into the running one), and
prompt-lookup drafts (:func:`lookup_draft`) are verified in one pass so one forward may accept several tokens."""
from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING

if TYPE_CHECKING:  # pragma: no cover
    import torch

from loadbearing.engine.batching import (
    LOOKAHEAD,
    LOOKAHEAD_ROWS,
    LOOKAHEAD_TOKENS,
    Pass,
    _Batch,
    _crop_left,
    _refillable,
    merge,
    prefill,
)


def lookup_draft(tokens: Sequence[int], k: int, max_ngram: int = 4, min_ngram: int = 2) -> list[int]:
    """Prompt-lookup draft: the up to ``k`` tokens that followed the latest earlier occurrence of the last
    ``n`` tokens (``n`` from ``max_ngram`` down to ``min_ngram``); empty when nothing matches."""
    n_tok = len(tokens)
    for n in range(min(max_ngram, n_tok - 1), min_ngram - 1, -1):
        tail = list(tokens[n_tok - n:])
        for i in range(n_tok - n - 1, -1, -1):
            if tokens[i] == tail[0] and list(tokens[i:i + n]) == tail:
                return list(tokens[i + n:i + n + k])
    return []


def decode_continuous(model, rows: list[list[int]], order: Sequence[int], *, batch_size: int,
                      step: Callable[[int, int], bool], pad_id: int, refill: bool = True,
                      min_refill: int | None = None, on_pass: Callable[[Pass], None] | None = None,
                      share: bool = True, lookahead: int | None = None,
                      on_step: Callable[[int], None] | None = None, max_new_tokens: int | None = None,
                      choose: Callable[[list[int], torch.Tensor], torch.Tensor] | None = None) -> None:
    """Greedy-decode ``rows`` (token lists) in the given ``order`` with at most ``batch_size`` in flight.

    ``choose(rows, logits [b, vocab]) -> tokens [b]`` replaces the greedy argmax (seeded sampling,
    :func:`loadbearing.engine.sampling.chooser`; ``rows`` are the batch rows' input rows); with it prompt-lookup
    drafts are off (a draft is verified against the greedy token).

    ``step(row, token) -> done`` receives each row's next greedy token and says whether the row is finished
    (the caller owns stop rules and records). ``on_pass(Pass)`` is called before every forward with what it
    computes and for which input rows (steering sets per-row vectors from it); ``share=False`` prefills every
    row's whole input in its own row (no shared prefixes); on a model with a sliding window a batch shares
    prefixes only where :func:`sharing_fits` with ``max_new_tokens`` (the most tokens ``step`` lets a row
    generate; None = unknown, so no sharing there). ``refill=False`` gives the
    classic static batches. Slots are refilled once at least ``min_refill`` (default ``batch_size // 4``,
    at least 1) are free, or when the batch has emptied.

    ``lookahead`` (default ``LOOKAHEAD``; 0 = off): once at most ``LOOKAHEAD_ROWS`` rows are in flight (a batch's tail, where a
    step costs the same for 1 token as for 10 because it only streams the weights), each row's next token is
    followed by up to ``lookahead`` draft tokens copied from its own context (:func:`lookup_draft`: what
    followed the last earlier occurrence of its latest n-gram - a row repeating itself is drafted exactly);
    one forward scores them all, the longest prefix the model itself would have produced greedily is kept,
    and the rejected columns are masked out. The tokens are the greedy tokens either way (prompt-lookup
    speculative decoding), only the forward passes are fewer.
    """
    import torch  # deferred: torch is heavy to import

    from loadbearing.engine.fastpath import fast_decoding  # deferred: loadbearing.engine.fastpath loads torch, transformers

    device = next(model.parameters()).device
    lookahead = LOOKAHEAD if lookahead is None else lookahead
    queue = list(order)
    min_refill = max(1, batch_size // 4) if min_refill is None else max(1, min_refill)
    batch: _Batch | None = None
    emitted: dict[int, list[int]] = {}  # tokens generated so far by each row in flight
    finished: set[int] = set()  # batch rows that finished inside an accepted draft

    def admit(k: int) -> _Batch:
        idx, queue[:] = queue[:k], queue[k:]
        for i in idx:
            emitted[i] = []
        return prefill(model, [rows[i] for i in idx], pad_id, on_pass=on_pass, share=share, ids_of_rows=idx,
                       horizon=max_new_tokens)

    with torch.inference_mode(), fast_decoding(model):
        while queue or batch is not None:
            if batch is None:
                batch = admit(batch_size)
            elif refill and queue and batch_size - len(batch.active) >= min(min_refill, len(queue)) \
                    and _refillable(batch.cache):
                batch = merge(batch, admit(batch_size - len(batch.active)))
            nxt = batch.logits.argmax(dim=-1) if choose is None else choose(batch.active, batch.logits)  # [b]
            keep = []
            for b, (r, t) in enumerate(zip(batch.active, nxt.tolist())):
                if b in finished or step(r, t):
                    emitted.pop(r, None)
                else:
                    emitted[r].append(t)
                    keep.append(b)
            finished = set()
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
            n = len(batch.active)
            drafts: list[list[int]] = []
            if lookahead and choose is None and n <= LOOKAHEAD_ROWS and _refillable(batch.cache):
                k = min(lookahead, LOOKAHEAD_TOKENS // n - 1)
                drafts = [lookup_draft(rows[r] + emitted[r], k) for r in batch.active] if k > 0 else []
            if on_pass is not None:
                on_pass(Pass("decode", list(batch.active)))
            if not any(drafts):
                batch.mask = torch.cat([batch.mask, batch.mask.new_ones((n, 1))], dim=1)
                batch.last_pos = batch.last_pos + 1
                batch.logits = model(input_ids=nxt[:, None], attention_mask=batch.mask,
                                     position_ids=batch.last_pos[:, None], past_key_values=batch.cache,
                                     use_cache=True, logits_to_keep=1).logits[:, -1, :]
                continue
            finished = _verify_drafts(model, batch, nxt, drafts, step, emitted, pad_id)


def _verify_drafts(model, batch: _Batch, nxt: torch.Tensor, drafts: list[list[int]],
                   step: Callable[[int, int], bool], emitted: dict[int, list[int]], pad_id: int) -> set[int]:
    """One forward over each row's next token and its draft (left-padded); keep the longest greedy-consistent
    prefix of each draft, mask the rest out, and leave each row's next-token logits in ``batch.logits``.
    Returns the batch rows that finished on an accepted draft token."""
    import torch  # deferred: torch is heavy to import

    n = len(batch.active)
    w = 1 + max(len(d) for d in drafts)
    s_old = batch.mask.shape[1]
    ids = torch.full((n, w), pad_id, dtype=torch.long)
    seg = torch.zeros((n, w), dtype=torch.long)
    pos = torch.zeros((n, w), dtype=torch.long)
    last = batch.last_pos.cpu()
    for b, (t, d) in enumerate(zip(nxt.tolist(), drafts)):
        m = len(d)
        ids[b, w - 1 - m:] = torch.tensor([t] + d, dtype=torch.long)
        seg[b, w - 1 - m:] = 1
        pos[b, w - 1 - m:] = torch.arange(int(last[b]) + 1, int(last[b]) + 2 + m)
    device = batch.mask.device
    batch.mask = torch.cat([batch.mask, seg.to(device)], dim=1)
    logits = model(input_ids=ids.to(device), attention_mask=batch.mask, position_ids=pos.to(device),
                   past_key_values=batch.cache, use_cache=True, logits_to_keep=w).logits  # [n, w, vocab]
    greedy = logits.argmax(dim=-1).tolist()
    finished: set[int] = set()
    take = []
    for b, (r, d) in enumerate(zip(batch.active, drafts)):
        m = len(d)
        first = w - 1 - m  # column of the row's next token; its draft follows
        a = 0
        while a < m and d[a] == greedy[b][first + a]:
            a += 1
        for tok in d[:a]:
            if step(r, tok):
                finished.add(b)
                break
            emitted[r].append(tok)
        if a < m:  # rejected draft columns: never attended to again
            batch.mask[b, s_old + first + 1 + a:] = 0
        batch.last_pos[b] += 1 + a
        take.append(first + a)
    batch.logits = logits[torch.arange(n, device=logits.device), torch.tensor(take, device=logits.device)]
    return finished
