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

import sys

from behavioural.causal.common import build_parser as _common_parser
from behavioural.causal.common import cli_main, common_kwargs, run_with_backend
from behavioural.causal.resample import PAPER, ResampleConfig, format_summary, is_complete, run_resample
from behavioural.causal.resample_matrix import parse_band
from behavioural.causal.resample_similarity import DEFAULT_METHOD, THRESHOLD

__all__ = ["ResampleConfig", "build_parser", "format_summary", "is_complete", "main", "run_resample"]


def build_parser():
    p = _common_parser("python -m behavioural.resample", __doc__ or "", backend=True)
    g = p.add_argument_group("rollouts")
    g.add_argument("--rollouts", type=int, default=8, help=f"rollouts per prefix (default 8; the paper: {PAPER['rollouts']})")
    g.add_argument("--temperature", type=float, default=PAPER["temperature"], help="sampling temperature (default 0.6)")
    g.add_argument("--top-p", type=float, default=PAPER["top_p"], help="nucleus mass (default 0.95)")
    g.add_argument("--sample-seed", type=int, default=PAPER["seed"],
                   help="seeds each rollout's stream (with its id) and the question sample (default 44)")
    g.add_argument("--max-questions", type=int, default=8, help="a seeded sample of at most this many eligible chains "
                   "(default 8; 0 = all)")
    g.add_argument("--max-new-tokens", type=int, default=256, help="tokens per rollout (default 256)")
    g.add_argument("--max-answer-tokens", type=int, default=16, help="tokens after a forced 'Answer:' (default 16)")
    g.add_argument("--no-forced", action="store_true", help="skip the forced-answer variant")
    f = p.add_argument_group("semantic filter")
    f.add_argument("--similarity", default=DEFAULT_METHOD, help="tfidf (the lexical fallback, default) or st:MODEL "
                   "(a cached sentence-transformers model, e.g. st:all-MiniLM-L6-v2 as in the paper)")
    f.add_argument("--threshold", type=float, default=THRESHOLD, help="a new step differs when similarity < this (0.8)")
    f.add_argument("--accuracy-band", default=None, metavar="LO,HI",
                   help="pool only questions whose resample accuracy (rollouts from the question alone) is in [LO, HI] "
                        "(thought-anchors keeps 0.25,0.75; default: all)")
    return p


def main(argv: list[str] | None = None) -> int:
    def body() -> None:
        args = build_parser().parse_args(argv)
        run_with_backend(run_resample, ResampleConfig(
            rollouts=args.rollouts, temperature=args.temperature, top_p=args.top_p, sample_seed=args.sample_seed,
            max_questions=args.max_questions or None, max_new_tokens=args.max_new_tokens,
            max_answer_tokens=args.max_answer_tokens, forced=not args.no_forced, similarity=args.similarity,
            threshold=args.threshold, accuracy_band=parse_band(args.accuracy_band), **common_kwargs(args)), args)

    return cli_main("resample", body)


if __name__ == "__main__":
    sys.exit(main())
