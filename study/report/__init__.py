"""Write ``report.md``, ``report.txt`` and ``report.html`` for a study directory from what each stage left there.

The command is ``python -m study.report`` (:mod:`study.report.__main__`). The code lives in
:mod:`study.report.write`, and the names it defines stay importable from ``study.report`` (loaded on first use, so
importing one submodule stays cheap).
"""
from __future__ import annotations

import importlib
from typing import Any


def __getattr__(name: str) -> Any:  # PEP 562: ``from study.report import X`` as before the package existed
    if name.startswith("__"):
        raise AttributeError(name)
    try:
        return getattr(importlib.import_module("study.report.write"), name)
    except AttributeError:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}") from None
