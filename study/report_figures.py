"""Figures the report draws itself: the steering sweep with a short title (the verdict is in the text).

The sweep stage draws ``steering/sweep.png`` with its whole verdict as the title, which a figure cuts off;
the report redraws it from ``steering/summary.json`` with :func:`steering.plot.plot_sweep` (the stage's own
plot) under a short title, into ``report_figures/steering_sweep.png``. If that fails (no matplotlib, a
summary of another schema), the report links the stage's own figure instead.
"""
from __future__ import annotations

import json
import tempfile
from pathlib import Path

from loadbearing.files import atomic_write_bytes

FIG_DIR = "report_figures"
SWEEP = f"{FIG_DIR}/steering_sweep.png"


def sweep_title(summary: dict) -> str:
    code = summary.get("verdict_code") or "?"
    return f"Steering sweep: {code} (numbers in the report text)"


def steering_figure(out: str | Path) -> str | None:
    """Draw the report's sweep figure; its path relative to ``out``, or None when it cannot be drawn."""
    out = Path(out)
    src = out / "steering" / "summary.json"
    try:
        summary = json.loads(src.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
    if not isinstance(summary, dict) or not summary.get("settings"):
        return None
    try:
        from steering.plot import plot_sweep

        with tempfile.TemporaryDirectory() as td:
            tmp = Path(td) / "sweep.png"
            plot_sweep(dict(summary, verdict=sweep_title(summary)), tmp)
            data = tmp.read_bytes()
    except Exception:  # a figure must never stop the report; the stage's own figure is linked instead
        return None
    target = out / SWEEP
    target.parent.mkdir(exist_ok=True)
    if not target.is_file() or target.read_bytes() != data:
        atomic_write_bytes(target, data)
    return SWEEP


__all__ = ["FIG_DIR", "SWEEP", "steering_figure", "sweep_title"]
