"""python -m study --output-dir DIR  (this module: the study's settings, stored in ``DIR/study.json``)

The rules that fill the settings left unset (the model's budgets, the dataset's tasks and strategies) are in
:mod:`study.settings`. The CPU default is the ``arith`` ladder at three levels that SmolLM2-135M-Instruct answers a
useful, different fraction of (s2_o3, s2_o5, s2_o9), with three edits that together give both outcomes: ``arithmetic`` (the
original evaluator's edit of the first number, often an operand the model then ignores),
``arithmetic_change`` (the line's result, which the model copies forward) and ``contradiction``.
"""
from __future__ import annotations

import dataclasses
import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from loadbearing.cli import check_fraction, check_number
from loadbearing.errors import LoadBearingError
from loadbearing.files import read_json, write_json
from loadbearing.options import check_layers, parse_float_list, parse_layers, parse_token_positions, split_list
from loadbearing.provenance import now
from loadbearing.runs import CONFIG, MANIFEST
from loadbearing.stage.parser import option
from steering.positions import POSITIONS
from steering.sweep.config import DEFAULT_ALPHAS, DEFAULT_KS, DEFAULT_PER_QUESTION, DEFAULT_RANDOM_SEEDS, DEFAULT_SESOI, OPERATORS

STUDY_FILE = "study.json"
#: the help groups of ``python -m study`` (its parser is built from :class:`StudyConfig`; study.options)
_STUDY, _GEN, _PS = "study", "generation backend (does not change results)", "probes and steering"
GROUPS = (_STUDY, "model", "questions", "protocol", _GEN, "labels", _PS)
SCHEMA_VERSION = 1


class StudyError(LoadBearingError, ValueError):
    """A study request that cannot be carried out; the message names the problem and the fix."""


