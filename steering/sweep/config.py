"""python -m steering.sweep RUN_DIR --directions RUN_DIR/probes  (this module: the sweep's settings)

:class:`SweepConfig` holds every setting of one steering sweep; :meth:`SweepConfig.validate` refuses bad
values (NaN/inf/empty alphas, non-positive counts, unknown controls...) with a one-line :class:`SweepError`
before any model is loaded or any file is written. The CLI (:func:`steering.sweep.main`) parses into it and
the study builds it directly.
"""
from __future__ import annotations

import math
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from loadbearing.cli import check_fraction
from loadbearing.errors import LoadBearingError
from loadbearing.runs import CONFIG, GENERATIONS, SUMMARY
from steering.positions import POSITIONS
from steering.vectors import DOSES

SCHEMA_VERSION = 3  # 3: every random generation draws its own direction (steering.sweep.controls)
#: the grid and sample a sweep takes when not told otherwise; the study's defaults are these same constants
#: (study.config), so ``python -m steering.sweep`` and ``python -m study`` steer the same way by default
DEFAULT_KS = (1, 4)
DEFAULT_ALPHAS = (0.25, 0.5)
DEFAULT_PER_QUESTION = 1
DEFAULT_RANDOM_SEEDS = 2
CONTROLS = ("random", "random_cov", "none")
#: how a setting edits the residual stream: add the dosed directions (steering.hooks) or project their span out
#: (steering.ablation); each operator is its own family of tests with its own verdict
OPERATORS = ("add", "ablate")
CASE_KINDS = ("C", "all")
ALPHA_UNITS = ("relative", "raw")
DEFAULT_SESOI = 0.10

# the sweep's output directory
CONFIG_FILE = CONFIG
PLOT = "sweep.png"


class SweepError(LoadBearingError, RuntimeError):
    """Bad sweep input; the message names the problem and the fix."""


