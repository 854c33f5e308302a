"""Resampling importance per reasoning step on a run's eligible chains ("thought anchors"; docs/causal-tests.md).

    python -m behavioural.resample runs/demo                           # writes runs/demo/resample/
    python -m behavioural.resample runs/demo --rollouts 100 --max-questions 50 --device cuda   # the paper's N
    python -m behavioural.resample runs/demo --resume                  # continue; a complete stage writes nothing
    python -m behavioural.resample runs/demo --shard 0/2               # one shard (an unsharded run merges them)

For each sampled chain and each cut k = 0..n, N rollouts are sampled (seeded, T and top-p) after the first k
reasoning lines, and N answers right after them + "Answer:"; step i's importance is the accuracy of the
rollouts whose new step i differs in meaning from the original, minus that of the rollouts from step i+1.
Prints the per-step table and whether the steps the paper edits (early/middle/late) are the important ones.
The library call is :func:`behavioural.causal.resample.run_resample`.
"""
from __future__ import annotations

import dataclasses
import sys

from behavioural.causal.resample import STAGE, ResampleConfig, format_summary, is_complete, run_resample

__all__ = ["ResampleConfig", "build_parser", "format_summary", "is_complete", "main", "run_resample"]

#: the command: ``STAGE`` with this docstring as its ``--help`` description; its options are ResampleConfig's fields
COMMAND = dataclasses.replace(STAGE, description=__doc__ or "")
build_parser = COMMAND.build_parser


def main(argv: list[str] | None = None) -> int:
    return COMMAND.main(argv)


if __name__ == "__main__":
    sys.exit(main())
