"""A stage as the study sees it: where its output lies in the study directory, whether it is done, how to run it
with the study's config, and how to render it for the report (:mod:`study.stages` holds the registry)."""
from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from study.config import StudyConfig


@dataclass(frozen=True)
class Stage:
    name: str
    title: str
    output: Callable[[Path], Path]
    is_complete: Callable[[Path], bool]
    run: Callable[[Path, StudyConfig], Any]
    render: Callable[[Path, str], str | None]  # (study dir, style) -> the stage's own summary, or None if absent
    needs: tuple[str, ...] = ()
    #: (study dir, config) -> why there is too little data to run this stage (one line), or None
    check: Callable[[Path, StudyConfig], str | None] | None = None
    #: upper bound on the model generations the stage makes, from the config alone (None: makes none)
    bound: Callable[[StudyConfig], str | None] | None = None
    #: run when ``--stages`` is not given (the optional causal tests and patching run only when named)
    default: bool = True
