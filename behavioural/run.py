"""Edit-and-continue protocol command.

    python -m behavioural.run --dataset arith --max-examples 24 --strategy arithmetic,contradiction --output-dir runs/demo
    python -m behavioural.run --resume runs/demo      # continue after any interruption (SIGKILL included)

(``python evaluate.py`` takes the same options.) Writes ``baselines.jsonl``, ``continuations.jsonl``,
``skipped.jsonl``, ``manifest.json`` and ``summary.json`` into ``--output-dir`` and prints the summary
table. ``--resume RUN_DIR`` alone continues with the settings stored in the run's manifest (printed in one
line); options given beside it are compared with the manifest and a difference is refused, naming each.
Resume checks the model's weights hash too. One writer per run directory (``RUN_DIR/.lock``); a refused
command modifies nothing.

Library use (what ``python -m study`` calls)::

    from behavioural.run import RunConfig, run_stage, is_complete
    summary = run_stage(RunConfig(settings=Settings(...), output_dir="runs/x"))
"""
from __future__ import annotations

import argparse
import dataclasses
import os
import shutil
import sys
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path
from typing import Any

from loadbearing.questions.data import DATASETS

DEFAULT_MODEL = "smollm2-135m-instruct"

#: CLI option dest -> Settings field, for options that change results (compared on --resume)
_RESULT_OPTIONS = {
    "model": "model", "dataset": "dataset", "task": "task", "data_dir": "data_dir", "input_file": "input_file",
    "max_examples": "max_examples", "all": "max_examples", "seed": "seed", "strategy": "strategies",
    "positions": "positions", "max_new_tokens": "max_new_tokens", "min_lines": "min_lines", "few_shot": "few_shot",
    "model_revision": "model_revision", "dataset_revision": "dataset_revision", "quantize": "quantize",
    "dtype": "dtype", "n_per_level": "n_per_level", "shard": "shard",
}
#: options that may change on resume (they do not change results)
_FREE_OPTIONS = {"batch_size": "batch_size", "backend": "backend"}


def build_parser() -> argparse.ArgumentParser:
    from loadbearing.cli import OneLineParser

    p = OneLineParser(prog="python -m behavioural.run", description=__doc__.split("\n\n")[0],
                                formatter_class=argparse.ArgumentDefaultsHelpFormatter)
    p.add_argument("--model", default=DEFAULT_MODEL, help="model name: the embedded default, a paper alias "
                   "(gemma-2-9b-it, llama-3.1-8b-instruct, deepseek-r1-distill-qwen-7b), a HF id, a local dir or a .gguf")
    p.add_argument("--dataset", choices=DATASETS, default="arith", help="question set")
    p.add_argument("--task", default=None, help="MMLU subject, BBH task, or arith level(s) e.g. s2_o5,s3_o5")
    p.add_argument("--data-dir", default=None, help="local copy of the benchmarks in their upstream layout "
                   "(e.g. ../shared/data); without it, load from the HF hub")
    p.add_argument("--input-file", default=None, help="JSONL of {id, question, answer[, choices][, task]} instead of a benchmark")
    p.add_argument("--max-examples", type=int, default=100, help="questions sampled (seeded) from the dataset")
    p.add_argument("--all", action="store_true", help="use every question (overrides --max-examples)")
    p.add_argument("--seed", type=int, default=42, help="sampling and perturbation seed")
    p.add_argument("--strategy", default=None, help="one or several strategies (comma list) or 'all'; default: "
                   "arithmetic_change for gsm8k/arith, wrong_elimination for mmlu, negation_flip for bbh")
    p.add_argument("--positions", default="early,middle,late", help="edited line positions (comma list of early,middle,late)")
    p.add_argument("--max-new-tokens", type=int, default=4096, help="generation budget per baseline/continuation")
    p.add_argument("--batch-size", type=int, default=8, help="generation batch size (does not change results beyond float noise)")
    p.add_argument("--backend", choices=("hf", "hf-plain", "vllm"), default="hf",
                   help="generation backend: hf (the fast path), hf-plain (the same batching with transformers' own "
                   "kernels and no prompt-lookup drafts: the reference for ruling out the fast kernels), vllm")
    p.add_argument("--tensor-parallel-size", type=int, default=1, help="vLLM: GPUs to shard over")
    p.add_argument("--gpu-memory-utilization", type=float, default=0.85, help="vLLM: fraction of GPU memory to use")
    p.add_argument("--pipeline-parallel-size", type=int, default=1, help="vLLM: pipeline stages (GPUs or nodes)")
    p.add_argument("--data-parallel-size", type=int, default=1, help="vLLM: engine replicas")
    p.add_argument("--distributed-executor-backend", choices=("mp", "ray", "uni", "external_launcher"), default=None,
                   help="vLLM: how workers are launched (ray for multi-node); default: vLLM's choice")
    p.add_argument("--shard", default=None, metavar="I/N",
                   help="run only shard I of N (0-based) of the question sample, partitioned by question key; merge the "
                        "parts with python -m behavioural.merge")
    p.add_argument("--model-revision", default=None, help="pin the model's HF revision (commit/tag)")
    p.add_argument("--dataset-revision", default=None, help="pin the HF dataset revision (hub loading only)")
    p.add_argument("--quantize", choices=("4bit", "8bit"), default=None, help="load the model quantised with bitsandbytes")
    p.add_argument("--dtype", default=None, help="float32 | float16 | bfloat16 (default: float32 on CPU, bfloat16 on GPU)")
    p.add_argument("--device", default=None, help="cpu | cuda | cuda:N | auto")
    p.add_argument("--output-dir", default=None, help="new run directory (must not exist); default runs/<dataset>-<time>")
    p.add_argument("--resume", default=None, metavar="RUN_DIR",
                   help="continue this run directory with the settings in its manifest (options given beside it must match)")
    p.add_argument("--min-lines", type=int, default=3, help="visible reasoning lines a correct baseline needs to be eligible")
    p.add_argument("--few-shot", dest="few_shot", action="store_true", default=None,
                   help="include few-shot turns (default: on for arith only)")
    p.add_argument("--no-few-shot", dest="few_shot", action="store_false", help="no few-shot turns")
    p.add_argument("--n-per-level", type=int, default=None, help="arith: questions generated per difficulty level (default 50)")
    p.add_argument("--quiet", action="store_true", help="no progress bars")
    return p