@dataclass(frozen=True)
class StudyConfig:
    """Every setting of a study (``python -m study`` and ``--config FILE`` parse into this; tests build it
    directly). A None below is filled by :func:`study.settings.resolve` from the model and dataset (the rule
    that applied is printed); the study stores the resolved settings in ``DIR/study.json``."""

    output_dir: str = option(metavar="DIR", group=_STUDY, help="new study directory (the run directory of every "
                             "stage); default runs/study-<time>")
    model: str = option("smollm2-135m-instruct", group="model", help="model for every stage (default %(default)s)")
    dataset: str = option("arith", group="questions", help="gsm8k | mmlu | bbh | arith (default %(default)s)")
    #: None: arith -> the three demo levels; gsm8k -> none; mmlu/bbh -> every subject/task. A comma list is accepted.
    task: str | None = option(None, group="questions", help="MMLU subjects, BBH tasks or arith levels, a comma list "
                              "(default: arith's three demo levels; every subject/task of mmlu/bbh)")
    data_dir: str | None = option(None, group="questions", help="benchmark data directory holding gsm8k/, mmlu/, bbh/ "
                                  "(default: the hub)")
    max_examples: int = option(160, type=int, group="questions", help="questions (default %(default)s)")
    #: arith questions generated per level (the sample is drawn from them; 53 x 3 levels = every one)
    n_per_level: int | None = option(None, type=int, group="questions",
                                     help="arith: questions generated per level (default 80)")
    strategy: str | None = option(None, group="protocol", help="perturbation strategies, a comma list (default: the "
                                  "dataset's, see study.settings)")
    positions: str = option("early,middle,late", flag="--line-positions", deprecated=("--positions",), metavar="LIST",
                            group="protocol", help="edited line positions, a comma list of early, middle, late")
    #: None: the embedded model's CPU budget (96), else the paper's 4,096
    max_new_tokens: int | None = option(None, type=int, group="protocol", help="generation budget (default: 96 for "
                                        "the embedded model, the paper's 4096 for any other)")
    #: None: the benchmark's own exemplars for the embedded model, the dataset's default otherwise
    few_shot: bool | None = option(None, off=("--no-few-shot", "no few-shot turns"), group="protocol",
                                   help="few-shot turns: the benchmark's own exemplars (default: on for the embedded "
                                        "model)")
    batch_size: int = option(16, type=int, group=_GEN, help="generation batch size (default %(default)s)")
    dtype: str | None = option(None, group="model", help="float32 | float16 | bfloat16 | auto (default: float32 on "
                               "CPU, bfloat16 on GPU)")
    quantize: str | None = option(None, group="model", help="4bit | 8bit (bitsandbytes)")
    labeller: str = option("rule", group="labels", help="rule, judge:MODEL, or a comma list (default rule)")
    final: str | None = option(None, group="labels", help="which labeller's label is final (default: the first)")
    folds: int = option(5, type=int, group=_PS, help="probes: grouped outer CV folds (default %(default)s)")
    #: fraction of questions the steering directions are NOT fitted on; only those questions are steered
    steer_holdout: float = option(0.5, type=float, group=_PS, help="fraction of questions kept out of the direction "
                                  "fit; steering uses only those (default %(default)s)")
    #: the steering grid and sample: the sweep's own defaults (steering.sweep.config), so the two steer alike
    k: str = option(",".join(str(k) for k in DEFAULT_KS), group=_PS,
                    help="steering: numbers of directions (default %(default)s)")
    alphas: str = option(",".join(f"{a:g}" for a in DEFAULT_ALPHAS), group=_PS, help="steering: strengths relative to "
                         "the mean residual norm (default %(default)s; >= 1 turns SmolLM2 into noise)")
    steer_layers: str | None = option(None, group=_PS, help="steering layers (default: the probes' selection)")
    max_cases: int = option(24, type=int, group=_PS, help="steering: C cases (default %(default)s)")
    #: C cases steered per question (1: the cases spread over as many questions as possible)
    per_question: int = option(DEFAULT_PER_QUESTION, type=int, group=_PS,
                               help="steering: C cases per question (default %(default)s)")
    #: None: the embedded model's CPU budget (64), else the paper's 4,096
    steer_max_new_tokens: int | None = option(None, type=int, group=_PS, help="steering budget (default: 64 for the "
                                              "embedded model, 4096 for any other)")
    #: smallest steering effect of interest (a fraction): a null must exclude it
    sesoi: float = option(DEFAULT_SESOI, type=float, group=_PS, help="steering: smallest effect of interest, a "
                          "fraction of cases (0.10 = 10 points; default %(default)s)")
    random_seeds: int = option(DEFAULT_RANDOM_SEEDS, type=int, group=_PS,
                               help="steering: random-direction seeds (default %(default)s)")
    #: steering: case (each random generation its own direction) or sweep (random setting j one direction for
    #: every case, so the probe's direction is ranked among them; steering.sweep --random-scope)
    random_scope: str = option("case", choices=("case", "sweep"), group=_PS, help="steering: case (a fresh random "
                               "direction per generation) or sweep (each random setting one direction for every case, "
                               "ranked against the probe's; use >= 19 seeds; default %(default)s)")
    #: steering operators, a comma list: add (the directions added at each alpha), ablate (their span projected out)
    steer_operator: str = option("add", group=_PS, help="steering operators, a comma list: add (the directions added "
                                 "at each alpha), ablate (their span projected out: are they necessary?) (default "
                                 "%(default)s)")
    seed: int = option(42, type=int, group="questions", help="sampling and perturbation seed (default %(default)s)")
    device: str | None = option(None, group="model", help="cpu | cuda | cuda:N | auto (--dry-run checks only the "
                                "syntax)")
    backend: str = option("hf", group=_GEN, help="hf | hf-plain | vllm (default hf)")
    tensor_parallel_size: int = option(1, type=int, group=_GEN, help="vLLM: GPUs to shard over")
    gpu_memory_utilization: float = option(0.85, type=float, group=_GEN,
                                           help="vLLM: fraction of GPU memory (default %(default)s)")
    pipeline_parallel_size: int = option(1, type=int, group=_GEN, help="vLLM: pipeline stages")
    data_parallel_size: int = option(1, type=int, group=_GEN, help="vLLM: engine replicas")
    distributed_executor_backend: str | None = option(None, group=_GEN,
                                                      help="vLLM: mp | ray | uni | external_launcher")
    #: the stages to run (comma list of study.stages names, or None / "all" for every one)
    stages: str | None = option(None, group=_STUDY, help="the stages to run, a comma list (default: behaviour,labels,"
                                "gradient,activations,probes,steering,browser; optional: early_answer,filler,"
                                "paraphrase,resample,receiver_heads,suppression,patch), or all")
    #: activation patching (``--stages patch``): the hidden-state layers ("all" or a comma list) and C cases
    patch_layers: str = option("all", group=_STUDY, help="--stages patch: hidden-state layers, 'all' or a comma list "
                               "(default %(default)s)")
    patch_cases: int = option(8, type=int, group=_STUDY, help="--stages patch: at most N C cases, one per question "
                              "(default %(default)s)")
    #: the hidden-state layers the activations stage stores ("all" or a comma list: ``make reproduce`` stores one)
    activation_layers: str = option("all", metavar="LAYERS", group=_PS, help="activations: hidden-state layers to "
                                    "store, 'all' or a comma list (default %(default)s)")
    #: probes.train --permutations: question-level label permutations of the shuffled-label control (0 = off)
    permutations: int = option(100, type=int, group=_PS, help="probes: label permutations of the shuffled-label "
                               "control, 0 = off (default %(default)s)")
    #: the probes trained (probes.train --probe: logistic, mass_mean, mlp, both = the linear two, or a comma set)
    probe: str = option("both", cli=False, help="a study file's setting: probes.train --probe")
    #: probes.train --paper-table: also paper_table.csv/.md, the paper's Tables 5-7 layout
    paper_table: bool = option(False, cli=False, help="a study file's setting: probes.train --paper-table")
    #: ``--stages paper_steering``: C cases (and as many non-C ones) of the descriptive paper-design sweep
    paper_steer_cases: int = option(4, cli=False, help="a study file's setting: --stages paper_steering's C cases")
    quiet: bool = option(False, group=_STUDY, help="no progress bars")
    #: steering positions (steering.positions: continuation, generated, all; think / answer for a thinking model)
    steer_positions: str = option("continuation", group=_PS, help="steering: which positions get the vector "
                                  "(continuation, generated, all; think / answer: a thinking model's think block / its "
                                  "answer; default %(default)s)")
    #: the activation store's token positions (activations.inputs; e.g. "prefix_last,think_mean")
    token_positions: str = option("prefix_last", group=_PS, help="activations: the stored token positions, a comma "
                                  "list (prefix_last, edit_mean, edit_last, think_mean, think_last; default "
                                  "%(default)s)")

    #: settings that may differ on --resume (they do not change results)
    FREE = ("output_dir", "batch_size", "device", "quiet", "backend", "tensor_parallel_size",
            "gpu_memory_utilization", "pipeline_parallel_size", "data_parallel_size", "distributed_executor_backend",
            "stages")

    #: settings added later, left out of the stored settings while they hold their default (so a study that does
    #: not use them stores the same study.json as before they existed)
    ADDED = {"steer_positions": "continuation", "token_positions": "prefix_last"}

    def to_dict(self) -> dict[str, Any]:
        d = dataclasses.asdict(self)
        return {k: v for k, v in d.items() if not (k in self.ADDED and v == self.ADDED[k])}

    def result_settings(self) -> dict[str, Any]:
        return {k: v for k, v in self.to_dict().items() if k not in self.FREE}

    def validate(self) -> None:
        """Refuse settings that cannot run (offline: loads nothing). :func:`study.dryrun.plan.check` goes further."""
        for name in ("max_examples", "max_new_tokens", "batch_size", "max_cases", "random_seeds", "n_per_level",
                     "per_question", "steer_max_new_tokens", "tensor_parallel_size", "pipeline_parallel_size",
                     "data_parallel_size", "paper_steer_cases"):
            check_number(getattr(self, name), "--" + name.replace("_", "-"), minimum=1)
        self._check_probe_settings()
        check_number(self.steer_holdout, "--steer-holdout", minimum=0, maximum=0.95)
        check_fraction(self.sesoi, "--sesoi", error=StudyError)

        if self.steer_positions not in POSITIONS:
            raise StudyError(f"--steer-positions must be one of {', '.join(POSITIONS)}, got {self.steer_positions!r}")
        if self.random_scope not in ("case", "sweep"):
            raise StudyError(f"--random-scope must be case or sweep, got {self.random_scope!r}")
        check_number(self.gpu_memory_utilization, "--gpu-memory-utilization", minimum=0.01, maximum=1.0)
        check_number(self.folds, "--folds", minimum=2)
        check_number(self.permutations, "--permutations", minimum=0)
        parse_float_list(self.alphas, "--alphas")
        ks = parse_float_list(self.k, "--k", minimum=1)
        if any(int(v) != v for v in ks):
            raise StudyError(f"--k {self.k!r}: numbers of directions must be whole numbers >= 1")

        ops = split_list(self.steer_operator)
        bad = [o for o in ops if o not in OPERATORS]
        if bad or not ops or len(set(ops)) != len(ops):
            raise StudyError(f"--steer-operator {self.steer_operator!r}: give a comma list of distinct operators from "
                             f"{', '.join(OPERATORS)} (e.g. add,ablate)")
        parse_layers(self.steer_layers, "--steer-layers", allow_all=False, error=StudyError)


    def _check_probe_settings(self) -> None:
        # deferred: keeps activations (and 8 more modules) out of `python -m study`'s start-up
        from activations.inputs import OUTCOME_POSITIONS, SAFE_POSITIONS, expand_continuation
        from probes.config import parse_probes  # deferred: probes.config loads sklearn

        check_layers(self.activation_layers, "--activation-layers", error=StudyError)
        try:
            parse_probes(self.probe)
        except LoadBearingError as e:  # the message names the one option at fault
            msg = str(e).splitlines()[0]
            raise StudyError(msg if msg.startswith("--probe") or "unknown --probe" in msg[:40]
                             else f"--probe {self.probe!r}: {msg}") from None
        try:
            parse_token_positions(self.token_positions, "--token-positions", safe=SAFE_POSITIONS,
                                  outcome=OUTCOME_POSITIONS, default=("prefix_last",), error=StudyError,
                                  expand=expand_continuation, expand_name="continuation[:N]")
        except LoadBearingError as e:
            raise StudyError(str(e).splitlines()[0]) from None


