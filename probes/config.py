"""The probes stage's settings: :class:`ProbeConfig` (everything ``python -m probes.train`` accepts) and the
names of its choices and files.

    from probes.config import ProbeConfig
    ProbeConfig(store="runs/demo/activations.h5", folds=5).validate()   # one-line ProbeError on a bad value
"""
from __future__ import annotations

import math
from dataclasses import dataclass
from pathlib import Path

from loadbearing.stage.parser import option
from probes.data import TARGETS, ProbeError, store_dir
from probes.fit.estimators import DEFAULT_CS
from probes.fit.mlp_train import HIDDEN_SIZES, WEIGHT_DECAYS

SCHEMA_VERSION = 2
PROBES = ("logistic", "mass_mean")  # what --probe both means (the linear probes)
ALL_PROBES = (*PROBES, "mlp")
MLP_PERMUTATIONS = 20  # the mlp control's permutations (each one a full MLP refit per outer fold)
TRANSFER_BY = ("strategy", "edit_position")
SOLVERS = ("torch", "sklearn")
RESULTS = "results.json"

#: the help groups of ``python -m probes.train``, in its ``--help`` order (its parser is built from ProbeConfig)
_IO, _DATA, _CV = "input and output", "data (which rows, labels and features)", "probes and cross-validation"
_CONTROLS, _MLP, _PAPER = "controls, intervals and transfer", "the mlp probe (--probe mlp)", "the paper's layout"
_DIRS, _RUN = "steering directions (directions.h5)", "solver and output (do not change results)"
GROUPS = (_IO, _DATA, _CV, _CONTROLS, _MLP, _PAPER, _DIRS, _RUN)


