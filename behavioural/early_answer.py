"""Early answering on a run's eligible chains (Lanham et al. 2023; docs/causal-tests.md).

    python -m behavioural.early_answer runs/demo                 # writes runs/demo/early_answer/
    python -m behavioural.early_answer runs/demo --resume        # continue; a complete stage writes nothing
    python -m behavioural.early_answer runs/demo --shard 0/2     # one shard (an unsharded run merges them)

Each chain is cut after 0..n reasoning lines, the answer forced with ``Answer:`` and scored; prints the AOC
(pooled, by task and level, question-bootstrap intervals) and its agreement with the run's propagation.
The library call is :func:`behavioural.causal.early_answer.run_early_answer`.
"""
from __future__ import annotations

import dataclasses
import sys

from behavioural.causal.early_answer import STAGE, EarlyAnswerConfig, format_summary, is_complete, run_early_answer

__all__ = ["EarlyAnswerConfig", "build_parser", "format_summary", "is_complete", "main", "run_early_answer"]

#: the command: ``STAGE`` with this docstring as its ``--help`` description; its options are EarlyAnswerConfig's fields
COMMAND = dataclasses.replace(STAGE, description=__doc__ or "")
build_parser = COMMAND.build_parser


def main(argv: list[str] | None = None) -> int:
    return COMMAND.main(argv)


if __name__ == "__main__":
    sys.exit(main())
