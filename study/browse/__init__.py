"""python -m study.browse RUN_DIR [RUN_DIR ...] [--output-file FILE.html] [--labelling NAME] [--steering FILE]

The command is ``python -m study.browse`` (:mod:`study.browse.__main__`). The code lives in
:mod:`study.browse.page`, and the names it defines stay importable from ``study.browse`` (loaded on first use, so
importing one submodule stays cheap).
"""
from __future__ import annotations

import importlib
from typing import Any


def __getattr__(name: str) -> Any:  # PEP 562: ``from study.browse import X`` as before the package existed
    if name.startswith("__"):
        raise AttributeError(name)
    try:
        return getattr(importlib.import_module("study.browse.page"), name)
    except AttributeError:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}") from None
