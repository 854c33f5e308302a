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
import sys

from behavioural.causal.common import build_parser as _common_parser
from behavioural.causal.common import cli_main, common_kwargs, parse_fractions, run_with_backend
from behavioural.causal.paraphrase import ParaphraseConfig, format_summary, is_complete, run_paraphrase

__all__ = ["ParaphraseConfig", "build_parser", "format_summary", "is_complete", "main", "run_paraphrase"]


def build_parser():
    p = _common_parser("python -m behavioural.paraphrase", __doc__ or "", backend=True)
    p.add_argument("--paraphraser", default=None, metavar="MODEL",
                   help="the paraphrasing model, required and other than the run's (Lanham et al.'s design): a name, "
                        "Hugging Face id, directory or .gguf")
    p.add_argument("--allow-same-paraphraser", action="store_true",
                   help="let the run's own model paraphrase (no --paraphraser needed; the summary says so)")
    p.add_argument("--fractions", default="0.25,0.5,0.75,1",
                   help="fractions of the chain paraphrased (default 0.25,0.5,0.75,1: Lanham et al.'s curve)")
    p.add_argument("--max-new-tokens", type=int, default=None, help="continuation tokens (default: the run's)")
    p.add_argument("--paraphrase-tokens", type=int, default=None,
                   help="paraphrase tokens (default: twice the prefix's tokens + 16)")
    # the single cut this command once had (--line-position, earlier --position) became the --fractions curve
    p.add_argument("--line-position", "--position", dest="line_position", default=None, help=argparse.SUPPRESS)
    return p


def main(argv: list[str] | None = None) -> int:
    def body() -> None:
        parser = build_parser()
        args = parser.parse_args(argv)
        if args.line_position is not None:
            parser.error(f"--line-position {args.line_position} was replaced by --fractions (the fraction of the chain "
                         "paraphrased, Lanham et al.'s curve): e.g. --fractions 0.5,1")
        run_with_backend(run_paraphrase, ParaphraseConfig(paraphraser=args.paraphraser, fractions=parse_fractions(args.fractions),
                                        allow_same_paraphraser=args.allow_same_paraphraser,
                                        max_new_tokens=args.max_new_tokens, paraphrase_tokens=args.paraphrase_tokens,
                                        **common_kwargs(args)), args)

    return cli_main("paraphrase", body)


if __name__ == "__main__":
    sys.exit(main())
