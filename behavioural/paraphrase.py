"""Paraphrase a run's chains so far and continue them (Lanham et al. 2023; docs/causal-tests.md).

    python -m behavioural.paraphrase runs/demo                              # the run's own model paraphrases
    python -m behavioural.paraphrase runs/demo --paraphraser Qwen/Qwen2.5-7B-Instruct --device cuda

The lines through the ``--line-position`` line (default middle) are rewritten by ``--paraphraser`` (any model the
run stage loads; default the run's own), the run's model continues greedily from the rewrite, and the
answer is compared with the unparaphrased continuation (the run's control at that line, else the baseline).
A tiny paraphraser is a weak check. The library call is :func:`behavioural.causal.paraphrase.run_paraphrase`.
"""
from __future__ import annotations

import sys

from behavioural.causal.common import build_parser as _common_parser
from behavioural.causal.common import cli_main, common_kwargs
from behavioural.causal.paraphrase import ParaphraseConfig, format_summary, is_complete, run_paraphrase
from loadbearing.cli import add_option

__all__ = ["ParaphraseConfig", "build_parser", "format_summary", "is_complete", "main", "run_paraphrase"]


def build_parser():
    p = _common_parser("python -m behavioural.paraphrase", __doc__ or "")
    p.add_argument("--paraphraser", default=None, metavar="MODEL",
                   help="the paraphrasing model: a name, Hugging Face id, directory or .gguf (default: the run's model)")
    add_option(p, "--line-position", dest="position", default="middle", metavar="LINE", deprecated=("--position",),
               help="cut after the early, middle or late line (default middle)")
    p.add_argument("--max-new-tokens", type=int, default=None, help="continuation tokens (default: the run's)")
    p.add_argument("--paraphrase-tokens", type=int, default=None,
                   help="paraphrase tokens (default: twice the prefix's tokens + 16)")
    return p


def main(argv: list[str] | None = None) -> int:
    def body() -> None:
        args = build_parser().parse_args(argv)
        run_paraphrase(ParaphraseConfig(paraphraser=args.paraphraser, position=args.position,
                                        max_new_tokens=args.max_new_tokens, paraphrase_tokens=args.paraphrase_tokens,
                                        **common_kwargs(args)))

    return cli_main("paraphrase", body)


if __name__ == "__main__":
    sys.exit(main())
