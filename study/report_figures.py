"""Figures the report draws itself: the steering sweep with a short title (the verdict is in the text), and the
early-answering curves of the causal tests' side-by-side section (:mod:`study.report_causal`).

The sweep stage draws ``steering/sweep.png`` with its whole verdict as the title, which a figure cuts off;
the report redraws it from ``steering/summary.json`` with :func:`steering.plot.plot_sweep` (the stage's own
plot) under a short title, into ``report_figures/steering_sweep.png``. If that fails (no matplotlib, a
summary of another schema), the report links the stage's own figure instead.

:func:`early_answer_figure` draws ``report_figures/early_answer_curves.png``: the same-answer fraction against
the fraction of the chain kept, one curve per task or level and the pooled curve, each with its interval band.
"""
from __future__ import annotations

import json
import tempfile
from pathlib import Path

from loadbearing.files import atomic_write_bytes

FIG_DIR = "report_figures"
SWEEP = f"{FIG_DIR}/steering_sweep.png"
EARLY_ANSWER = f"{FIG_DIR}/early_answer_curves.png"


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
    return _save(out, SWEEP, data)


def _save(out: Path, rel: str, data: bytes) -> str:
    target = out / rel
    target.parent.mkdir(exist_ok=True)
    if not target.is_file() or target.read_bytes() != data:
        atomic_write_bytes(target, data)
    return rel


def early_answer_figure(out: str | Path, curves: list[dict], group_name: str = "group") -> str | None:
    """Draw the early-answering curves (:func:`study.report_causal.early_answer_curves`: the pooled curve first,
    then one per ``group_name`` value) with their interval bands; the path relative to ``out``, or None when
    there is no curve or it cannot be drawn."""
    if not curves or not any(c["x"] for c in curves):
        return None
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt

        fig, ax = plt.subplots(figsize=(6, 4))
        for i, c in enumerate(curves):
            pooled = i == 0
            color = "black" if pooled else f"C{i - 1}"
            label = (f"pooled ({c['n_questions']} q)" if pooled else f"{group_name} {c['label']} ({c['n_questions']} q)")
            ax.plot(c["x"], c["same"], "-o" if pooled else "--o", color=color, lw=2 if pooled else 1.2, ms=3,
                    label=label)
            band = [(x, lo, hi) for x, lo, hi in zip(c["x"], c["lo"], c["hi"]) if lo is not None and hi is not None]
            if band:
                ax.fill_between([b[0] for b in band], [b[1] for b in band], [b[2] for b in band], color=color,
                                alpha=0.12 if pooled else 0.08, lw=0)
        ax.set_xlabel("fraction of the chain kept (reasoning lines k/n, 10% bins)")
        ax.set_ylabel("forced answer = full-chain answer")
        ax.set_xlim(-0.02, 1.02)
        ax.set_ylim(-0.02, 1.02)
        ax.set_title("Early answering: same-answer curves (bands: 95% intervals clustered by question)", fontsize=8)
        ax.legend(fontsize=7, loc="upper left")
        fig.tight_layout()
        with tempfile.TemporaryDirectory() as td:
            tmp = Path(td) / "curves.png"
            fig.savefig(tmp, dpi=110, metadata={"Software": None})
            plt.close(fig)
            data = tmp.read_bytes()
    except Exception:  # a figure must never stop the report
        return None
    return _save(Path(out), EARLY_ANSWER, data)


__all__ = ["EARLY_ANSWER", "FIG_DIR", "SWEEP", "early_answer_figure", "steering_figure", "sweep_title"]