def read_stored(out: Path) -> dict[str, Any] | None:
    """The settings stored in ``DIR/study.json``, or None when the study has not stored any yet."""
    p = out / STUDY_FILE
    if not p.is_file():
        return None
    try:
        d = json.loads(p.read_text(encoding="utf-8"))
    except (ValueError, UnicodeDecodeError) as e:
        raise StudyError(f"{p} is not valid JSON ({e}); it was cut off or edited: restore it, or delete it to resume "
                         "with the options given on the command line") from None
    if not isinstance(d, dict) or not isinstance(d.get("settings"), dict):
        raise StudyError(f"{p} holds no study settings; restore it, or delete it to resume with the given options")
    return d["settings"]


def write_stored(out: Path, config: StudyConfig) -> None:
    write_json(out / STUDY_FILE, {"kind": "study", "schema_version": SCHEMA_VERSION, "updated": now(),
                                  "settings": config.to_dict()})


def record_batching(out: Path, name: str, target: Path) -> dict[str, Any] | None:
    """Copy the batch sizes stage ``name`` used (``batching`` in its manifest, sweep record or store attributes:
    :meth:`loadbearing.engine.oom.BatchSize.record`) from its output ``target`` into ``DIR/study.json``'s
    ``batching``; returns it (None for a stage that runs no batched forward passes)."""
    record: Any = None
    if target.is_file() and target.suffix == ".h5":  # an activation store (the browser's page holds none)
        # deferred: keeps activations (and 7 more modules) out of `python -m study`'s start-up
        from activations.store import open_store

        with open_store(target) as st:
            record = st.attrs.get("batching") or None
        record = json.loads(record) if isinstance(record, str) else record
    else:
        for file in (MANIFEST, CONFIG):
            if (target / file).is_file():
                record = read_json(target / file).get("batching")
                break
    if not isinstance(record, dict) or not (out / STUDY_FILE).is_file():
        return None
    stored = read_json(out / STUDY_FILE)
    stored["batching"] = {**(stored.get("batching") or {}), name: record}
    write_json(out / STUDY_FILE, stored)
    return record
