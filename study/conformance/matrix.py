"""The conformance checks: every generation, capture, steering, patching and forced-answer path of the toolkit
against transformers' own one-at-a-time computation, on one loaded model.

    from study.conformance.matrix import run_checks, chat_inputs
    results = run_checks(lm, chat_inputs(lm.tokenizer, 8), max_new_tokens=32)   # list[Result], one per path
    for r in results: print(r.line())       # "fast            pass" / "simple  fail: row 3: ..."

The same checks run three ways: ``tests/test_conformance.py`` over every architecture family as a tiny random
model (:mod:`loadbearing.engine.families`), ``python -m study.conformance.support_matrix`` writing
``docs/support-matrix.md`` from them, and ``cot-selfcheck`` (:mod:`study.conformance.selfcheck`) on a user's real model.

Generation paths, each compared record by record (text, token count, finish reason) with transformers'
``model.generate`` run greedily on one input at a time (no padding, its own cache), the stop rule applied to
its tokens by :func:`loadbearing.engine.generation.finish`:

* ``fast``: :func:`loadbearing.engine.generation.generate` as the stages call it (prefix sharing, continuous
  batching with refill, prompt-lookup drafts), a batch smaller than the inputs so slots are refilled;
* ``hf-plain``: the same batching over transformers' own kernels; ``simple``: left-padded ``model.generate``
  batches; ``stop-rule``: the fast path with ``stop_at_answer`` against the rule on the reference tokens;
* ``sampling``: seeded sampling gives the same tokens twice, and at batch 1 as in a batch.

The other checks live in :mod:`study.conformance.checks`. Every check gives one :class:`Result`; a check that
raises is a failure whose detail is ``raised`` and the exception's first line; a path a model cannot take (an engine that does
not support its architecture) is ``n.a.`` with the reason.
"""
from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

from loadbearing.engine.decoding import decode_continuous
from loadbearing.engine.generation import encode, finish, generate, generate_plain, generate_simple, pad_token_id, stop_token_ids
from loadbearing.engine.sampling import Sampling

#: the questions the checks' chat inputs are built from (every check needs inputs, not answers)
QUESTIONS = (
    "Start with 4. Add 3. Subtract 2. What is the result?",
    "Name three colours of the rainbow and say which comes first.",
    "A train leaves at 9 and arrives at 11. How long is the trip?",
    "Write the numbers from one to six in words.",
    "What is the capital of France, and which river runs through it?",
    "Start with 7. Add 5. What is the result?",
)
#: the shared assistant prefix half of the inputs continue from (an edited line and its control share it)
PREFIXES = ("Let me work through this one line at a time.\nFirst, ", "Let me work through this one line at a time.\nStep 1: ")


@dataclass(frozen=True)
class Result:
    """One path's verdict on one model: ``status`` is ``pass``, ``fail`` or ``n.a.``; ``detail`` says why."""

    path: str
    status: str
    detail: str = ""
    seconds: float = 0.0

    @property
    def ok(self) -> bool:
        return self.status != "fail"

    def line(self) -> str:
        text = self.status if not self.detail else f"{self.status}: {self.detail}"
        return f"{self.path:<20} {text}"


class NotApplicable(Exception):
    """Raised by a check whose path this model cannot take (the message says why and what to use)."""


