"""The toolkit's public commands: each one's ``python -m`` module and its console-script name.

Every command's parser takes its ``prog`` from :func:`prog`, so ``cot-run --help`` says ``usage: cot-run`` and
``python -m behavioural.run --help`` says ``usage: python -m behavioural.run``.
"""
from __future__ import annotations

import sys
from pathlib import Path

#: console script -> the module ``python -m`` runs (also the order ``docs/architecture.md`` lists them in)
COMMANDS: dict[str, str] = {
    "cot-run": "behavioural.run",
    "cot-label": "behavioural.label",
    "cot-gradient": "behavioural.gradient",
    "cot-paper-import": "behavioural.paper_import",
    "cot-merge": "behavioural.merge",
    "cot-cache": "activations.cache",
    "cot-cache-merge": "activations.merge",
    "cot-probes": "probes.train",
    "cot-steer": "steering.sweep",
    "cot-study": "study",
    "cot-report": "study.report",
    "cot-browse": "behavioural.browse",
    "cot-selfcheck": "loadbearing.selfcheck",
}


def prog(module: str) -> str:
    """The name the user typed: the console script when run as one, else ``python -m <module>``."""
    name = Path(sys.argv[0]).name if sys.argv and sys.argv[0] else ""
    if name in COMMANDS:
        return name
    return f"python -m {module}"
