"""The study's optional paper-design steering stage: ``--stages ...,paper_steering`` (``make reproduce`` runs it).

    python -m study --output-dir DIR --stages behaviour,labels,activations,probes,steering,paper_steering

A small descriptive sweep in the paper's own design (:mod:`steering.paper.design`: its M2 and probe bases,
k 2/4/8, summed dose, 11 raw alphas, its relative depth, random controls) on ``paper_steer_cases`` held-out C
cases and as many non-C ones, one random generation per case and setting, into ``DIR/steering-paper``, with
``table7.csv``/``.md`` (the paper's Table 7 layout) beside its summary. It is not the study's steering test
(that is the ``steering`` stage, on its own fixed settings); its many settings at small n describe.
"""
from __future__ import annotations

from pathlib import Path
from typing import Any

from study.config import StudyConfig
from study.stage_entry import Stage

#: random generations per case and setting in the paper-design sweep (the paper drew one random direction)
RANDOM_SEEDS = 1


def _dir(out: Path) -> Path:
    return out / "steering-paper"


def _complete(d: Path) -> bool:
    from steering.sweep.cli import is_complete  # deferred: keeps probes (and 22 more modules) out of `python -m study`'s start-up

    return bool(is_complete(d)) and (d / "table7.csv").is_file()


def _run(out: Path, c: StudyConfig) -> dict[str, Any]:
    # deferred: keeps probes (and 20 more modules) out of `python -m study`'s start-up
    from steering.paper.design import run_paper_design
    from steering.sweep.cli import SweepConfig  # deferred: keeps probes (and 22 more modules) out of `python -m study`'s start-up

    assert c.steer_max_new_tokens is not None, "resolve the config first (study.settings.resolve)"
    cfg = SweepConfig(run_dir=str(out), directions=str(out / "probes"), output=str(_dir(out)),
                      max_cases=c.paper_steer_cases, per_question=c.per_question, random_seeds=RANDOM_SEEDS,
                      max_new_tokens=c.steer_max_new_tokens, sesoi=c.sesoi, seed=c.seed, batch_size=c.batch_size,
                      device=c.device, progress=not c.quiet, resume=_dir(out).exists())
    from study.stages.core import steering_backend  # deferred: import cycle study.stages.core -> study.stages.paper

    with steering_backend(c) as fns:  # --backend vllm: hooks inside vLLM (steering.vllm.engine)
        return run_paper_design(cfg, echo=(lambda *_: None) if c.quiet else print, generate_fn=fns.get("generate_fn"))


def _render(out: Path, style: str) -> str | None:
    # deferred: keeps probes (and 20 more modules) out of `python -m study`'s start-up
    from steering.paper.design import load_design

    # deferred: keeps steering.paper (and 1 more modules) out of `python -m study`'s start-up
    from steering.paper.table7 import render

    if not _complete(_dir(out)):
        return None
    return render(_dir(out), style="md" if style == "md" else "text", notes=load_design().notes)


def per_case(design: Any = None) -> int:
    """Generations per steered case: the unsteered rerun, each basis x k x nonzero alpha, and the random
    controls (``RANDOM_SEEDS`` per k x alpha)."""
    # deferred: keeps probes (and 20 more modules) out of `python -m study`'s start-up
    from steering.paper.design import load_design

    d = design or load_design()
    n = len(d.ks) * len(d.steered_alphas)
    return 1 + n * len(d.bases) + n * RANDOM_SEEDS


def bound(c: StudyConfig) -> str:
    n = per_case()
    return (f"<= {c.paper_steer_cases} C + {c.paper_steer_cases} non-C cases x {n} (unsteered + 2 bases x 3 k x 10 "
            f"alphas + {RANDOM_SEEDS} random per k x alpha) = {2 * c.paper_steer_cases * n} generations, each <= "
            f"{c.steer_max_new_tokens} new tokens (descriptive: the paper's Table 7)")


#: the paper-design sweep (registered by :mod:`study.stages` after the other optional stages)
STAGES = (Stage("paper_steering", "Steering in the paper's design (its Table 7 layout)", _dir, _complete, _run, _render,
                needs=("probes",), bound=bound, default=False),)

__all__ = ["RANDOM_SEEDS", "STAGES", "bound", "per_case"]
