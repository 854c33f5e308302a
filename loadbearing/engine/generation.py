"""Greedy generation backend (Hugging Face transformers), batched, prefix-sharing and order-preserving.

    from loadbearing.engine.generation import generate
    outs = generate(lm, texts, max_new_tokens=256, batch_size=16)   # list[Generation], input order

* Inputs are full model input texts (chat-templated prompt, optionally followed by an assistant prefix);
  each is tokenised exactly once with ``add_special_tokens=False`` (the chat template already wrote any
  BOS, so no second BOS is added), see :func:`encode`.
* Stops at end of turn (EOS) or, with ``stop_at_answer=True``, as soon as a final-answer line anchored at a
  line start (``Answer: ...``, ``Final answer: ...``, ``#### ...``, a lone ``\\boxed{...}``) is complete
  (:func:`loadbearing.answers.has_final_answer_line`). The stop rule is
  one pure function of a row's own tokens (:func:`finish`), shared by every backend (HF fast, HF simple,
  vLLM), so a record never depends on what else was in its batch.
* Fast path (the default, :mod:`loadbearing.engine.batching`): rows are sorted by their token ids (rows that share
  a prefix - a question's perturbed and control continuations, or every prompt's system + few-shot turns -
  become neighbours). Up to ``batch_size`` rows decode at once (continuous batching): an admitted group is
  prefilled in up to three levels - the prefix every row shares once, each question's shared prompt and
  response prefix once, then each row's own tokens (left-padded, explicit position ids) - logits are
  computed for the last position only, each row leaves the batch as soon as it is done, freed slots are
  refilled from the queue (the newcomers' cache is left-padded and concatenated), and a batch's last few
  rows verify prompt-lookup drafts (``lookahead``; the greedy tokens either way). The decode kernels are
  :mod:`loadbearing.engine.fastpath`'s. Results are put back in input order; identical texts are generated once
  (``dedupe``).
* ``on_pass(pass_)`` is called before every forward of the fast path with what the pass computes (a shared
  prefix, the rows' own input tokens, or one decode step) and for which input rows
  (:class:`loadbearing.engine.batching.Pass`), so a caller can apply per-row settings (steering's per-row vectors)
  without leaving the fast path.
* ``sampling=Sampling(temperature, top_p, seed)`` samples on the fast path instead of decoding greedily: one
  seeded random stream per row, so a row's tokens do not depend on its batch (:mod:`loadbearing.engine.sampling`).
* ``batch_context(indices)`` wraps each batch's ``model.generate`` in a context manager that knows which
  input rows are in the batch; such calls take the simple path (:func:`generate_simple`: length-sorted,
  left-padded ``model.generate`` batches of a fixed composition), the reference the fast path is tested
  against.
"""
from __future__ import annotations

import contextlib
import time
import weakref
from collections.abc import Callable, Sequence
from dataclasses import dataclass

from loadbearing.answers import has_final_answer_line
from loadbearing.engine.batching import Pass
from loadbearing.engine.decoding import decode_continuous
from loadbearing.engine.sampling import Sampling, chooser, default_keys


@dataclass(frozen=True)
class Generation:
    text: str  # the generated continuation (special tokens removed)
    new_tokens: int  # tokens generated, end-of-turn excluded
    finish_reason: str  # "answer_line" | "eos" | "length"


def has_complete_answer_line(text: str) -> bool:
    """True when ``text`` holds a complete final-answer line anchored at a line start (the stop rule lives in
    :func:`loadbearing.answers.has_final_answer_line`; a mid-sentence "the answer is" never stops)."""
    return has_final_answer_line(text)


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
        import torch  # deferred: torch is heavy to import

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
    ids: set[int] = set()
    for src in (getattr(model.generation_config, "eos_token_id", None), tokenizer.eos_token_id):
        if src is None:
            continue
        ids.update(src if isinstance(src, (list, tuple)) else [src])
    for tok in ("<|im_end|>", "<|eot_id|>", "<end_of_turn>", "<|end_of_text|>", "<｜end▁of▁sentence｜>"):
        tid = tokenizer.convert_tokens_to_ids(tok)
        if isinstance(tid, int) and tid != tokenizer.unk_token_id and tid is not None and tid >= 0:
            ids.add(tid)
    return sorted(ids)


