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
from loadbearing.options import parse_layers, parse_list
from loadbearing.runs import CONFIG, GENERATIONS, SUMMARY
from loadbearing.stage.parser import option
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
_MODEL = "model and generation"

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

    run_dir: str = option(positional=True, nargs="?", group="inputs",
                          help="run directory written by python -m behavioural.run")
    directions: str = option(group="inputs", help="probes output directory holding directions.h5 (or the .h5 file "
                             "itself; required unless --plan)")
    output: str | None = option(None, flag="--output-dir", deprecated=("--output",), metavar="DIR", group="output",
                                help="output directory (default RUN_DIR/steering); must not exist unless --resume")
    #: override the run manifest's model (refused unless allow_other_model)
    model: str | None = option(None, group=_MODEL, help="model overriding the run manifest's (refused when it names "
                               "another model, unless --allow-other-model)")
    device: str | None = option(None, group=_MODEL, help="device for the run's model (default: loadbearing.engine."
                                "models' choice)")
    #: default: the directions' selected layer, else the middle one
    layers: list[int] | None = option(None, parse=lambda s: parse_layers(s, allow_all=False, error=SweepError),
                                      group="grid", help="comma-separated hidden_states layers to steer (default: the "
                                                         "file's selected_layer, else the middle of its layers)")
    #: default DEFAULT_KS, those within the stored basis
    ks: list[int] | None = option(None, flag="--k", parse=lambda s: parse_list(s, "--k", kind=int, error=SweepError),
                                  group="grid", help="comma-separated numbers of directions (default "
                                  f"{','.join(str(k) for k in DEFAULT_KS)}, those within the basis)")
    alphas: list[float] = option(factory=lambda: list(DEFAULT_ALPHAS), cli_default=",".join(str(a) for a in DEFAULT_ALPHAS),
                                 parse=lambda s: parse_list(s, "--alphas", kind=float, error=SweepError) or [],
                                 group="grid", help="comma-separated steering strengths, relative to the layer's mean "
                                                    "residual norm (default %(default)s)")
    controls: list[str] = option(factory=lambda: list(CONTROLS), cli_default=",".join(CONTROLS), group="grid",
                                 parse=lambda s: parse_list(s, "--controls", error=SweepError) or [],
                                 help="comma-separated controls: random (norm-matched isotropic random bases), "
                                      "random_cov (k > 1: bases matched to the activations' covariance), none (alpha-0 "
                                      "rerun) (default %(default)s)")
    #: add | ablate (ablate: no alpha)
    operators: list[str] = option(factory=lambda: ["add"], flag="--operator", cli_default="add", group="grid",
                                  parse=lambda s: parse_list(s, "--operator", error=SweepError) or [],
                                  help="comma-separated operators: add (add the directions at each alpha), ablate "
                                       "(project their span out of the residual stream, no alpha: is the direction "
                                       "necessary? steering.ablation); each gets its own controls, tests and verdict "
                                       "(default %(default)s)")
    random_seeds: int = option(DEFAULT_RANDOM_SEEDS, type=int, group="grid", help="random generations per case and "
                               "setting, each with its own direction (default %(default)s)")
    #: ``case``: each random generation draws its own direction; ``sweep``: random setting j is one direction
    #: for every case (R = random_seeds directions, so the probe's rate can be ranked among theirs)
    random_scope: str = option("case", choices=("case", "sweep"), group="grid",
                               help="case: every random generation draws its own direction; sweep: random setting j is "
                                    "one direction for every case, so the probe's moved rate is ranked among the R = "
                                    "--random-seeds directions' (use >= 19; default %(default)s)")
    cases: str = option("C", choices=CASE_KINDS, group="cases", help="C: type-C perturbed continuations only; all: also "
                        "a sample of non-C ones (side effects)")
    max_cases: int | None = option(None, type=int, group="cases", help="steer at most N C cases (a seeded sample, "
                                   "round-robin over questions; default: all)")
    per_question: int = option(DEFAULT_PER_QUESTION, type=int, group="cases",
                               help="at most N C cases per question (default %(default)s)")
    n_non_c: int | None = option(None, type=int, group="cases", help="with --cases all: number of non-C cases to sample "
                                 "(default: as many as C cases)")
    seed: int = option(0, type=int, group="cases", help="case-sampling seed (default %(default)s)")
    #: file of question keys/ids the directions were fitted on
    exclude_questions: str | None = option(None, metavar="FILE", group="cases",
                                           help="question keys or ids (one per line, or a JSON list) the directions "
                                                "were fitted on: never steered (directions.h5's own recorded split is "
                                                "always applied)")
    #: also steer the directions' fitting questions (recorded; not a held-out test)
    allow_overlap: bool = option(False, group="cases", help="also steer questions the directions were fitted on "
                                 "(recorded; not a held-out test)")
    max_new_tokens: int = option(128, type=int, group=_MODEL,
                                 help="generation budget per continuation (default %(default)s)")
    batch_size: int = option(32, type=int, group=_MODEL, help="rows per steered batch (default %(default)s)")
    positions: str = option("continuation", flag="--steer-positions", deprecated=("--positions",), choices=POSITIONS,
                            group="grid", help="which token positions are steered (see steering.positions; think / "
                                               "answer: a thinking model's think block / its answer only; default "
                                               "%(default)s)")
    dose: str = option("matched", choices=DOSES, group="grid", help="matched: k-direction vector rescaled to one "
                       "direction's norm; sum: the paper's plain sum")
    #: which stored bases of directions.h5 the probe settings steer along (probes.directions.BASES): the
    #: toolkit's ``basis``, the paper's ``m2`` and ``probe_pc`` (the paper design, steering.paper.design)
    bases: list[str] = field(default_factory=lambda: ["basis"], kw_only=True)
    #: ``relative``: alphas times the layer's mean residual norm; ``raw``: alphas in residual-stream units
    alpha_units: str = field(default="relative", kw_only=True)
    sesoi: float = option(DEFAULT_SESOI, type=float, group="cases",
                          help="smallest effect of interest, a fraction (0.10 = 10 points): a null verdict's interval "
                               "must lie within +/- it (default %(default)g)")
    level: float = field(default=0.05, kw_only=True)
    resume: bool = option(False, group="output", help="continue an existing output directory, skipping finished "
                          "generations")
    allow_incomplete: bool = option(False, group=_MODEL, help="steer a run whose manifest is not complete")
    allow_other_model: bool = option(False, group=_MODEL, help="steer with a model other than the run's")
    progress: bool = option(True, negate="--quiet", deprecated=("--no-progress",), group="output",
                            help="no progress bars")

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
