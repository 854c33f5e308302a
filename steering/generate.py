"""Steered greedy generation on the shared-prefix fast path, one steering vector and alpha per row.

    from steering.generate import generate_steered
    outs = generate_steered(lm, texts, vectors, alphas, layers=[6])   # vectors [n, d_model], alphas [n]

The sweep re-generates every case under every setting, so a batch holds the same few inputs many times
over with different vectors. The rows run on the unsteered fast path itself
(:func:`loadbearing.engine.generation.generate`: token-id order, shared prefixes computed once, continuous batching
with refilled slots, the same decode kernels); a forward hook reads each pass's
:class:`loadbearing.engine.batching.Pass` and adds ``alpha_i * v_i`` to the residual stream at ``layers`` (hook
points as in :mod:`steering.hooks`: layer ``L`` = output of block ``L-1``) for the rows in that pass, at
exactly the positions :mod:`steering.hooks` steers for ``positions`` (the one rule,
:func:`steering.positions.prompt_steering`): every generated token, and of a row's own input tokens

* ``"continuation"``: the last one (a shared prefix never includes a row's last token, so it is computed
  once, unsteered, and shared);
* ``"generated"``: none;
* ``"all"``: every non-pad one, prefix included (no prefix sharing then: the prefix is steered per row).

``"think"`` / ``"answer"`` (thinking models) keep the ``"continuation"`` positions of one phase: a forward
pre-hook on the model reads each pass's tokens and narrows the hook's mask to the think block or the answer
(:mod:`loadbearing.thinking`). Each returned record is a :class:`SteeredGeneration` whose ``audit`` is
what the pass recorder saw (:mod:`steering.audit`: the positions that got the vector, the hook's firings per
token, the KV cache).

The stop rule is the fast path's own (``loadbearing.engine.generation``'s row stepper, the rule of
:func:`loadbearing.engine.generation.finish` that every backend uses), so a steered record with alpha 0 is the
unsteered record. No model hook outlives the call (registered in ``try``, removed in
``finally``); the model's other hooks are never touched.
"""
from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import numpy as np

from loadbearing.engine.batching import Pass
from loadbearing.engine.generation import Generation, encode, generate
from loadbearing.engine.hookpoints import block_hidden, forward_hooks, replace_hidden
from loadbearing.thinking import ThinkError, ThinkTags
from steering.errors import SteeringError
from steering.hooks import d_model, hook_module
from steering.positions import check_positions, phase_of, prompt_steering

if TYPE_CHECKING:
    from torch import Tensor


@dataclass(frozen=True, eq=False)
class SteeredGeneration(Generation):
    """A :class:`loadbearing.engine.generation.Generation` with the pass recorder's ``steer_audit``
    (:mod:`steering.audit`); equal to any Generation with the same text, token count and finish reason (the
    audit describes how it was made, not what it is)."""

    audit: dict | None = None

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, Generation):
            return NotImplemented
        return (self.text, self.new_tokens, self.finish_reason) == (other.text, other.new_tokens, other.finish_reason)

    __hash__ = Generation.__hash__


class _RowSteer:
    """Forward hook state: which rows and positions the current pass steers."""

    def __init__(self) -> None:
        self.delta: Any = None  # [b, 1, d_model] float32 tensor, rows in current batch order
        self.mode = "off"  # off | last | mask | all
        self.mask: Any = None  # [b, cur] bool tensor, mode "mask"
        self._cast: dict = {}

    def set(self, mode: str, delta: Any = None, mask: Any = None) -> None:
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
        hidden = block_hidden(output)  # [b, pos, d_model]
        delta = self._d(hidden)  # [b, 1, d_model]
        if self.mode == "all":
            new = hidden + delta
        elif self.mode == "last":
            new = hidden.clone()
            new[:, -1:, :] += delta
        else:
            new = hidden + delta * self.mask[..., None].to(hidden.dtype)
        return replace_hidden(output, new)


def _check_args(positions: str, batch_size: int, max_new_tokens: int) -> str:
    """The prompt rule of ``positions`` (:func:`steering.positions.prompt_steering`), after checking the sizes."""
    prompt_mode = prompt_steering(check_positions(positions))
    if batch_size < 1:
        raise SteeringError(f"batch_size must be >= 1, got {batch_size}")
    if max_new_tokens < 1:
        raise SteeringError(f"max_new_tokens must be >= 1, got {max_new_tokens}")
    return prompt_mode


