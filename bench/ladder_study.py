"""The arith-ladder gradient study on the embedded model (SmolLM2-135M-Instruct): one protocol run per level,
then ``behavioural.gradient`` over them. Does the tiny model's chain become more load-bearing as its accuracy falls?

    flock /tmp/cpu.lock .venv/bin/python bench/ladder_study.py --output-dir runs/ladder

(about 20-25 minutes on a free 2-core machine with the defaults; ``--smoke`` runs 2 levels x 8 questions in
about a minute). Writes ``OUTPUT/runs/<level>/`` (ordinary run directories, resumable: rerunning the same
command continues unfinished levels and skips finished ones), ``OUTPUT/gradient/`` (gradient.json, .md, .png)
and ``OUTPUT/ladder_study.json`` (settings, per-level timings, total elapsed), and prints the gradient table
and the elapsed time.

Sizing: the harder a level, the fewer of its baselines are eligible (correct with >= 3 lines), so harder
levels get more questions. Measured eligibility of the embedded model (DESIGN.md): ~45% at s2_o3 and s2_o5,
~10-25% at s3_o5, ~10% at s2_o9, ~5% at s3_o9. The default counts aim at ~50+ eligible questions on the easy
levels (the tiny model copies its chain, p ~ 0.85, so a question-clustered interval of about +/-10 points)
and as many as the time budget allows on the hard ones; a level with few eligible baselines reports its
(wide) interval and its n, and never a rate without a denominator.
"""
from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

DEFAULT_COUNTS = "s2_o3=100,s2_o5=100,s3_o5=160,s2_o9=160,s3_o9=160"
SMOKE_COUNTS = "s2_o3=8,s3_o5=8"


def parse_counts(spec: str) -> list[tuple[str, int]]:
    out = []
    for part in spec.split(","):
        if not part.strip():
            continue
        level, _, n = part.partition("=")
        try:
            out.append((level.strip(), int(n)))
        except ValueError:
            raise SystemExit(f"error: --levels {part!r} is not LEVEL=N (e.g. s2_o3=120)") from None
    if len(out) < 1:
        raise SystemExit("error: --levels names no level")
    return out


def build_parser() -> argparse.ArgumentParser:
    from loadbearing.cli import HelpFormatter, add_line_positions, add_output, add_quiet

    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0], formatter_class=HelpFormatter)
    add_output(p, "dir", "study directory (runs/, gradient/, ladder_study.json)", dest="output", required=True)
    p.add_argument("--levels", default=DEFAULT_COUNTS, help="LEVEL=N questions per arith level, easiest first")
    p.add_argument("--smoke", action="store_true", help=f"tiny check: --levels {SMOKE_COUNTS}")
    p.add_argument("--strategies", default="arithmetic,contradiction",
                   help="perturbation strategies (a numerical and a text family, so the type effect is estimable)")
    add_line_positions(p, "early,middle,late")
    p.add_argument("--model", default="smollm2-135m-instruct", help="the model every level runs")
    p.add_argument("--seed", type=int, default=42, help="sampling and perturbation seed")
    p.add_argument("--max-new-tokens", type=int, default=96, help="per baseline / continuation (arith answers are short)")
    p.add_argument("--batch-size", type=int, default=32, help="generation batch size")
    add_quiet(p)
    return p


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    t0 = time.perf_counter()
    counts = parse_counts(SMOKE_COUNTS if args.smoke else args.levels)
    out = Path(args.output)
    grad_dir = out / "gradient"
    if grad_dir.exists():
        print(f"error: {grad_dir} already exists: this study finished; choose a new --output-dir", file=sys.stderr)
        return 2
    from behavioural.gradient import GradientConfig, format_summary, run_gradient
    from behavioural.protocol import Settings, run_protocol
    from behavioural.run import is_complete as run_is_complete
    from behavioural.strategies import parse_strategies
    from loadbearing.engine.models import load_model
    from loadbearing.questions.data import load_questions, sample

    strategies = tuple(parse_strategies(args.strategies, "arith"))
    positions = tuple(s.strip() for s in args.positions.split(",") if s.strip())
    plan = []
    for level, n in counts:  # validate every level before loading the model
        qs = sample(load_questions("arith", task=level, n_per_level=n, seed=args.seed), None, args.seed)
        plan.append((level, n, qs))
    lm = load_model(args.model)
    out.mkdir(parents=True, exist_ok=True)
    timings = {}
    run_dirs = []
    for level, n, qs in plan:
        rd = out / "runs" / level
        run_dirs.append(str(rd))
        if run_is_complete(rd):  # behavioural.run's own test of a finished run
            print(f"{level}: finished earlier, kept", flush=True)
            continue
        settings = Settings(model=args.model, dataset="arith", strategies=strategies, positions=positions, task=level,
                            seed=args.seed, max_examples=None, max_new_tokens=args.max_new_tokens, n_per_level=n,
                            batch_size=args.batch_size)
        t = time.perf_counter()
        summary = run_protocol(lm, qs, settings, rd, resume=rd.exists(), progress=not args.quiet, echo=None)
        timings[level] = round(time.perf_counter() - t, 1)
        print(f"{level}: {len(qs)} questions, {summary.get('eligible')} eligible, "
              f"{summary.get('continuations')} continuations in {timings[level]:.0f} s", flush=True)
    gsum = run_gradient(GradientConfig(runs=tuple(run_dirs), output=str(grad_dir)))
    print()
    print(format_summary(gsum))
    elapsed = time.perf_counter() - t0
    meta = {"command": sys.argv, "levels": dict(counts), "strategies": list(strategies), "positions": list(positions),
            "model": args.model, "seed": args.seed, "max_new_tokens": args.max_new_tokens,
            "batch_size": args.batch_size, "level_seconds": timings, "elapsed_seconds": round(elapsed, 1),
            "gradient": str(grad_dir)}
    (out / "ladder_study.json").write_text(json.dumps(meta, indent=2) + "\n")
    print(f"\nladder study: {len(counts)} levels in {elapsed / 60:.1f} min; wrote {grad_dir}/ and {out}/ladder_study.json")
    return 0


if __name__ == "__main__":
    sys.exit(main())
