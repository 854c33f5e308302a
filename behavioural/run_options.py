"""The options of ``python -m behavioural.run`` and the :class:`~behavioural.protocol.Settings` they make.

    from behavioural.run_options import build_parser, settings_from_args   # the parser is RunOptions' fields
    settings = settings_from_args(build_parser().parse_args(["--dataset", "arith", "--max-examples", "24"]))

``--resume RUN_DIR`` alone continues with the settings stored in the run's manifest
(:func:`settings_for_resume`); options given beside it are compared with the manifest and a difference
that changes results is refused, naming each. :func:`describe` prints the settings in one line.
"""
from __future__ import annotations

import argparse
import dataclasses
from dataclasses import dataclass
from pathlib import Path

from behavioural.strategies import StrategyError, parse_strategies
from loadbearing.options import parse_line_positions
from loadbearing.questions.data import DATASETS
from loadbearing.runs import MANIFEST, Run
from loadbearing.stage.parser import option, parser_from_config

DEFAULT_MODEL = "smollm2-135m-instruct"
DESCRIPTION = "Edit-and-continue protocol command."

#: CLI option dest -> Settings field, for options that change results (compared on --resume)
RESULT_OPTIONS = {
    "model": "model", "dataset": "dataset", "task": "task", "data_dir": "data_dir", "input_file": "input_file",
    "max_examples": "max_examples", "all": "max_examples", "seed": "seed", "strategy": "strategies",
    "positions": "positions", "max_new_tokens": "max_new_tokens", "min_lines": "min_lines", "few_shot": "few_shot",
    "model_revision": "model_revision", "dataset_revision": "dataset_revision", "quantize": "quantize",
    "dtype": "dtype", "n_per_level": "n_per_level", "shard": "shard",
}
#: CLI option dest -> its option, where the two differ
OPTION_NAMES = {"positions": "--line-positions"}
#: options that may change on resume (they do not change results)
FREE_OPTIONS = {"batch_size": "batch_size", "backend": "backend"}


_GEN, _VLLM = "generation (does not change results)", "vLLM engine"


@dataclass(frozen=True)
class RunOptions:
    """What ``python -m behavioural.run`` accepts, one field per option (its parser is built from these fields);
    :func:`settings_from_args` makes the run's :class:`~behavioural.protocol.Settings` of it."""

    model: str = option(DEFAULT_MODEL, group="model", help="model name: the embedded default, a paper alias "
                        "(gemma-2-9b-it, llama-3.1-8b-instruct, deepseek-r1-distill-qwen-7b), a HF id, a local dir or a "
                        ".gguf")
    model_revision: str | None = option(None, group="model", help="pin the model's HF revision (commit/tag)")
    quantize: str | None = option(None, choices=("4bit", "8bit"), group="model",
                                  help="load the model quantised with bitsandbytes")
    dtype: str | None = option(None, group="model", help="float32 | float16 | bfloat16 (default: float32 on CPU, "
                               "bfloat16 on GPU)")
    device: str | None = option(None, group="model", help="cpu | cuda | cuda:N | auto")
    dataset: str = option("arith", choices=DATASETS, group="questions", help="question set")
    task: str | None = option(None, group="questions",
                              help="MMLU subject, BBH task, or arith level(s) e.g. s2_o5,s3_o5")
    data_dir: str | None = option(None, group="questions", help="local copy of the benchmarks in their upstream "
                                  "layout (e.g. ../shared/data); without it, load from the HF hub")
    input_file: str | None = option(None, group="questions", help="JSONL of {id, question, answer[, choices][, task]} "
                                    "instead of a benchmark")
    max_examples: int = option(100, type=int, group="questions", help="questions sampled (seeded) from the dataset")
    all: bool = option(False, group="questions", help="use every question (overrides --max-examples)")
    seed: int = option(42, type=int, group="questions", help="sampling and perturbation seed")
    dataset_revision: str | None = option(None, group="questions",
                                          help="pin the HF dataset revision (hub loading only)")
    n_per_level: int | None = option(None, type=int, group="questions",
                                     help="arith: questions generated per difficulty level (default 50)")
    shard: str | None = option(None, metavar="I/N", group="questions",
                               help="run only shard I of N (0-based) of the question sample, partitioned by question "
                                    "key; merge the parts with python -m behavioural.merge")
    strategy: str | None = option(None, group="protocol", help="one or several strategies (comma list) or 'all'; "
                                  "default: arithmetic_change for gsm8k/arith, wrong_elimination for mmlu, negation_flip "
                                  "for bbh")
    positions: str = option("early,middle,late", flag="--line-positions", deprecated=("--positions",),
                            metavar="LIST", group="protocol",
                            help="edited line positions, a comma list of early, middle, late")
    max_new_tokens: int = option(4096, type=int, group="protocol", help="generation budget per baseline/continuation")
    min_lines: int = option(3, type=int, group="protocol",
                            help="visible reasoning lines a correct baseline needs to be eligible")
    few_shot: bool | None = option(None, off=("--no-few-shot", "no few-shot turns"), group="protocol",
                                   help="include few-shot turns (default: on for arith only)")
    batch_size: int = option(8, type=int, group=_GEN,
                             help="generation batch size (does not change results beyond float noise)")
    backend: str = option("hf", choices=("hf", "hf-plain", "vllm"), group=_GEN,
                          help="generation backend: hf (the fast path), hf-plain (the same batching with transformers' "
                               "own kernels and no prompt-lookup drafts: the reference for ruling out the fast "
                               "kernels), vllm")
    tensor_parallel_size: int = option(1, type=int, group=_VLLM, help="vLLM: GPUs to shard over")
    gpu_memory_utilization: float = option(0.85, type=float, group=_VLLM, help="vLLM: fraction of GPU memory to use")
    pipeline_parallel_size: int = option(1, type=int, group=_VLLM, help="vLLM: pipeline stages (GPUs or nodes)")
    data_parallel_size: int = option(1, type=int, group=_VLLM, help="vLLM: engine replicas")
    distributed_executor_backend: str | None = option(None, choices=("mp", "ray", "uni", "external_launcher"),
                                                      group=_VLLM, help="vLLM: how workers are launched (ray for "
                                                                        "multi-node); default: vLLM's choice")
    output_dir: str | None = option(None, metavar="DIR", group="output",
                                    help="new run directory (must not exist); default runs/<dataset>-<time>")
    resume: str | None = option(None, metavar="RUN_DIR", group="output", help="continue this run directory with the "
                                "settings in its manifest (options given beside it must match)")
    quiet: bool = option(False, group="output", help="no progress bars")


