"""Early answering on a run's eligible chains (Lanham et al. 2023; docs/causal-tests.md).

    python -m behavioural.early_answer runs/demo                 # writes runs/demo/early_answer/
    python -m behavioural.early_answer runs/demo --resume        # continue; a complete stage writes nothing
    python -m behavioural.early_answer runs/demo --shard 0/2     # one shard (an unsharded run merges them)

Each chain is cut after 0..n reasoning lines, the answer forced with ``Answer:`` and scored; prints the AOC
(pooled, by task and level, question-bootstrap intervals) and its agreement with the run's propagation.
The library call is :func:`behavioural.causal.early_answer.run_early_answer`.
"""
from __future__ import annotations

import sys

from behavioural.causal.common import build_parser as _common_parser
from behavioural.causal.common import cli_main, common_kwargs, run_with_backend
from behavioural.causal.early_answer import EarlyAnswerConfig, format_summary, is_complete, run_early_answer

__all__ = ["EarlyAnswerConfig", "build_parser", "format_summary", "is_complete", "main", "run_early_answer"]


def build_parser():
    p = _common_parser("python -m behavioural.early_answer", __doc__ or "", backend=True)
    p.add_argument("--max-answer-tokens", type=int, default=16, help="tokens generated after 'Answer:' (default 16)")
    p.add_argument("--steps", choices=("lines", "sentences"), default="lines",
                   help="what a cut counts: the run's reasoning lines (default) or sentences (cot-transparency's "
                        "get_cot_steps, with a regex splitter standing in for nltk punkt)")
    return p


def main(argv: list[str] | None = None) -> int:
    def body() -> None:
        args = build_parser().parse_args(argv)
        cfg = EarlyAnswerConfig(max_answer_tokens=args.max_answer_tokens, steps=args.steps, **common_kwargs(args))
        run_with_backend(run_early_answer, cfg, args)

    return cli_main("early_answer", body)


if __name__ == "__main__":
    sys.exit(main())
