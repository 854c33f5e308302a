"""A vLLM ``generate_fn`` that starts its engine at its first call, on the model it is called with.

    from loadbearing.engine.vllm_engine import LazyVLLM
    gen = LazyVLLM(tensor_parallel_size=1)            # nothing started yet: every check of a stage runs first
    run_early_answer(config, generate_fn=gen)         # the engine starts at the first generation
    gen.shutdown()

Stages load their model only after every check that does not need it, and call ``generate_fn(lm, texts, ...)``
with it; this wrapper builds one :class:`loadbearing.engine.vllm_backend.VLLMGenerate` for that model at the
first call (``hooks=True``: with the steering worker extension and ``enforce_eager``, see
:mod:`loadbearing.engine.vllm_hooks`). One engine serves one model: a call with another model (paraphrase's
``--paraphraser``) runs on the HF fast path and is counted in :meth:`LazyVLLM.record`.
``manages_memory``: vLLM reserves its memory itself, so the stages' out-of-memory step-down is off.
"""
from __future__ import annotations

from typing import TYPE_CHECKING, Any

from loadbearing.cli import UsageError
from loadbearing.engine.generation import generate
from loadbearing.engine.models import ModelError
from loadbearing.stage.parser import Extra, extra

if TYPE_CHECKING:
    from loadbearing.engine.vllm_backend import VLLMGenerate


class LazyVLLM:
    manages_memory = True

    def __init__(self, *, hooks: bool = False, **options: Any) -> None:
        self.hooks = hooks
        self.options = {k: v for k, v in options.items() if v is not None}
        self.vg: VLLMGenerate | None = None
        self._model: tuple | None = None
        self.hf_calls = 0  # calls with another model than the engine's, run on the HF fast path

    @staticmethod
    def _identity(lm: Any) -> tuple:
        return (getattr(lm, "name", None), str(getattr(lm, "local_dir", None) or getattr(lm, "model_id", None)))

    def engine(self, lm: Any) -> VLLMGenerate:
        """The engine for ``lm`` (started on first use)."""
        if self.vg is None:
            # deferred: tests monkeypatch loadbearing.engine.vllm_backend.import_vllm
            from loadbearing.engine.vllm_backend import import_vllm, make_vllm_generate

            opts = dict(self.options)
            if self.hooks:
                # deferred: loadbearing.engine.vllm_hooks loads numpy
                from loadbearing.engine.vllm_hooks import EXTENSION, check_version

                check_version(getattr(import_vllm(), "__version__", "?"))
                opts.update(enforce_eager=True, worker_extension_cls=EXTENSION)
            self.vg = make_vllm_generate(lm, **opts)
            self._model = self._identity(lm)
        elif not self.serves(lm):
            raise ModelError(f"this vLLM engine serves {self._model[0]!r} (started on it); a call with "  # type: ignore[index]
                             f"{getattr(lm, 'name', None)!r} needs its own engine: use --backend hf for a second model")
        return self.vg

    def serves(self, lm: Any) -> bool:
        return self.vg is None or self._identity(lm) == self._model

    def __call__(self, lm: Any, texts: Any, **kwargs: Any) -> list:
        if not self.serves(lm):  # a second model (paraphrase's --paraphraser): the HF fast path, recorded

            self.hf_calls += 1
            return generate(lm, texts, **kwargs)
        return self.engine(lm)(lm, texts, **kwargs)  # type: ignore[no-any-return]

    def record(self) -> dict[str, Any]:
        """What a stage records about its backend (``stats()`` once started)."""
        base = {"backend": "vllm", "hooks": self.hooks, "options": dict(self.options),
                "other_model_calls_on_hf": self.hf_calls}
        return base | (self.vg.stats() if self.vg is not None else {"started": False})

    def shutdown(self) -> None:
        if self.vg is not None:
            self.vg.shutdown()
        self.vg = None


#: the help group the backend options are listed in
BACKEND_GROUP = "backend (does not change records beyond floating-point order)"


def backend_extras(what: str) -> tuple[Extra, ...]:
    """``--backend hf|vllm`` and the vLLM engine's own options (the names ``behavioural.run`` uses), as a command's
    extra options (:mod:`loadbearing.stage.parser`): they choose the engine, not what a stage computes."""
    return (
        extra("--backend", choices=("hf", "vllm"), default="hf", group=BACKEND_GROUP,
              help=f"hf (the batched fast path) or vllm: {what} inside vLLM (make vllm; docs/vllm-interventions.md)"),
        extra("--tensor-parallel-size", type=int, default=1, group=BACKEND_GROUP,
              help="vLLM: GPUs to shard over (default 1)"),
        extra("--pipeline-parallel-size", type=int, default=1, group=BACKEND_GROUP,
              help="vLLM: pipeline stages (default 1)"),
        extra("--gpu-memory-utilization", type=float, default=0.85, group=BACKEND_GROUP,
              help="vLLM: fraction of GPU memory to use (on CPU: of host memory, capped) (default 0.85)"),
    )


def add_backend_arguments(parser: Any, what: str) -> None:
    """Add :func:`backend_extras` to ``parser`` in their own group."""
    g = parser.add_argument_group(BACKEND_GROUP)
    for e in backend_extras(what):
        g.add_argument(*e.names, **e.kwargs)


def backend_options(args: Any) -> dict[str, Any]:
    """The vLLM engine options of :func:`add_backend_arguments` (checked: one error line each)."""
    for name in ("tensor_parallel_size", "pipeline_parallel_size"):
        if getattr(args, name) < 1:
            raise UsageError(f"--{name.replace('_', '-')} must be >= 1, got {getattr(args, name)}")
    if not 0 < args.gpu_memory_utilization <= 1:
        raise UsageError(f"--gpu-memory-utilization must be in (0, 1], got {args.gpu_memory_utilization}")
    out: dict[str, Any] = {"tensor_parallel_size": args.tensor_parallel_size,
                           "gpu_memory_utilization": args.gpu_memory_utilization}
    if args.pipeline_parallel_size != 1:
        out["pipeline_parallel_size"] = args.pipeline_parallel_size
    return out


def check_ready(hooks: bool) -> None:
    """Before any model is loaded: vLLM imports here, and (``hooks``) is a version the hooks support."""
    # deferred: tests monkeypatch loadbearing.engine.vllm_backend.import_vllm
    from loadbearing.engine.vllm_backend import import_vllm

    vllm = import_vllm()
    if hooks:
        from loadbearing.engine.vllm_hooks import check_version  # deferred: loadbearing.engine.vllm_hooks loads numpy

        check_version(getattr(vllm, "__version__", "?"))


__all__ = ["LazyVLLM", "add_backend_arguments", "backend_options", "check_ready"]
