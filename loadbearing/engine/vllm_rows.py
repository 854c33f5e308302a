"""One vLLM engine call over rows that may each carry a steering row, a prefix-cache salt or a sampling seed.

    from loadbearing.engine.vllm_rows import generate_rows
    outs = generate_rows(vg, lm, texts, max_new_tokens=64)                       # greedy, like the HF backend
    outs = generate_rows(vg, lm, texts, max_new_tokens=64, tags=tags, salts=salts)   # steered (vllm_hooks)
    outs = generate_rows(vg, lm, texts, max_new_tokens=64, sampling=Sampling(0.6, 0.95, 44), sample_keys=ids)

* Prompts go in as token ids, tokenised as the HF path does (:func:`loadbearing.engine.generation.encode`).
* Distinct requests only: rows with the same prompt ids, salt and seed have the same output (greedy, or the
  same seeded draw), so one request serves them all; the rest are copies (input order kept). ``dedupe=False``
  sends one request per row (benchmarks: the same work as a steered call).
* ``tags[i]`` (``[call, row]`` or None) goes into ``SamplingParams.extra_args`` for the worker hooks
  (:mod:`loadbearing.engine.vllm_hooks`); ``salts[i]`` into the prompt's ``cache_salt``: the prefix cache never
  hands a steered request's KV blocks to a request steered otherwise (or not at all). A row whose edit is
  the identity (alpha 0) has no salt and shares the unsteered cache, which its KV equals bit for bit.
* ``sampling``: vLLM's own sampler with a per-request ``seed`` = :func:`loadbearing.engine.sampling.row_seed`
  of the row's key, so a rollout is reproducible whatever else is in the batch. vLLM draws differently from the
  HF fast path's inverse-CDF sampler: the same distribution (temperature, top-p), not the same draws.
* Each output is ended by :func:`loadbearing.engine.generation.finish` (the stop rule every backend uses),
  outputs are matched to requests by their position (vLLM returns them sorted by integer request id) and
  checked against the prompt ids.
"""
from __future__ import annotations

import time
from collections.abc import Sequence
from typing import Any

from loadbearing.engine.generation import Generation, _newline_ids, encode, finish
from loadbearing.engine.sampling import default_keys, row_seed


def generate_rows(vg: Any, lm: Any, texts: Sequence[str], *, max_new_tokens: int, stop_at_answer: bool = True,
                  progress: bool = True, tags: Sequence[Any] | None = None, salts: Sequence[str | None] | None = None,
                  sampling: Any = None, sample_keys: Sequence[str] | None = None,
                  dedupe: bool = True) -> list[Generation]:
    """Generation records for ``texts`` through ``vg.llm`` (a :class:`loadbearing.engine.vllm_backend.VLLMGenerate`)."""
    from vllm import SamplingParams  # deferred: vLLM is optional (its own environment)
    from vllm.inputs import TokensPrompt  # deferred: vLLM is optional (its own environment)

    from loadbearing.engine.vllm_hooks import EXTRA_KEY  # deferred: loadbearing.engine.vllm_hooks loads numpy

    if max_new_tokens < 1:
        raise ValueError(f"max_new_tokens must be >= 1, got {max_new_tokens}")
    n = len(texts)
    if not n:
        return []
    for name, seq in (("tags", tags), ("salts", salts), ("sample_keys", sample_keys)):
        if seq is not None and len(seq) != n:
            raise ValueError(f"{len(seq)} {name} for {n} texts")
    tok = lm.tokenizer
    encoded = [encode(tok, t) for t in texts]
    if any(not e for e in encoded):
        raise ValueError("cannot generate from an empty input (no tokens)")
    seeds: list[int | None] = [None] * n
    if sampling is not None and not sampling.greedy:
        keys = list(sample_keys) if sample_keys is not None else default_keys(texts)
        seeds = [row_seed(sampling.seed, k) for k in keys]
    # one request per distinct (prompt ids, salt, seed)
    slot: dict[tuple, int] = {}
    req_of: list[int] = []
    first: list[int] = []
    for i, e in enumerate(encoded):
        key = (tuple(e), salts[i] if salts else None, seeds[i], None if dedupe else i)
        if key not in slot:
            slot[key] = len(first)
            first.append(i)
        req_of.append(slot[key])
    stop = sorted(vg.stop_ids)
    prompts, params = [], []
    for i in first:
        sp_kw: dict[str, Any] = dict(max_tokens=max_new_tokens, stop_token_ids=stop, ignore_eos=False,
                                     skip_special_tokens=True, detokenize=False)
        seed = seeds[i]
        if seed is None:
            sp_kw["temperature"] = 0.0
        else:
            sp_kw.update(temperature=float(sampling.temperature), top_p=float(sampling.top_p), seed=int(seed))
        tag = tags[i] if tags else None
        if tag is not None:
            sp_kw["extra_args"] = {EXTRA_KEY: [int(tag[0]), int(tag[1])]}
        params.append(SamplingParams(**sp_kw))
        salt = salts[i] if salts else None
        prompts.append(TokensPrompt(prompt_token_ids=encoded[i], cache_salt=salt) if salt
                       else TokensPrompt(prompt_token_ids=encoded[i]))
    t0 = time.perf_counter()
    outs = vg.llm.generate(prompts, params, use_tqdm=progress)
    vg.seconds += time.perf_counter() - t0
    if len(outs) != len(first):
        raise RuntimeError(f"vLLM returned {len(outs)} outputs for {len(first)} requests")
    nl = _newline_ids(tok) if stop_at_answer else frozenset()
    done: list[Generation] = []
    for j, o in enumerate(outs):
        if list(o.prompt_token_ids) != list(encoded[first[j]]):
            raise RuntimeError("vLLM's outputs do not match its requests' prompts (order lost)")
        ids = list(o.outputs[0].token_ids)
        g = finish(tok, ids, vg.stop_ids, stop_at_answer, newline_ids=nl)
        assert g is not None  # finish() without max_new_tokens always returns a record
        vg.generated_tokens += len(ids)
        vg.discarded_tokens += len(ids) - g.new_tokens - (1 if g.finish_reason == "eos" else 0)
        done.append(g)
    vg.last_token_ids = [list(outs[r].outputs[0].token_ids) for r in req_of]  # per input row (diagnostics)
    return [done[r] for r in req_of]


__all__ = ["generate_rows"]