@dataclass(frozen=True)
class RunConfig:
    """The behavioural stage's configuration: result settings plus how to run them."""

    settings: Any  # behavioural.protocol.Settings
    output_dir: str | Path
    resume: bool = False
    device: str | None = None
    tensor_parallel_size: int = 1
    gpu_memory_utilization: float = 0.85
    pipeline_parallel_size: int = 1
    data_parallel_size: int = 1
    distributed_executor_backend: str | None = None
    progress: bool = True


# ------------------------------------------------------------------------------------------ validation
def _positions(spec: str) -> tuple[str, ...]:
    from behavioural.strategies import StrategyError

    positions = tuple(s.strip() for s in str(spec).split(",") if s.strip())
    bad = [p for p in positions if p not in ("early", "middle", "late")]
    if bad or not positions:
        raise StrategyError(f"unknown position(s) {bad or spec!r}; use a comma list of early,middle,late")
    return positions


def vllm_options(config: RunConfig) -> dict[str, Any]:
    """The engine options passed through to ``vllm.LLM`` (vLLM's own tensor/pipeline/data parallelism)."""
    out: dict[str, Any] = {"tensor_parallel_size": config.tensor_parallel_size,
                           "gpu_memory_utilization": config.gpu_memory_utilization}
    if config.pipeline_parallel_size != 1:
        out["pipeline_parallel_size"] = config.pipeline_parallel_size
    if config.data_parallel_size != 1:
        out["data_parallel_size"] = config.data_parallel_size
    if config.distributed_executor_backend:
        out["distributed_executor_backend"] = config.distributed_executor_backend
    return out


