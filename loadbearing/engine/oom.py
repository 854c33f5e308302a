"""Out of accelerator memory: step the batch size down and retry the failed chunk (like lm-eval's
``--batch_size auto``), the one home of that rule for every stage that runs batched forward passes.

    from loadbearing.engine.oom import BatchSize
    sizer = BatchSize(32, what="baselines")
    gens = sizer.call(generate, lm, texts, max_new_tokens=256)          # one call, retried whole at b // 2
    for part, acts in sizer.chunks(items, lambda part: forward(part)):   # chunks of at most sizer.size items
        write(part, acts)                                                # only completed chunks reach here
    manifest["batching"] = sizer.record()   # {"start": 32, "used": 16, "oom_retries": 1, "retry_on_oom": True}

* An error counts as out of memory (:func:`is_oom`) when it is ``torch.OutOfMemoryError`` (CUDA's
  ``torch.cuda.OutOfMemoryError``), or a ``RuntimeError`` that accelerate's
  ``should_reduce_batch_size`` recognises or whose message says "out of memory" (MPS, XPU, HIP, the CPU
  allocator), anywhere in its cause chain (a tracing library that wraps the error).
* On one, the memory the failed attempt held is freed (``gc.collect`` and the device's ``empty_cache``, via
  accelerate's ``clear_device_cache``), one line is printed (``out of memory at batch 32; retrying at 16``),
  the size is halved and the same chunk runs again. The smaller size is kept for the rest of the stage.
  At batch 1 the stage stops with :class:`OutOfMemory`, one line naming the fix (a smaller model, a lower
  precision, ``--quantize``, a smaller ``--max-new-tokens``).
* Nothing of a failed attempt is returned, so a caller that writes records only for what :meth:`BatchSize.run`
  returned or :meth:`BatchSize.chunks` yielded writes each record once: none lost, none duplicated, and a
  resumed run continues from the last written record as before.
* Records do not depend on the batch size beyond floating-point noise (every backend's rows depend on their
  own tokens only, :mod:`loadbearing.engine.generation`), so a run that stepped down gives the records of a
  run started at the smaller size.
* vLLM manages its own memory (a fixed share of the device, its own scheduler): a generate function with
  ``manages_memory = True`` gets ``BatchSize(..., retry=False)`` and its errors pass through unchanged.
"""
from __future__ import annotations

import sys
from collections.abc import Callable, Iterator, Sequence
from typing import Any, TypeVar

from loadbearing.errors import LoadBearingError

T = TypeVar("T")
X = TypeVar("X")

#: what the one-line error at batch size 1 suggests by default (the generating stages' options)
GENERATION_FIX = ("load a smaller model, a lower precision (--dtype bfloat16 or float16), a quantised one "
                  "(--quantize 4bit), or generate fewer tokens (a smaller --max-new-tokens)")


class OutOfMemory(LoadBearingError, RuntimeError):
    """Out of memory even at batch size 1; the message names the fix."""


def is_oom(e: BaseException) -> bool:
    """True when ``e`` (or an error in its cause chain) is an out-of-memory error a smaller batch may avoid."""
    import torch  # deferred: torch is heavy to import
    from accelerate.utils.memory import should_reduce_batch_size  # deferred: accelerate is heavy to import

    oom_type = getattr(torch, "OutOfMemoryError", torch.cuda.OutOfMemoryError)
    seen: set[int] = set()
    err: BaseException | None = e
    while err is not None and id(err) not in seen:
        seen.add(id(err))
        if isinstance(err, LoadBearingError):  # our own error at batch 1: never retried by an outer caller
            return False
        if isinstance(err, oom_type) or should_reduce_batch_size(err):
            return True
        if isinstance(err, RuntimeError) and "out of memory" in str(err).lower():
            return True
        err = err.__cause__ or err.__context__
    return False


def free_memory() -> None:
    """Free what a failed attempt left: Python's reference cycles, then the device allocator's cache."""
    from accelerate.utils.memory import clear_device_cache  # deferred: accelerate is heavy to import

    clear_device_cache(garbage_collection=True)


def _say(message: str) -> None:
    from tqdm.auto import tqdm  # deferred: tqdm is heavy to import

    tqdm.write(message, file=sys.stderr)


class BatchSize:
    """The batch size of one stage: starts at ``start``, halves on out of memory (see the module docstring).

    ``what`` names the work in the error line; ``fix`` is what that line tells the user to change; ``echo``
    receives the step-down line (default: stderr, above any progress bar). ``retry=False`` never steps down
    (a backend that manages its own memory): errors pass through and the size stays ``start``.
    """

    def __init__(self, start: int, *, what: str = "generation", fix: str = GENERATION_FIX,
                 echo: Callable[[str], Any] | None = None, retry: bool = True):
        if isinstance(start, bool) or not isinstance(start, int) or start < 1:
            raise ValueError(f"batch size must be a whole number >= 1, got {start!r}")
        self.start = start
        self.size = start
        self.retries = 0
        self.what = what
        self.fix = fix
        self.echo = echo or _say
        self.retry = retry

    def _step_down(self, failed: int) -> None:
        free_memory()
        if failed <= 1:
            raise OutOfMemory(f"out of memory at batch size 1 ({self.what}): even one row does not fit; {self.fix}")
        self.size = min(self.size, max(1, failed // 2))
        self.retries += 1
        self.echo(f"out of memory at batch {failed}; retrying at {self.size}")

    def run(self, fn: Callable[[int], T]) -> T:
        """``fn(batch_size)``; on out of memory, free, halve and call it again (the whole call is the chunk)."""
        while True:
            failed = self.size
            try:
                return fn(failed)
            except Exception as e:
                if not self.retry or not is_oom(e):
                    raise
            # outside the except block: the failed attempt's frames (and tensors) are no longer referenced
            self._step_down(failed)

    def call(self, fn: Callable[..., T], *args: Any, **kwargs: Any) -> T:
        """``fn(*args, batch_size=b, **kwargs)`` through :meth:`run` (a generate function's signature)."""
        return self.run(lambda b: fn(*args, batch_size=b, **kwargs))

    def chunks(self, items: Sequence[X], fn: Callable[[list[X]], T]) -> Iterator[tuple[list[X], T]]:
        """``(part, fn(part))`` for consecutive parts of ``items`` of at most ``self.size`` items, in order;
        on out of memory the failed part is retried at half the size (from its first item)."""
        i = 0
        while i < len(items):
            failed = self.size
            part = list(items[i:i + failed])
            try:
                out = fn(part)
            except Exception as e:
                if not self.retry or not is_oom(e):
                    raise
            else:
                yield part, out
                i += len(part)
                continue
            self._step_down(failed)

    def record(self) -> dict[str, Any]:
        """What a stage writes into its manifest: the starting size, the size finally used, the retries."""
        return {"start": self.start, "used": self.size, "oom_retries": self.retries, "retry_on_oom": self.retry}


def for_generate_fn(generate_fn: Any, start: int, *, what: str = "generation", fix: str = GENERATION_FIX,
                    echo: Callable[[str], Any] | None = None) -> BatchSize:
    """The :class:`BatchSize` for a stage whose generation runs through ``generate_fn`` (no retries for a
    backend that manages its own memory, vLLM: ``manages_memory = True``)."""
    return BatchSize(start, what=what, fix=fix, echo=echo, retry=not getattr(generate_fn, "manages_memory", False))


__all__ = ["GENERATION_FIX", "BatchSize", "OutOfMemory", "for_generate_fn", "free_memory", "is_oom"]
