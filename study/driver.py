"""The study driver: every stage in order on one directory, each skipped when its own output is complete.

    python -m study --output-dir runs/study          # the README's `make demo` (embedded SmolLM2, CPU)
    python -m study --resume runs/study              # continue after any interruption (SIGKILL included)

Each stage is called as a library function with its config dataclass (:mod:`study.stages`); a stage whose
output its own ``is_complete`` accepts is skipped, an unfinished one is resumed. The study's settings are
stored in ``DIR/study.json``: ``--resume DIR`` alone continues with them (printed in one line); options given
beside it are compared and a difference is refused, naming each. ``report.md``/``report.txt`` join every
stage's own summary (:mod:`study.report`).
"""
from __future__ import annotations

import argparse
import functools
import shutil
import sys
import time
from pathlib import Path

from study.config import STUDY_FILE, StudyConfig, StudyError, read_stored, write_stored


def build_parser() -> argparse.ArgumentParser:
    d = StudyConfig(output_dir="")
    from loadbearing.cli import OneLineParser

    p = OneLineParser(prog="python -m study", description=(__doc__ or "").split("\n\n")[0],
                                formatter_class=argparse.ArgumentDefaultsHelpFormatter)
    p.add_argument("--output-dir", default=None, help="new study directory (the run directory of every stage); "
                   "default runs/study-<time>")
    p.add_argument("--resume", default=None, metavar="DIR", help="continue this study directory with its stored settings")
    p.add_argument("--model", default=d.model, help="model for every stage")
    p.add_argument("--dataset", default=d.dataset, help="question set (see python -m behavioural.run --help)")
    p.add_argument("--task", default=d.task, help="task / arith levels")
    p.add_argument("--data-dir", default=d.data_dir, help="benchmark data directory (gsm8k/mmlu/bbh)")
    p.add_argument("--max-examples", type=int, default=d.max_examples, help="questions")
    p.add_argument("--strategy", default=d.strategy, help="perturbation strategies (mixed, so both outcomes occur)")
    p.add_argument("--max-new-tokens", type=int, default=d.max_new_tokens, help="generation budget (behaviour and steering)")
    p.add_argument("--batch-size", type=int, default=d.batch_size, help="generation batch size")
    p.add_argument("--folds", type=int, default=d.folds, help="probes: outer cross-validation folds (grouped by question)")
    p.add_argument("--k", default=d.k, help="steering: numbers of directions")
    p.add_argument("--alphas", default=d.alphas,
                   help="steering: strengths relative to the mean residual norm (>= 1 turns SmolLM2 into noise)")
    p.add_argument("--steer-layers", default=d.steer_layers, help="steering layers (default: the probes' nested-CV selection)")
    p.add_argument("--max-cases", type=int, default=d.max_cases, help="steering: C cases to steer")
    p.add_argument("--per-question", type=int, default=d.per_question, help="steering: at most this many C cases a question")
    p.add_argument("--steer-holdout", type=float, default=d.steer_holdout,
                   help="fraction of questions kept out of the direction fit; steering uses only those")
    p.add_argument("--sesoi", type=float, default=d.sesoi,
                   help="steering: smallest effect of interest (0.10 = 10 points) that a null must exclude")
    p.add_argument("--steer-max-new-tokens", type=int, default=d.steer_max_new_tokens, help="steering: generation budget")
    p.add_argument("--n-per-level", type=int, default=d.n_per_level, help="arith: questions generated per level")
    p.add_argument("--random-seeds", type=int, default=d.random_seeds, help="steering: random-direction control seeds")
    p.add_argument("--seed", type=int, default=d.seed, help="sampling and perturbation seed")
    p.add_argument("--device", default=d.device, help="cpu | cuda | auto")
    p.add_argument("--quiet", action="store_true", help="no progress bars")
    return p


def config_from_argv(argv: list[str] | None) -> tuple[StudyConfig, bool]:
    """(config, resume) from the command line; on --resume, the stored settings with explicit options compared."""
    from loadbearing.cli import UsageError, explicit_options

    parser = build_parser()
    args = parser.parse_args(argv)
    if args.resume and args.output_dir and Path(args.output_dir) != Path(args.resume):
        raise UsageError("--resume and --output-dir name different directories; pass only --resume DIR")
    given = {k: v for k, v in vars(args).items() if k not in ("resume", "output_dir")}
    if not args.resume:
        out = args.output_dir or f"runs/study-{time.strftime('%Y%m%d-%H%M%S')}"
        return StudyConfig(output_dir=out, **given), False
    out = Path(args.resume)
    if not out.is_dir():
        raise StudyError(f"--resume {out}: no such study directory; check the path, or start a new study with "
                         f"--output-dir {out}")
    stored = read_stored(out)
    if stored is None:  # killed before the study stored its settings: the given options (the run's are compared)
        return StudyConfig(output_dir=str(out), **given), True
    fields = set(StudyConfig.__dataclass_fields__)
    base = StudyConfig(**{k: v for k, v in stored.items() if k in fields} | {"output_dir": str(out)})
    explicit = explicit_options(parser, argv) - {"resume", "output_dir"}
    diffs = [f"--{k.replace('_', '-')} {given[k]!r} differs from the study's {getattr(base, k)!r}"
             for k in sorted(explicit) if k not in StudyConfig.FREE and given[k] != getattr(base, k)]
    if diffs:
        raise StudyError(f"cannot resume {out}: {'; '.join(diffs)}; omit those options to continue with the study's "
                         "own settings, or start a new --output-dir")
    free = {k: given[k] for k in explicit if k in StudyConfig.FREE}
    return StudyConfig(**(base.to_dict() | free)), True