def row_deltas(vectors: Any, alphas: Any, n: int, width: int) -> Tensor:
    """``alphas[i] * vectors[i]`` for each of ``n`` rows, a float32 tensor ``[n, width]`` (one vector may stand for
    all rows, one alpha too); a wrong shape or a non-finite value is a SteeringError (the HF fast path's and the
    vLLM path's one reading)."""
    import torch  # deferred: torch is heavy to import

    v = torch.as_tensor(np.asarray(vectors, dtype=np.float32))
    if v.ndim == 1:
        v = v[None].expand(n, -1)
    if v.ndim != 2 or v.shape[0] != n or v.shape[1] != width:
        raise SteeringError(f"steering vectors have shape {tuple(v.shape)}; expected [{n}, {width}] (one per text, "
                            "the model's d_model wide)")
    a = torch.as_tensor(np.broadcast_to(np.asarray(alphas, dtype=np.float32), (n,)).copy())
    if not torch.isfinite(a).all() or not torch.isfinite(v).all():
        raise SteeringError("steering vectors and alphas must be finite")
    return a[:, None] * v


def generate_steered(lm, texts: Sequence[str], vectors, alphas, *, layers: Sequence[int],
                     positions: str = "continuation", max_new_tokens: int = 128, batch_size: int = 32,
                     stop_at_answer: bool = True, progress: bool = True, desc: str = "steer") -> list[Generation]:
    """Greedy continuations of ``texts`` with ``alphas[i] * vectors[i]`` added at ``layers`` for row ``i``.

    ``vectors``: ``[n, d_model]`` (or one ``[d_model]`` shared by all rows); ``alphas``: ``[n]`` or a float.
    Returns :class:`loadbearing.engine.generation.Generation` records in input order (see the module docstring).
    """

    _check_args(positions, batch_size, max_new_tokens)
    model = getattr(lm, "model", lm)
    n = len(texts)
    if n == 0:
        return []
    deltas = row_deltas(vectors, alphas, n, d_model(model))[:, None, :]  # [n, 1, d_model]
    return generate_with_row_hook(lm, texts, _RowSteer(), deltas, layers=layers, positions=positions,
                                  max_new_tokens=max_new_tokens, batch_size=batch_size, stop_at_answer=stop_at_answer,
                                  progress=progress, desc=desc)


def generate_with_row_hook(lm, texts: Sequence[str], state: Any, row_data: Any, *, layers: Sequence[int] | int,
                           positions: str = "continuation", max_new_tokens: int = 128, batch_size: int = 32,
                           stop_at_answer: bool = True, progress: bool = True, desc: str = "steer") -> list[Generation]:
    """The fast path with a per-row edit of the residual stream at ``layers``: ``state`` is the forward hook
    (``state.set(mode, data, mask)`` before each pass, mode ``off | last | mask | all``; :class:`_RowSteer`
    adds, :class:`steering.ablation.RowAblate` projects out) and ``row_data[i]`` row ``i``'s data (a tensor
    indexed by the pass's rows). The positions rule and the prefix sharing are the module docstring's."""
    from steering.audit import PassWatch  # deferred: import cycle steering -> steering.ablation -> steering.generate

    prompt_mode = _check_args(positions, batch_size, max_new_tokens)  # last | none | all
    model = getattr(lm, "model", lm)
    if not texts:
        return []
    layers = [int(x) for x in ([layers] if isinstance(layers, (int, np.integer)) else layers)]
    if not layers:
        raise SteeringError("no layers to steer; pass layers=[L, ...]")
    mods = [hook_module(model, L) for L in layers]  # validates the layers
    if any(not t for t in texts):  # only "" has no tokens (the chat template writes every other input's)
        raise SteeringError("cannot generate from an empty input (no tokens)")

    tok = lm.tokenizer
    phase = phase_of(positions)
    tags = None
    if phase is not None:
        try:
            tags = ThinkTags.of(tok)
        except ThinkError as e:
            raise SteeringError(str(e)) from None
    watch = PassWatch(state, [encode(tok, t) for t in texts], phase, tags)

    def on_pass(p: Pass) -> None:
        watch.on_pass(p.kind, p.rows)
        if p.kind == "shared":  # a prefix several rows share: unsteered (never "all", which shares nothing)
            state.set("off")
            return
        data = row_data[p.rows]  # [b, ...]
        if p.kind == "decode":  # every generated token is steered
            state.set("all", data)
        elif prompt_mode == "last":
            state.set("last", data)
        elif prompt_mode == "none":
            state.set("off", data)
        else:  # all: every non-pad input token
            state.set("mask", data, p.mask)

    with forward_hooks((m, state) for m in mods) as hooks:
        hooks.pre_forward(model, watch.pre, with_kwargs=True)
        for m in mods:
            hooks.forward(m, watch.fired)
        outs = generate(lm, texts, max_new_tokens=max_new_tokens, batch_size=batch_size,
                        stop_at_answer=stop_at_answer, progress=progress, desc=desc, on_pass=on_pass,
                        share=positions != "all")
    return [SteeredGeneration(g.text, g.new_tokens, g.finish_reason, watch.audits[i].record(
        prompt_tokens=watch.prompt_len[i], produced=g.new_tokens + (g.finish_reason == "eos"), layers=len(layers),
        text=g.text, decode=lambda ids: tok.decode(ids, skip_special_tokens=True))) for i, g in enumerate(outs)]


__all__ = ["SteeredGeneration", "generate_steered", "generate_with_row_hook"]