def chat_inputs(tokenizer, n: int = 8) -> list[str]:
    """``n`` chat-templated inputs: prompts, and every other one continued from a shared assistant prefix."""
    out = []
    for i in range(n):
        q = QUESTIONS[(i // 2) % len(QUESTIONS)]
        prompt = tokenizer.apply_chat_template([{"role": "user", "content": q}], tokenize=False,
                                               add_generation_prompt=True)
        out.append(prompt if i % 2 == 0 else prompt + PREFIXES[(i // 2) % 2])
    return out


def records(gens: Sequence[Any]) -> list[tuple[str, int, str]]:
    return [(g.text, g.new_tokens, g.finish_reason) for g in gens]


def first_difference(got: Sequence[Any], want: Sequence[Any]) -> str:
    """'' when equal, else the first differing row and both values (shortened)."""
    if len(got) != len(want):
        return f"{len(got)} rows, expected {len(want)}"
    for i, (a, b) in enumerate(zip(got, want)):
        if a != b:
            return f"row {i}: got {_short(a)}, expected {_short(b)}"
    return ""


def _short(x: Any, n: int = 70) -> str:
    s = repr(x)
    return s if len(s) <= n else s[:n] + "..."


def reference_tokens(lm, texts: Sequence[str], max_new_tokens: int) -> list[list[int]]:
    """transformers' greedy ``generate``, one input at a time: each row's new token ids (up to its first stop)."""
    import torch  # deferred: torch is heavy to import

    model, tok = lm.model, lm.tokenizer
    stop = stop_token_ids(tok, model)
    device = next(model.parameters()).device
    out = []
    with torch.inference_mode():
        for t in texts:
            ids = torch.tensor([encode(tok, t)], device=device)
            g = model.generate(input_ids=ids, attention_mask=torch.ones_like(ids), max_new_tokens=max_new_tokens,
                               do_sample=False, temperature=None, top_p=None, top_k=None, eos_token_id=stop,
                               pad_token_id=tok.pad_token_id)
            out.append(g[0, ids.shape[1]:].tolist())
    return out


def reference_records(lm, ref: Sequence[Sequence[int]], stop_at_answer: bool) -> list[tuple[str, int, str]]:
    stop = set(stop_token_ids(lm.tokenizer, lm.model))
    return records([finish(lm.tokenizer, list(r), stop, stop_at_answer) for r in ref])


def staggered(lm, texts: Sequence[str], ref: Sequence[Sequence[int]], max_new_tokens: int) -> str:
    """The fast path's engine with rows that stop at different lengths (row r after ``max_new_tokens - 3r``
    tokens), so freed slots are refilled mid-batch (merged caches, cropped columns) and the last rows verify
    prompt-lookup drafts: each row's tokens must be the reference's first ones."""
    stop = frozenset(stop_token_ids(lm.tokenizer, lm.model))
    rows = [encode(lm.tokenizer, t) for t in texts]
    limit = [max(2, max_new_tokens - 3 * r) for r in range(len(rows))]
    got: list[list[int]] = [[] for _ in rows]

    def step(r: int, t: int) -> bool:
        if t in stop:
            return True
        got[r].append(t)
        return len(got[r]) >= limit[r]

    decode_continuous(lm.model, rows, sorted(range(len(rows)), key=lambda i: rows[i]), batch_size=2, step=step,
                      pad_id=pad_token_id(lm.tokenizer, stop), min_refill=1, max_new_tokens=max_new_tokens)
    want = []
    for r, toks in enumerate(ref):
        cut = [t for t in toks[:next((i for i, t in enumerate(toks) if t in stop), len(toks))]]
        want.append(cut[:limit[r]])
    diff = first_difference(got, want)
    return diff and "with refill: " + diff


def generation_checks(lm, texts: Sequence[str], max_new_tokens: int, batch_size: int) -> dict[str, Callable[[], str]]:
    """The generation paths as ``{path: check}``; a check returns '' (pass) or the first difference."""
    state: dict[str, Any] = {}
    kw: dict[str, Any] = dict(max_new_tokens=max_new_tokens, batch_size=batch_size, progress=False)

    def want(stop_at_answer: bool = False):
        if "ref" not in state:
            state["ref"] = reference_tokens(lm, texts, max_new_tokens)
        return reference_records(lm, state["ref"], stop_at_answer)

    def sampling() -> str:
        s = Sampling(temperature=0.5, top_p=0.9, seed=7)
        few, short = texts[:2], kw | {"max_new_tokens": min(12, max_new_tokens)}
        a = records(generate(lm, few, sampling=s, **short))
        b = records(generate(lm, few, sampling=s, **short))
        c = records(generate(lm, few, sampling=s, **(short | {"batch_size": 1})))
        return (first_difference(b, a) and "not reproducible: " + first_difference(b, a)) or (
            first_difference(c, a) and "batch 1 differs from the batch: " + first_difference(c, a))

    def fast() -> str:
        diff = first_difference(records(generate(lm, texts, stop_at_answer=False, **kw)), want())
        return diff or staggered(lm, texts, state["ref"], max_new_tokens)

    return {
        "fast": fast,
        "hf-plain": lambda: first_difference(records(generate_plain(lm, texts, stop_at_answer=False, **kw)), want()),
        "simple": lambda: first_difference(records(generate_simple(lm, texts, stop_at_answer=False, **kw)), want()),
        "stop-rule": lambda: first_difference(records(generate(lm, texts, stop_at_answer=True, **kw)), want(True)),
        "sampling": sampling,
    }


def run_checks(lm, texts: Sequence[str] | None = None, *, max_new_tokens: int = 16, batch_size: int = 3,
               only: Sequence[str] | None = None) -> list[Result]:
    """Every conformance check on ``lm`` (``only``: the named paths), one :class:`Result` each, in order."""
    # deferred: import cycle study.conformance.checks -> study.conformance.matrix
    from study.conformance.checks import model_checks

    texts = list(texts) if texts is not None else chat_inputs(lm.tokenizer, 4)
    checks = generation_checks(lm, texts, max_new_tokens, batch_size) | model_checks(lm, texts, batch_size)
    out = []
    for path, check in checks.items():
        if only is not None and path not in only:
            continue
        t0 = time.perf_counter()
        try:
            diff = check()
            status, detail = ("fail", diff) if diff else ("pass", "")
        except NotApplicable as e:
            status, detail = "n.a.", str(e)
        except Exception as e:  # noqa: BLE001 - a crashing path is a failing path; the line names the error
            status, detail = "fail", f"raised {type(e).__name__}: {str(e).splitlines()[0][:160] if str(e) else ''}"
        out.append(Result(path, status, detail, time.perf_counter() - t0))
    return out


PATHS = ("fast", "hf-plain", "simple", "stop-rule", "sampling", "capture:hf", "capture:nnsight",
         "capture:transformer-lens", "steer:alpha0", "steer:batch", "hooks-restored", "ablation", "patching",
         "early-answer", "filler")
