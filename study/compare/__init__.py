"""python -m study.compare RUN_OR_STUDY [RUN_OR_STUDY ...] [--by model|dataset|level|strategy] [--output-dir DIR]

The command is ``python -m study.compare`` (:mod:`study.compare.__main__`). The code lives in
:mod:`study.compare.cli`, and the names it defines stay importable from ``study.compare`` (loaded on first use, so
importing one submodule stays cheap).
"""
from __future__ import annotations

import importlib
from typing import Any


def __getattr__(name: str) -> Any:  # PEP 562: ``from study.compare import X`` as before the package existed
    if name.startswith("__"):
        raise AttributeError(name)
    try:
        return getattr(importlib.import_module("study.compare.cli"), name)
    except AttributeError:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}") from None
