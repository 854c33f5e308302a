"""Greedy generation backend (Hugging Face transformers), batched and order-preserving.

    from behavioural.generation import generate
    outs = generate(lm, texts, max_new_tokens=256, batch_size=16)   # list[Generation], input order

* Inputs are full model input texts (chat-templated prompt, optionally followed by an assistant prefix);
  each is tokenised exactly once with ``add_special_tokens=False`` (the chat template already wrote any
  BOS, so no second BOS is added), see :func:`encode`.
* Rows are sorted by token length (longest first), left-padded into batches, and results are put back in
  input order. Identical texts are generated once.
* Stops at end of turn (EOS) or, with ``stop_at_answer=True``, as soon as a final-answer line
  (``Answer: ...``, ``The answer is ...``, ``Final answer: ...``, ``#### ...``) is complete; rows that are
  done stop consuming compute in their batch (HF marks them finished and pads them).
* ``batch_context(indices)`` lets a caller wrap each batch's ``model.generate`` in a context manager that
  knows which input rows are in the batch, in batch-row order (steering applies per-row settings this way).
"""
from __future__ import annotations

import contextlib
import re
import time
from dataclasses import dataclass
from typing import Callable, Sequence

ANSWER_STATEMENT_RE = re.compile(r"(?:the (?:final )?answer is|final answer\s*[:：]|^\W*answer\s*[:：]|^\s*####)\s*\S",
                                 re.IGNORECASE | re.MULTILINE)


@dataclass(frozen=True)
class Generation:
    text: str  # the generated continuation (special tokens removed)
    new_tokens: int  # tokens generated, end-of-turn excluded
    finish_reason: str  # "answer_line" | "eos" | "length"


def has_complete_answer_line(text: str) -> bool:
    """True when ``text`` contains a newline-terminated line that states a final answer."""
    if "\n" not in text:
        return False
    complete = text[: text.rfind("\n")]
    return any(ANSWER_STATEMENT_RE.search(line) for line in complete.split("\n"))


def encode(tokenizer, text: str) -> list[int]:
    """Tokenise a full model input once, adding no special tokens (the chat template holds them)."""
    return tokenizer(text, add_special_tokens=False)["input_ids"]


class _AnswerLineStop:
    """Per-row stopping criterion: stop a row once its generated text has a complete answer line."""

    def __init__(self, tokenizer, prompt_len: int):
        self.tokenizer = tokenizer
        self.prompt_len = prompt_len
        self._nl_cache: dict[int, bool] = {}

    def _has_newline(self, tok_id: int) -> bool:
        v = self._nl_cache.get(tok_id)
        if v is None:
            v = "\n" in self.tokenizer.decode([tok_id])
            self._nl_cache[tok_id] = v
        return v

    def __call__(self, input_ids, scores, **kwargs):
        import torch

        done = torch.zeros(input_ids.shape[0], dtype=torch.bool, device=input_ids.device)
        if input_ids.shape[1] <= self.prompt_len:
            return done
        last = input_ids[:, -1].tolist()
        for i, t in enumerate(last):
            if self._has_newline(t):
                new = self.tokenizer.decode(input_ids[i, self.prompt_len :], skip_special_tokens=True)
                done[i] = has_complete_answer_line(new)
        return done


def _stop_ids(tokenizer, model) -> list[int]:
    ids = set()
    for src in (getattr(model.generation_config, "eos_token_id", None), tokenizer.eos_token_id):
        if src is None:
            continue
        ids.update(src if isinstance(src, (list, tuple)) else [src])
    for tok in ("<|im_end|>", "<|eot_id|>", "<end_of_turn>", "<|end_of_text|>", "<｜end▁of▁sentence｜>"):
        tid = tokenizer.convert_tokens_to_ids(tok)
        if isinstance(tid, int) and tid != tokenizer.unk_token_id and tid is not None and tid >= 0:
            ids.add(tid)
    return sorted(ids)


