"""python -m steering.sweep RUN_DIR --directions RUN_DIR/probes [--layers 6] [--k 1,4] [--alphas 0.25,0.5]
python -m steering.sweep RUN_DIR --directions RUN_DIR/probes --operator add,ablate --output-dir RUN_DIR/steering-ablate
python -m steering.sweep RUN_DIR --directions RUN_DIR/probes --design paper [--max-cases 8] [--random-seeds 1]
python -m steering.sweep --plan [--sesoi 0.10] [--pilot RUN_DIR/steering | --base-rate R --effect E]
.venv-vllm/bin/python -m steering.sweep RUN_DIR --directions RUN_DIR/probes --backend vllm [--tensor-parallel-size 2]

Steering sweep: re-generate a seeded, question-stratified sample of the run's type-C perturbed continuations
(and, with ``--cases all``, of non-C ones, for side effects) from their exact ``input_text`` while adding the
probe directions to the residual stream, for each (layer, k, alpha), next to norm-matched random-direction
controls (several per case: random orthonormal bases of the same k, combined with the same dose; every random
generation of a case draws its own direction, isotropic and, for k > 1, also matched to the activations'
covariance: :mod:`steering.sweep.controls`) and an unsteered alpha-0 rerun (which checks that the C cases
reproduce). Steered cases come from questions the directions were not fitted on (the split the probes record
in ``directions.h5``, or ``--exclude-questions FILE``). Generation runs on the shared-prefix fast path with
one vector and alpha per row (:mod:`steering.generate`); every generation is scored with the foundation's
strict parser and appended (flushed) to ``OUTPUT/generations.jsonl``; ``--resume`` skips the (setting, case)
pairs already there.

``--operator ablate`` (:mod:`steering.ablation`) adds directional ablation: per (layer, k) one setting with no
alpha (``L5|k4|ablate|probe``) that projects the span of the first k basis rows out of the residual stream at
the steered positions, ``h <- h - B^T (B h)``, next to random k-dimensional bases projected out the same way
(``L5|k4|ablate|random0``..., a fresh basis per case, isotropic and for k > 1 covariance-matched, as many per
case as the additive controls). It asks whether the directions are *necessary* for the error to propagate, where
adding them asks whether they are sufficient to stop it; each operator is tested, Holm-adjusted and given a
verdict on its own (``summary.json``'s ``verdicts``; the table's ``operator`` column).

Alphas are relative to the layer's mean residual-stream norm (the ``resid_norm`` the probes wrote, else
measured on the cases' inputs): ``--alphas 1`` adds a vector as long as the average residual. The k-direction
vector is dose-matched (rescaled to the norm of one direction; see :mod:`steering.hooks`).

Outputs (``OUTPUT`` defaults to ``RUN_DIR/steering``): ``config.json`` (settings, the case sample, the
question split, provenance), ``generations.jsonl``, ``summary.json`` (see :mod:`steering.sweep.analysis`: per
setting moved-of-all with coverage, the question-level difference from the matched control with its
interval, the exact randomisation test (:mod:`steering.sweep.exact`), Holm/BH across the grid, the strongest
setting, a verdict that is one of effect / harm / null / inconclusive (:mod:`steering.sweep.verdict`), and the
minimum detectable effect and the cases a null would need, simulated (:mod:`steering.planning.power`)),
``sweep.png`` and a printed table. No C case to steer: ``status = "insufficient_data"`` (exit 0). Bad input
exits 2 with a one-line error, before any model is loaded where it can be, and writes nothing.

``--backend vllm`` runs the same grid, cases and records with the vectors added (or bases projected out) by hooks
inside vLLM's workers, per request (:mod:`steering.vllm.engine`, docs/vllm-interventions.md); ``config.json``
then records the engine under ``backend``.

``--plan`` (:mod:`steering.planning.planner`) sizes a sweep before it runs: the held-out C cases a null at ``--sesoi``
or an effect of ``--effect`` needs, from ``--pilot`` (a finished sweep) or ``--base-rate``; it prints one
block, writes nothing and loads no model.

Modules: :mod:`steering.sweep.config` (settings), :mod:`steering.sweep.cases` (the sample), :mod:`steering.sweep.grid`
(settings grid, vectors and the directions' checks), :mod:`steering.sweep.plan` (what a sweep steers),
:mod:`steering.sweep.runner` (:func:`run_sweep`), :mod:`steering.generate` (steered fast path),
:mod:`steering.sweep.summary` and :mod:`steering.sweep.analysis` (statistics and text), :mod:`steering.sweep.plot` (figure);
this module is the command line, and keeps every name callers import from ``steering.sweep``.
"""
from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import TYPE_CHECKING, Any