def validate_settings(s) -> None:
    """Refuse settings that cannot produce a result, before anything is loaded or written."""
    from loadbearing.cli import UsageError, check_number

    if s.min_lines < 2:
        raise UsageError(f"--min-lines must be >= 2 (a position needs a line after the edited one), got {s.min_lines}")
    check_number(s.max_new_tokens, "--max-new-tokens", minimum=1)
    check_number(s.batch_size, "--batch-size", minimum=1)
    check_number(s.max_examples, "--max-examples", minimum=1)
    check_number(s.n_per_level, "--n-per-level", minimum=1)
    if s.shard is not None:
        from loadbearing.shards import ShardError, parse_shard

        try:
            parse_shard(s.shard)
        except ShardError as e:
            raise UsageError(str(e)) from None
    if s.input_file is not None:
        p = Path(s.input_file)
        if not p.is_file():
            raise UsageError(f"--input-file {s.input_file!r} not found; pass a JSONL file of questions")
        if not p.read_text(encoding="utf-8", errors="replace").strip():
            raise UsageError(f"--input-file {s.input_file!r} is empty; it needs one JSON question per line")


def _settings_from_args(args: argparse.Namespace):
    from behavioural.protocol import Settings
    from behavioural.strategies import parse_strategies

    dataset_kind = args.dataset if not args.input_file else "custom"
    return Settings(
        model=args.model, dataset=args.dataset, strategies=tuple(parse_strategies(args.strategy, dataset_kind)),
        positions=_positions(args.positions), task=args.task, seed=args.seed,
        max_examples=None if args.all else args.max_examples, max_new_tokens=args.max_new_tokens,
        min_lines=args.min_lines, few_shot=args.few_shot, model_revision=args.model_revision,
        dataset_revision=args.dataset_revision, quantize=args.quantize, dtype=args.dtype,
        n_per_level=args.n_per_level, data_dir=args.data_dir, input_file=args.input_file, shard=args.shard,
        batch_size=args.batch_size, backend=args.backend,
    )


def _norm(v):
    return tuple(v) if isinstance(v, list) else v


def settings_for_resume(run_dir: Path, args: argparse.Namespace, explicit: set[str]):
    """The run's stored settings, with explicit options compared (a result-changing difference is refused)."""
    from behavioural.protocol import ProtocolError, Settings
    from loadbearing.runs import Run

    manifest = Run(run_dir).manifest
    stored = manifest.get("settings")
    if manifest.get("kind") != "behavioural.run" or not isinstance(stored, dict):
        raise ProtocolError(f"{run_dir} is not a behavioural run directory (manifest kind {manifest.get('kind')!r}); "
                            "pass a directory written by python -m behavioural.run")
    fields = {f.name for f in dataclasses.fields(Settings)}
    try:
        base = Settings(**{k: _norm(v) for k, v in stored.items() if k in fields})
    except TypeError as e:
        raise ProtocolError(f"{run_dir / 'manifest.json'}: settings are incomplete ({e}); the manifest was edited or "
                            "written by another version: start a new --output-dir") from None
    given = {k: getattr(args, k) for k in explicit if k in _RESULT_OPTIONS or k in _FREE_OPTIONS}
    if not given:
        return base
    # interpret the explicit options in the stored run's context (e.g. --strategy defaults depend on the dataset)
    merged = argparse.Namespace(**vars(args))
    for dest, field in {**_RESULT_OPTIONS, **_FREE_OPTIONS}.items():
        if dest not in explicit and dest != "all":
            v = getattr(base, field)
            if dest == "strategy":
                v = ",".join(v)
            elif dest == "positions":
                v = ",".join(v)
            elif dest == "max_examples" and v is None:
                v = 0
            setattr(merged, dest, v)
    if "all" not in explicit and "max_examples" not in explicit:
        merged.all = base.max_examples is None
    new = _settings_from_args(merged)
    diffs = []
    for dest in sorted(explicit):
        fname = _RESULT_OPTIONS.get(dest)
        if fname is None:
            continue
        a, b = _norm(getattr(base, fname)), _norm(getattr(new, fname))
        if a != b:
            opt = "--" + dest.replace("_", "-")
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


# ------------------------------------------------------------------------------------------ the stage
def is_complete(out_path: str | Path) -> bool:
    """True when ``out_path`` holds a finished behavioural run (manifest ok/insufficient_data + summary)."""
    from loadbearing.files import RunDirError
    from loadbearing.runs import SUMMARY, Run

    try:
        r = Run(out_path)
        return r.status in ("ok", "insufficient_data") and (r.path / SUMMARY).is_file()
    except RunDirError:
        return False


