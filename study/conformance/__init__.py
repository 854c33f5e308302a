"""The conformance checks: every generation, capture, steering, patching and forced-answer path of the toolkit

The code lives in :mod:`study.conformance.matrix`, and the names it defines stay importable from
``study.conformance`` (loaded on first use, so importing one submodule stays cheap).
"""
from __future__ import annotations

import importlib
from typing import Any


def __getattr__(name: str) -> Any:  # PEP 562: ``from study.conformance import X`` as before the package existed
    if name.startswith("__"):
        raise AttributeError(name)
    try:
        return getattr(importlib.import_module("study.conformance.matrix"), name)
    except AttributeError:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}") from None
