"""The difficulty gradient across a several-run study's runs (models x datasets), written to ``ROOT/gradient/``
after the last run (:func:`study.driver.main` on a study file with several models or datasets)."""
from __future__ import annotations

import json
from pathlib import Path

from loadbearing.errors import LoadBearingError
from loadbearing.runs import SUMMARY


def cross_run_gradient(root: Path, run_dirs: list[Path], say) -> Path | None:
    """The difficulty gradient across a several-run study's runs (models x datasets), in ``ROOT/gradient/``:
    every run whose behaviour found eligible baselines, with ``allow_mixed`` (the datasets' budgets differ by
    design; the gradient records it). Fewer than 2 such runs, or a gradient already written (a resume), write
    nothing; a refusal is said in one line and the runs stay as they are."""
    # deferred: the gradient's fit (statsmodels) loads only for a several-run study
    from behavioural.gradient import GradientConfig, run_gradient

    out = root / "gradient"
    if out.exists():
        return out
    usable = []
    for d in run_dirs:
        try:
            summary = json.loads((d / SUMMARY).read_text(encoding="utf-8"))
        except (OSError, ValueError):
            continue
        if isinstance(summary, dict) and "overall" in summary:
            usable.append(str(d))
    if len(usable) < 2:
        say(f"cross-run gradient: skipped: {len(usable)} run(s) with eligible baselines; it needs >= 2")
        return None
    try:
        run_gradient(GradientConfig(runs=tuple(usable), output=str(out), allow_mixed=True))
    except LoadBearingError as e:
        say(f"cross-run gradient: skipped: {str(e).splitlines()[0]}")
        return None
    say(f"cross-run gradient over {len(usable)} runs: {out / 'gradient.md'}")
    return out


__all__ = ["cross_run_gradient"]
