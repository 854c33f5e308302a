"""Steering and directional ablation inside vLLM, one vector (or basis) and steered span per request.

    from steering.vllm.engine import VLLMSteering
    vs = VLLMSteering(tensor_parallel_size=1)                   # the engine starts at the first call
    outs = vs.add(lm, texts, vectors, alphas, layers=[6])       # as steering.generate.generate_steered
    outs = vs.ablate(lm, texts, bases, layers=[6])              # as steering.ablation.generate_ablated
    run_sweep(config, generate_fn=vs.add, ablate_fn=vs.ablate)  # python -m steering.sweep ... --backend vllm
    vs.shutdown()

``vs.add`` and ``vs.ablate`` take the HF fast path's arguments and return its records
(:class:`loadbearing.engine.generation.Generation`, input order), so the sweep runs the same design and writes
the same ``generations.jsonl`` rows. Row ``i``'s ``alphas[i] * vectors[i]`` (float32, as the HF path forms it)
or orthonormalised basis (:func:`steering.ablation.stack_bases`) becomes row ``i`` of a table installed in
vLLM's workers for this call; the request carries its row (:mod:`loadbearing.engine.vllm_hooks`), so one
engine call mixes settings, cases and random controls freely (no batching by setting). Positions: the rule of
:mod:`steering.positions` (``continuation``: the last prompt token and every generated one), read per token
from vLLM's own positions. The prefix cache stays on, salted per edit (:mod:`loadbearing.engine.vllm_rows`).

Refused, one line each (:class:`steering.errors.SteeringError`): layer 0 (the embedding output: vLLM's
decoder blocks are hooked, not its embedding), a layer past the last block, vectors or bases of the wrong
shape or width, non-finite values; an unsupported vLLM version (:func:`loadbearing.engine.vllm_hooks.check_version`).
Each call checks afterwards that the hooks ran (a compiled forward would skip them) and that none is left.
"""
from __future__ import annotations

import hashlib
from collections.abc import Sequence
from typing import Any

import numpy as np

from loadbearing.engine.generation import Generation
from loadbearing.engine.vllm_engine import LazyVLLM
from loadbearing.engine.vllm_hooks import HookSpec, VLLMHookError, installed, new_call_id
from loadbearing.engine.vllm_rows import generate_rows
from steering.ablation import row_bases
from steering.errors import SteeringError
from steering.generate import row_deltas
from steering.hooks import d_model, n_layers
from steering.positions import check_positions, prompt_steering


def _salt(op: str, layers: Sequence[int], mode: str, row: np.ndarray) -> str:
    h = hashlib.sha256(f"{op}|{','.join(map(str, layers))}|{mode}|{row.shape}".encode())
    h.update(np.ascontiguousarray(row, dtype=np.float32).tobytes())
    return "lb-" + h.hexdigest()[:32]


class _Op:
    """``vs.add`` / ``vs.ablate``: a generate function (``manages_memory``: vLLM sizes its own batches)."""

    manages_memory = True

    def __init__(self, owner: VLLMSteering, op: str) -> None:
        self.owner, self.op = owner, op

    def __call__(self, lm: Any, texts: Sequence[str], data: Any, alphas: Any = None, **kw: Any) -> list[Generation]:
        if self.op == "add":
            return self.owner.steer(lm, texts, data, 1.0 if alphas is None else alphas, **kw)
        return self.owner.project_out(lm, texts, data, **kw)

    def backend_record(self) -> dict[str, Any]:
        return self.owner.record()