def _check_writable(out_dir: Path) -> None:
    from loadbearing.files import RunDirError

    parent = out_dir if out_dir.exists() else out_dir.parent
    while not parent.exists() and parent != parent.parent:
        parent = parent.parent
    if not parent.is_dir():
        raise RunDirError(f"cannot write {str(out_dir)!r}: {str(parent)!r} is not a directory; choose another --output-dir")
    if not os.access(parent, os.W_OK):
        raise RunDirError(f"cannot write {str(out_dir)!r}: {str(parent)!r} is read-only; choose another --output-dir")
    if shutil.disk_usage(parent).free < 1 << 20:
        raise RunDirError(f"cannot write {str(out_dir)!r}: the disk holding {str(parent)!r} is full; free space or choose "
                          "another --output-dir")


def run_stage(config: RunConfig, *, lm=None, generate_fn=None, echo=print, log=None) -> dict:
    """Run (or resume) the behavioural stage; returns the summary dict. Refusals modify nothing."""
    from behavioural.protocol import check_resume, run_protocol
    from loadbearing.cli import check_device, check_model_file
    from loadbearing.files import RunDirError
    from loadbearing.locks import output_lock
    from loadbearing.questions.data import load_questions, sample
    from loadbearing.runs import Run, is_fresh_dir

    log = log or (lambda m: print(m, file=sys.stderr))
    s = config.settings
    out_dir = Path(config.output_dir)
    validate_settings(s)
    if lm is None:
        check_device(config.device)
        check_model_file(s.model)
    created = False
    if config.resume:
        Run(out_dir)  # a run directory with a manifest, or a one-line error
    elif not is_fresh_dir(out_dir):  # a directory the study driver (or a killed start) left empty is taken
        if out_dir.exists():
            raise RunDirError(f"output directory {str(out_dir)!r} already exists; choose a new --output-dir, or continue it "
                              f"with --resume {out_dir}")
        _check_writable(out_dir)
        try:
            out_dir.mkdir(parents=True)
        except FileExistsError:
            raise RunDirError(f"output directory {str(out_dir)!r} already exists (another writer?); choose a new "
                              "--output-dir") from None
        created = True
    started = False
    try:
        with output_lock(out_dir):
            extra = {"n_per_level": s.n_per_level} if s.n_per_level else {}
            kind = s.dataset if not s.input_file else "custom"
            questions = load_questions(kind, task=s.task, data_dir=s.data_dir, input_file=s.input_file,
                                       revision=s.dataset_revision, seed=s.seed, **extra)
            questions = sample(questions, s.max_examples, s.seed)
            if not questions:
                raise RunDirError(f"no questions selected (dataset {s.dataset!r}, task {s.task!r}); check --task / "
                                  "--input-file")
            if config.resume:  # refuse before loading a model
                check_resume(out_dir, s, questions)
            if lm is None:
                from loadbearing.engine.models import load_model

                lm = load_model(s.model, revision=s.model_revision, dtype=s.dtype, device=config.device,
                                quantize=s.quantize)
            if config.resume:
                Run(out_dir).check_model(lm)
            if s.backend == "hf-plain" and generate_fn is None:
                from loadbearing.engine.generation import generate_plain

                generate_fn = generate_plain
            if s.backend == "vllm" and generate_fn is None:
                from loadbearing.engine.vllm_backend import make_vllm_generate

                generate_fn = make_vllm_generate(lm, **vllm_options(config))
            log(f"run directory: {out_dir}  ({len(questions)} questions, strategies {', '.join(s.strategies)}, "
                f"positions {', '.join(s.positions)}, model {s.model})")
            started = True
            return run_protocol(lm, questions, s, out_dir, resume=config.resume, progress=config.progress,
                                generate_fn=generate_fn, echo=echo)
    except BaseException:
        if created and not started:  # a refused new run leaves nothing behind
            shutil.rmtree(out_dir, ignore_errors=True)
        raise


