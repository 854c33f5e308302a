"""The difficulty gradient across runs, levels and models: the paper's headline analysis.

    python -m behavioural.gradient RUN_DIR [RUN_DIR ...] --output-dir DIR [--allow-mixed] [--difficulty auto|accuracy|level]

Combines any number of run directories (models x datasets x tasks x ladder levels), read through
:class:`loadbearing.runs.Run`. It refuses, in one line, runs whose rates are not comparable (protocol
version, parser, stop rule, ``min_lines``, ``max_new_tokens``, where the labels came from) unless
``--allow-mixed`` (the differences are then recorded in ``gradient.json``). Writes into ``--output-dir``:

* ``gradient.json`` - everything below, with the settings and the runs it read;
* ``gradient.md`` - the tables; ``gradient.png`` - propagation against baseline accuracy (one point per
  task-or-level and model, interval bars both ways, the fitted logistic curve per model).

Per (model, task or level): baseline accuracy (the paper's definition: an unparseable answer is wrong) with
its coverage, propagation with a question-clustered interval, control error, n questions, n distinct
generations. Then: the test of difficulty at the level where it varies (one observation per cell: a random-
effects meta-regression with the Knapp-Hartung t, :mod:`behavioural.gradient.cells`; descriptive below 3
cells); a logistic model of C on difficulty, strategy family (``behavioural.strategies.FAMILIES``; and the
paper's numerical / text edit type), position and their interactions with errors clustered by question and one
row per generation and strategy (positions that share one generation merged into one level, ``middle=late``,
and every design reduced to full rank with a note: :mod:`loadbearing.stats.design`); the sequential deviance
partition in both orders; the within-dataset slope; the position test; type-by-difficulty tables; propagation conditional on
perturbation uptake; cross-model paired differences on the shared eligible questions; the A/B/C taxonomy.

Library use::

    from behavioural.gradient import GradientConfig, run_gradient, format_summary
    summary = run_gradient(GradientConfig(runs=("runs/a", "runs/b"), output="runs/gradient"))
    print(format_summary(summary))
"""
from __future__ import annotations

import argparse
import json
import os
import shutil
import tempfile
from collections.abc import Sequence
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

from behavioural.gradient.rows import GradientError, load_runs, position_merges
from loadbearing.cli import run_cli
from loadbearing.files import RunDirError, atomic_write_text, publish_dir, write_json
from loadbearing.stage.parser import config_from_parsed, option, parser_from_config

SCHEMA = "behavioural.gradient/1"
JSON_NAME, MD_NAME, PNG_NAME = "gradient.json", "gradient.md", "gradient.png"

__all__ = ["GradientConfig", "GradientError", "run_gradient", "analyse", "format_summary", "is_complete", "main"]


@dataclass(frozen=True)
class GradientConfig:
    """What ``python -m behavioural.gradient`` accepts (its parser is built from these fields)."""

    runs: tuple[str, ...] = option(positional=True, nargs="+", metavar="RUN_DIR", parse=tuple, group="inputs",
                                   help="run directories written by python -m behavioural.run (or python -m "
                                        "behavioural.paper_import)")
    output: str | None = option(None, flag="--output-dir", deprecated=("--output",), metavar="DIR", group="output",
                                help="new directory for gradient.json, gradient.md, gradient.png (default: print only)")
    allow_mixed: bool = option(False, group="inputs", help="combine runs whose protocol/parser/settings differ "
                               "(recorded in gradient.json)")
    allow_incomplete: bool = option(False, group="inputs", help="read runs that did not finish")
    difficulty: str = option("auto", choices=("auto", "accuracy", "level"), group="analysis",
                             help="difficulty axis of the regression: 1 - baseline accuracy, or the level/dataset "
                                  "ordinal")
    labelling: str | None = option(None, metavar="NAME", group="inputs",
                                   help="labels/<NAME> to read A/B/C from (default: the newest)")
    seed: int = option(0, type=int, group="analysis", help="bootstrap seed")
    plot: bool = option(True, negate="--no-plot", group="output", help="skip gradient.png")


