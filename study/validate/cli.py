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
from loadbearing.organisms.build import read_record

KINDS = ("load-bearing", "graded", "decorative")
STAGES = ("behaviour", "labels", "gradient", "early_answer", "filler", "paraphrase", "resample", "patch", "activations",
          "probes", "browser", "steering")


def build_parser() -> argparse.ArgumentParser:
    p = OneLineParser(prog="python -m study.validate", description=__doc__.splitlines()[0])
    p.add_argument("--output-dir", required=True, help="new directory: one study per organism, then the table")
    p.add_argument("--resume", action="store_true", help="continue the studies already in --output-dir")
    p.add_argument("--n-per-level", type=int, default=24, help="held-out questions per level (at most 64)")
    p.add_argument("--strategy", default="arithmetic,arithmetic_change", help="edit strategies (comma list)")
    p.add_argument("--kinds", default=",".join(KINDS), help="organisms to validate (comma list)")
    p.add_argument("--publish", action="store_true",
                   help="also write the table to the toolkit's shipped copy (study/validate/diagnosticity.json), "
                        "which every study report shows under 'Planted truth'")
    add_quiet(p, "no progress bars")
    return p


def study_config(kind: str, model_dir: Path, out: Path, args: argparse.Namespace):
    from study.config import StudyConfig  # deferred: study.config loads numpy

    levels = default_spec(kind).data.levels
    return StudyConfig(output_dir=str(out / kind), model=str(model_dir), dataset="arith", task=",".join(levels),
                       n_per_level=args.n_per_level, max_examples=args.n_per_level * len(levels),
                       strategy=args.strategy, max_new_tokens=48, steer_max_new_tokens=32, batch_size=16,
                       k="1,4", alphas="0.25,0.5", max_cases=16, random_seeds=2, steer_operator="add,ablate",
                       patch_cases=8, stages=",".join(STAGES), device="cpu", seed=42, quiet=args.quiet)


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
        weights: dict[str, str] = {}
        refused: dict[str, dict[str, str]] = {}
        for kind in kinds:
            model_dir = organism_dir(kind, check_levels=None, progress=not args.quiet)
            weights[kind] = str(read_record(model_dir).get("weights_sha256"))
            cfg = study_config(kind, model_dir, out, args)
            out.mkdir(parents=True, exist_ok=True)
            print(f"== {kind}: {model_dir} -> {cfg.output_dir}", flush=True)
            log = (lambda *a, **k: None) if args.quiet else print
            # one stage at a time: a stage that refuses on an organism (the probes with too few C questions for
            # their folds, steering without directions) is reported in the table, and the others still run
            for i, stage in enumerate(STAGES):
                try:
                    run_study(replace(cfg, stages=stage), resume=i > 0 or Path(cfg.output_dir).exists(), log=log)
                except LoadBearingError as e:
                    if stage == STAGES[0]:
                        raise
                    refused.setdefault(kind, {})[stage] = one_line(e)
                    print(f"   {kind}: {stage} refused: {refused[kind][stage]}", flush=True)
            dirs[kind] = Path(cfg.output_dir)
        table = diagnosticity(dirs, refused)
        write_json(out / "diagnosticity.json", table)
        command = "python -m study.validate " + " ".join(argv if argv is not None else sys.argv[1:])
        md = render(table, command=command)
        atomic_write_text(out / "diagnosticity.md", md)
        print(md)
        if args.publish:
            from study.validate.shipped import SHIPPED, publish  # deferred: study.validate.shipped runs git

            publish(table, command=command, weights=weights)
            print(f"published to {SHIPPED}")

    return run_cli(body)


if __name__ == "__main__":
    sys.exit(main())
