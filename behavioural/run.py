"""Edit-and-continue protocol command.

    python -m behavioural.run --dataset arith --max-examples 24 --strategy arithmetic,contradiction --output-dir runs/demo
    python -m behavioural.run --resume runs/demo      # continue after any interruption (SIGKILL included)

(``python evaluate.py`` takes the same options.) Writes ``baselines.jsonl``, ``continuations.jsonl``,
``skipped.jsonl``, ``manifest.json`` and ``summary.json`` into ``--output-dir`` and prints the summary
table. ``--resume RUN_DIR`` alone continues with the settings stored in the run's manifest (printed in one
line); options given beside it are compared with the manifest and a difference is refused, naming each.
Resume checks the model's weights hash too. Resuming a run that is already complete prints one line saying
so and changes no file. One writer per run directory (``RUN_DIR/.lock``); a refused command modifies
nothing. The options and the settings they make live in :mod:`behavioural.run_options`.

Library use (what ``python -m study`` calls)::

    from behavioural.run import RunConfig, run_stage, is_complete
    summary = run_stage(RunConfig(settings=Settings(...), output_dir="runs/x"))
"""
from __future__ import annotations

import os
import shutil
import sys
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path
from typing import Any, cast

from behavioural.protocol import check_manifest, check_resume, run_protocol
from behavioural.results import BehaviourSummary
from behavioural.run_options import (
    DEFAULT_MODEL,
    RunOptions,
    build_parser,
    describe,
    settings_for_resume,
    settings_from_args,
)
from behavioural.summary import format_summary
from loadbearing.cli import UsageError, check_device, check_model_file, check_number, explicit_options, run_cli
from loadbearing.engine.generation import generate_plain
from loadbearing.engine.vllm_backend import make_vllm_generate
from loadbearing.files import RunDirError
from loadbearing.locks import output_lock
from loadbearing.questions.data import load_questions, sample
from loadbearing.runs import MANIFEST, SUMMARY, Run, is_fresh_dir
from loadbearing.shards import parse_shard
from loadbearing.stage.parser import config_from_parsed

__all__ = ["DEFAULT_MODEL", "RunConfig", "build_parser", "check_writable", "config_from_argv", "describe",
           "format_summary", "is_complete", "main", "run_stage", "settings_for_resume",
           "settings_from_args", "validate_settings", "vllm_options"]


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
    if s.min_lines < 2:
        raise UsageError(f"--min-lines must be >= 2 (a position needs a line after the edited one), got {s.min_lines}")
    check_number(s.max_new_tokens, "--max-new-tokens", minimum=1)
    check_number(s.batch_size, "--batch-size", minimum=1)
    check_number(s.max_examples, "--max-examples", minimum=1)
    check_number(s.n_per_level, "--n-per-level", minimum=1)
    if s.shard is not None:
        parse_shard(s.shard)  # a bad --shard is the shards' own one-line ShardError
    if s.input_file is not None:
        p = Path(s.input_file)
        if not p.is_file():
            raise UsageError(f"--input-file {s.input_file!r} not found; pass a JSONL file of questions")
        if not p.read_text(encoding="utf-8", errors="replace").strip():
            raise UsageError(f"--input-file {s.input_file!r} is empty; it needs one JSON question per line")


# ------------------------------------------------------------------------------------------ the stage
def is_complete(out_path: str | Path) -> bool:
    """True when ``out_path`` holds a finished behavioural run (manifest ok/insufficient_data + summary)."""
    try:
        r = Run(out_path)
        return r.status in ("ok", "insufficient_data") and (r.path / SUMMARY).is_file()
    except RunDirError:
        return False


def check_writable(out_dir: Path) -> None:
    """Refuse an output directory whose nearest existing parent is not a writable directory with free space."""
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


_check_writable = check_writable  # the old private name (study.driver used it); new code: check_writable


def _finished_summary(out_dir: Path, settings, say) -> BehaviourSummary:
    """Resuming a finished run: check its manifest against the settings, say so in one line, write nothing."""
    check_manifest(out_dir, settings)
    run = Run(out_dir)
    say(f"{out_dir} is already complete (status {run.status}); nothing to do")
    return cast(BehaviourSummary, run.summary() or {})


