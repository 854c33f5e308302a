"""python -m study --output-dir DIR  (this module: each stage as a library call, asked whether it is done)

The code lives in :mod:`study.stages.core`, and the names it defines stay importable from ``study.stages`` (loaded
on first use, so importing one submodule stays cheap).
"""
from __future__ import annotations

import importlib
from typing import Any


def __getattr__(name: str) -> Any:  # PEP 562: ``from study.stages import X`` as before the package existed
    if name.startswith("__"):
        raise AttributeError(name)
    try:
        return getattr(importlib.import_module("study.stages.core"), name)
    except AttributeError:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}") from None
