"""python -m steering.sweep RUN_DIR --directions RUN_DIR/probes [--layers 6] [--k 1,4] [--alphas 0.25,0.5]

The command is ``python -m steering.sweep`` (:mod:`steering.sweep.__main__`). The code lives in
:mod:`steering.sweep.cli`, and the names it defines stay importable from ``steering.sweep`` (loaded on first use,
so importing one submodule stays cheap).
"""
from __future__ import annotations

import importlib
from typing import Any


def __getattr__(name: str) -> Any:  # PEP 562: ``from steering.sweep import X`` as before the package existed
    if name.startswith("__"):
        raise AttributeError(name)
    try:
        return getattr(importlib.import_module("steering.sweep.cli"), name)
    except AttributeError:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}") from None
