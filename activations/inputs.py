"""Inputs of the activation cache: which layers and positions, one continuation's tokens and spans, padding.

    from activations.inputs import prepare_item, pad_right
    items = [prepare_item(rec, tokenizer, ["prefix_last", "edit_mean"]) for rec in records]
    ids, mask = pad_right(items[:8], pad_id)          # [b, seq] right-padded, mask 1 on real tokens

Positions (all before the outcome unless ``--allow-outcome-tokens``): ``prefix_last`` (the last input token),
``edit_mean`` / ``edit_last`` (mean over / last of the tokens of the edited line, found through the tokenizer's
offset mapping), ``think_mean`` / ``think_last`` (mean over / last of the input's tokens inside its think block, a thinking
model's ``<think>...</think>``, whether the chat template or the model opened it; :func:`loadbearing.thinking.think_span`),
``continuation_mean`` (mean over the continuation's tokens, which contain the outcome: leaky), and
``continuation[:N]`` (the first ``N`` tokens of the continuation, the text generated after the edited step, each
its own position ``continuation_0`` .. ``continuation_{N-1}``; default and most :data:`MAX_CONTINUATION`; also
leaky, post-outcome). Only the first ``N`` continuation tokens are fed (a causal model's states there do not
depend on later tokens), so the forward pass and the store grow by ``N`` tokens and ``N`` positions per row, a
bound fixed before caching; a continuation shorter than ``N`` repeats its last token (the stored span says so).
Layer indices follow :mod:`loadbearing.engine.layers` (0 = embeddings, L = output of block L-1). ``--layers`` and
``--token-positions`` are read by :mod:`loadbearing.options` (``parse_layers``, ``parse_token_positions``; the
``continuation[:N]`` entries through :func:`expand_continuation`).
"""
from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from activations.schema import StoreError
from loadbearing.runs import question_key_of
from loadbearing.thinking import OPEN_TAG, think_span

SAFE_POSITIONS = ("prefix_last", "edit_mean", "edit_last", "think_mean", "think_last")
OUTCOME_POSITIONS = ("continuation_mean",)
POSITIONS = SAFE_POSITIONS + OUTCOME_POSITIONS
#: ``continuation[:N]``: the first N generated tokens after the edit, one position each (post-outcome)
CONTINUATION = "continuation"
DEFAULT_CONTINUATION = 8
MAX_CONTINUATION = 64


def continuation_positions(n: int) -> list[str]:
    """The position names ``continuation:n`` expands to."""
    return [f"{CONTINUATION}_{i}" for i in range(n)]


def is_outcome_position(p: str) -> bool:
    """Whether position ``p`` reads tokens written after the edit (the outcome): leaky for prediction."""
    return p in OUTCOME_POSITIONS or p.startswith(CONTINUATION + "_")


def _continuation_count(p: str) -> int | None:
    """N of a ``continuation[:N]`` entry (None: not one); a bad N is a CacheError naming the fix."""
    if p == CONTINUATION:
        return DEFAULT_CONTINUATION
    if not p.startswith(CONTINUATION + ":"):
        return None
    raw = p.split(":", 1)[1]
    if not raw.isdigit() or not 1 <= int(raw) <= MAX_CONTINUATION:
        raise CacheError(f"--token-positions {p!r}: N must be a whole number from 1 to {MAX_CONTINUATION} (the "
                         f"store keeps N positions per row), e.g. continuation:8")
    return int(raw)
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


def expand_continuation(p: str) -> list[str] | None:
    """``continuation[:N]`` -> its ``N`` positions (``continuation_0`` ..); None when ``p`` is not such an entry
    (:func:`loadbearing.options.parse_token_positions`' ``expand``)."""
    n = _continuation_count(p)
    return None if n is None else continuation_positions(n)


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
    if any(p.startswith("think_") for p in positions):
        ts = think_span(text, offsets)
        if ts is None:
            raise CacheError(f"continuation {cid!r}: its input_text holds no think block (no {OPEN_TAG} tag before "
                             "the cut, or an empty one); think_* positions need a thinking model's run, use "
                             "prefix_last or edit_* here")
        spans["think_mean"], spans["think_last"] = ts, (ts[1] - 1, ts[1])
    n_cont = sum(1 for p in positions if p.startswith(CONTINUATION + "_"))
    if "continuation_mean" in positions or n_cont:
        cont = rec.get("continuation") or ""
        cids = list(tokenizer(cont, add_special_tokens=False)["input_ids"])
        if not cids:
            raise CacheError(f"continuation {cid!r} has an empty continuation; cannot read positions after the edit")
        if "continuation_mean" in positions:
            spans["continuation_mean"] = (n, n + len(cids))
        else:  # only the first N are read: feed no more (a causal model's states there ignore later tokens)
            cids = cids[:n_cont]
        for i in range(n_cont):
            j = n + min(i, len(cids) - 1)
            spans[f"{CONTINUATION}_{i}"] = (j, j + 1)
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


__all__ = ["CONTINUATION", "CacheError", "DEFAULT_CONTINUATION", "Item", "LAYER_SEMANTICS", "MAX_CONTINUATION",
           "OUTCOME_POSITIONS", "POSITIONS", "SAFE_POSITIONS", "continuation_positions", "expand_continuation",
           "is_outcome_position", "pad_right", "prepare_item"]