def build_parser() -> argparse.ArgumentParser:
    """The command's parser, built from :class:`RunOptions`."""
    return parser_from_config(RunOptions, prog="python -m behavioural.run", description=DESCRIPTION,
                              groups=("model", "questions", "protocol", _GEN, _VLLM, "output"))


def settings_from_args(args: argparse.Namespace | RunOptions):
    """The :class:`~behavioural.protocol.Settings` of parsed options (a namespace or :class:`RunOptions`)."""
    from behavioural.protocol import Settings  # deferred: behavioural.protocol loads numpy

    dataset_kind = args.dataset if not args.input_file else "custom"
    return Settings(
        model=args.model, dataset=args.dataset, strategies=tuple(parse_strategies(args.strategy, dataset_kind)),
        positions=parse_line_positions(args.positions, error=StrategyError), task=args.task, seed=args.seed,
        max_examples=None if args.all else args.max_examples, max_new_tokens=args.max_new_tokens,
        min_lines=args.min_lines, few_shot=args.few_shot, model_revision=args.model_revision,
        dataset_revision=args.dataset_revision, quantize=args.quantize, dtype=args.dtype,
        n_per_level=args.n_per_level, data_dir=args.data_dir, input_file=args.input_file, shard=args.shard,
        batch_size=args.batch_size, backend=args.backend,
    )


def _norm(v):
    return tuple(v) if isinstance(v, list) else v


def settings_for_resume(run_dir: Path, args: argparse.Namespace | RunOptions, explicit: set[str]):
    """The run's stored settings, with explicit options compared (a result-changing difference is refused)."""
    from behavioural.protocol import ProtocolError, Settings  # deferred: behavioural.protocol loads numpy

    manifest = Run(run_dir).manifest
    stored = manifest.get("settings")
    if manifest.get("kind") != "behavioural.run" or not isinstance(stored, dict):
        raise ProtocolError(f"{run_dir} is not a behavioural run directory (manifest kind {manifest.get('kind')!r}); "
                            "pass a directory written by python -m behavioural.run")
    fields = {f.name for f in dataclasses.fields(Settings)}
    try:
        base = Settings(**{k: _norm(v) for k, v in stored.items() if k in fields})
    except TypeError as e:
        raise ProtocolError(f"{run_dir / MANIFEST}: settings are incomplete ({e}); the manifest was edited or "
                            "written by another version: start a new --output-dir") from None
    given = {k: getattr(args, k) for k in explicit if k in RESULT_OPTIONS or k in FREE_OPTIONS}
    if not given:
        return base
    # interpret the explicit options in the stored run's context (e.g. --strategy defaults depend on the dataset)
    merged = argparse.Namespace(**vars(args))
    for dest, field in {**RESULT_OPTIONS, **FREE_OPTIONS}.items():
        if dest not in explicit and dest != "all":
            v = getattr(base, field)
            if dest in ("strategy", "positions"):
                v = ",".join(v)
            elif dest == "max_examples" and v is None:
                v = 0
            setattr(merged, dest, v)
    if "all" not in explicit and "max_examples" not in explicit:
        merged.all = base.max_examples is None
    new = settings_from_args(merged)
    diffs = []
    for dest in sorted(explicit):
        fname = RESULT_OPTIONS.get(dest)
        if fname is None:
            continue
        a, b = _norm(getattr(base, fname)), _norm(getattr(new, fname))
        if a != b:
            opt = OPTION_NAMES.get(dest, "--" + dest.replace("_", "-"))
            diffs.append(f"{opt} {b!r} differs from the run's {fname}={a!r}")
    if diffs:
        raise ProtocolError(f"cannot resume {run_dir}: {'; '.join(diffs)}; omit those options to continue with the "
                            "run's own settings, or start a new --output-dir")
    return dataclasses.replace(base, batch_size=new.batch_size, backend=new.backend)


def describe(settings) -> str:
    """The result settings in one line."""
    d = settings.to_dict()
    keep = ["model", "dataset", "task", "max_examples", "seed", "strategies", "positions", "max_new_tokens",
            "min_lines", "few_shot", "batch_size", "backend"]
    extra = [k for k, v in d.items() if k not in keep and v is not None]
    parts = []
    for k in keep + extra:
        v = d[k]
        parts.append(f"{k}={','.join(v) if isinstance(v, list) else v}")
    return " ".join(parts)
