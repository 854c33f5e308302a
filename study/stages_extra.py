"""The study's optional stages: the field's other causal tests and activation patching.

    python -m study --output-dir DIR --stages behaviour,labels,early_answer,filler,paraphrase,resample,patch

They are registered in :data:`study.stages.REGISTRY` with ``default=False``: the study runs them only when
``--stages`` names them (or ``--stages all``), so the default demo keeps its budget. Each one is the stage's
own library call (``behavioural.causal.*``, ``steering.patch``) on the study's run directory, and renders its
own ``summary.md`` in the report.
"""
from __future__ import annotations

import importlib
import json
from pathlib import Path
from typing import Any

from loadbearing.runs import SUMMARY
from study.config import StudyConfig
from study.stages import Stage, register

#: name -> (module, config class, run function, title)
CAUSAL = {
    "early_answer": ("behavioural.causal.early_answer", "EarlyAnswerConfig", "run_early_answer",
                     "Early answering: does cutting the chain change the answer?"),
    "filler": ("behavioural.causal.filler", "FillerConfig", "run_filler",
               "Filler tokens: does the chain's content matter, or only its length?"),
    "paraphrase": ("behavioural.causal.paraphrase", "ParaphraseConfig", "run_paraphrase",
                   "Paraphrase: does the chain's wording matter?"),
    "resample": ("behavioural.causal.resample", "ResampleConfig", "run_resample",
                 "Resampling importance: which steps anchor the answer (on-policy)?"),
    "receiver_heads": ("behavioural.causal.attention", "AttentionConfig", "run_receiver_heads",
                       "Receiver heads: which steps do the model's broadcasting heads attend to (white-box)?"),
    "suppression": ("behavioural.causal.attention", "AttentionConfig", "run_suppression",
                    "Attention suppression: which steps does masking change the later steps' predictions for?"),
}


def _causal_run(name: str):
    mod, cfg, fn, _ = CAUSAL[name]

    def run(out: Path, c: StudyConfig) -> Any:
        m = importlib.import_module(mod)
        kwargs: dict[str, Any] = {"run_dir": str(out), "resume": True, "batch_size": c.batch_size,
                                  "device": c.device, "seed": c.seed, "progress": not c.quiet}
        if name == "paraphrase":  # a study holds one model: its own chains are rewritten by it (the summary says so)
            kwargs["allow_same_paraphraser"] = True
        return getattr(m, fn)(getattr(m, cfg)(**kwargs))

    return run


def _causal_complete(name: str):
    from behavioural.causal.common import is_stage_complete

    return lambda p: bool(is_stage_complete(p, name))


def _causal_render(name: str):
    def render(out: Path, style: str) -> str | None:
        p = out / name / SUMMARY
        if not p.is_file():
            return None
        mod = importlib.import_module(CAUSAL[name][0])
        return str(mod.format_summary(json.loads(p.read_text(encoding="utf-8")), style="md" if style == "md" else "text"))

    return render


def _patch_dir(out: Path) -> Path:
    return out / "patching"


def _run_patch(out: Path, c: StudyConfig) -> Any:
    from steering.patch import PatchConfig, run_patching

    return run_patching(PatchConfig(run_dir=str(out), layers=c.patch_layers, max_cases=c.patch_cases, seed=c.seed,
                                    device=c.device, progress=not c.quiet, command="python -m study --stages patch"))


def _render_patch(out: Path, style: str) -> None:
    """The report shows patching in its own section (``study.report_sections``: ``patching/patching.md`` and the
    heat map), so the stage renders nothing here."""
    return None


#: upper bounds on each optional stage's model generations (eligibility is known only after the baselines)
BOUNDS = {
    "early_answer": lambda c: f"<= {c.max_examples} eligible baselines x (reasoning lines + 1) forced answers of <= 16 tokens",
    "filler": lambda c: f"<= {c.max_examples} eligible baselines x 10 forced answers (no chain, full chain, 2 fillers x 4 "
                        "lengths)",
    "paraphrase": lambda c: f"<= {c.max_examples} eligible baselines x 4 fractions x (1 paraphrase + 1 continuation)",
    "resample": lambda c: "<= 8 questions x reasoning lines x 2 prefixes x 8 rollouts (+ forced answers)",
    "receiver_heads": lambda c: "forward passes only: <= 8 chains x 1 pass with attention weights",
    "suppression": lambda c: "forward passes only: <= 8 chains x (reasoning lines + 1) passes",
    "patch": lambda c: f"forward passes only: <= {c.patch_cases} C cases x layers x 4 position groups (+ controls)",
}


def _register() -> None:
    for name, (_, _, _, title) in CAUSAL.items():
        register(Stage(name, title, (lambda n: lambda o: o / n)(name), _causal_complete(name), _causal_run(name),
                       _causal_render(name), needs=("behaviour",), bound=BOUNDS[name], default=False))
    register(Stage("patch", "Activation patching: where is the error carried?", _patch_dir,
                   lambda p: (p / "patching.json").is_file(), _run_patch, _render_patch, needs=("behaviour",),
                   bound=BOUNDS["patch"], default=False))


_register()
importlib.import_module("study.stages_paper")  # the paper-design steering sweep (paper_steering), after these
