"""Behavioural stage and base layer: models, questions, answers, statistics, run directories, and the
edit-and-continue protocol. Later stages (activations, probes, steering) import from here, never the
reverse. Importing this package loads no model (names are resolved lazily)."""
from __future__ import annotations

import importlib

_EXPORTS = {
    "load_model": "models", "LoadedModel": "models", "ModelError": "models",
    "load_questions": "data", "Question": "data", "sample": "data", "DataError": "data",
    "extract_answer": "answers", "is_correct": "answers",
    "proportion_ci": "stats", "rate": "stats", "cluster_bootstrap_ci": "stats",
    "generate": "generation", "run_protocol": "protocol", "Settings": "protocol",
    "Baseline": "records", "Continuation": "records",
}
__all__ = sorted(_EXPORTS)


def __getattr__(name):
    if name in _EXPORTS:
        return getattr(importlib.import_module(f".{_EXPORTS[name]}", __name__), name)
    raise AttributeError(f"module 'behavioural' has no attribute {name!r}")