def stop_token_ids(tokenizer, model) -> list[int]:
    """The token ids that end a row (end of turn / EOS) on every backend."""
    return _stop_ids(tokenizer, model)


def pad_token_id(tokenizer, stop_ids) -> int:
    """The id the batched paths pad rows with (the tokenizer's pad token, else the smallest stop id)."""
    return _pad_id(tokenizer, stop_ids)


_NEWLINE_IDS: weakref.WeakKeyDictionary = weakref.WeakKeyDictionary()


def _newline_ids(tokenizer) -> frozenset[int]:
    """Ids of the tokens whose text contains a newline (a final-answer line can only complete on one)."""
    try:
        return _NEWLINE_IDS[tokenizer]
    except (KeyError, TypeError):
        pass
    vocab = tokenizer.get_vocab()
    ids = sorted(set(vocab.values()))
    texts = tokenizer.batch_decode([[i] for i in ids])
    found = frozenset(i for i, t in zip(ids, texts) if "\n" in t)
    try:
        _NEWLINE_IDS[tokenizer] = found
    except TypeError:  # pragma: no cover - an unhashable / non-weakref-able tokenizer
        pass
    return found


def finish(tokenizer, new_ids: Sequence[int], stop_ids, stop_at_answer: bool, max_new_tokens: int | None = None,
           newline_ids: frozenset[int] | None = None) -> Generation | None:
    """The record for a row whose generated tokens are ``new_ids`` - or ``None`` while it is still running.

    Scans the tokens in order: an end-of-turn id ends the row ("eos", the id is not kept); with
    ``stop_at_answer`` a newline-bearing token after which the text holds a complete answer line ends it
    ("answer_line"); reaching ``max_new_tokens`` tokens ends it ("length"). When ``max_new_tokens`` is None the
    tokens are taken as final (whatever follows a stop - e.g. a batch's padding - is ignored).
    """
    nl = newline_ids if newline_ids is not None else _newline_ids(tokenizer)
    kept: list[int] = []
    for t in new_ids:
        if t in stop_ids:
            return Generation(tokenizer.decode(kept, skip_special_tokens=True), len(kept), "eos")
        kept.append(t)
        if stop_at_answer and t in nl:
            text = tokenizer.decode(kept, skip_special_tokens=True)
            if has_complete_answer_line(text):
                return Generation(text, len(kept), "answer_line")
        if max_new_tokens is not None and len(kept) >= max_new_tokens:
            return Generation(tokenizer.decode(kept, skip_special_tokens=True), len(kept), "length")
    if max_new_tokens is not None:
        return None
    return Generation(tokenizer.decode(kept, skip_special_tokens=True), len(kept), "length")


def _unique(texts: Sequence[str], dedupe: bool) -> tuple[list[int], list[int]]:
    """(slot, first): input row -> unique row, unique row -> first input row."""
    slot: list[int] = []
    first: list[int] = []
    seen: dict[str, int] = {}
    for i, t in enumerate(texts):
        u = seen.setdefault(t, len(first)) if dedupe else len(first)
        if u == len(first):
            first.append(i)
        slot.append(u)
    return slot, first


