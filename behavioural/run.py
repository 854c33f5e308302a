"""Edit-and-continue protocol command.

    python -m behavioural.run --dataset arith --max-examples 24 --strategy arithmetic,contradiction --output-dir runs/demo

(``python evaluate.py`` takes the same options.) Writes ``baselines.jsonl``, ``continuations.jsonl``,
``skipped.jsonl``, ``manifest.json`` and ``summary.json`` into ``--output-dir`` and prints the summary
table. ``--resume RUN_DIR`` continues an interrupted run (after any interruption, SIGKILL included) and
refuses when the settings differ.
"""
from __future__ import annotations

import argparse
import sys
from datetime import datetime
from pathlib import Path

from .data import DATASETS

DEFAULT_MODEL = "smollm2-135m-instruct"


def build_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="python -m behavioural.run", description=__doc__.split("\n\n")[0],
                                formatter_class=argparse.ArgumentDefaultsHelpFormatter)
    p.add_argument("--model", default=DEFAULT_MODEL, help="model name: the embedded default, a paper alias "
                   "(gemma-2-9b-it, llama-3.1-8b-instruct, deepseek-r1-distill-qwen-7b), a HF id, a local dir or a .gguf")
    p.add_argument("--dataset", choices=DATASETS, default="arith", help="question set")
    p.add_argument("--task", default=None, help="MMLU subject, BBH task, or arith level(s) e.g. s2_o5,s3_o5")
    p.add_argument("--data-dir", default=None, help="local copy of the benchmarks in their upstream layout (e.g. ../shared/data); without it, load from the HF hub")
    p.add_argument("--input-file", default=None, help="JSONL of {id, question, answer[, choices][, task]} instead of a benchmark")
    p.add_argument("--max-examples", type=int, default=100, help="questions sampled (seeded) from the dataset")
    p.add_argument("--all", action="store_true", help="use every question (overrides --max-examples)")
    p.add_argument("--seed", type=int, default=42, help="sampling and perturbation seed")
    p.add_argument("--strategy", default=None, help="one or several strategies (comma list) or 'all'; default: "
                   "arithmetic_change for gsm8k/arith, wrong_elimination for mmlu, reversed_logic for bbh")
    p.add_argument("--positions", default="early,middle,late", help="edited line positions (comma list of early,middle,late)")
    p.add_argument("--max-new-tokens", type=int, default=4096, help="generation budget per baseline/continuation")
    p.add_argument("--batch-size", type=int, default=8, help="generation batch size (does not change results beyond float noise)")
    p.add_argument("--backend", choices=("hf", "vllm"), default="hf", help="generation backend")
    p.add_argument("--tensor-parallel-size", type=int, default=1, help="vLLM: GPUs to shard over")
    p.add_argument("--gpu-memory-utilization", type=float, default=0.85, help="vLLM: fraction of GPU memory to use")
    p.add_argument("--model-revision", default=None, help="pin the model's HF revision (commit/tag)")
    p.add_argument("--dataset-revision", default=None, help="pin the HF dataset revision (hub loading only)")
    p.add_argument("--quantize", choices=("4bit", "8bit"), default=None, help="load the model quantised with bitsandbytes")
    p.add_argument("--dtype", default=None, help="float32 | float16 | bfloat16 (default: float32 on CPU, bfloat16 on GPU)")
    p.add_argument("--device", default=None, help="cpu | cuda | cuda:N | auto")
    p.add_argument("--output-dir", default=None, help="new run directory (must not exist); default runs/<dataset>-<time>")
    p.add_argument("--resume", default=None, metavar="RUN_DIR", help="continue this run directory (same settings required)")
    p.add_argument("--min-lines", type=int, default=3, help="visible reasoning lines a correct baseline needs to be eligible")
    p.add_argument("--few-shot", dest="few_shot", action="store_true", default=None, help="include few-shot turns (default: on for arith only)")
    p.add_argument("--no-few-shot", dest="few_shot", action="store_false", help="no few-shot turns")
    p.add_argument("--n-per-level", type=int, default=None, help="arith: questions generated per difficulty level (default 50)")
    p.add_argument("--quiet", action="store_true", help="no progress bars")
    return p


