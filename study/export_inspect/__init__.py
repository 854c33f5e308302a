"""python -m study.export_inspect RUN_DIR [--output-file FILE.eval|FILE.json] [--labelling NAME] [--allow-incomplete]

The command is ``python -m study.export_inspect`` (:mod:`study.export_inspect.__main__`). The code lives in
:mod:`study.export_inspect.cli`, and the names it defines stay importable from ``study.export_inspect`` (loaded on
first use, so importing one submodule stays cheap).
"""
from __future__ import annotations

import importlib
from typing import Any


def __getattr__(name: str) -> Any:  # PEP 562: ``from study.export_inspect import X`` as before the package existed
    if name.startswith("__"):
        raise AttributeError(name)
    try:
        return getattr(importlib.import_module("study.export_inspect.cli"), name)
    except AttributeError:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}") from None
