"""python -m steering.patching RUN_DIR [--layers 0,4,8|all] [--max-cases N] [--seed S] [--output-dir DIR] [--flip] [--force]

Activation patching between the clean and the edited prefix: where does the model carry the injected error on
its way to the answer? For each sampled C case (a perturbed continuation whose answer is wrong) whose question
has a control at the same cut, run the edited prefix and, at hidden-state layer L and a group of token
positions (``edit``: the edited line, ``before``: everything before it, ``last``: the newline after it, ``all``),
replace the residual stream with the clean prefix's at the aligned positions; score
``log P(correct answer) - log P(propagated answer)`` after the forced ``Answer:`` prefix, and report the
fraction of the edited-to-clean difference each patch restores, with 95% intervals over questions, beside
random-position and random-layer controls. ``--flip`` also decodes greedily with each patch held and scores
whether the answer flips to correct.

Engine: plain Hugging Face forward hooks (``"engine": "hf-hooks"`` in the output; see
:mod:`steering.patching.engine`); one forward of the clean prefix per case records every layer's residual at
the aligned positions, and the patched runs are batched. Modules: :mod:`steering.patching`.

Writes RUN_DIR/patching/ (or --output-dir): ``patching.json`` (settings, engine, per-case rows with their alignment,
the per-(layer, group) summary with intervals, the controls), ``patching.png`` (heat map) and ``patching.md``.
An existing output is refused unless --force.
"""
from __future__ import annotations

import argparse
import shlex
import shutil
import sys
from collections.abc import Callable
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

from loadbearing.cli import check_device, check_number, run_cli
from loadbearing.engine.layers import decoder_layers, n_layers
from loadbearing.files import atomic_write_text, publish_dir, write_json
from loadbearing.options import parse_layers
from loadbearing.provenance import git_info, now, package_versions
from loadbearing.runs import Run
from loadbearing.stage.parser import config_from_parsed, option, parser_from_config
from steering.errors import PatchingError
from steering.patching.align import ANSWER_PREFIX, GROUPS
from steering.patching.cases import select_cases
from steering.patching.summary import heatmap, markdown, summarise

SCHEMA_VERSION = 1
OUTPUT_DIR = "patching"
_MODEL = "model (does not change results)"


@dataclass
class PatchConfig:
    """What ``python -m steering.patching`` accepts (its parser is built from these fields)."""

    run_dir: str = option(positional=True, group="inputs", help="run directory written by python -m behavioural.run")
    layers: str = option("all", group="patching", help="comma-separated hidden-state layers (0 = embeddings) or 'all' "
                                                       "(default %(default)s)")
    max_cases: int | None = option(None, type=int, group="inputs",
                                   help="patch at most N C cases, one per question (seeded)")
    seed: int = option(0, type=int, group="inputs", help="case-sampling and control seed (default %(default)s)")
    output: str | None = option(None, flag="--output-dir", deprecated=("--output",), metavar="DIR", group="output",
                                help="output directory (default RUN_DIR/patching)")
    flip: bool = option(False, group="patching", help="also decode greedily with each patch held (costlier)")
    flip_tokens: int = option(48, type=int, group="patching",
                              help="greedy budget per --flip continuation (default %(default)s)")
    batch_size: int = option(32, type=int, group=_MODEL, help="patched rows per forward (default %(default)s)")
    min_gap: float = option(0.1, type=float, group="patching",
                            help="cases whose clean and edited log-prob differences are closer than this (nats) get "
                                 "no restored fraction (default %(default)s)")
    n_boot: int = option(2000, type=int, group="patching",
                         help="bootstrap resamples over questions (default %(default)s)")
    device: str | None = option(None, group=_MODEL,
                                help="device for the run's model (default: loadbearing.engine.models' choice)")
    force: bool = option(False, group="output", help="replace an existing output directory")
    allow_incomplete: bool = option(False, group="inputs", help="patch a run whose manifest is not complete")
    progress: bool = option(True, negate="--quiet", deprecated=("--no-progress",), group="output",
                            help="no progress bars")
    command: str = option("", cli=False, help="the command line, recorded in patching.json")


def build_parser() -> argparse.ArgumentParser:
    """The command's parser, built from :class:`PatchConfig`."""
    return parser_from_config(PatchConfig, prog="python -m steering.patching", description=__doc__.split("\n\n")[1],
                               raw_description=True, groups=("inputs", "patching", _MODEL, "output"), help_order=("device",))


def output_dir(config: PatchConfig) -> Path:
    return Path(config.output) if config.output else Path(config.run_dir) / OUTPUT_DIR


