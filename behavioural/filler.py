"""Filler tokens in place of a run's eligible chains (Lanham et al. 2023; docs/causal-tests.md).

    python -m behavioural.filler runs/demo                        # writes runs/demo/filler/
    python -m behavioural.filler runs/demo --fillers dots,underscores --resume

Each chain is replaced by as many filler tokens ("... ... ..." and "- - -" by default), the answer forced
with ``Answer:`` and scored; prints the accuracy beside no chain and the full chain (question-bootstrap
intervals). The library call is :func:`behavioural.causal.filler.run_filler`.
"""
from __future__ import annotations

import dataclasses
import sys

from behavioural.causal.filler import STAGE, FillerConfig, format_summary, is_complete, run_filler

__all__ = ["FillerConfig", "build_parser", "format_summary", "is_complete", "main", "run_filler"]

#: the command: ``STAGE`` with this docstring as its ``--help`` description; its options are FillerConfig's fields
COMMAND = dataclasses.replace(STAGE, description=__doc__ or "")
build_parser = COMMAND.build_parser


def main(argv: list[str] | None = None) -> int:
    return COMMAND.main(argv)


if __name__ == "__main__":
    sys.exit(main())
