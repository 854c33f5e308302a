"""Inputs of the activation cache: which layers and positions, one continuation's tokens and spans, padding.

    from activations.inputs import prepare_item, pad_right
    items = [prepare_item(rec, tokenizer, ["prefix_last", "edit_mean"]) for rec in records]
    ids, mask = pad_right(items[:8], pad_id)          # [b, seq] right-padded, mask 1 on real tokens

Positions (all before the outcome unless ``--allow-outcome-tokens``): ``prefix_last`` (the last input token),
``edit_mean`` / ``edit_last`` (mean over / last of the tokens of the edited line, found through the tokenizer's
offset mapping), ``continuation_mean`` (mean over the continuation's tokens, which contain the outcome: leaky).
Layer indices follow :mod:`loadbearing.engine.layers` (0 = embeddings, L = output of block L-1). ``--layers`` and
``--token-positions`` are read by :mod:`loadbearing.options` (``parse_layers``, ``parse_token_positions``).
"""
from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from activations.schema import StoreError
from loadbearing.runs import question_key_of

SAFE_POSITIONS = ("prefix_last", "edit_mean", "edit_last")
OUTCOME_POSITIONS = ("continuation_mean",)
POSITIONS = SAFE_POSITIONS + OUTCOME_POSITIONS
LAYER_SEMANTICS = (
    "HF hidden_states indexing: 0 = residual stream entering block 0 (embeddings), L = residual stream after "
    "block L-1; the last index is before the final norm"
)


class CacheError(StoreError):
    """Bad input to the caching stage; the message names the problem and the fix."""


@dataclass
class Item:
    """One continuation prepared for the forward pass."""

    row: dict[str, Any]  # the store's row-table columns
    ids: list[int]  # tokens fed to the model
    spans: dict[str, tuple[int, int]]  # position -> [start, end) token offsets


def _token_offsets(tokenizer, text: str) -> tuple[list[int], list[tuple[int, int]]]:
    try:
        enc = tokenizer(text, add_special_tokens=False, return_offsets_mapping=True)
    except NotImplementedError:
        raise CacheError("the tokenizer gives no offset mapping (a slow tokenizer?); load a fast tokenizer") from None
    return list(enc["input_ids"]), [tuple(o) for o in enc["offset_mapping"]]


def prepare_item(rec: dict, tokenizer, positions: Sequence[str], label3: str | None = None,
                 source_index: int | None = None) -> Item:
    """Rebuild one continuation's input tokens and the token spans of each position."""
    cid = rec.get("id")
    text = rec.get("input_text")
    if not isinstance(text, str) or not text:
        raise CacheError(f"continuation {cid!r} has no input_text; was continuations.jsonl written by behavioural.run?")
    ids, offsets = _token_offsets(tokenizer, text)
    n = len(ids)
    if rec.get("input_tokens") and n != rec.get("input_tokens"):  # 0: unknown (an imported run: paper_import)
        raise CacheError(
            f"continuation {cid!r}: input_text tokenises to {n} tokens but the record says input_tokens="
            f"{rec.get('input_tokens')}; the tokenizer differs from the run's (wrong --model?) or the record was edited"
        )
    spans: dict[str, tuple[int, int]] = {}
    if any(p.startswith("edit_") for p in positions):
        es = rec.get("edit_span")
        if not es or len(es) != 2:
            raise CacheError(f"continuation {cid!r} has no edit_span; cannot place edit_* positions")
        a, b = int(es[0]), int(es[1])
        toks = [i for i, (s, e) in enumerate(offsets) if s < b and e > a and e > s]
        if not toks:
            raise CacheError(f"continuation {cid!r}: edit_span {[a, b]} covers no token of input_text")
        if toks != list(range(toks[0], toks[-1] + 1)):
            raise CacheError(f"continuation {cid!r}: edit_span tokens are not contiguous ({toks})")
        spans["edit_mean"] = (toks[0], toks[-1] + 1)
        spans["edit_last"] = (toks[-1], toks[-1] + 1)
    spans["prefix_last"] = (n - 1, n)
    if "continuation_mean" in positions:
        cont = rec.get("continuation") or ""
        cids = list(tokenizer(cont, add_special_tokens=False)["input_ids"])
        if not cids:
            raise CacheError(f"continuation {cid!r} has an empty continuation; cannot average over it")
        spans["continuation_mean"] = (n, n + len(cids))
        ids = ids + cids
    memberships = rec.get("memberships")
    row = {
        "continuation_id": cid,
        "question_id": rec.get("question_id"),
        "question_key": question_key_of(rec),
        "dataset": rec.get("dataset"),
        "task": rec.get("task"),
        "difficulty": rec.get("difficulty"),
        "strategy": rec.get("strategy"),
        "edit_position": rec.get("position"),
        "line_index": rec.get("line_index"),  # the edited line (metadata for the probes' baseline)
        "n_lines": rec.get("n_lines"),
        "condition": rec.get("condition"),
        "label": rec.get("label"),
        "label3": label3,
        "memberships": json.dumps([list(m) for m in memberships]) if memberships else None,
        "correct": rec.get("correct"),
        "input_tokens": n,
        "source_index": source_index,
    }
    return Item(row=row, ids=ids, spans={p: spans[p] for p in positions})


def pad_right(items: Sequence[Item], pad_id: int):
    """Right-padded ``(ids, mask)`` long tensors ``[b, seq]`` for a batch of prepared items."""
    import torch  # deferred: torch is heavy to import

    seq = max(len(it.ids) for it in items)
    ids = torch.full((len(items), seq), pad_id, dtype=torch.long)
    mask = torch.zeros((len(items), seq), dtype=torch.long)
    for i, it in enumerate(items):
        ids[i, : len(it.ids)] = torch.tensor(it.ids)
        mask[i, : len(it.ids)] = 1
    return ids, mask


__all__ = ["CacheError", "Item", "LAYER_SEMANTICS", "OUTCOME_POSITIONS", "POSITIONS", "SAFE_POSITIONS",
           "pad_right", "prepare_item"]
