"""python -m steering.sweep RUN_DIR --directions RUN_DIR/probes --design paper [--max-cases N] [--random-seeds M]

The paper's steering design as a preset of the sweep (the preset file ``steering/presets/paper.toml``, shipped
with the package, says where each value comes from and what is adapted): its two bases (``m2``: mean
difference + within-C principal axes; ``probe_pc``: probe direction + principal components; both stored in
``directions.h5`` by the probes stage, fitted on the direction-fitting questions only), k in {2, 4, 8}, its dose
(the plain sum of k unit directions, norm sqrt(k)), its 11 alphas in raw residual units (-10..10; 0 is the
unsteered rerun), its layer at the paper's relative depth (block 21 of 42 -> the same fraction of this model's
blocks, or ``--layers``), random-direction controls, and a mix of C and non-C cases. Every other setting
(cases, seeds, budget, output) is the sweep's own.

It runs the sweep (:func:`steering.sweep.runner.run_sweep`) and writes, beside its ``summary.json``:

* ``design.json`` - the preset as applied: the layer and how it was chosen, the model's block count, each
  layer's mean residual norm and every alpha as a fraction of it, and the adaptation notes;
* ``table7.csv`` / ``table7.md`` - the sweep in the paper's Table 7 layout (:mod:`steering.paper.table7`).

Bad input (no paper bases in ``directions.h5``, a layer it lacks, an option the design fixes) is one
:class:`~steering.sweep.config.SweepError` line, before the model is loaded where it can be.
"""
from __future__ import annotations

import dataclasses
import math
import types
from collections.abc import Callable
from dataclasses import dataclass
from importlib import resources
from pathlib import Path
from typing import Any

from loadbearing.engine.layers import n_layers
from loadbearing.files import read_json, write_json
from loadbearing.runs import Run
from probes.data import ProbeError
from steering.paper.table7 import write_table7
from steering.sweep.config import CONFIG_FILE, SweepConfig, SweepError
from steering.sweep.grid import sweep_directions
from steering.sweep.runner import run_sweep

PRESET = "paper.toml"
DESIGN_FILE = "design.json"
#: the sweep options the design fixes (a command line that sets one beside --design paper is refused)
FIXED = ("k", "alphas", "controls", "dose", "cases")


@dataclass(frozen=True)
class PaperDesign:
    """The preset's values (``steering/presets/paper.toml``)."""

    bases: tuple[str, ...]
    ks: tuple[int, ...]
    alphas: tuple[float, ...]  # including 0 (the unsteered rerun)
    alpha_units: str
    dose: str
    controls: tuple[str, ...]
    cases: str
    model: str
    decoder_block: int
    n_decoder_blocks: int
    max_new_tokens: int
    notes: tuple[str, ...]
    text: str = ""

    @property
    def relative_depth(self) -> float:
        return self.decoder_block / self.n_decoder_blocks

    @property
    def steered_alphas(self) -> list[float]:
        """The alphas the sweep steers at (0 is its unsteered rerun, the ``none`` control)."""
        return [a for a in self.alphas if a != 0]


def _toml() -> types.ModuleType:
    try:
        import tomllib  # deferred: tomllib or its backport, by Python version
    except ModuleNotFoundError:  # Python 3.10: the tomli backport
        # deferred: tomllib or its backport, by Python version
        import tomli as tomllib  # type: ignore[no-redef]
    return tomllib


def load_design(text: str | None = None) -> PaperDesign:
    """The design from the shipped preset (or from ``text``, a preset file's content)."""
    if text is None:
        text = (resources.files("steering") / "presets" / PRESET).read_text(encoding="utf-8")
    try:
        d = _toml().loads(text)
        paper, design = d["paper"], d["design"]
        return PaperDesign(bases=tuple(design["bases"]), ks=tuple(int(k) for k in design["ks"]),
                           alphas=tuple(float(a) for a in design["alphas"]), alpha_units=str(design["alpha_units"]),
                           dose=str(design["dose"]), controls=tuple(design["controls"]), cases=str(design["cases"]),
                           model=str(paper["model"]), decoder_block=int(paper["decoder_block"]),
                           n_decoder_blocks=int(paper["n_decoder_blocks"]),
                           max_new_tokens=int(paper["max_new_tokens"]),
                           notes=tuple(str(n) for n in d.get("adapted", {}).get("notes", ())), text=text)
    except (KeyError, TypeError, ValueError) as e:
        raise SweepError(f"the paper design preset is malformed ({type(e).__name__}: {e}); reinstall the package") from None


def paper_layer(n_blocks: int, design: PaperDesign | None = None) -> int:
    """The hidden-states layer at the paper's relative depth: the output of block ``round(depth * n_blocks)``
    (half up, at most the last block), i.e. hidden-states index block + 1 (22 for the paper's 42 blocks, 16 for
    SmolLM2-135M's 30)."""
    depth = (design or load_design()).relative_depth
    block = min(int(math.floor(depth * int(n_blocks) + 0.5)), int(n_blocks) - 1)
    return block + 1


