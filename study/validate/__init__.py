"""python -m study.validate --output-dir runs/validate   (make validate: the diagnosticity table on planted truth)

The command is ``python -m study.validate`` (:mod:`study.validate.__main__`). The code lives in
:mod:`study.validate.cli`, and the names it defines stay importable from ``study.validate`` (loaded on first use,
so importing one submodule stays cheap).
"""
from __future__ import annotations

import importlib
from typing import Any


def __getattr__(name: str) -> Any:  # PEP 562: ``from study.validate import X`` as before the package existed
    if name.startswith("__"):
        raise AttributeError(name)
    try:
        return getattr(importlib.import_module("study.validate.cli"), name)
    except AttributeError:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}") from None
