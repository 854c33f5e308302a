"""Attention suppression on a run's eligible chains (thought anchors' white-box method; behavioural.causal.attention).

    python -m behavioural.suppression runs/demo                     # writes runs/demo/suppression/

For each step j, the attention to its tokens is masked in every layer and head; cell (i, j) is the mean log KL
of step i's next-token distributions against the unmasked pass.
"""
from __future__ import annotations

import sys

from behavioural.causal.attention import SUPPRESSION, cli


def main(argv: list[str] | None = None) -> int:
    return cli(SUPPRESSION, argv, __doc__ or "")


if __name__ == "__main__":
    sys.exit(main())