def check_fixed(explicit: set[str]) -> None:
    """Refuse options the design fixes (``explicit``: the dest names given on the command line)."""
    given = [o for o in FIXED if o in explicit]
    if given:
        raise SweepError(f"--design paper fixes {', '.join('--' + o for o in given)} (steering/presets/paper.toml); "
                         "drop them, or run the sweep without --design")


def check_bases(dirs: Any, layer: int, design: PaperDesign) -> None:
    """The directions hold both paper bases at ``layer`` with at least max(k) rows (one-line SweepError)."""
    if layer not in dirs.bases:
        raise SweepError(f"{dirs.path} has no directions for layer {layer} (the paper's relative depth); it has "
                         f"layers {dirs.layers}: re-run python -m probes.train with a store holding layer {layer}, or "
                         "pass --layers")
    for name in design.bases:
        try:
            dirs.named_basis(name, layer, k=max(design.ks))
        except ProbeError as e:
            raise SweepError(str(e).splitlines()[0]) from None


def design_config(config: SweepConfig, design: PaperDesign, layer: int) -> SweepConfig:
    """``config`` with the design's settings (the layer resolved by the caller)."""
    return dataclasses.replace(config, layers=[int(layer)], ks=list(design.ks), alphas=design.steered_alphas,
                               alpha_units=design.alpha_units, bases=list(design.bases), dose=design.dose,
                               controls=list(design.controls), cases=design.cases).validate()


def design_record(design: PaperDesign, layer: int, n_blocks: int, given: bool, sweep: dict[str, Any]) -> dict[str, Any]:
    """``design.json``: the preset as applied, with each layer's residual norm and alpha / norm."""
    norms = {str(k): v for k, v in (sweep.get("resid_norm") or {}).items()}
    return {
        "kind": "steering.paper.design", "schema_version": 1, "preset": f"steering/presets/{PRESET}",
        "paper": {"model": design.model, "decoder_block": design.decoder_block,
                  "n_decoder_blocks": design.n_decoder_blocks, "max_new_tokens": design.max_new_tokens},
        "layer": int(layer), "n_decoder_blocks": int(n_blocks),
        "layer_rule": ("given with --layers" if given else f"the paper's relative depth {design.relative_depth:g}: "
                       f"block {layer - 1} of {n_blocks} (hidden_states index {layer})"),
        "bases": list(design.bases), "ks": list(design.ks), "alphas": list(design.alphas),
        "alpha_units": design.alpha_units, "dose": design.dose, "controls": list(design.controls),
        "cases": design.cases, "resid_norm": norms, "resid_norm_source": sweep.get("resid_norm_source"),
        "alpha_over_norm": {L: {f"{a:g}": (a / v if v else None) for a in design.alphas} for L, v in norms.items()},
        "adapted": list(design.notes), "preset_text": design.text,
    }


def run_paper_design(config: SweepConfig, lm: Any = None, *, echo: Callable[[str], None] = print,
                     generate_fn: Callable[..., list] | None = None) -> dict[str, Any]:
    """Run the paper-design sweep on ``config`` (its design settings are replaced by the preset's; a given
    ``layers`` of one layer is kept) and write ``design.json`` and ``table7.csv``/``.md``; returns the summary."""
    design = load_design()
    config.validate()
    if config.layers is not None and len(config.layers) != 1:
        raise SweepError(f"--design paper steers one layer; got --layers {','.join(map(str, config.layers))}")
    if config.out_dir.exists() and not config.resume:
        raise SweepError(f"output directory {str(config.out_dir)!r} already exists; pass --resume to continue it or "
                         "choose another --output-dir")
    dirs = sweep_directions(config.directions)
    missing = [b for b in design.bases if not dirs.extra_bases.get(b)]
    if missing:
        raise SweepError(f"{dirs.path} holds no {' or '.join(missing)} basis (it was written before the paper's bases "
                         "were stored); re-run python -m probes.train on the activation store")
    if config.layers:
        check_bases(dirs, int(config.layers[0]), design)
    if lm is None:
        run = Run(config.run_dir)
        if run.status not in ("complete", "ok", "insufficient_data"):
            run.require_complete(allow_incomplete=config.allow_incomplete)
        lm = run.load_model(config.model if config.allow_other_model else None, device=config.device)

    n_blocks = n_layers(lm.model)
    layer = int(config.layers[0]) if config.layers else paper_layer(n_blocks, design)
    check_bases(dirs, layer, design)
    summary = run_sweep(design_config(config, design, layer), lm, echo=echo, generate_fn=generate_fn)
    out = config.out_dir
    if (out / CONFIG_FILE).is_file():
        write_json(out / DESIGN_FILE, design_record(design, layer, n_blocks, bool(config.layers),
                                                    read_json(out / CONFIG_FILE)))
    if summary.get("status") == "ok":
        paths = write_table7(out, design.notes)
        echo(f"Table 7 layout: {paths[0]} (+ {Path(paths[1]).name})")
    return summary


__all__ = ["DESIGN_FILE", "FIXED", "PRESET", "PaperDesign", "check_bases", "check_fixed", "design_config",
           "design_record", "load_design", "paper_layer", "run_paper_design"]
