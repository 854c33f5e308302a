"""Keep the caching stage's resident memory flat in the number of rows.

    from activations.memory import trim
    trim()      # after each batch: return freed heap pages to the OS (glibc malloc_trim)

Why: each batch allocates activations of shape ``[batch, seq, d_model]`` with a different ``seq``. glibc serves
such blocks from its heap arenas once its dynamic mmap threshold has risen (it rises every time a large mmapped
block is freed), and freed arena memory of odd sizes is not returned to the OS: resident memory then grows with
the number of distinct batch shapes, i.e. with N. ``malloc_trim(0)`` releases the free pages at the end of each
batch. A no-op where glibc is not the allocator.
"""
from __future__ import annotations

import ctypes
import ctypes.util
from functools import lru_cache
from typing import Any


@lru_cache(maxsize=1)
def _libc() -> Any:
    name = ctypes.util.find_library("c")
    try:
        lib = ctypes.CDLL(name or "libc.so.6")
        lib.malloc_trim.argtypes = [ctypes.c_size_t]
        return lib
    except (OSError, AttributeError):
        return None


def trim() -> bool:
    """Return free heap memory to the OS; True when glibc did it."""
    lib = _libc()
    if lib is None:
        return False
    try:
        return bool(lib.malloc_trim(0))
    except (OSError, AttributeError):
        return False


__all__ = ["trim"]