@dataclass
class ProbeConfig:
    """Everything ``python -m probes.train`` accepts; :meth:`validate` refuses bad values before any work."""

    store: str = option(positional=True, group=_IO, help="activation store (.h5) written by python -m activations.cache")
    output: str | None = option(None, flag="--output-dir", deprecated=("--output",), metavar="DIR", group=_IO,
                                help="new output directory (must not exist); default <store dir>/probes")
    target: str = option("propagation", choices=TARGETS, group=_DATA,
                         help="propagation: C vs non-C (y=1 for C, from 'label'); three_class: A/B/C (from 'label3'); "
                              "bypass: A vs B or C (y=1 for A, from 'label3'; the paper's 'Binary bypass')")
    layers: str = option("all", group=_DATA, help="'all', a comma list '0,4,8' or ranges '4-8' of stored layers")
    position: str = option("prefix_last", flag="--token-position", deprecated=("--position",), metavar="POSITION",
                           group=_DATA, help="which stored token position's hidden states to use")
    probe: str = option("both", group=_CV, help=f"probe type: {', '.join(ALL_PROBES)}, both (= logistic,mass_mean) or "
                        "a comma set such as logistic,mass_mean,mlp")
    folds: int = option(5, type=int, group=_CV, help="outer cross-validation folds (grouped by --group)")
    inner_folds: int = option(3, type=int, group=_CV,
                              help="grouped inner folds inside each training split (logistic C; layer-selection score)")
    group: str = option("question", choices=("question", "none"), group=_CV,
                        help="CV grouping; 'none' (rows split independently) is an optimistic diagnostic only")
    seed: int = option(0, type=int, group=_CV, help="fold assignment, control permutations, PCA seed")
    conditions: str = option("perturbed", choices=("perturbed", "all"), group=_DATA,
                             help="which continuations to probe: perturbed only, or perturbed + unedited controls")
    cs: tuple[float, ...] = option(DEFAULT_CS, cli_default=",".join(f"{c:g}" for c in DEFAULT_CS),
                                   parse=lambda s: parse_cs(s), group=_CV,
                                   help="logistic C grid (comma list of numbers > 0) searched by the inner grouped CV")
    pca: int | None = option(None, type=int, group=_CV,
                             help="optional PCA components, fitted inside each fold (needs --solver sklearn)")
    n_directions: int = option(8, type=int, group=_DIRS, help="rows of the exported steering basis")
    permutations: int = option(100, type=int, aliases=("--control-repeats",), group=_CONTROLS,
                               help="question-level label permutations of the shuffled-label control (0 = off)")
    bootstrap: int = option(1000, type=int, group=_CONTROLS, help="question-cluster bootstrap resamples (0 = off)")
    transfer_layer: int | None = option(None, type=int, group=_CONTROLS,
                                        help="layer for the transfer checks (default: the layer nested CV chose most "
                                             "often)")
    transfer: bool = option(True, negate="--no-transfer", group=_CONTROLS, help="skip the transfer checks")
    directions: bool = option(True, negate="--no-directions", group=_DIRS, help="skip directions.h5")
    #: fraction of questions held out of the direction fit, so steering can test on unseen questions
    steer_holdout: float = option(0.0, type=float, group=_DIRS,
                                  help="fraction of questions (seeded) left out of the direction fit and recorded in "
                                       "directions.h5, so python -m steering.sweep steers only questions the "
                                       "directions never saw")
    allow_incomplete: bool = option(False, group=_DATA, help="read a store whose caching did not finish")
    allow_leaky: bool = option(False, group=_DATA, help="accept a store marked leaky (features from tokens after the "
                               "edit): results are not valid")
    quiet: bool = option(False, group=_RUN, help="no per-layer progress lines")
    solver: str = option("torch", choices=SOLVERS, group=_RUN,
                         help="torch: batched solver (same optimum as sklearn's lbfgs); sklearn: the reference")
    device: str = option("auto", group=_RUN, help="torch device: auto, cpu, cuda, cuda:N")
    #: write paper_table.csv (+ .md): the paper's Tables 5-7 layout, per layer, for its three tasks
    paper_table: bool = option(False, group=_PAPER,
                               help="also write paper_table.csv/.md: per layer and probe, the paper's three tasks in "
                                    "the layout of its Tables 5-7 (mean +/- std over the outer folds), beside the "
                                    "nested headline")
    mlp_permutations: int = option(MLP_PERMUTATIONS, type=int, group=_MLP,
                                   help="permutations of the mlp's shuffled-label control (each a full refit per fold; "
                                        "at most --permutations)")
    mlp_hidden: tuple[int, ...] = option(HIDDEN_SIZES, cli_default=",".join(str(h) for h in HIDDEN_SIZES),
                                         parse=lambda s: parse_ints(s, "--mlp-hidden"), group=_MLP,
                                         help="hidden sizes searched by the inner grouped CV")
    mlp_weight_decay: tuple[float, ...] = option(WEIGHT_DECAYS, cli_default=",".join(f"{w:g}" for w in WEIGHT_DECAYS),
                                                 parse=lambda s: parse_floats(s, "--mlp-weight-decay"), group=_MLP,
                                                 help="L2 weight decays searched by the inner grouped CV")
    command: str = option("", cli=False, help="the command line, recorded in results.json")

    def validate(self) -> None:
        """One-line :class:`ProbeError` for any bad value (checks that need the store run in
        :func:`probes.stage.train`)."""
        cs = tuple(self.cs)
        if not cs or any(not isinstance(c, (int, float)) or not math.isfinite(c) or c <= 0 for c in cs):
            raise ProbeError(f"--cs {','.join(str(c) for c in cs) or '(empty)'}: every C must be a finite number > 0, "
                             f"e.g. --cs 0.01,1,100")
        checks = [
            (self.folds < 2, f"--folds must be at least 2, got {self.folds}"),
            (self.inner_folds < 2, f"--inner-folds must be at least 2, got {self.inner_folds}"),
            (self.pca is not None and self.pca <= 0, f"--pca must be a positive number of components, got {self.pca}"),
            (self.n_directions < 1, f"--n-directions must be at least 1, got {self.n_directions}"),
            (not (math.isfinite(self.steer_holdout) and 0 <= self.steer_holdout < 1),
             f"--steer-holdout must be a fraction in [0, 1), got {self.steer_holdout}"),
            (self.permutations < 0, f"--permutations must be 0 or more, got {self.permutations}"),
            (self.bootstrap < 0, f"--bootstrap must be 0 (off) or more, got {self.bootstrap}"),
            (self.target not in TARGETS, f"unknown --target {self.target!r}; choose {', '.join(TARGETS)}"),
            (self.mlp_permutations < 0, f"--mlp-permutations must be 0 or more, got {self.mlp_permutations}"),
            (not self.mlp_hidden or any(int(h) < 1 for h in self.mlp_hidden),
             f"--mlp-hidden must list hidden sizes >= 1, got {','.join(str(h) for h in self.mlp_hidden) or '(empty)'}"),
            (not self.mlp_weight_decay or any(not math.isfinite(w) or w < 0 for w in self.mlp_weight_decay),
             "--mlp-weight-decay must list finite weight decays >= 0, got "
             f"{','.join(str(w) for w in self.mlp_weight_decay) or '(empty)'}"),
            (self.group not in ("question", "none"), f"unknown --group {self.group!r}; choose question or none"),
            (self.conditions not in ("perturbed", "all"),
             f"unknown --conditions {self.conditions!r}; choose perturbed or all"),
            (self.solver not in SOLVERS, f"unknown --solver {self.solver!r}; choose torch or sklearn"),
            (self.solver == "torch" and self.pca is not None,
             "--pca needs --solver sklearn (the torch solver fits standardised raw features)"),
        ]
        for bad, msg in checks:
            if bad:
                raise ProbeError(msg)
        parse_probes(self.probe)
        if self.solver == "torch":
            from probes.fit.solver import resolve_device  # deferred: probes.fit.solver loads torch

            try:
                resolve_device(self.device)
            except ValueError as e:
                raise ProbeError(str(e)) from None

    @property
    def probes(self) -> tuple[str, ...]:
        return parse_probes(self.probe)

    def mlp_settings(self) -> dict[str, int | tuple[int, ...] | tuple[float, ...]]:
        """What :class:`probes.fit.mlp_cv.MLPBackend` takes (used when the probe set holds ``mlp``)."""
        return {"permutations": int(self.mlp_permutations), "hidden_sizes": tuple(int(h) for h in self.mlp_hidden),
                "weight_decays": tuple(float(w) for w in self.mlp_weight_decay)}

    def out_dir(self) -> Path:
        return Path(self.output) if self.output else store_dir(self.store) / "probes"


