"""Report objects: a report is a list of :class:`Section`; each section a list of blocks, rendered to markdown or

The code lives in :mod:`loadbearing.report.blocks`, and the names it defines stay importable from
``loadbearing.report`` (loaded on first use, so importing one submodule stays cheap).
"""
from __future__ import annotations

import importlib
from typing import Any


def __getattr__(name: str) -> Any:  # PEP 562: ``from loadbearing.report import X`` as before the package existed
    if name.startswith("__"):
        raise AttributeError(name)
    try:
        return getattr(importlib.import_module("loadbearing.report.blocks"), name)
    except AttributeError:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}") from None
