"""The edit-and-continue stage: protocol, strategies, run, summary and merge, with subpackages for labels
(``behavioural.labels``), the difficulty gradient (``behavioural.gradient``) and the paper's released rows
(``behavioural.paper_import``). It builds on the shared base package ``loadbearing``. Importing this package
loads no model (names are resolved lazily)."""
from __future__ import annotations

import importlib

_EXPORTS = {
    "run_protocol": "behavioural.protocol", "Settings": "behavioural.protocol",
}
__all__ = sorted(_EXPORTS)


def __getattr__(name):
    if name in _EXPORTS:
        return getattr(importlib.import_module(_EXPORTS[name]), name)
    raise AttributeError(f"module 'behavioural' has no attribute {name!r}")