class VLLMSteering:
    """One vLLM engine with the steering worker extension (started lazily on the first call's model)."""

    def __init__(self, **vllm_options: Any) -> None:
        self.lazy = LazyVLLM(hooks=True, **vllm_options)
        self.add = _Op(self, "add")
        self.ablate = _Op(self, "ablate")
        self.generate = self.lazy  # unsteered, through the same engine
        self.last: dict[str, Any] = {}  # the hooks' report of the last call
        self.calls = 0
        self.steered_tokens = 0
        self.max_projection = 0.0

    # ------------------------------------------------------------------------------------------ checks
    @staticmethod
    def _layers(lm: Any, layers: Sequence[int] | int) -> list[int]:
        got = [int(x) for x in ([layers] if isinstance(layers, (int, np.integer)) else layers)]
        if not got:
            raise SteeringError("no layers to steer; pass layers=[L, ...]")
        top = n_layers(getattr(lm, "model", lm))
        for L in got:
            if L == 0:
                raise SteeringError("--backend vllm does not steer layer 0 (the embedding output; vLLM's decoder "
                                    f"blocks are hooked): choose --layers 1..{top}, or --backend hf for layer 0")
            if not 1 <= L <= top:
                raise SteeringError(f"layer {L} is outside 1..{top} (hidden_states layers of this {top}-block model)")
        return got

    @staticmethod
    def _check(texts: Sequence[str], positions: str, max_new_tokens: int) -> str:
        mode = prompt_steering(check_positions(positions))
        if max_new_tokens < 1:
            raise SteeringError(f"max_new_tokens must be >= 1, got {max_new_tokens}")
        if any(not t for t in texts):
            raise SteeringError("cannot generate from an empty input (no tokens)")
        return mode

    # ------------------------------------------------------------------------------------------ the two ops
    def steer(self, lm: Any, texts: Sequence[str], vectors: Any, alphas: Any, *, layers: Sequence[int] | int,
              positions: str = "continuation", max_new_tokens: int = 128, batch_size: int = 32,
              stop_at_answer: bool = True, progress: bool = True, desc: str = "steer") -> list[Generation]:
        """Greedy continuations with ``alphas[i] * vectors[i]`` added at ``layers`` for row ``i``
        (:func:`steering.generate.generate_steered`'s contract)."""
        n = len(texts)
        mode = self._check(texts, positions, max_new_tokens)
        if n == 0:
            return []
        layer_list = self._layers(lm, layers)
        deltas = row_deltas(vectors, alphas, n, d_model(getattr(lm, "model", lm))).numpy()  # [n, d], as HF forms them
        salts = [None if not np.any(d) else _salt("add", layer_list, mode, d) for d in deltas]
        return self._run(lm, texts, "add", layer_list, mode, deltas, salts, max_new_tokens, stop_at_answer, progress)

    def project_out(self, lm: Any, texts: Sequence[str], bases: Any, *, layers: Sequence[int] | int,
                    positions: str = "continuation", max_new_tokens: int = 128, batch_size: int = 32,
                    stop_at_answer: bool = True, progress: bool = True, desc: str = "ablate") -> list[Generation]:
        """Greedy continuations with row ``i``'s basis projected out at ``layers``
        (:func:`steering.ablation.generate_ablated`'s contract)."""
        n = len(texts)
        mode = self._check(texts, positions, max_new_tokens)
        if n == 0:
            return []
        layer_list = self._layers(lm, layers)
        b = row_bases(bases, n, d_model(getattr(lm, "model", lm)))
        salts: list[str | None] = [_salt("ablate", layer_list, mode, r) for r in b]
        return self._run(lm, texts, "ablate", layer_list, mode, b, salts, max_new_tokens, stop_at_answer, progress)

    def _run(self, lm: Any, texts: Sequence[str], op: str, layers: list[int], mode: str, rows: np.ndarray,
             salts: list[str | None], max_new_tokens: int, stop_at_answer: bool, progress: bool) -> list[Generation]:
        vg = self.lazy.engine(lm)
        table = np.concatenate([np.zeros((1, *rows.shape[1:]), dtype=np.float32), rows.astype(np.float32)])
        call = new_call_id()
        spec = HookSpec(op=op, blocks=tuple(L - 1 for L in layers), prompt_mode=mode, table=table, call=call)
        tags = [[call, i + 1] for i in range(len(texts))]
        with installed(vg.llm, spec) as stats:
            outs = generate_rows(vg, lm, texts, max_new_tokens=max_new_tokens, stop_at_answer=stop_at_answer,
                                 progress=progress, tags=tags, salts=salts)
        self.last = stats
        self.calls += 1
        self.steered_tokens += stats.get("steered_tokens", 0)
        self.max_projection = max(self.max_projection, stats.get("max_projection", 0.0))
        if stats.get("remaining_hooks"):
            raise VLLMHookError(f"{stats['remaining_hooks']} steering hooks were left on vLLM's model after the call")
        if stats.get("steered_tokens", 0) == 0 and (op == "ablate" or any(s is not None for s in salts)):
            raise VLLMHookError("the steering hooks never ran inside vLLM (a compiled or graph-captured forward skips "
                                "Python hooks); build the engine with enforce_eager=True, as VLLMSteering does")
        return outs

    # ------------------------------------------------------------------------------------------ lifecycle
    def record(self) -> dict[str, Any]:
        """The backend, for the sweep's config.json."""
        return self.lazy.record() | {"steer_calls": self.calls, "steered_tokens": self.steered_tokens,
                                     "max_ablation_projection": self.max_projection,
                                     "per_request": True, "hook_module": "loadbearing.engine.vllm_hooks"}

    def shutdown(self) -> None:
        self.lazy.shutdown()


__all__ = ["VLLMSteering"]