def _postprocess(tokenizer, new_ids: Sequence[int], stop_ids: set[int], stop_at_answer: bool) -> Generation:
    ended = False
    kept = []
    for t in new_ids:
        if t in stop_ids:
            ended = True
            break
        kept.append(t)
    text = tokenizer.decode(kept, skip_special_tokens=True)
    if ended:
        reason = "eos"
    elif stop_at_answer and has_complete_answer_line(text):
        reason = "answer_line"
    else:
        reason = "length"
    return Generation(text=text, new_tokens=len(kept), finish_reason=reason)


def generate(
    lm,
    texts: Sequence[str],
    *,
    max_new_tokens: int = 512,
    batch_size: int = 8,
    stop_at_answer: bool = True,
    progress: bool = True,
    desc: str = "generate",
    batch_context: Callable[[list[int]], contextlib.AbstractContextManager] | None = None,
    sort_by_length: bool = True,
    dedupe: bool = True,
) -> list[Generation]:
    """Greedy continuations of ``texts`` (see module docstring); returns them in input order."""
    import torch
    from tqdm.auto import tqdm
    from transformers import StoppingCriteriaList

    if batch_size < 1:
        raise ValueError(f"batch_size must be >= 1, got {batch_size}")
    model, tok = lm.model, lm.tokenizer
    # with dedupe, identical texts share one generation (steering turns it off: same text, other alpha)
    slot: list[int] = []  # input row -> unique row
    first: list[int] = []  # unique row -> first input row
    seen: dict[str, int] = {}
    for i, t in enumerate(texts):
        u = seen.setdefault(t, len(first)) if dedupe else len(first)
        if u == len(first):
            first.append(i)
        slot.append(u)
    utexts = [texts[i] for i in first]
    encoded = [encode(tok, t) for t in utexts]
    order = sorted(range(len(utexts)), key=lambda i: -len(encoded[i])) if sort_by_length else list(range(len(utexts)))
    stop_ids = _stop_ids(tok, model)
    pad_id = tok.pad_token_id if tok.pad_token_id is not None else stop_ids[0]
    device = next(model.parameters()).device
    results: list[Generation | None] = [None] * len(utexts)
    bar = tqdm(total=len(utexts), desc=desc, unit="seq", disable=not progress, dynamic_ncols=True)
    n_tok, t0 = 0, time.perf_counter()
    try:
        for b in range(0, len(order), batch_size):
            idx = order[b : b + batch_size]
            width = max(len(encoded[i]) for i in idx)
            ids = torch.full((len(idx), width), pad_id, dtype=torch.long)
            mask = torch.zeros((len(idx), width), dtype=torch.long)
            for r, i in enumerate(idx):
                e = encoded[i]
                ids[r, width - len(e) :] = torch.tensor(e, dtype=torch.long)
                mask[r, width - len(e) :] = 1
            ids, mask = ids.to(device), mask.to(device)
            criteria = [_AnswerLineStop(tok, width)] if stop_at_answer else []

            ctx = batch_context([first[i] for i in idx]) if batch_context else contextlib.nullcontext()
            with ctx, torch.inference_mode():
                out = model.generate(
                    input_ids=ids,
                    attention_mask=mask,
                    max_new_tokens=max_new_tokens,
                    do_sample=False,
                    temperature=None,
                    top_p=None,
                    top_k=None,
                    eos_token_id=stop_ids,
                    pad_token_id=pad_id,
                    stopping_criteria=StoppingCriteriaList(criteria),
                )
            for r, i in enumerate(idx):
                g = _postprocess(tok, out[r, width:].tolist(), set(stop_ids), stop_at_answer)
                results[i] = g
                n_tok += g.new_tokens
            bar.update(len(idx))
            bar.set_postfix(tok_s=f"{n_tok / max(time.perf_counter() - t0, 1e-9):.1f}")
    finally:
        bar.close()
    return [results[u] for u in slot]  # type: ignore[misc]