def format_summary(summary: dict, style: str = "text") -> str:
    """The behavioural summary as a text table (``style="text"``) or markdown (``style="md"``)."""
    from behavioural import summary as summary_mod

    fn = getattr(summary_mod, "format_summary", None)
    if fn is not None:
        return fn(summary, style=style)
    if style == "text":
        return summary_mod.format_table(summary)
    if style != "md":
        raise ValueError(f"unknown style {style!r}; use 'text' or 'md'")
    from loadbearing.stats import format_rate

    def pct(r) -> str:
        return "n/a" if not r else format_rate(r, style="md")

    lines = [
        f"Questions: {summary['questions']}; baseline accuracy {pct(summary['baseline_accuracy'])}; eligible "
        f"{summary['eligible']}; continuations {summary['continuations']}; not-applicable edits "
        f"{summary['not_applicable']}.", "",
        "| group | propagation (95% CI) | control error | coverage |", "|---|---|---|---|",
    ]

    def row(name, r):
        cov = r["coverage"]["rate"]
        flag = " (too few cases)" if r["propagation"]["n"] < 5 else ""
        return (f"| {name} | {pct(r['propagation'])}{flag} | {pct(r['control_error'])} | "
                f"{'n/a' if cov is None else f'{100 * cov:.0f}%'} |")

    lines.append(row("overall", summary["overall"]))
    for key, groups in summary.get("by", {}).items():
        for g, r in groups.items():
            lines.append(row(f"{key}={g}", r))
    d = summary["overall"].get("paired_difference") or {}
    if d.get("estimate") is not None and (d.get("ci") or [None])[0] is not None:
        lines += ["", f"Paired perturbed - control difference: {100 * d['estimate']:.1f} pp, question-clustered "
                      f"bootstrap 95% CI [{100 * d['ci'][0]:.1f}, {100 * d['ci'][1]:.1f}] ({d['n_pairs']} pairs, "
                      f"{d['n_clusters']} questions)."]
    if summary.get("baseline_by_level"):
        lines += ["", "| level | baseline accuracy | eligible |", "|---|---|---|"]
        for lvl, v in summary["baseline_by_level"].items():
            lines.append(f"| {lvl} | {pct(v['accuracy'])} | {v['eligible']} |")
    if summary.get("message"):
        lines += ["", f"**{summary['message']}**"]
    return "\n".join(lines)


# ------------------------------------------------------------------------------------------ CLI
def config_from_argv(argv: list[str] | None) -> RunConfig:
    from loadbearing.cli import explicit_options

    parser = build_parser()
    args = parser.parse_args(argv)
    if args.resume and not (Path(args.resume) / "manifest.json").is_file():
        from loadbearing.files import RunDirError

        what = "no manifest.json there" if Path(args.resume).is_dir() else "no such directory, so no manifest.json"
        raise RunDirError(f"--resume {args.resume}: {what}; pass a run directory written by python -m behavioural.run")
    if args.resume and args.output_dir and Path(args.output_dir) != Path(args.resume):
        from loadbearing.cli import UsageError

        raise UsageError("--resume and --output-dir name different directories; pass only --resume RUN_DIR")
    if args.resume:
        settings = settings_for_resume(Path(args.resume), args, explicit_options(parser, argv))
        print(f"resuming {args.resume} with: {describe(settings)}", flush=True)
        out = Path(args.resume)
    else:
        settings = _settings_from_args(args)
        out = Path(args.output_dir or f"runs/{args.dataset}-{datetime.now():%Y%m%d-%H%M%S}")
    from loadbearing.cli import check_number

    for opt in ("tensor_parallel_size", "pipeline_parallel_size", "data_parallel_size"):
        check_number(getattr(args, opt), "--" + opt.replace("_", "-"), minimum=1)
    return RunConfig(settings=settings, output_dir=out, resume=bool(args.resume), device=args.device,
                     tensor_parallel_size=args.tensor_parallel_size,
                     gpu_memory_utilization=args.gpu_memory_utilization,
                     pipeline_parallel_size=args.pipeline_parallel_size, data_parallel_size=args.data_parallel_size,
                     distributed_executor_backend=args.distributed_executor_backend, progress=not args.quiet)


def main(argv: list[str] | None = None) -> int:
    from loadbearing.cli import run_cli

    argv = list(sys.argv[1:] if argv is None else argv)
    where: dict[str, Any] = {}

    def body() -> int:
        config = config_from_argv(argv)
        where["out"] = config.output_dir
        summary = run_stage(config)
        print(f"\nwrote {config.output_dir}/summary.json (status {summary['status']})")
        return 0

    return run_cli(body, interrupted_hint=lambda: f"continue with: python -m behavioural.run --resume "
                                                  f"{where.get('out', 'RUN_DIR')}")


if __name__ == "__main__":
    sys.exit(main())