def _row_stepper(tokenizer, results: list, generated: list[list[int]], *, max_new_tokens: int,
                 stop_ids: frozenset[int], stop_at_answer: bool, newline_ids: frozenset[int]):
    """The stop rule as a ``step(row, token) -> done`` callback for :func:`loadbearing.engine.decoding.decode_continuous`.

    Same rule as :func:`finish`: end of turn ("eos", id not kept), a completed final-answer line
    ("answer_line"), or ``max_new_tokens`` tokens ("length").
    """
    def step(r: int, t: int) -> bool:
        g = generated[r]
        if t in stop_ids:
            results[r] = Generation(tokenizer.decode(g, skip_special_tokens=True), len(g), "eos")
            return True
        g.append(t)
        if stop_at_answer and t in newline_ids:
            text = tokenizer.decode(g, skip_special_tokens=True)
            if has_complete_answer_line(text):
                results[r] = Generation(text, len(g), "answer_line")
                return True
        if len(g) >= max_new_tokens:
            results[r] = Generation(tokenizer.decode(g, skip_special_tokens=True), len(g), "length")
            return True
        return False

    return step


def _pad_id(tok, stop_ids) -> int:
    return tok.pad_token_id if tok.pad_token_id is not None else sorted(stop_ids)[0]


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
    refill: bool = True,
    on_pass: Callable[[Pass], None] | None = None,
    share: bool = True,
    lookahead: int | None = None,
    sampling: Sampling | None = None,
    sample_keys: Sequence[str] | None = None,
) -> list[Generation]:
    """Greedy continuations of ``texts`` (see module docstring); returns them in input order.

    ``sampling`` (:class:`loadbearing.engine.sampling.Sampling`, temperature > 0): seeded sampling instead,
    one random stream per input row keyed by ``sample_keys[i]`` (default: the text and its occurrence number
    among identical texts); identical texts are then separate rows (no ``dedupe``) and prompt-lookup drafts
    are off. A temperature of 0 is greedy.

    ``refill=False`` turns continuous batching off (static batches that run down as rows finish).
    ``on_pass`` receives, before every forward, a :class:`loadbearing.engine.batching.Pass` whose ``rows`` are
    *input* indices (into ``texts``) in batch-row order; with it identical texts are not merged (``dedupe``
    is ignored). ``share=False`` turns prefix sharing off (every row's whole input runs in its own row); on a
    model with a sliding window it is off by itself for a batch whose padded width plus ``max_new_tokens``
    reaches the window (:func:`loadbearing.engine.batching.sharing_fits`; the manifest's
    ``model.prefix_sharing`` says so).
    ``lookahead``: prompt-lookup drafts per row in a batch's tail (default
    :data:`loadbearing.engine.batching.LOOKAHEAD`, 0 = off; see :func:`loadbearing.engine.decoding.decode_continuous`).

    ``sort_by_length=False`` keeps the input order inside batches (no reordering); with ``batch_context`` the
    simple path runs (:func:`generate_simple`).
    """
    sampled = sampling is not None and not sampling.greedy
    if sampled and batch_context is not None:
        raise ValueError("sampling runs on the fast path only; drop batch_context")
    if sample_keys is not None and len(sample_keys) != len(texts):
        raise ValueError(f"sample_keys has {len(sample_keys)} keys for {len(texts)} texts")
    if batch_context is not None:
        return generate_simple(lm, texts, max_new_tokens=max_new_tokens, batch_size=batch_size,
                               stop_at_answer=stop_at_answer, progress=progress, desc=desc,
                               batch_context=batch_context, sort_by_length=sort_by_length, dedupe=dedupe)
    from tqdm.auto import tqdm  # deferred: tqdm is heavy to import

    if batch_size < 1:
        raise ValueError(f"batch_size must be >= 1, got {batch_size}")
    if max_new_tokens < 1:
        raise ValueError(f"max_new_tokens must be >= 1, got {max_new_tokens}")
    model, tok = lm.model, lm.tokenizer
    slot, first = _unique(texts, dedupe and on_pass is None and not sampled)
    choose = None
    if sampled:
        assert sampling is not None
        choose = chooser(sampling, list(sample_keys) if sample_keys is not None else default_keys(texts))
    encoded = [encode(tok, texts[i]) for i in first]
    # token-id order puts rows that share a prefix next to each other (and similar lengths near each other)
    order = sorted(range(len(encoded)), key=lambda i: encoded[i]) if sort_by_length else list(range(len(encoded)))
    stop_ids = frozenset(_stop_ids(tok, model))
    pad_id = _pad_id(tok, stop_ids)
    nl_ids = _newline_ids(tok) if stop_at_answer else frozenset()
    results: list[Generation | None] = [None] * len(encoded)
    generated: list[list[int]] = [[] for _ in encoded]
    row_step = _row_stepper(tok, results, generated, max_new_tokens=max_new_tokens, stop_ids=stop_ids,
                            stop_at_answer=stop_at_answer, newline_ids=nl_ids)
    bar = tqdm(total=len(encoded), desc=desc, unit="seq", disable=not progress, dynamic_ncols=True)
    t0 = time.perf_counter()
    n_tok = 0

    def step(r: int, t: int) -> bool:
        nonlocal n_tok
        n_tok += 1
        done = row_step(r, t)
        if done:
            bar.update(1)
            bar.set_postfix(tok_s=f"{n_tok / max(time.perf_counter() - t0, 1e-9):.1f}", refresh=False)
        return done

    try:
        hook = None
        if on_pass is not None:
            def hook(p: Pass) -> None:
                on_pass(Pass(p.kind, None if p.rows is None else [first[u] for u in p.rows], p.mask))

        decode_continuous(model, encoded, order, batch_size=batch_size, step=step, pad_id=pad_id, refill=refill,
                          on_pass=hook, share=share, lookahead=lookahead, choose=choose,
                          max_new_tokens=max_new_tokens)
    finally:
        bar.close()
    return [results[u] for u in slot]  # type: ignore[misc]