def _check(config: PatchConfig) -> None:
    check_number(config.max_cases, "--max-cases", minimum=1)
    check_number(config.batch_size, "--batch-size", minimum=2)
    check_number(config.flip_tokens, "--flip-tokens", minimum=1)
    check_number(config.min_gap, "--min-gap", minimum=0)
    check_number(config.n_boot, "--n-boot", minimum=1)
    check_device(config.device)
    parse_layers(config.layers, error=PatchingError)
    out = output_dir(config)
    if out.exists() and not config.force:
        raise PatchingError(f"output {str(out)!r} already exists; pass --force to replace it, or choose --output-dir DIR")


def run_patching(config: PatchConfig, lm: Any = None, *, echo: Callable[[str], None] = print) -> dict[str, Any]:
    """Validate, patch the sampled cases, write the outputs; returns the ``patching.json`` object.

    ``lm`` (a :class:`loadbearing.engine.models.LoadedModel`) overrides the run's model (tests pass a tiny one);
    otherwise the run's model is loaded through :meth:`loadbearing.runs.Run.load_model`.
    """
    import numpy as np  # deferred: numpy is heavy to import
    from tqdm.auto import tqdm  # deferred: tqdm is heavy to import

    from steering.patching.engine import ENGINE  # deferred: steering.patching.engine loads torch
    from steering.patching.sweep import patch_case  # deferred: steering.patching.sweep loads torch

    _check(config)
    run = Run(config.run_dir)
    run.require_complete(allow_incomplete=config.allow_incomplete)
    cases, sample = select_cases(run, max_cases=config.max_cases, seed=config.seed)
    if lm is None:
        lm = run.load_model(device=config.device)
    verified = run.check_model(lm)
    n_hidden = n_layers(lm.model)
    layers = parse_layers(config.layers, n_layers=n_hidden, error=PatchingError)
    assert layers is not None
    questions = run.questions()
    rng = np.random.default_rng(config.seed)
    rows, skipped = [], []
    bar = tqdm(total=0, desc=f"patch {len(cases)} cases", unit="row", disable=not config.progress, dynamic_ncols=True)
    try:
        for case in cases:
            try:
                rows.append(patch_case(lm, case, questions.get(case.edited.question_id, case.edited), layers=layers,
                                       n_hidden=n_hidden, rng=rng, batch_size=config.batch_size,
                                       min_gap=config.min_gap, flip=config.flip, flip_tokens=config.flip_tokens,
                                       progress=bar))
            except PatchingError as e:  # a case whose prefixes do not align: recorded, never dropped silently
                skipped.append({"id": case.edited.id, "reason": str(e)})
    finally:
        bar.close()
    if not rows:
        raise PatchingError(f"none of the {len(cases)} sampled cases could be aligned ({skipped[0]['reason']}); "
                            "check the run's edit_span fields")
    summary = summarise(rows, layers, seed=config.seed, n_boot=config.n_boot)
    settings = asdict(config) | {"layers": layers, "engine": ENGINE, "answer_prefix": ANSWER_PREFIX,
                                 "groups": list(GROUPS), "decoder_layers_path": decoder_layers(lm.model)[0],
                                 "n_hidden_layers": n_hidden,
                                 "model": {"name": lm.name, "weights_hash": lm.weights_hash, "verified": verified}}
    obj = {"schema_version": SCHEMA_VERSION, "kind": "steering.patching.cli", "created": now(), "engine": ENGINE,
           "settings": settings, "sample": sample | {"n_skipped": len(skipped)}, "skipped": skipped,
           "summary": summary, "cases": rows, "provenance": {"git": git_info(), "packages": package_versions()}}
    out = output_dir(config)
    out.parent.mkdir(parents=True, exist_ok=True)
    tmp = out.with_name("." + out.name + ".tmp")
    if tmp.exists():
        shutil.rmtree(tmp)
    tmp.mkdir()
    try:
        write_json(tmp / "patching.json", obj)
        heatmap(summary, layers, tmp / "patching.png")

        atomic_write_text(tmp / "patching.md", markdown(summary, layers, settings))
        publish_dir(tmp, out, replace=config.force)
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        raise
    echo(f"patched {len(rows)} cases x {len(layers)} layers x {len(GROUPS)} groups -> {out}")
    return obj


def config_from_args(args: argparse.Namespace, argv: list[str] | None) -> PatchConfig:
    cmd = "python -m steering.patching " + " ".join(shlex.quote(a) for a in (sys.argv[1:] if argv is None else argv))
    config: PatchConfig = config_from_parsed(PatchConfig, args, command=cmd)
    return config


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)

    def body() -> None:
        run_patching(config_from_args(args, argv))

    return run_cli(body, errors=(PatchingError,))


if __name__ == "__main__":
    raise SystemExit(main())