def parse_probes(spec: str) -> tuple[str, ...]:
    """``--probe``: one of logistic, mass_mean, mlp, ``both`` (= logistic,mass_mean, the linear probes) or a
    comma set such as ``logistic,mass_mean,mlp`` (order kept, duplicates dropped); else ProbeError."""
    out: list[str] = []
    for part in str(spec).split(","):
        part = part.strip()
        if not part:
            continue
        if part == "both":
            out.extend(PROBES)
        elif part in ALL_PROBES:
            out.append(part)
        else:
            raise ProbeError(f"unknown --probe {part!r} in {spec!r}; choose {', '.join(ALL_PROBES)}, both "
                             f"(= logistic,mass_mean) or a comma set such as logistic,mass_mean,mlp")
    if not out:
        raise ProbeError(f"--probe {spec!r} names no probe; choose {', '.join(ALL_PROBES)} or both")
    return tuple(dict.fromkeys(out))


def parse_ints(spec: str, flag: str) -> tuple[int, ...]:
    """``"16,64"`` -> ints; anything else -> ProbeError naming ``flag``."""
    try:
        vals = tuple(int(x) for x in str(spec).split(",") if x.strip())
    except ValueError:
        vals = ()
    if not vals:
        raise ProbeError(f"{flag} {spec!r}: expected a comma list of whole numbers, e.g. {flag} 16,64")
    return vals


def parse_floats(spec: str, flag: str) -> tuple[float, ...]:
    """``"0.001,0.1"`` -> floats; anything else -> ProbeError naming ``flag``."""
    try:
        vals = tuple(float(x) for x in str(spec).split(",") if x.strip())
    except ValueError:
        vals = ()
    if not vals:
        raise ProbeError(f"{flag} {spec!r}: expected a comma list of numbers, e.g. {flag} 0.001,0.1")
    return vals


def parse_cs(spec: str) -> tuple[float, ...]:
    """``"0.01,1,100"`` -> floats; anything else (empty, nan, inf, <= 0, not a number) -> ProbeError."""
    try:
        cs = tuple(float(x) for x in str(spec).split(",") if x.strip())
    except ValueError:
        cs = ()
    if not cs or any(not math.isfinite(c) or c <= 0 for c in cs):
        raise ProbeError(f"--cs {spec!r}: expected a comma list of finite numbers > 0, e.g. --cs 0.01,1,100")
    return cs


__all__ = ["ProbeConfig", "parse_cs", "parse_probes", "parse_ints", "parse_floats", "SCHEMA_VERSION", "PROBES",
           "ALL_PROBES", "MLP_PERMUTATIONS", "TARGETS", "TRANSFER_BY", "SOLVERS", "RESULTS"]