def analyse(cfg: GradientConfig) -> dict[str, Any]:
    """Load the runs and compute every section (no files written)."""
    from behavioural.gradient import analysis as A  # deferred: import cycle behavioural.gradient
    from behavioural.gradient.cells import cell_slope  # deferred: import cycle behavioural.gradient

    data = load_runs(cfg.runs, allow_mixed=cfg.allow_mixed, allow_incomplete=cfg.allow_incomplete,
                     labelling=cfg.labelling)
    cells = A.cell_table(data, seed=cfg.seed)
    if not cells:
        raise GradientError("the runs hold no baselines and no continuations; nothing to analyse")
    axis, diff, axis_desc = A.difficulty_axis(cells, cfg.difficulty)
    for c in cells:
        c["difficulty"] = diff[(c["model"], c["cell"])]
    uptake = A.uptake_table(data.rows, seed=cfg.seed)  # sets row["uptake"] used below
    merges = position_merges(data.rows)
    summary: dict[str, Any] = {
        "schema": SCHEMA,
        "status": "ok",
        "config": asdict(cfg),
        "runs": [{"path": r.path, "model": r.model, "kind": r.kind, "labelling": r.labelling, **r.signature}
                 for r in data.runs],
        "mixed": data.mixed,
        "allow_mixed_used": bool(data.mixed),
        "notes": list(data.notes) + ([merges["note"]] if merges["note"] else []),
        "position_merges": merges,
        "axis": axis,
        "axis_description": axis_desc,
        "cells": cells,
        "difficulty_test": cell_slope(data.rows, cells, diff, axis=axis),
        "regression": A.regression(data.rows, diff, axis=axis),
        "within_dataset": A.within_dataset(data.rows, diff, axis=axis),
        "position": A.position_test(data.rows, diff, seed=cfg.seed),
        "type_by_difficulty": A.type_by_difficulty(data.rows, cells, seed=cfg.seed),
        "uptake": uptake,
        "cross_model": A.cross_model(data.rows, diff, seed=cfg.seed),
        "taxonomy": A.taxonomy(data.rows),
        "curves": {m: A.logistic_curve(data.rows, diff, m) for m in sorted({c["model"] for c in cells})},
    }
    if not data.rows:
        summary["status"] = "insufficient_data"
        summary["notes"].append("no perturbed continuations in any run: no propagation rate can be estimated")
    return summary


def run_gradient(cfg: GradientConfig) -> dict[str, Any]:
    """Analyse and (when ``cfg.output``) write gradient.json, gradient.md and gradient.png atomically:
    a refused or failed command leaves no partial output directory."""
    if cfg.output:
        out = Path(cfg.output)
        if out.exists() and (not out.is_dir() or any(out.iterdir())):
            raise GradientError(f"output {str(out)!r} already exists and is not empty; choose a new --output-dir")
    summary = analyse(cfg)
    if cfg.output:
        out = Path(cfg.output)
        out.parent.mkdir(parents=True, exist_ok=True)
        tmp = Path(tempfile.mkdtemp(prefix=f".{out.name}.", dir=out.parent))
        try:
            if cfg.plot:
                from behavioural.gradient.render import plot  # deferred: import cycle behavioural.gradient

                summary["figure"] = plot(summary, tmp / PNG_NAME)
            atomic_write_text(tmp / MD_NAME, format_summary(summary, style="md") + "\n", fsync=False)
            write_json(tmp / JSON_NAME, summary)
            try:
                if out.exists():
                    out.rmdir()  # only an empty directory (checked above) is taken over
                publish_dir(tmp, out)
            except (OSError, RunDirError) as e:
                why = e.strerror if isinstance(e, OSError) and e.strerror else "it appeared meanwhile"
                raise GradientError(f"could not create {str(out)!r} ({why}); another writer? choose a new "
                                    "--output-dir") from None
        except BaseException:
            shutil.rmtree(tmp, ignore_errors=True)
            raise
    return summary


def is_complete(out_path: str | os.PathLike[str]) -> bool:
    p = Path(out_path) / JSON_NAME
    if not p.is_file():
        return False
    try:
        return json.loads(p.read_text(encoding="utf-8")).get("status") in ("ok", "insufficient_data")
    except ValueError:
        return False


def format_summary(summary: dict[str, Any], style: str = "text") -> str:
    from behavioural.gradient.render import format_summary as _fmt  # deferred: import cycle behavioural.gradient

    return _fmt(summary, style)


def build_parser() -> argparse.ArgumentParser:
    """The command's parser, built from :class:`GradientConfig`."""
    return parser_from_config(GradientConfig, prog="python -m behavioural.gradient",
                               description=(__doc__ or "").split("\n\n")[0], groups=("inputs", "analysis", "output"),
                              help_order=("runs", "labelling"))


def main(argv: Sequence[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    cfg: GradientConfig = config_from_parsed(GradientConfig, args)

    def body() -> int:
        summary = run_gradient(cfg)
        print(format_summary(summary))
        if cfg.output:
            print(f"\nwrote {cfg.output}/{JSON_NAME}, {MD_NAME}" + (f", {PNG_NAME}" if cfg.plot else ""))
        return 0

    return run_cli(body)
