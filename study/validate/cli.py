"""python -m study.validate --output-dir runs/validate   (make validate: the diagnosticity table on planted truth)

Runs the whole study (every stage: behaviour, labels, gradient, early answering, filler, paraphrase, resampling,
patching, activations, probes, steering with ablation, the browser) on each model organism
(:mod:`loadbearing.organisms`: load-bearing, decorative and graded by construction), then writes
``OUTPUT/diagnosticity.md`` and ``.json``: per test, the measure on each organism with its question-clustered
95% interval, whether the test orders them as planted (load-bearing > graded > decorative), the question-level
AUROC of load-bearing against decorative; the graded organism's difficulty gradient (slope, interval, p);
where patching finds the error; and what probes and steering find on the graded organism. A test that does not
separate the organisms is reported as such. ``--resume`` continues an interrupted validation.
"""
from __future__ import annotations

import argparse
import sys
from dataclasses import replace
from pathlib import Path

from loadbearing.cli import OneLineParser, UsageError, add_quiet, check_number, one_line, run_cli
from loadbearing.errors import LoadBearingError
from loadbearing.files import atomic_write_text, write_json
from loadbearing.organisms import default_spec, organism_dir

KINDS = ("load-bearing", "graded", "decorative")
STAGES = ("behaviour,labels,gradient,early_answer,filler,paraphrase,resample,patch,activations,probes,browser")
#: run last, on its own: on an organism with (almost) no C case it may refuse, which the table then reports
LAST = "steering"


def build_parser() -> argparse.ArgumentParser:
    p = OneLineParser(prog="python -m study.validate", description=__doc__.splitlines()[0])
    p.add_argument("--output-dir", required=True, help="new directory: one study per organism, then the table")
    p.add_argument("--resume", action="store_true", help="continue the studies already in --output-dir")
    p.add_argument("--n-per-level", type=int, default=24, help="held-out questions per level (at most 64)")
    p.add_argument("--strategy", default="arithmetic,arithmetic_change", help="edit strategies (comma list)")
    p.add_argument("--kinds", default=",".join(KINDS), help="organisms to validate (comma list)")
    add_quiet(p, "no progress bars")
    return p


def study_config(kind: str, model_dir: Path, out: Path, args: argparse.Namespace):
    from study.config import StudyConfig  # deferred: study.config loads numpy

    levels = default_spec(kind).data.levels
    return StudyConfig(output_dir=str(out / kind), model=str(model_dir), dataset="arith", task=",".join(levels),
                       n_per_level=args.n_per_level, max_examples=args.n_per_level * len(levels),
                       strategy=args.strategy, max_new_tokens=48, steer_max_new_tokens=32, batch_size=16,
                       k="1,4", alphas="0.25,0.5", max_cases=16, random_seeds=2, steer_operator="add,ablate",
                       patch_cases=8, stages=STAGES, device="cpu", seed=42, quiet=args.quiet)


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)

    def body() -> None:
        from study.driver import run_study  # deferred: study.driver loads numpy
        from study.validate.table import diagnosticity, render  # deferred: study.validate.table loads numpy

        check_number(args.n_per_level, "--n-per-level", minimum=2, maximum=64)
        kinds = [k.strip() for k in args.kinds.split(",") if k.strip()]
        bad = [k for k in kinds if k not in KINDS]
        if bad or not kinds:
            raise UsageError(f"--kinds {args.kinds!r}: choose from {', '.join(KINDS)}")
        out = Path(args.output_dir)
        if out.exists() and not args.resume:
            raise UsageError(f"--output-dir {out} already exists; choose a new one or pass --resume")
        dirs: dict[str, Path] = {}
        refused: dict[str, str] = {}
        for kind in kinds:
            model_dir = organism_dir(kind, check_levels=None, progress=not args.quiet)
            cfg = study_config(kind, model_dir, out, args)
            out.mkdir(parents=True, exist_ok=True)
            print(f"== {kind}: {model_dir} -> {cfg.output_dir}", flush=True)
            log = (lambda *a, **k: None) if args.quiet else print
            run_study(cfg, resume=Path(cfg.output_dir).exists(), log=log)
            try:
                run_study(replace(cfg, stages=LAST), resume=True, log=log)
            except LoadBearingError as e:  # the stage's own one-line refusal, kept for the table
                refused[kind] = one_line(e)
                print(f"   {kind}: {LAST} refused: {refused[kind]}", flush=True)
            dirs[kind] = Path(cfg.output_dir)
        table = diagnosticity(dirs)
        table["refused"] = refused
        write_json(out / "diagnosticity.json", table)
        md = render(table, command="python -m study.validate " + " ".join(argv if argv is not None else sys.argv[1:]))
        atomic_write_text(out / "diagnosticity.md", md)
        print(md)

    return run_cli(body)


if __name__ == "__main__":
    sys.exit(main())