from loadbearing.cli import (
    OneLineParser,
    add_option,
    add_output,
    add_quiet,
    check_device,
    check_fraction,
    explicit_options,
    run_cli,
)
from loadbearing.commands import prog
from loadbearing.engine.vllm_engine import add_backend_arguments, backend_options, check_ready
from loadbearing.files import check_jsonl_tail
from loadbearing.options import parse_layers, parse_list
from loadbearing.runs import CONTINUATIONS
from steering.paper.design import check_fixed, run_paper_design
from steering.planning.planner import format_plan, pilot_design, plan, stated_design
from steering.sweep.analysis import format_summary, format_table
from steering.sweep.config import (
    CASE_KINDS,
    DEFAULT_ALPHAS,
    DEFAULT_KS,
    DEFAULT_PER_QUESTION,
    DEFAULT_RANDOM_SEEDS,
    DEFAULT_SESOI,
    DOSES,
    POSITIONS,
    SweepConfig,
    SweepError,
)
from steering.sweep.runner import run_sweep, score
from steering.sweep.summary import is_complete, summarize

if TYPE_CHECKING:
    from steering.vllm.engine import VLLMSteering


def build_parser() -> argparse.ArgumentParser:
    p = OneLineParser(prog=prog("steering.sweep"), description=__doc__.split("\n\n")[1],
                      formatter_class=argparse.RawDescriptionHelpFormatter)
    inp = p.add_argument_group("inputs")
    inp.add_argument("run_dir", nargs="?", default=None, help="run directory written by python -m behavioural.run")
    inp.add_argument("--directions", default=None,
                     help="probes output directory holding directions.h5 (or the .h5 file itself; required unless "
                          "--plan)")
    pl = p.add_argument_group("planning (--plan: print the sample a definitive verdict needs; nothing is run)")
    pl.add_argument("--plan", action="store_true", help="size a sweep before generating (no model, nothing written)")
    pl.add_argument("--pilot", default=None, metavar="SWEEP_DIR",
                    help="a finished sweep (RUN_DIR/steering): its settings, random-move rate and strongest difference")
    pl.add_argument("--base-rate", type=float, default=None,
                    help="fraction of C cases a random direction moves (without --pilot)")
    pl.add_argument("--base-range", default=None, metavar="LO,HI",
                    help="the base rate's uncertainty, two fractions (without --pilot; default: half to 1.5 times "
                         "--base-rate); a null is sized to hold over it")
    pl.add_argument("--parse-rate", type=float, default=None,
                    help="fraction of steered answers that parse (without --pilot; default 1)")
    pl.add_argument("--effect", type=float, default=None, help="effect to detect, a fraction (0.20 = 20 points)")
    pl.add_argument("--plan-sims", type=int, default=None, metavar="N",
                    help="simulated sweeps per point of the plan (default 500; fewer: a quicker, noisier plan)")
    g = p.add_argument_group("grid")
    g.add_argument("--layers", default=None,
                   help="comma-separated hidden_states layers to steer (default: the file's selected_layer, else the "
                        "middle of its layers)")
    g.add_argument("--k", default=None, help="comma-separated numbers of directions (default "
                   f"{','.join(str(k) for k in DEFAULT_KS)}, those within the basis)")
    g.add_argument("--alphas", default=",".join(str(a) for a in DEFAULT_ALPHAS),
                   help="comma-separated steering strengths, relative to the layer's mean residual norm (default %(default)s)")
    g.add_argument("--controls", default="random,random_cov,none",
                   help="comma-separated controls: random (norm-matched isotropic random bases), random_cov (k > 1: "
                        "bases matched to the activations' covariance), none (alpha-0 rerun) (default %(default)s)")
    g.add_argument("--random-seeds", type=int, default=DEFAULT_RANDOM_SEEDS,
                   help="random generations per case and setting, each with its own direction (default %(default)s)")
    g.add_argument("--random-scope", choices=("case", "sweep"), default="case",
                   help="case: every random generation draws its own direction; sweep: random setting j is one "
                        "direction for every case, so the probe's moved rate is ranked among the R = --random-seeds "
                        "directions' (use >= 19; default %(default)s)")
    add_option(g, "--steer-positions", dest="positions", choices=POSITIONS, default="continuation",
               deprecated=("--positions",), help="which token positions are steered (see steering.positions; "
                                                 "think / answer: a thinking model's think block / its answer "
                                                 "only; default %(default)s)")
    g.add_argument("--operator", default="add",
                   help="comma-separated operators: add (add the directions at each alpha), ablate (project their span "
                        "out of the residual stream, no alpha: is the direction necessary? steering.ablation); each "
                        "gets its own controls, tests and verdict (default %(default)s)")
    g.add_argument("--design", choices=("paper",), default=None,
                   help="paper: the paper's steering design (steering/presets/paper.toml: its M2 and probe bases, k "
                        "2,4,8, summed dose, 11 raw alphas -10..10, its relative depth, random controls; "
                        "steering.paper.design), with table7.csv beside the summary")
    g.add_argument("--dose", choices=DOSES, default="matched",
                   help="matched: k-direction vector rescaled to one direction's norm; sum: the paper's plain sum")
    c = p.add_argument_group("cases")
    c.add_argument("--cases", choices=CASE_KINDS, default="C",
                   help="C: type-C perturbed continuations only; all: also a sample of non-C ones (side effects)")
    c.add_argument("--max-cases", type=int, default=None,
                   help="steer at most N C cases (a seeded sample, round-robin over questions; default: all)")
    c.add_argument("--per-question", type=int, default=DEFAULT_PER_QUESTION,
                   help="at most N C cases per question (default %(default)s)")
    c.add_argument("--n-non-c", type=int, default=None,
                   help="with --cases all: number of non-C cases to sample (default: as many as C cases)")
    c.add_argument("--seed", type=int, default=0, help="case-sampling seed (default %(default)s)")
    c.add_argument("--exclude-questions", default=None, metavar="FILE",
                   help="question keys or ids (one per line, or a JSON list) the directions were fitted on: never "
                        "steered (directions.h5's own recorded split is always applied)")
    c.add_argument("--allow-overlap", action="store_true",
                   help="also steer questions the directions were fitted on (recorded; not a held-out test)")
    c.add_argument("--sesoi", type=float, default=DEFAULT_SESOI,
                   help="smallest effect of interest, a fraction (0.10 = 10 points): a null verdict's interval must lie "
                        "within +/- it (default %(default)g)")
    m = p.add_argument_group("model and generation")
    m.add_argument("--max-new-tokens", type=int, default=128, help="generation budget per continuation (default %(default)s)")
    m.add_argument("--batch-size", type=int, default=32, help="rows per steered batch (default %(default)s)")
    m.add_argument("--model", default=None,
                   help="model overriding the run manifest's (refused when it names another model, unless --allow-other-model)")
    m.add_argument("--device", default=None, help="device for the run's model (default: loadbearing.engine.models' choice)")
    m.add_argument("--allow-other-model", action="store_true", help="steer with a model other than the run's")
    m.add_argument("--allow-incomplete", action="store_true", help="steer a run whose manifest is not complete")

    add_backend_arguments(p, "hooks in vLLM's workers add the vectors / project out the bases per request "
                             "(steering.vllm.engine)")
    o = p.add_argument_group("output")
    add_output(o, "dir", "output directory (default RUN_DIR/steering); must not exist unless --resume", dest="output")
    o.add_argument("--resume", action="store_true", help="continue an existing output directory, skipping finished generations")
    add_quiet(o, deprecated=("--no-progress",))
    return p