@dataclass
class SweepConfig:
    """Settings of one steering sweep (see :mod:`steering.sweep` for what each one does).

    ``max_cases`` counts type-C cases (None: every eligible one); ``per_question`` caps the C cases taken from
    one question (cases are drawn round-robin over questions in a seeded order, so the sample spans as many
    questions as it can); ``sesoi`` is the smallest effect of interest (a fraction: 0.10 = 10 points) that a
    "null" verdict must exclude.
    """

    run_dir: str
    directions: str
    output: str | None = None  # default RUN_DIR/steering
    model: str | None = None  # override the run manifest's model (refused unless allow_other_model)
    device: str | None = None  # where to load the run's model (default: loadbearing.engine.models' choice)
    layers: list[int] | None = None  # default: the directions' selected layer, else the middle one
    ks: list[int] | None = None  # default DEFAULT_KS, those within the stored basis
    alphas: list[float] = field(default_factory=lambda: list(DEFAULT_ALPHAS))
    controls: list[str] = field(default_factory=lambda: list(CONTROLS))
    operators: list[str] = field(default_factory=lambda: ["add"])  # add | ablate (ablate: no alpha)
    random_seeds: int = DEFAULT_RANDOM_SEEDS
    #: ``case``: each random generation draws its own direction; ``sweep``: random setting j is one direction
    #: for every case (R = random_seeds directions, so the probe's rate can be ranked among theirs)
    random_scope: str = "case"
    cases: str = "C"
    max_cases: int | None = None
    per_question: int = DEFAULT_PER_QUESTION
    n_non_c: int | None = None
    seed: int = 0
    exclude_questions: str | None = None  # file of question keys/ids the directions were fitted on
    allow_overlap: bool = False  # also steer the directions' fitting questions (recorded; not a held-out test)
    max_new_tokens: int = 128
    batch_size: int = 32
    positions: str = "continuation"
    dose: str = "matched"
    #: which stored bases of directions.h5 the probe settings steer along (probes.directions.BASES): the
    #: toolkit's ``basis``, the paper's ``m2`` and ``probe_pc`` (the paper design, steering.paper.design)
    bases: list[str] = field(default_factory=lambda: ["basis"])
    #: ``relative``: alphas times the layer's mean residual norm; ``raw``: alphas in residual-stream units
    alpha_units: str = "relative"
    sesoi: float = DEFAULT_SESOI
    level: float = 0.05
    resume: bool = False
    allow_incomplete: bool = False
    allow_other_model: bool = False
    progress: bool = True

    @property
    def out_dir(self) -> Path:
        return Path(self.output) if self.output is not None else Path(self.run_dir) / "steering"

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)

    def validate(self) -> SweepConfig:
        """Refuse impossible settings (one-line :class:`SweepError`); returns self."""
        if not self.alphas:
            raise SweepError("--alphas is empty; pass e.g. --alphas 0.25,0.5,1")
        for a in self.alphas:
            if not isinstance(a, (int, float)) or not math.isfinite(float(a)):
                raise SweepError(f"--alphas must be finite numbers, got {a!r}; pass e.g. --alphas 0.25,0.5,1")
        if self.ks is not None:
            if not self.ks:
                raise SweepError("--k is empty; pass e.g. --k 1,2,4")
            if any(int(k) < 1 for k in self.ks):
                raise SweepError(f"--k values must be >= 1, got {list(self.ks)}")
        if self.layers is not None and not self.layers:
            raise SweepError("--layers is empty; omit it to use the directions' selected layer")
        bad_ops = [o for o in self.operators if o not in OPERATORS]
        if bad_ops or not self.operators or len(set(self.operators)) != len(self.operators):
            why = (f"unknown operator {bad_ops[0]!r}" if bad_ops else "--operator is empty" if not self.operators
                   else f"--operator repeats an operator ({','.join(self.operators)})")
            raise SweepError(f"{why}; choose from {', '.join(OPERATORS)} (a comma list, e.g. --operator add,ablate)")
        bad = sorted(set(self.controls) - set(CONTROLS))
        if bad:
            raise SweepError(f"unknown controls {bad}; choose from {', '.join(CONTROLS)}")
        if not self.controls:
            raise SweepError("--controls is empty; pass random,none (a steering effect needs a control)")
        if "random" in self.controls and self.random_seeds < 1:
            raise SweepError(f"--random-seeds must be >= 1 with the random control, got {self.random_seeds}")
        if self.random_scope not in ("case", "sweep"):
            raise SweepError(f"--random-scope must be case or sweep, got {self.random_scope!r}")
        if self.cases not in CASE_KINDS:
            raise SweepError(f"--cases must be one of {', '.join(CASE_KINDS)}, got {self.cases!r}")
        for name in ("max_cases", "n_non_c"):
            v = getattr(self, name)
            if v is not None and v < 1:
                raise SweepError(f"--{name.replace('_', '-')} must be >= 1, got {v}; omit it to use every case")
        for name in ("per_question", "batch_size", "max_new_tokens"):
            v = getattr(self, name)
            if v < 1:
                raise SweepError(f"--{name.replace('_', '-')} must be >= 1, got {v}")
        if self.positions not in POSITIONS:
            raise SweepError(f"--steer-positions must be one of {', '.join(POSITIONS)}, got {self.positions!r}")
        if self.dose not in DOSES:
            raise SweepError(f"--dose must be one of {', '.join(DOSES)}, got {self.dose!r}")
        # deferred: keeps probes (and 3 more modules) out of `python -m steering.patching`'s start-up
        from probes.directions import BASES

        if not self.bases or len(set(self.bases)) != len(self.bases) or set(self.bases) - set(BASES):
            raise SweepError(f"bases must be distinct names from {', '.join(BASES)}, got {list(self.bases)}")
        if self.alpha_units not in ALPHA_UNITS:
            raise SweepError(f"alpha units must be one of {', '.join(ALPHA_UNITS)}, got {self.alpha_units!r}")
        check_fraction(self.sesoi, "--sesoi", error=SweepError)
        if not (math.isfinite(self.level) and 0 < self.level < 1):
            raise SweepError(f"the test level must be in (0, 1), got {self.level}")
        return self


__all__ = ["SweepConfig", "SweepError", "SCHEMA_VERSION", "DEFAULT_KS", "DEFAULT_ALPHAS",
           "DEFAULT_PER_QUESTION", "DEFAULT_RANDOM_SEEDS", "CONTROLS",
           "OPERATORS", "ALPHA_UNITS",
           "CASE_KINDS", "POSITIONS", "DOSES", "DEFAULT_SESOI", "CONFIG_FILE", "GENERATIONS", "SUMMARY", "PLOT"]
