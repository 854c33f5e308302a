"""Attention suppression on a run's eligible chains (thought anchors' white-box method; behavioural.causal.attention).

    python -m behavioural.causal.suppression runs/demo                     # writes runs/demo/suppression/

For each step j, the attention to its tokens is masked in every layer and head; cell (i, j) is the mean log KL
of step i's next-token distributions against the unmasked pass.
"""
from __future__ import annotations

import dataclasses
import sys

from behavioural.causal.attention import SUPPRESSION_STAGE

#: the command: ``SUPPRESSION_STAGE`` with this docstring as its ``--help`` description; its options are AttentionConfig's
COMMAND = dataclasses.replace(SUPPRESSION_STAGE, description=__doc__ or "")
build_parser, main = COMMAND.build_parser, COMMAND.main


if __name__ == "__main__":
    sys.exit(main())
