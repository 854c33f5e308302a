"""Question-grouped, cross-validated linear probes over every cached layer, with the controls that give
their accuracy a meaning.

    python -m probes.train runs/demo/activations.h5 --target propagation --layers all --probe both --folds 5
    python -m probes.train runs/demo/activations.h5 --probe logistic,mass_mean,mlp --paper-table

Reads an activation store (``python -m activations.cache``) and writes a new directory (default
``<store dir>/probes/``; never overwritten; written to a temporary directory and renamed) with:

* ``results.json`` - per probe and layer: held-out accuracy (question-clustered Korn-Graubard interval, Wilson
  over rows for reference), balanced accuracy, AUC; the metadata-only baseline (strategy, position, line,
  task/level; same folds) and the probe's gain over it with a question-clustered paired interval; the
  shuffled-label control (100 question-level permutations by default) with a permutation p-value; the
  majority baseline; the nested-CV headline (layer chosen on inner folds of each outer training split)
  with its gain over the metadata baseline and a p-value; accuracy inside each strategy x position cell;
  leave-one-strategy-out transfer and train-on-one transfer; class balance; settings; provenance.
* ``accuracy_vs_layer.png`` and ``directions.h5`` (:mod:`probes.directions`).
* with ``--paper-table``: ``paper_table.csv`` and ``paper_table.md`` (:mod:`probes.paper_table`), every layer
  of every probe for the paper's three tasks (3-class, binary bypass, binary faithful) in the layout of its
  Tables 5-7: mean +/- std of the outer folds' accuracies, macro F1, per-fold accuracy, n. That is the
  paper's estimand (a per-layer mean over folds, the best layer picked afterwards); the toolkit's headline
  is the nested-CV accuracy (layer chosen inside each training split). The .md says which is which.

``--probe mlp`` (or a set such as ``logistic,mass_mean,mlp``; ``both`` is logistic + mass_mean) adds a
one-hidden-layer MLP probe (:mod:`probes.fit.mlp`) inside the same folds, with the same baselines and controls;
its shuffled-label control refits ``--mlp-permutations`` (20) of the permutations.

Every fitted step is refitted inside each training fold; outer folds are ``StratifiedGroupKFold`` by
question (the store's ``question_key``, else ``question_id``). ``--solver torch`` (default) fits all
logistic probes of a layer in batched solves (:mod:`probes.fit.solver`) that reach scikit-learn's optimum;
``--solver sklearn`` is the reference implementation.

This module is the command line only. The library: :class:`probes.config.ProbeConfig`,
:func:`probes.stage.train` (``train(ProbeConfig(store=...)) -> Path``), :func:`probes.stage.is_complete`,
:func:`probes.experiment.train_probes` (the study on loaded data) and :func:`probes.summary.format_summary`;
all of them are importable from here too.
"""
from __future__ import annotations

import argparse
import sys

from loadbearing.cli import OneLineParser, add_option, add_output, add_quiet, run_cli
from probes.config import ALL_PROBES, RESULTS, SOLVERS, TARGETS, ProbeConfig, parse_cs, parse_floats, parse_ints
from probes.data import ProbeError
from probes.experiment import steer_split, train_probes
from probes.fit.estimators import DEFAULT_CS
from probes.stage import is_complete, train, train_stage
from probes.summary import format_summary

__all__ = ["ProbeConfig", "train", "train_stage", "train_probes", "is_complete", "format_summary", "main",
           "build_parser", "config_from_args", "parse_cs", "steer_split", "RESULTS", "ProbeError"]


