"""python -m loadbearing.selfcheck --model MODEL [--device cuda] [--dtype bfloat16] [--quantize 4bit]

Run this first on a new model or machine: the conformance checks of ``tests/test_conformance.py``
(:mod:`study.conformance`) on your own model with a few chat prompts, in about a minute. Every generation path
(fast: prefix sharing, continuous batching, prompt-lookup drafts; hf-plain; simple; the stop rule; seeded
sampling) is compared with transformers' own one-at-a-time greedy ``generate``; every capture engine with
an ``output_hidden_states`` forward; steering, ablation, patching and the forced-answer tests with their own
one-at-a-time or identity references. One line per path: ``pass``, ``fail: row N: ...`` (the first
differing row) or ``n.a.: why``; exit status 1 when any path fails (a bad option or model: one ``error:``
line, status 2).

In bfloat16 or quantised, a batched forward can round differently from a one-row forward, so a greedy
record may legitimately differ from the one-at-a-time reference; the failing line says where, and float32 on
the same model tells a numerical difference from a fault.
"""
from __future__ import annotations

import argparse
import sys
import time
from dataclasses import dataclass

from loadbearing.cli import UsageError, check_device, check_model_file, check_number, run_cli
from loadbearing.engine.models import DTYPES, EMBEDDED, QUANTIZE_CHOICES
from loadbearing.stage.parser import config_from_parsed, option, parser_from_config
from study.conformance.matrix import PATHS, chat_inputs, run_checks


@dataclass(frozen=True)
class SelfcheckConfig:
    """What ``python -m loadbearing.selfcheck`` accepts (its parser is built from these fields)."""

    model: str = option(EMBEDDED, group="model", help="model name, Hugging Face id, local directory or .gguf file "
                        "(default %(default)s)")
    device: str | None = option(None, group="model", help="cpu, cuda, cuda:N or auto (default: cuda when available)")
    dtype: str | None = option(None, choices=DTYPES, group="model",
                               help="weights dtype (default: float32 on CPU, bfloat16 on GPU)")
    quantize: str | None = option(None, choices=QUANTIZE_CHOICES, group="model",
                                  help="bitsandbytes quantisation (default: none)")
    prompts: int = option(4, type=int, group="checks", help="chat inputs, half continued from a shared assistant "
                          "prefix (default %(default)s)")
    max_new_tokens: int = option(24, type=int, group="checks", help="greedy tokens per input (default %(default)s)")
    batch_size: int = option(3, type=int, group="checks", help="rows per batch, fewer than --prompts so slots are "
                             "refilled (default %(default)s)")
    only: str | None = option(None, group="checks", help="comma-separated paths to run (default: all)")


def build_parser() -> argparse.ArgumentParser:
    """The command's parser, built from :class:`SelfcheckConfig`."""
    return parser_from_config(SelfcheckConfig, prog="python -m loadbearing.selfcheck", groups=("model", "checks"),
                              description=__doc__.split("\n\n")[1], raw_description=True)


def selfcheck(args: argparse.Namespace | SelfcheckConfig, echo=print) -> int:
    from loadbearing.engine.models import load_model  # deferred: tests monkeypatch loadbearing.engine.models.load_model

    check_device(args.device)
    check_model_file(args.model)
    check_number(args.prompts, "--prompts", minimum=2)
    check_number(args.max_new_tokens, "--max-new-tokens", minimum=1)
    check_number(args.batch_size, "--batch-size", minimum=1)
    only = None if args.only is None else [s.strip() for s in args.only.split(",") if s.strip()]
    unknown = [s for s in only or () if s not in PATHS]
    if unknown:
        raise UsageError(f"--only names unknown paths {', '.join(unknown)}; choose from {', '.join(PATHS)}")
    t0 = time.perf_counter()
    lm = load_model(args.model, device=args.device, dtype=args.dtype, quantize=args.quantize)
    prov = lm.provenance()
    echo(f"model {args.model} on {lm.device}, {lm.dtype}{', ' + lm.quantize if lm.quantize else ''}; attention "
         f"{prov.get('attn_implementation')}; sliding window {prov.get('sliding_window')}; prefix sharing "
         f"{prov.get('prefix_sharing')}")
    results = run_checks(lm, chat_inputs(lm.tokenizer, args.prompts), max_new_tokens=args.max_new_tokens,
                         batch_size=args.batch_size, only=only)
    for r in results:
        echo(f"{r.line()}  ({r.seconds:.1f} s)")
    failed = [r.path for r in results if r.status == "fail"]
    echo(f"{len(results) - len(failed)}/{len(results)} paths pass in {time.perf_counter() - t0:.0f} s"
         + (f"; failing: {', '.join(failed)}" if failed else ""))
    return 1 if failed else 0


def main(argv: list[str] | None = None) -> int:
    args: SelfcheckConfig = config_from_parsed(SelfcheckConfig, build_parser().parse_args(argv))
    return run_cli(lambda: selfcheck(args))


if __name__ == "__main__":
    sys.exit(main())
