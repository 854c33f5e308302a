"""The whole study on one model, end to end: behaviour -> labels -> activations -> probes -> steering -> report.

    python study.py --output-dir runs/study          # the README's `make demo` (embedded SmolLM2, CPU)
    python study.py --resume runs/study              # continue after an interruption

Each stage is the same command a researcher would run by hand (``python -m behavioural.run``,
``python -m behavioural.label``, ``python -m activations.cache``, ``python -m probes.train``,
``python -m steering.sweep``), called in order on one run directory; a stage whose outputs are complete
is skipped on ``--resume``. ``report.md`` collects every stage's tables, figures and the steering verdict.

The CPU default is the ``arith`` ladder at the two levels where SmolLM2-135M-Instruct answers a useful
fraction correctly (s2_o3, s2_o5), with three edits that together give both outcomes: ``arithmetic`` (the
original evaluator's edit of the first number, often an operand the model then ignores),
``arithmetic_change`` (the line's result, which the model copies forward) and ``contradiction``.
"""
from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path


def build_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="python study.py", description=__doc__.split("\n\n")[0],
                                formatter_class=argparse.ArgumentDefaultsHelpFormatter)
    p.add_argument("--output-dir", default=None, help="new study directory (the run directory of every stage)")
    p.add_argument("--resume", default=None, metavar="DIR", help="continue a study directory")
    p.add_argument("--model", default="smollm2-135m-instruct", help="model for every stage")
    p.add_argument("--dataset", default="arith", help="question set (see python -m behavioural.run --help)")
    p.add_argument("--task", default="s2_o3,s2_o5", help="task / arith levels")
    p.add_argument("--data-dir", default=None, help="benchmark data directory (gsm8k/mmlu/bbh)")
    p.add_argument("--max-examples", type=int, default=64, help="questions")
    p.add_argument("--strategy", default="arithmetic,arithmetic_change,contradiction", help="perturbation strategies (mixed, so both outcomes occur)")
    p.add_argument("--max-new-tokens", type=int, default=96, help="generation budget (behaviour and steering)")
    p.add_argument("--batch-size", type=int, default=16, help="generation batch size")
    p.add_argument("--folds", type=int, default=5, help="probes: outer cross-validation folds (grouped by question)")
    p.add_argument("--k", default="1,2,4", help="steering: numbers of directions")
    p.add_argument("--alphas", default="0.1,0.25,0.5", help="steering: strengths relative to the mean residual norm (>= 1 turns SmolLM2 into noise)")
    p.add_argument("--steer-layers", default=None, help="steering layers (default: the probes' nested-CV selection)")
    p.add_argument("--max-cases", type=int, default=12, help="steering: C cases to steer")
    p.add_argument("--random-seeds", type=int, default=2, help="steering: random-direction control seeds")
    p.add_argument("--seed", type=int, default=42, help="sampling and perturbation seed")
    p.add_argument("--device", default=None, help="cpu | cuda | auto")
    p.add_argument("--quiet", action="store_true", help="no progress bars")
    return p


def _stage(name: str, fn, argv: list[str], done: bool) -> None:
    bar = "=" * 8
    if done:
        print(f"\n{bar} {name}: already complete, skipped {bar}", flush=True)
        return
    print(f"\n{bar} {name}: {' '.join(argv)} {bar}", flush=True)
    t = time.perf_counter()
    rc = fn(argv)
    if rc not in (0, None):
        raise SystemExit(f"study stopped: stage {name!r} exited with status {rc}; fix the error above and rerun with --resume")
    print(f"{bar} {name} done in {time.perf_counter() - t:.0f} s {bar}", flush=True)


def main(argv=None) -> int:
    args = build_parser().parse_args(argv)
    from activations.cache import main as cache_main
    from behavioural.label import main as label_main
    from behavioural.run import main as run_main
    from probes.train import main as probes_main
    from report import read_json_if_exists as _json
    from steering.sweep import main as sweep_main

    if not args.output_dir and not args.resume:
        args.output_dir = f"runs/study-{time.strftime('%Y%m%d-%H%M%S')}"
    out = Path(args.resume or args.output_dir)
    if not args.resume and out.exists():
        print(f"error: study directory {str(out)!r} already exists; choose a new --output-dir or continue it with --resume {out}",
              file=sys.stderr)
        return 2
    quiet = ["--quiet"] if args.quiet else []
    t0 = time.perf_counter()

    run_args = ["--model", args.model, "--dataset", args.dataset, "--task", args.task, "--max-examples", str(args.max_examples),
                "--strategy", args.strategy, "--max-new-tokens", str(args.max_new_tokens), "--batch-size", str(args.batch_size),
                "--seed", str(args.seed)]
    if args.data_dir:
        run_args += ["--data-dir", args.data_dir]
    if args.device:
        run_args += ["--device", args.device]
    run_done = (_json(out / "manifest.json") or {}).get("status") in ("ok", "insufficient_data")
    run_args += ["--resume", str(out)] if args.resume and (out / "manifest.json").exists() else ["--output-dir", str(out)]
    _stage("behaviour", run_main, run_args + quiet, run_done)
    summary = _json(out / "summary.json")
    if summary["status"] == "insufficient_data":
        _write_report(out, time.perf_counter() - t0)
        print(f"\nno eligible baselines: nothing to label, probe or steer. Report: {out / 'report.md'}")
        return 0

    _stage("labels", label_main, [str(out), "--labeller", "rule", "--name", "rule"] + (["--no-progress"] if args.quiet else []),
           (out / "labels" / "rule" / "summary.json").is_file())
    store = out / "activations.h5"
    store_done = False
    if store.is_file():
        from activations.store import StoreError, open_store

        try:
            with open_store(store):
                store_done = True
        except StoreError:
            pass
    cache_args = [str(out), "--layers", "all", "--labels", "rule", "--conditions", "perturbed"] + quiet
    if store.is_file() and not store_done:
        cache_args.append("--resume")
    _stage("activations", cache_main, cache_args, store_done)
    probes_dir = out / "probes"
    _stage("probes", probes_main, [str(store), "--output", str(probes_dir), "--folds", str(args.folds)] + quiet, (probes_dir / "results.json").is_file())
    steer_dir = out / "steering"
    sweep_args = [str(out), "--directions", str(probes_dir), "--k", args.k, "--alphas", args.alphas,
                  "--max-cases", str(args.max_cases), "--random-seeds", str(args.random_seeds),
                  "--max-new-tokens", str(args.max_new_tokens), "--batch-size", str(args.batch_size), "--output", str(steer_dir)]
    if args.steer_layers:
        sweep_args += ["--layers", args.steer_layers]
    if steer_dir.exists():
        sweep_args.append("--resume")
    if args.quiet:
        sweep_args.append("--no-progress")
    _stage("steering", sweep_main, sweep_args, (steer_dir / "summary.json").is_file())
    path = _write_report(out, time.perf_counter() - t0)
    print(f"\nreport: {path}")
    return 0


def _write_report(out: Path, seconds: float) -> Path:
    from report import write_report

    return write_report(out, seconds=seconds)


if __name__ == "__main__":
    sys.exit(main())
