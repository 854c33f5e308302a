"""Receiver heads on a run's eligible chains (thought anchors' white-box method; behavioural.causal.attention).

    python -m behavioural.receiver_heads runs/demo                  # writes runs/demo/receiver_heads/
    python -m behavioural.receiver_heads runs/demo --proximity-ignore 2 --max-questions 0

One forward pass per chain with eager attention; per head the step x step attention, each step's vertical
score, the kurtosis across steps; the top heads by mean kurtosis and each step's receiver-head score.
"""
from __future__ import annotations

import sys

from behavioural.causal.attention import RECEIVER, cli


def main(argv: list[str] | None = None) -> int:
    return cli(RECEIVER, argv, __doc__ or "")


if __name__ == "__main__":
    sys.exit(main())
