"""The toolkit's public commands: each one's ``python -m`` module and its console-script name.

Every command's parser takes its ``prog`` from :func:`prog`, so ``cot-run --help`` says ``usage: cot-run`` and
``python -m behavioural.run --help`` says ``usage: python -m behavioural.run``.
"""
from __future__ import annotations

import sys
from dataclasses import dataclass
from pathlib import Path


@dataclass(frozen=True)
class Command:
    """One public command: its console script, the module ``python -m`` runs, and the function the script calls.

    ``module`` may be a thin shim that forwards with ``runpy`` to ``entry``'s module (its home), so a documented
    ``python -m`` name keeps working when the code moves."""

    script: str
    module: str
    entry: str  # "package.module:main", as in pyproject.toml's [project.scripts]


#: THE command table (the order ``docs/architecture.md`` lists them in); pyproject.toml's [project.scripts] and
#: the docs' table are checked against it by tests/test_commands.py
COMMAND_TABLE: tuple[Command, ...] = (
    Command("cot-run", "behavioural.run", "behavioural.run:main"),
    Command("cot-label", "behavioural.label", "behavioural.labels.stage:main"),
    Command("cot-gradient", "behavioural.gradient", "behavioural.gradient:main"),
    Command("cot-paper-import", "behavioural.paper_import", "behavioural.paper_import:main"),
    Command("cot-merge", "behavioural.merge", "behavioural.merge:main"),
    Command("cot-cache", "activations.cache", "activations.cache:main"),
    Command("cot-cache-merge", "activations.merge", "activations.merge:main"),
    Command("cot-probes", "probes.train", "probes.train:main"),
    Command("cot-steer", "steering.sweep", "steering.sweep.cli:main"),
    Command("cot-study", "study", "study.driver:main"),
    Command("cot-report", "study.report", "study.report.write:main"),
    Command("cot-browse", "behavioural.browse", "study.browse.page:main"),
    Command("cot-selfcheck", "loadbearing.selfcheck", "study.conformance.selfcheck:main"),
    Command("cot-compare", "study.compare", "study.compare.cli:main"),
)

#: console script -> the module ``python -m`` runs (derived from :data:`COMMAND_TABLE`)
COMMANDS: dict[str, str] = {c.script: c.module for c in COMMAND_TABLE}


def pyproject_scripts() -> dict[str, str]:
    """The ``[project.scripts]`` table pyproject.toml must declare: console script -> entry point."""
    return {c.script: c.entry for c in COMMAND_TABLE}

def prog(module: str) -> str:
    """The name the user typed: the console script when run as one, else ``python -m <module>``."""
    name = Path(sys.argv[0]).name if sys.argv and sys.argv[0] else ""
    if name in COMMANDS:
        return name
    return f"python -m {module}"