def generate_plain(lm, texts: Sequence[str], **kwargs) -> list[Generation]:
    """:func:`generate` with transformers' own kernels (:func:`loadbearing.engine.fastpath.plain`) and no
    prompt-lookup drafts (``--backend hf-plain``): the same batching, the reference against which the fast
    kernels' floating-point order can be ruled out. Same arguments and records as :func:`generate`."""
    from loadbearing.engine.fastpath import plain  # deferred: loadbearing.engine.fastpath loads torch, transformers

    with plain():
        return generate(lm, texts, **(kwargs | {"lookahead": 0}))


def generate_simple(
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
    """The simple path: length-sorted, left-padded ``model.generate`` batches (the reference the fast path
    is tested against, and the path ``batch_context`` callers take). Same arguments and records as
    :func:`generate`; ``batch_size=1`` is the one-at-a-time baseline."""
    import torch  # deferred: torch is heavy to import
    from tqdm.auto import tqdm  # deferred: tqdm is heavy to import
    from transformers import StoppingCriteriaList  # deferred: transformers is heavy to import

    if batch_size < 1:
        raise ValueError(f"batch_size must be >= 1, got {batch_size}")
    model, tok = lm.model, lm.tokenizer
    # with dedupe, identical texts share one generation (steering turns it off: same text, other alpha)
    slot, first = _unique(texts, dedupe)
    utexts = [texts[i] for i in first]
    encoded = [encode(tok, t) for t in utexts]
    order = sorted(range(len(utexts)), key=lambda i: -len(encoded[i])) if sort_by_length else list(range(len(utexts)))
    stop_ids = _stop_ids(tok, model)
    pad_id = _pad_id(tok, stop_ids)
    nl_ids = _newline_ids(tok) if stop_at_answer else frozenset()
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
                # a row stopped early is followed by padding (often an end-of-turn id): `finish` reads the
                # row's own tokens up to its first stop, so the record does not depend on the batch
                g = finish(tok, out[r, width:].tolist(), set(stop_ids), stop_at_answer, newline_ids=nl_ids)
                results[i] = g
                n_tok += g.new_tokens  # type: ignore[union-attr]
            bar.update(len(idx))
            bar.set_postfix(tok_s=f"{n_tok / max(time.perf_counter() - t0, 1e-9):.1f}")
    finally:
        bar.close()
    return [results[u] for u in slot]  # type: ignore[misc]
