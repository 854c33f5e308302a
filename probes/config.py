"""The probes stage's settings: :class:`ProbeConfig` (everything ``python -m probes.train`` accepts) and the
names of its choices and files.

    from probes.config import ProbeConfig
    ProbeConfig(store="runs/demo/activations.h5", folds=5).validate()   # one-line ProbeError on a bad value
"""
from __future__ import annotations

import math
from dataclasses import dataclass, field
from pathlib import Path

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


@dataclass
class ProbeConfig:
    """Everything ``python -m probes.train`` accepts; :meth:`validate` refuses bad values before any work."""

    store: str
    output: str | None = None
    target: str = "propagation"
    layers: str = "all"
    position: str = "prefix_last"
    probe: str = "both"
    folds: int = 5
    inner_folds: int = 3
    group: str = "question"
    seed: int = 0
    conditions: str = "perturbed"
    cs: tuple[float, ...] = DEFAULT_CS
    pca: int | None = None
    n_directions: int = 8
    permutations: int = 100
    bootstrap: int = 1000
    transfer_layer: int | None = None
    transfer: bool = True
    directions: bool = True
    #: fraction of questions held out of the direction fit, so steering can test on unseen questions
    steer_holdout: float = 0.0
    allow_incomplete: bool = False
    allow_leaky: bool = False
    quiet: bool = False
    solver: str = "torch"
    device: str = "auto"
    #: write paper_table.csv (+ .md): the paper's Tables 5-7 layout, per layer, for its three tasks
    paper_table: bool = False
    mlp_permutations: int = MLP_PERMUTATIONS
    mlp_hidden: tuple[int, ...] = HIDDEN_SIZES
    mlp_weight_decay: tuple[float, ...] = WEIGHT_DECAYS
    command: str = field(default="", repr=False)

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