def config_from_args(args: argparse.Namespace) -> SweepConfig:
    check_fraction(args.sesoi, "--sesoi", error=SweepError)
    if args.run_dir is None or args.directions is None:
        raise SweepError("give RUN_DIR and --directions PROBES_DIR to run a sweep (or --plan to size one)")
    return SweepConfig(
        run_dir=args.run_dir, directions=args.directions, output=args.output, model=args.model,
        layers=parse_layers(args.layers, allow_all=False, error=SweepError),
        ks=parse_list(args.k, "--k", kind=int, error=SweepError),
        alphas=parse_list(args.alphas, "--alphas", kind=float, error=SweepError) or [],
        controls=parse_list(args.controls, "--controls", error=SweepError) or [],
        operators=parse_list(args.operator, "--operator", error=SweepError) or [],
        random_seeds=args.random_seeds, random_scope=args.random_scope, cases=args.cases, max_cases=args.max_cases,
        per_question=args.per_question,
        n_non_c=args.n_non_c, seed=args.seed, exclude_questions=args.exclude_questions,
        allow_overlap=args.allow_overlap, sesoi=args.sesoi,
        max_new_tokens=args.max_new_tokens, batch_size=args.batch_size, positions=args.positions, dose=args.dose,
        device=args.device, resume=args.resume, allow_incomplete=args.allow_incomplete, allow_other_model=args.allow_other_model,
        progress=not args.quiet,
    ).validate()