def describe(c: StudyConfig) -> str:
    return " ".join(f"{k}={v}" for k, v in c.to_dict().items() if k != "output_dir" and v is not None)


def run_study(config: StudyConfig, *, resume: bool = False, log=print) -> Path:
    """Run (or resume) every stage on ``config.output_dir``; returns the report's path.

    Resuming a study whose every stage is complete and whose report is written logs one line and writes
    nothing (no file's bytes or modification time change)."""
    from loadbearing.cli import check_device, check_model_file
    from loadbearing.files import RunDirError

    config.validate()
    check_device(config.device)
    check_model_file(config.model)
    out = Path(config.output_dir)
    if resume:
        if not out.is_dir():
            raise StudyError(f"--resume {out}: no such study directory; check the path, or start a new study with "
                             f"--output-dir {out}")
        if read_stored(out) is None:  # killed before it was stored: store it now (a refused resume writes nothing)
            write_stored(out, config)
        if is_complete(out):
            log(f"{out}: the study is complete (every stage finished, report written); nothing to do. "
                f"Report: {out / 'report.md'}")
            return out / "report.md"
        log(f"resuming {out} with: {describe(config)}")
        return _stages(out, config, log)
    if out.exists():
        raise RunDirError(f"study directory {str(out)!r} already exists; choose a new --output-dir or continue it "
                          f"with --resume {out}")
    from behavioural.run import check_writable
    from loadbearing.runs import is_fresh_dir

    check_writable(out)
    out.mkdir(parents=True)
    try:
        write_stored(out, config)
        return _stages(out, config, log)
    except BaseException:
        if is_fresh_dir(out):  # refused before any stage wrote anything: leave nothing behind
            shutil.rmtree(out, ignore_errors=True)
        raise


def _insufficient(out: Path) -> bool:
    """Whether the behavioural stage found no eligible baseline (nothing after it can run)."""
    from loadbearing.runs import Run

    return (Run(out).summary() or {}).get("status") == "insufficient_data"


def is_complete(out: str | Path) -> bool:
    """Whether every stage the study runs is complete (each asked by its own ``is_complete``) and the report
    is written: resuming such a study has nothing to do."""
    from study.report import is_written
    from study.stages import STAGES

    out = Path(out)
    for st in STAGES:
        if not st.is_complete(st.output(out)):
            return False
        if st.name == "behaviour" and _insufficient(out):
            break
    return is_written(out)


def _stages(out: Path, config: StudyConfig, log) -> Path:
    from study.report import write_report
    from study.stages import STAGES

    t0 = time.perf_counter()
    bar = "=" * 8
    for st in STAGES:
        target = st.output(out)
        if st.is_complete(target):
            log(f"\n{bar} {st.name}: already complete, skipped {bar}")
        else:
            log(f"\n{bar} {st.name} {bar}")
            t = time.perf_counter()
            st.run(out, config)
            if not st.is_complete(target):
                raise StudyError(f"stage {st.name!r} did not complete its output {target}; fix the error above and rerun "
                                 f"with python -m study --resume {out}")
            log(f"{bar} {st.name} done in {time.perf_counter() - t:.0f} s {bar}")
        if st.name == "behaviour" and _insufficient(out):
            path = write_report(out, seconds=time.perf_counter() - t0)
            log(f"\nno eligible baselines: nothing to label, probe or steer. Report: {path}")
            return path
    path = write_report(out, seconds=time.perf_counter() - t0)
    log(f"\nreport: {path}")
    return path


def main(argv: list[str] | None = None) -> int:
    from loadbearing.cli import run_cli

    argv = list(sys.argv[1:] if argv is None else argv)
    where: dict[str, str] = {}

    def body() -> int:
        config, resume = config_from_argv(argv)
        where["out"] = config.output_dir
        run_study(config, resume=resume, log=functools.partial(print, flush=True))
        return 0

    # every stage's error derives from LoadBearingError, which run_cli reports as one line
    return run_cli(body, interrupted_hint=lambda: f"continue with: python -m study --resume {where.get('out', 'DIR')}")


__all__ = ["STUDY_FILE", "build_parser", "config_from_argv", "is_complete", "main", "run_study"]
