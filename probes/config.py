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
from probes.estimators import DEFAULT_CS

SCHEMA_VERSION = 2
PROBES = ("logistic", "mass_mean")
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
            (self.target not in TARGETS, f"unknown --target {self.target!r}; choose propagation or three_class"),
            (self.probe not in (*PROBES, "both"), f"unknown --probe {self.probe!r}; choose logistic, mass_mean or both"),
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
        if self.solver == "torch":
            from probes.solver import resolve_device

            try:
                resolve_device(self.device)
            except ValueError as e:
                raise ProbeError(str(e)) from None

    @property
    def probes(self) -> tuple[str, ...]:
        return PROBES if self.probe == "both" else (self.probe,)

    def out_dir(self) -> Path:
        return Path(self.output) if self.output else store_dir(self.store) / "probes"


def parse_cs(spec: str) -> tuple[float, ...]:
    """``"0.01,1,100"`` -> floats; anything else (empty, nan, inf, <= 0, not a number) -> ProbeError."""
    try:
        cs = tuple(float(x) for x in str(spec).split(",") if x.strip())
    except ValueError:
        cs = ()
    if not cs or any(not math.isfinite(c) or c <= 0 for c in cs):
        raise ProbeError(f"--cs {spec!r}: expected a comma list of finite numbers > 0, e.g. --cs 0.01,1,100")
    return cs


__all__ = ["ProbeConfig", "parse_cs", "SCHEMA_VERSION", "PROBES", "TARGETS", "TRANSFER_BY", "SOLVERS", "RESULTS"]