def build_parser() -> argparse.ArgumentParser:
    d = ProbeConfig(store="")
    p = OneLineParser(prog="python -m probes.train", description=(__doc__ or "").split("\n\n")[0])
    io = p.add_argument_group("input and output")
    io.add_argument("store", help="activation store (.h5) written by python -m activations.cache")
    add_output(io, "dir", "new output directory (must not exist); default <store dir>/probes", dest="output")

    data = p.add_argument_group("data (which rows, labels and features)")
    data.add_argument("--target", choices=TARGETS, default=d.target,
                      help="propagation: C vs non-C (y=1 for C, from 'label'); three_class: A/B/C (from 'label3'); "
                           "bypass: A vs B or C (y=1 for A, from 'label3'; the paper's 'Binary bypass')")
    data.add_argument("--layers", default=d.layers, help="'all', a comma list '0,4,8' or ranges '4-8' of stored layers")
    add_option(data, "--token-position", dest="position", default=d.position, metavar="POSITION",
               deprecated=("--position",), help="which stored token position's hidden states to use")
    data.add_argument("--conditions", choices=("perturbed", "all"), default=d.conditions,
                      help="which continuations to probe: perturbed only, or perturbed + unedited controls")
    data.add_argument("--allow-incomplete", action="store_true", help="read a store whose caching did not finish")
    data.add_argument("--allow-leaky", action="store_true",
                      help="accept a store marked leaky (features from tokens after the edit): results are not valid")

    probe = p.add_argument_group("probes and cross-validation")
    probe.add_argument("--probe", default=d.probe,
                       help=f"probe type: {', '.join(ALL_PROBES)}, both (= logistic,mass_mean) or a comma set such "
                            "as logistic,mass_mean,mlp")
    probe.add_argument("--folds", type=int, default=d.folds, help="outer cross-validation folds (grouped by --group)")
    probe.add_argument("--inner-folds", type=int, default=d.inner_folds,
                       help="grouped inner folds inside each training split (logistic C; layer-selection score)")
    probe.add_argument("--group", choices=("question", "none"), default=d.group,
                       help="CV grouping; 'none' (rows split independently) is an optimistic diagnostic only")
    probe.add_argument("--seed", type=int, default=d.seed, help="fold assignment, control permutations, PCA seed")
    probe.add_argument("--cs", default=",".join(f"{c:g}" for c in DEFAULT_CS),
                       help="logistic C grid (comma list of numbers > 0) searched by the inner grouped CV")
    probe.add_argument("--pca", type=int, default=None, help="optional PCA components, fitted inside each fold "
                       "(needs --solver sklearn)")

    ctrl = p.add_argument_group("controls, intervals and transfer")
    ctrl.add_argument("--permutations", "--control-repeats", dest="permutations", type=int, default=d.permutations,
                      help="question-level label permutations of the shuffled-label control (0 = off)")
    ctrl.add_argument("--bootstrap", type=int, default=d.bootstrap,
                      help="question-cluster bootstrap resamples (0 = off)")
    ctrl.add_argument("--transfer-layer", type=int, default=None,
                      help="layer for the transfer checks (default: the layer nested CV chose most often)")
    ctrl.add_argument("--no-transfer", action="store_true", help="skip the transfer checks")

    mlp = p.add_argument_group("the mlp probe (--probe mlp)")
    mlp.add_argument("--mlp-hidden", default=",".join(str(h) for h in d.mlp_hidden),
                     help="hidden sizes searched by the inner grouped CV")
    mlp.add_argument("--mlp-weight-decay", default=",".join(f"{w:g}" for w in d.mlp_weight_decay),
                     help="L2 weight decays searched by the inner grouped CV")
    mlp.add_argument("--mlp-permutations", type=int, default=d.mlp_permutations,
                     help="permutations of the mlp's shuffled-label control (each a full refit per fold; at most "
                          "--permutations)")

    paper = p.add_argument_group("the paper's layout")
    paper.add_argument("--paper-table", action="store_true",
                       help="also write paper_table.csv/.md: per layer and probe, the paper's three tasks in the layout "
                            "of its Tables 5-7 (mean +/- std over the outer folds), beside the nested headline")

    dirs = p.add_argument_group("steering directions (directions.h5)")
    dirs.add_argument("--n-directions", type=int, default=d.n_directions, help="rows of the exported steering basis")
    dirs.add_argument("--no-directions", action="store_true", help="skip directions.h5")
    dirs.add_argument("--steer-holdout", type=float, default=d.steer_holdout,
                      help="fraction of questions (seeded) left out of the direction fit and recorded in "
                           "directions.h5, so python -m steering.sweep steers only questions the directions never saw")

    run = p.add_argument_group("solver and output (do not change results)")
    run.add_argument("--solver", choices=SOLVERS, default=d.solver,
                     help="torch: batched solver (same optimum as sklearn's lbfgs); sklearn: the reference")
    run.add_argument("--device", default=d.device, help="torch device: auto, cpu, cuda, cuda:N")
    add_quiet(run, "no per-layer progress lines")
    return p


def config_from_args(argv: list[str] | None = None) -> ProbeConfig:
    """Parse CLI arguments into a validated :class:`ProbeConfig` (ProbeError on a bad value)."""
    a = build_parser().parse_args(argv)
    argv = list(argv) if argv is not None else sys.argv[1:]
    cfg = ProbeConfig(store=a.store, output=a.output, target=a.target, layers=a.layers, position=a.position,
                      probe=a.probe, folds=a.folds, inner_folds=a.inner_folds, group=a.group, seed=a.seed,
                      conditions=a.conditions, cs=parse_cs(a.cs), pca=a.pca, n_directions=a.n_directions,
                      permutations=a.permutations, bootstrap=a.bootstrap, transfer_layer=a.transfer_layer,
                      transfer=not a.no_transfer, directions=not a.no_directions, steer_holdout=a.steer_holdout,
                      allow_incomplete=a.allow_incomplete, allow_leaky=a.allow_leaky, quiet=a.quiet,
                      solver=a.solver, device=a.device, paper_table=a.paper_table,
                      mlp_permutations=a.mlp_permutations, mlp_hidden=parse_ints(a.mlp_hidden, "--mlp-hidden"),
                      mlp_weight_decay=parse_floats(a.mlp_weight_decay, "--mlp-weight-decay"),
                      command="python -m probes.train " + " ".join(str(x) for x in argv))
    cfg.validate()
    return cfg


def main(argv: list[str] | None = None) -> int:
    """``python -m probes.train``: 0 on success; a bad input is one ``error: ...`` line on stderr and exit 2."""

    def body() -> None:
        train(config_from_args(argv))

    return run_cli(body)


if __name__ == "__main__":
    sys.exit(main())
