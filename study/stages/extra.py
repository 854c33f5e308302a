"""The study's optional stages: the field's other causal tests and activation patching.

    python -m study --output-dir DIR --stages behaviour,labels,early_answer,filler,paraphrase,resample,patch

They are registered in :data:`study.stages.REGISTRY` with ``default=False``: the study runs them only when
``--stages`` names them (or ``--stages all``), so the default demo keeps its budget. Each one is the stage's
own library call (``behavioural.causal.*``, ``steering.patching``) on the study's run directory, and renders its
own ``summary.md`` in the report.
"""
from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from behavioural.causal import attention, early_answer, filler, paraphrase, resample
from loadbearing.engine.vllm_engine import LazyVLLM
from loadbearing.runs import SUMMARY
from loadbearing.stage import Stage as StageType
from study.config import StudyConfig
from study.stage_entry import Stage

#: the causal tests' stage objects, by their --stages names
CAUSAL: dict[str, StageType] = {st.name: st for st in (
    early_answer.STAGE, filler.STAGE, paraphrase.STAGE, resample.STAGE, attention.RECEIVER_STAGE,
    attention.SUPPRESSION_STAGE)}


#: the causal tests whose generations (forced answers, rollouts) run through vLLM with ``--backend vllm``
VLLM_CAUSAL = ("early_answer", "filler", "paraphrase", "resample")


def _causal_run(st: StageType):
    def run(out: Path, c: StudyConfig) -> dict[str, Any]:
        kwargs: dict[str, Any] = {"run_dir": str(out), "resume": True, "batch_size": c.batch_size,
                                  "device": c.device, "seed": c.seed, "quiet": c.quiet}
        if st.name == "paraphrase":  # a study holds one model: its own chains are rewritten by it (the summary says so)
            kwargs["allow_same_paraphraser"] = True
        config = st.config(**kwargs)
        if c.backend != "vllm" or st.name not in VLLM_CAUSAL:  # the white-box tests are forward passes (HF)
            return st.run(config)
        # deferred: keeps behavioural.protocol (and 9 more modules) out of `python -m study.report`'s start-up
        from behavioural.run import vllm_options

        gen = LazyVLLM(**vllm_options(c))  # type: ignore[arg-type]  # forced answers / rollouts, prefix cache on
        try:
            return st.run(config, generate_fn=gen)  # type: ignore[call-arg]  # the generating tests take generate_fn
        finally:
            gen.shutdown()

    return run


def _causal_render(st: StageType):
    def render(out: Path, style: str) -> str | None:
        p = out / st.name / SUMMARY
        if not p.is_file():
            return None
        summary = json.loads(p.read_text(encoding="utf-8"))
        return st.report(summary).render("md" if style == "md" else "text")

    return render


def _patch_dir(out: Path) -> Path:
    return out / "patching"


def _run_patch(out: Path, c: StudyConfig) -> dict[str, Any]:
    # deferred: keeps steering.patching (and 4 more modules) out of `python -m study.report`'s start-up
    from steering.patching.cli import PatchConfig, run_patching

    return run_patching(PatchConfig(run_dir=str(out), layers=c.patch_layers, max_cases=c.patch_cases, seed=c.seed,
                                    device=c.device, progress=not c.quiet, command="python -m study --stages patch"))


def _render_patch(out: Path, style: str) -> None:
    """The report shows patching in its own section (``study.report.sections``: ``patching/patching.md`` and the
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


#: the optional stages, in run order (registered by :mod:`study.stages` after the default ones)
STAGES: tuple[Stage, ...] = (
    *(Stage(name, st.title, (lambda n: lambda o: o / n)(name), st.is_complete, _causal_run(st), _causal_render(st),
            needs=("behaviour",), bound=BOUNDS[name], default=False) for name, st in CAUSAL.items()),
    Stage("patch", "Activation patching: where is the error carried?", _patch_dir,
          lambda p: (p / "patching.json").is_file(), _run_patch, _render_patch, needs=("behaviour",),
          bound=BOUNDS["patch"], default=False),
)
