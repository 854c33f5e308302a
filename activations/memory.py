"""Keep the caching stage's resident memory flat in the number of rows.

    from activations.memory import bound_heap, release
    bound_heap()   # once, before the first batch: large blocks go to mmap and back to the OS when freed
    release()      # after each batch: collect reference cycles that hold the batch's tensors

Why RSS grew with N (measured on SmolLM2-135M, batch 8): each batch allocates ``[batch, seq, d_model]`` and
``[batch, seq, d_ff]`` tensors with a different ``seq``. glibc raises its mmap threshold every time it frees an
mmapped block (up to 32 MiB), so after the first batch such blocks come from the heap arenas; freed holes of
odd sizes are reused only when a later block fits, and the heap keeps growing with the number of distinct batch
shapes, i.e. with N. In addition, the tracing engines leave reference cycles (graph nodes holding tensors) that
Python's cycle collector frees only when enough *objects* were allocated, not bytes. ``bound_heap`` pins the
mmap threshold (``mallopt(M_MMAP_THRESHOLD, 1 MiB)``, which also stops its dynamic growth), so every large
tensor is its own mapping, returned to the OS on free; ``release`` runs ``gc.collect()`` after each batch.
The threshold is process-wide; it only changes where large blocks live, never results. No-op without glibc.
"""
from __future__ import annotations

import ctypes
import ctypes.util
import gc
from functools import lru_cache

M_MMAP_THRESHOLD = -3
MMAP_THRESHOLD_BYTES = 1 << 20


@lru_cache(maxsize=1)
def _libc() -> ctypes.CDLL | None:
    try:
        lib = ctypes.CDLL(ctypes.util.find_library("c") or "libc.so.6")
        lib.mallopt.argtypes = [ctypes.c_int, ctypes.c_int]
        lib.malloc_trim.argtypes = [ctypes.c_size_t]
        return lib
    except (OSError, AttributeError):
        return None


@lru_cache(maxsize=1)
def bound_heap() -> bool:
    """Pin glibc's mmap threshold (once per process); True when it took effect."""
    lib = _libc()
    if lib is None:
        return False
    try:
        return bool(lib.mallopt(M_MMAP_THRESHOLD, MMAP_THRESHOLD_BYTES))
    except (OSError, AttributeError):
        return False


def release() -> None:
    """After a batch: free the reference cycles that still hold its tensors."""
    gc.collect()


def trim() -> bool:
    """Return free heap pages to the OS (glibc ``malloc_trim(0)``); True when some were released."""
    lib = _libc()
    if lib is None:
        return False
    try:
        return bool(lib.malloc_trim(0))
    except (OSError, AttributeError):
        return False


__all__ = ["bound_heap", "release", "trim"]
