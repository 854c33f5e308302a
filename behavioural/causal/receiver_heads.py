"""Receiver heads on a run's eligible chains (thought anchors' white-box method; behavioural.causal.attention).

    python -m behavioural.causal.receiver_heads runs/demo                  # writes runs/demo/receiver_heads/
    python -m behavioural.causal.receiver_heads runs/demo --proximity-ignore 2 --max-questions 0

One forward pass per chain with eager attention; per head the step x step attention, each step's vertical
score, the kurtosis across steps; the top heads by mean kurtosis and each step's receiver-head score.
"""
from __future__ import annotations

import dataclasses
import sys

from behavioural.causal.attention import RECEIVER_STAGE

#: the command: ``RECEIVER_STAGE`` with this docstring as its ``--help`` description; its options are AttentionConfig's
COMMAND = dataclasses.replace(RECEIVER_STAGE, description=__doc__ or "")
build_parser, main = COMMAND.build_parser, COMMAND.main


if __name__ == "__main__":
    sys.exit(main())
