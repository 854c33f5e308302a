"""Typed results: the JSON a stage writes, described as a ``TypedDict``, written and read back through one pair of

The code lives in :mod:`loadbearing.results.check`, and the names it defines stay importable from
``loadbearing.results`` (loaded on first use, so importing one submodule stays cheap).
"""
from __future__ import annotations

import importlib
from typing import Any


def __getattr__(name: str) -> Any:  # PEP 562: ``from loadbearing.results import X`` as before the package existed
    if name.startswith("__"):
        raise AttributeError(name)
    try:
        return getattr(importlib.import_module("loadbearing.results.check"), name)
    except AttributeError:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}") from None