def run_plan(args: argparse.Namespace, echo=print) -> int:
    """``--plan``: print the planner's block (:mod:`steering.planning.planner`); writes nothing, loads no model."""
    check_fraction(args.sesoi, "--sesoi", error=SweepError)
    check_fraction(args.effect, "--effect", error=SweepError)
    check_fraction(args.base_rate, "--base-rate", allow_zero=True, error=SweepError)
    if args.pilot is not None:
        design = pilot_design(args.pilot, args.effect)
    elif args.base_rate is not None:
        n_settings = (len(parse_list(args.k, "--k", kind=int, error=SweepError) or DEFAULT_KS)
                      * len(parse_list(args.alphas, "--alphas", kind=float, error=SweepError) or [])
                      * len(parse_layers(args.layers, allow_all=False, error=SweepError) or [0]))
        if args.random_seeds < 1:
            raise SweepError(f"--random-seeds must be >= 1, got {args.random_seeds}")
        rng = None
        if args.base_range is not None:
            vals = parse_list(args.base_range, "--base-range", kind=float, error=SweepError) or []
            if len(vals) != 2 or not 0 <= vals[0] <= args.base_rate <= vals[1] <= 1:
                raise SweepError(f"--base-range {args.base_range!r} must be two fractions LO,HI with LO <= --base-rate "
                                 f"({args.base_rate:g}) <= HI, e.g. --base-range 0.01,0.05")
            rng = (vals[0], vals[1])
        check_fraction(args.parse_rate, "--parse-rate", error=SweepError)
        design = stated_design(args.base_rate, args.effect, n_settings, args.random_seeds,
                               parse_rate=1.0 if args.parse_rate is None else args.parse_rate, base_range=rng)
    else:
        raise SweepError("--plan needs --pilot SWEEP_DIR or --base-rate R (the fraction of C cases a random "
                         "direction moves)")
    if args.plan_sims is not None and args.plan_sims < 50:
        raise SweepError(f"--plan-sims must be >= 50, got {args.plan_sims}")
    echo(format_plan(design, plan(design, sesoi=args.sesoi, seed=args.seed, n_sims=args.plan_sims)))
    return 0


def _backend(args: argparse.Namespace) -> tuple[dict[str, Any], VLLMSteering | None]:
    """``--backend vllm``: the generate functions of one :class:`steering.vllm.engine.VLLMSteering` (checked
    before any model is loaded: vLLM importable, a supported version, no layer 0)."""
    if args.backend != "vllm":
        return {}, None

    opts = backend_options(args)
    if 0 in (parse_layers(args.layers, allow_all=False, error=SweepError) or []):
        raise SweepError("--backend vllm does not steer layer 0 (the embedding output; vLLM's decoder blocks are "
                         "hooked): choose --layers >= 1, or --backend hf for layer 0")
    check_ready(hooks=True)
    from steering.vllm.engine import VLLMSteering  # deferred: tests monkeypatch steering.vllm.engine.VLLMSteering

    vs = VLLMSteering(**opts)
    return {"generate_fn": vs.add, "ablate_fn": vs.ablate}, vs


def _main(args: argparse.Namespace) -> int:
    if args.plan:
        return run_plan(args)
    try:
        check_device(args.device)  # before any model is loaded (H-REL battery)
        fns, engine = _backend(args)  # --backend vllm: checked here, the engine started at the first generation
        check_jsonl_tail(Path(args.run_dir) / CONTINUATIONS, args.run_dir)
        try:
            if args.design:  # the paper's design (steering.paper.design): it fixes the grid, writes table7.csv

                check_fixed(getattr(args, "given", set()))
                summary = run_paper_design(config_from_args(args), generate_fn=fns.get("generate_fn"))
            else:
                summary = run_sweep(config_from_args(args), **fns)
        finally:
            if engine is not None:
                engine.shutdown()
    except OSError as e:  # an unwritable or full output location
        raise SweepError(f"{e.strerror or e} ({e.filename or ''}); choose another --output-dir") from None
    return 0 if summary.get("status") in ("ok", "insufficient_data") else 1


def main(argv: list[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    if args.design:
        args.given = explicit_options(parser, sys.argv[1:] if argv is None else argv)
    return run_cli(lambda: _main(args))


__all__ = ["SweepConfig", "SweepError", "build_parser", "config_from_args", "format_summary", "format_table",
           "is_complete", "main", "run_plan", "run_sweep", "score", "summarize"]


if __name__ == "__main__":
    sys.exit(main())