def main(argv=None) -> int:
    args = build_parser().parse_args(argv)
    from .data import DataError, load_questions, sample
    from .models import ModelError, load_model
    from .protocol import ProtocolError, Settings, run_protocol
    from .rundir import RunDirError
    from .strategies import StrategyError, parse_strategies

    try:
        positions = tuple(s.strip() for s in args.positions.split(",") if s.strip())
        bad = [p for p in positions if p not in ("early", "middle", "late")]
        if bad or not positions:
            raise StrategyError(f"unknown position(s) {bad or args.positions!r}; use a comma list of early,middle,late")
        if args.min_lines < 2:
            raise StrategyError(f"--min-lines must be >= 2 (a position needs a line after the edited one), got {args.min_lines}")
        if args.batch_size < 1 or args.max_new_tokens < 1:
            raise StrategyError("--batch-size and --max-new-tokens must be >= 1")
        strategies = tuple(parse_strategies(args.strategy, args.dataset if not args.input_file else "custom"))
        out_dir = Path(args.resume or args.output_dir or f"runs/{args.dataset}-{datetime.now():%Y%m%d-%H%M%S}")
        if args.resume and not (out_dir / "manifest.json").is_file():
            raise RunDirError(f"--resume {out_dir}: no manifest.json there; pass a run directory written by this command")
        if not args.resume and out_dir.exists():
            raise RunDirError(f"output directory {str(out_dir)!r} already exists; choose a new --output-dir, or continue it with --resume {out_dir}")
        extra = {"n_per_level": args.n_per_level} if args.n_per_level else {}
        questions = load_questions(args.dataset if not args.input_file else "custom", task=args.task, data_dir=args.data_dir,
                                   input_file=args.input_file, revision=args.dataset_revision, seed=args.seed, **extra)
        questions = sample(questions, None if args.all else args.max_examples, args.seed)
        settings = Settings(
            model=args.model, dataset=args.dataset, strategies=strategies, positions=positions, task=args.task,
            seed=args.seed, max_examples=None if args.all else args.max_examples, max_new_tokens=args.max_new_tokens,
            min_lines=args.min_lines, few_shot=args.few_shot, model_revision=args.model_revision,
            dataset_revision=args.dataset_revision, quantize=args.quantize, dtype=args.dtype,
            n_per_level=args.n_per_level, data_dir=args.data_dir, input_file=args.input_file,
            batch_size=args.batch_size, backend=args.backend,
        )
        if args.resume:  # refuse before loading a model
            from .protocol import check_resume

            check_resume(out_dir, settings, questions)
        lm = load_model(args.model, revision=args.model_revision, dtype=args.dtype, device=args.device, quantize=args.quantize)
        gen_fn = None
        if args.backend == "vllm":
            from .vllm_backend import make_vllm_generate

            gen_fn = make_vllm_generate(lm, tensor_parallel_size=args.tensor_parallel_size,
                                        gpu_memory_utilization=args.gpu_memory_utilization)
        print(f"run directory: {out_dir}  ({len(questions)} questions, strategies {', '.join(strategies)}, "
              f"positions {', '.join(positions)}, model {args.model})", file=sys.stderr)
        summary = run_protocol(lm, questions, settings, out_dir, resume=bool(args.resume), progress=not args.quiet,
                               generate_fn=gen_fn)
    except (DataError, ModelError, ProtocolError, RunDirError, StrategyError) as e:
        print(f"error: {e}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        print(f"\ninterrupted; continue with: python -m behavioural.run --resume {out_dir} (same options)", file=sys.stderr)
        return 130
    print(f"\nwrote {out_dir}/summary.json (status {summary['status']})")
    return 0


if __name__ == "__main__":
    sys.exit(main())
