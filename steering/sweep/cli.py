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

from loadbearing.cli import check_device, check_fraction, explicit_options, run_cli
from loadbearing.commands import prog
from loadbearing.engine.vllm_engine import BACKEND_GROUP, backend_extras, backend_options, check_ready
from loadbearing.files import check_jsonl_tail
from loadbearing.options import parse_layers, parse_list
from loadbearing.runs import CONTINUATIONS
from loadbearing.stage.parser import cli_fields, config_from_parsed, extra, flag_of, parser_from_config
from steering.paper.design import check_fixed, run_paper_design
from steering.planning.planner import format_plan, pilot_design, plan, stated_design
from steering.sweep.analysis import format_summary, format_table
from steering.sweep.config import (
    DEFAULT_KS,
    SweepConfig,
    SweepError,
)
from steering.sweep.runner import run_sweep, score
from steering.sweep.summary import is_complete, summarize

if TYPE_CHECKING:
    from steering.vllm.engine import VLLMSteering


_PLANNING = "planning (--plan: print the sample a definitive verdict needs; nothing is run)"
#: the options that are not :class:`SweepConfig` fields: the planner's (``--plan`` sizes a sweep and runs none),
#: the paper's design (it fixes the grid) and the generation backend's
EXTRAS = (
    extra("--plan", action="store_true", group=_PLANNING,
          help="size a sweep before generating (no model, nothing written)"),
    extra("--pilot", default=None, metavar="SWEEP_DIR", group=_PLANNING,
          help="a finished sweep (RUN_DIR/steering): its settings, random-move rate and strongest difference"),
    extra("--base-rate", type=float, default=None, group=_PLANNING,
          help="fraction of C cases a random direction moves (without --pilot)"),
    extra("--base-range", default=None, metavar="LO,HI", group=_PLANNING,
          help="the base rate's uncertainty, two fractions (without --pilot; default: half to 1.5 times --base-rate); "
               "a null is sized to hold over it"),
    extra("--parse-rate", type=float, default=None, group=_PLANNING,
          help="fraction of steered answers that parse (without --pilot; default 1)"),
    extra("--effect", type=float, default=None, group=_PLANNING,
          help="effect to detect, a fraction (0.20 = 20 points)"),
    extra("--plan-sims", type=int, default=None, metavar="N", group=_PLANNING,
          help="simulated sweeps per point of the plan (default 500; fewer: a quicker, noisier plan)"),
    extra("--design", choices=("paper",), default=None, group="grid",
          help="paper: the paper's steering design (steering/presets/paper.toml: its M2 and probe bases, k 2,4,8, "
               "summed dose, 11 raw alphas -10..10, its relative depth, random controls; steering.paper.design), with "
               "table7.csv beside the summary"),
    *backend_extras("hooks in vLLM's workers add the vectors / project out the bases per request "
                    "(steering.vllm.engine)"),
)


def build_parser() -> argparse.ArgumentParser:
    """The command's parser: :class:`SweepConfig`'s fields and :data:`EXTRAS`."""
    return parser_from_config(SweepConfig, prog=prog("steering.sweep"), description=__doc__.split("\n\n")[1],
                              raw_description=True, extras=EXTRAS,
                              groups=("inputs", _PLANNING, "grid", "cases", "model and generation", BACKEND_GROUP,
                                      "output"),
                              help_order=("layers", "ks", "alphas", "controls", "random_seeds", "random_scope", "positions",
                                          "operators", "design", "max_new_tokens", "batch_size", "model", "device",
                                          "allow_other_model"))


def config_from_args(args: argparse.Namespace) -> SweepConfig:
    check_fraction(args.sesoi, "--sesoi", error=SweepError)
    if args.run_dir is None or args.directions is None:
        raise SweepError("give RUN_DIR and --directions PROBES_DIR to run a sweep (or --plan to size one)")
    config: SweepConfig = config_from_parsed(SweepConfig, args)
    return config.validate()


def run_plan(args: argparse.Namespace, echo=print) -> int:
    """``--plan``: print the planner's block (:mod:`steering.planning.planner`); writes nothing, loads no model."""
    check_fraction(args.sesoi, "--sesoi", error=SweepError)
    check_fraction(args.effect, "--effect", error=SweepError)
    check_fraction(args.base_rate, "--base-rate", allow_zero=True, error=SweepError)
    if args.pilot is not None:
        design = pilot_design(args.pilot, args.effect)
    elif args.base_rate is not None:
        n_settings = (len(parse_list(args.ks, "--k", kind=int, error=SweepError) or DEFAULT_KS)
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
        flags = {f.name: flag_of(f).lstrip("-") for f in cli_fields(SweepConfig)}  # check_fixed names options
        args.given = {flags.get(d, d) for d in explicit_options(parser, sys.argv[1:] if argv is None else argv)}
    return run_cli(lambda: _main(args))


__all__ = ["SweepConfig", "SweepError", "build_parser", "config_from_args", "format_summary", "format_table",
           "is_complete", "main", "run_plan", "run_sweep", "score", "summarize"]


if __name__ == "__main__":
    sys.exit(main())