def run_stage(config: RunConfig, *, lm=None, generate_fn=None, echo=print, log=None) -> BehaviourSummary:
    """Run (or resume) the behavioural stage; returns the summary dict. Refusals modify nothing, and so does
    resuming a run that is already complete (it returns the stored summary and changes no file)."""
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
        check_writable(out_dir)
        try:
            out_dir.mkdir(parents=True)
        except FileExistsError:
            raise RunDirError(f"output directory {str(out_dir)!r} already exists (another writer?); choose a new "
                              "--output-dir") from None
        created = True
    started = False
    try:
        with output_lock(out_dir):  # held even here: a run another writer is resuming is refused, not reported
            if config.resume and is_complete(out_dir):
                return _finished_summary(out_dir, s, echo or log)
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
                # deferred: tests monkeypatch loadbearing.engine.models.load_model
                from loadbearing.engine.models import load_model

                lm = load_model(s.model, revision=s.model_revision, dtype=s.dtype, device=config.device,
                                quantize=s.quantize)
            if config.resume:
                Run(out_dir).check_model(lm)
            if s.backend == "hf-plain" and generate_fn is None:
                generate_fn = generate_plain
            own_engine = None
            if s.backend == "vllm" and generate_fn is None:
                generate_fn = own_engine = make_vllm_generate(lm, **vllm_options(config))
            log(f"run directory: {out_dir}  ({len(questions)} questions, strategies {', '.join(s.strategies)}, "
                f"positions {', '.join(s.positions)}, model {s.model})")
            started = True
            try:
                return run_protocol(lm, questions, s, out_dir, resume=config.resume, progress=config.progress,
                                    generate_fn=generate_fn, echo=echo)
            finally:  # the study's later stages start their own engines: free this one's memory first
                if own_engine is not None:
                    own_engine.shutdown()
    except BaseException:
        if created and not started:  # a refused new run leaves nothing behind
            shutil.rmtree(out_dir, ignore_errors=True)
        raise


# ------------------------------------------------------------------------------------------ CLI
def config_from_argv(argv: list[str] | None) -> RunConfig:
    parser = build_parser()
    args = config_from_parsed(RunOptions, parser.parse_args(argv))
    if args.resume and not (Path(args.resume) / MANIFEST).is_file():
        what = "no manifest.json there" if Path(args.resume).is_dir() else "no such directory, so no manifest.json"
        raise RunDirError(f"--resume {args.resume}: {what}; pass a run directory written by python -m behavioural.run")
    if args.resume and args.output_dir and Path(args.output_dir) != Path(args.resume):
        raise UsageError("--resume and --output-dir name different directories; pass only --resume RUN_DIR")
    if args.resume:
        settings = settings_for_resume(Path(args.resume), args, explicit_options(parser, argv))
        out = Path(args.resume)
    else:
        settings = settings_from_args(args)
        out = Path(args.output_dir or f"runs/{args.dataset}-{datetime.now():%Y%m%d-%H%M%S}")

    for opt in ("tensor_parallel_size", "pipeline_parallel_size", "data_parallel_size"):
        check_number(getattr(args, opt), "--" + opt.replace("_", "-"), minimum=1)
    return RunConfig(settings=settings, output_dir=out, resume=bool(args.resume), device=args.device,
                     tensor_parallel_size=args.tensor_parallel_size,
                     gpu_memory_utilization=args.gpu_memory_utilization,
                     pipeline_parallel_size=args.pipeline_parallel_size, data_parallel_size=args.data_parallel_size,
                     distributed_executor_backend=args.distributed_executor_backend, progress=not args.quiet)


def main(argv: list[str] | None = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    where: dict[str, Any] = {}

    def body() -> int:
        config = config_from_argv(argv)
        where["out"] = config.output_dir
        finished = config.resume and is_complete(config.output_dir)  # run_stage says so in one line
        if config.resume and not finished:
            print(f"resuming {config.output_dir} with: {describe(config.settings)}", flush=True)
        summary = run_stage(config)
        if not finished:
            print(f"\nwrote {config.output_dir}/summary.json (status {summary['status']})")
        return 0

    return run_cli(body, interrupted_hint=lambda: f"continue with: python -m behavioural.run --resume "
                                                  f"{where.get('out', 'RUN_DIR')}")


if __name__ == "__main__":
    sys.exit(main())
