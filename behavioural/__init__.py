"""The edit-and-continue stage: protocol, strategies, run, summary and merge, with subpackages for labels
(``behavioural.labels``), the difficulty gradient (``behavioural.gradient``) and the paper's released rows
(``behavioural.paper_import``). It builds on the shared base package ``loadbearing``. Importing this package
loads no model (names are resolved lazily)."""
from __future__ import annotations

import importlib
import warnings

_EXPORTS = {
    "run_protocol": "behavioural.protocol", "Settings": "behavioural.protocol",
}
__all__ = sorted(_EXPORTS)

#: names this package exported before the shared base moved to ``loadbearing`` -> their new home; each still
#: resolves, with one DeprecationWarning per name (removal: the next minor release, see CHANGELOG.md)
_MOVED = {
    "load_model": "loadbearing.engine.models", "LoadedModel": "loadbearing.engine.models",
    "ModelError": "loadbearing.engine.models",
    "load_questions": "loadbearing.questions.data", "Question": "loadbearing.questions.data",
    "sample": "loadbearing.questions.data", "DataError": "loadbearing.questions.data",
    "extract_answer": "loadbearing.answers", "is_correct": "loadbearing.answers",
    "proportion_ci": "loadbearing.stats", "rate": "loadbearing.stats", "cluster_bootstrap_ci": "loadbearing.stats",
    "generate": "loadbearing.engine.generation",
    "Baseline": "loadbearing.records", "Continuation": "loadbearing.records",
}
_warned: set[str] = set()


def __getattr__(name):
    if name in _EXPORTS:
        return getattr(importlib.import_module(_EXPORTS[name]), name)
    if name in _MOVED:
        if name not in _warned:
            _warned.add(name)

            warnings.warn(f"behavioural.{name} moved: use `from {_MOVED[name]} import {name}` "
                          "(the old name goes in the next minor release)", DeprecationWarning, stacklevel=2)
        return getattr(importlib.import_module(_MOVED[name]), name)
    raise AttributeError(f"module 'behavioural' has no attribute {name!r}")
