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

from loadbearing.cli import run_cli
from loadbearing.stage.parser import config_from_parsed, parser_from_config
from probes.config import GROUPS, RESULTS, ProbeConfig, parse_cs
from probes.data import ProbeError
from probes.experiment import steer_split, train_probes
from probes.stage import is_complete, train, train_stage
from probes.summary import format_summary

__all__ = ["ProbeConfig", "train", "train_stage", "train_probes", "is_complete", "format_summary", "main",
           "build_parser", "config_from_args", "parse_cs", "steer_split", "RESULTS", "ProbeError"]


def build_parser() -> argparse.ArgumentParser:
    """The command's parser, built from :class:`probes.config.ProbeConfig`'s fields."""
    return parser_from_config(ProbeConfig, prog="python -m probes.train", description=(__doc__ or "").split("\n\n")[0],
                              groups=GROUPS, help_order=("mlp_hidden", "mlp_weight_decay", "solver", "device"))


def config_from_args(argv: list[str] | None = None) -> ProbeConfig:
    """Parse CLI arguments into a validated :class:`ProbeConfig` (ProbeError on a bad value)."""
    a = build_parser().parse_args(argv)
    argv = list(argv) if argv is not None else sys.argv[1:]
    cfg: ProbeConfig = config_from_parsed(ProbeConfig, a, command="python -m probes.train " + " ".join(str(x) for x in argv))
    cfg.validate()
    return cfg


def main(argv: list[str] | None = None) -> int:
    """``python -m probes.train``: 0 on success; a bad input is one ``error: ...`` line on stderr and exit 2."""

    def body() -> None:
        train(config_from_args(argv))

    return run_cli(body)


if __name__ == "__main__":
    sys.exit(main())
