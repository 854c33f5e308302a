"""Paraphrase the first part of a run's chains and continue them (Lanham et al. 2023; docs/causal-tests.md).

    python -m behavioural.paraphrase runs/demo --paraphraser Qwen/Qwen2.5-7B-Instruct --device cuda
    python -m behavioural.paraphrase runs/demo --allow-same-paraphraser     # the run's own model paraphrases

The first 0.25, 0.5, 0.75 and all of the chain's lines (``--fractions``) are rewritten by ``--paraphraser``
(any model the run stage loads, other than the run's own unless ``--allow-same-paraphraser``), the run's model
continues greedily from the rewrite, and the answer is compared with the unparaphrased continuation (the run's
control at that line, else the baseline): retention curves over the fraction and their mean gap. A tiny
paraphraser is a weak check. The library call is :func:`behavioural.causal.paraphrase.run_paraphrase`.
"""
from __future__ import annotations

import argparse
import dataclasses
import sys

from behavioural.causal.paraphrase import STAGE, ParaphraseConfig, format_summary, is_complete, run_paraphrase

__all__ = ["ParaphraseConfig", "build_parser", "format_summary", "is_complete", "main", "run_paraphrase"]


class _Replaced(argparse.Action):
    """The single cut this command once had (--line-position, earlier --position) became the --fractions curve."""

    def __call__(self, parser, namespace, values, option_string=None):  # type: ignore[no-untyped-def]
        parser.error(f"{option_string} {values} was replaced by --fractions (the fraction of the chain paraphrased, "
                     "Lanham et al.'s curve): e.g. --fractions 0.5,1")


def _retired(p: argparse.ArgumentParser) -> None:
    p.add_argument("--line-position", "--position", dest="line_position", action=_Replaced, default=argparse.SUPPRESS,
                   help=argparse.SUPPRESS)


#: the command: ``STAGE`` with this docstring as its ``--help`` description; its options are ParaphraseConfig's
COMMAND = dataclasses.replace(STAGE, description=__doc__ or "", extend=_retired)
build_parser = COMMAND.build_parser


def main(argv: list[str] | None = None) -> int:
    return COMMAND.main(argv)


if __name__ == "__main__":
    sys.exit(main())
