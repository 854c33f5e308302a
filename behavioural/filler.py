"""Filler tokens in place of a run's eligible chains (Lanham et al. 2023; docs/causal-tests.md).

    python -m behavioural.filler runs/demo                        # writes runs/demo/filler/
    python -m behavioural.filler runs/demo --fillers dots,underscores --resume

Each chain is replaced by as many filler tokens ("... ... ..." and "- - -" by default), the answer forced
with ``Answer:`` and scored; prints the accuracy beside no chain and the full chain (question-bootstrap
intervals). The library call is :func:`behavioural.causal.filler.run_filler`.
"""
from __future__ import annotations

import sys

from behavioural.causal.common import build_parser as _common_parser
from behavioural.causal.common import cli_main, common_kwargs, parse_fractions, run_with_backend
from behavioural.causal.filler import FILLERS, FillerConfig, format_summary, is_complete, run_filler

__all__ = ["FillerConfig", "build_parser", "format_summary", "is_complete", "main", "run_filler"]


def build_parser():
    p = _common_parser("python -m behavioural.filler", __doc__ or "", backend=True)
    p.add_argument("--fillers", default="dots,dashes", help=f"comma list of {', '.join(FILLERS)} (default dots,dashes)")
    p.add_argument("--fractions", default="0.25,0.5,0.75,1", help="filler lengths as fractions of each chain's token "
                   "count, 1 included (default 0.25,0.5,0.75,1; 0 is the no-chain condition, always run)")
    p.add_argument("--max-answer-tokens", type=int, default=16, help="tokens generated after 'Answer:' (default 16)")
    return p


def main(argv: list[str] | None = None) -> int:
    def body() -> None:
        args = build_parser().parse_args(argv)
        fillers = tuple(f.strip() for f in args.fillers.split(",") if f.strip())
        run_with_backend(run_filler, FillerConfig(fillers=fillers, fractions=parse_fractions(args.fractions),
                                max_answer_tokens=args.max_answer_tokens, **common_kwargs(args)), args)

    return cli_main("filler", body)


if __name__ == "__main__":
    sys.exit(main())
