"""Figures the report draws itself: the steering sweep with a short title (the verdict is in the text), and the
early-answering curves of the causal tests' side-by-side section (:mod:`study.report.causal`).

The sweep stage draws ``steering/sweep.png`` with its whole verdict as the title, which a figure cuts off;
the report redraws it from ``steering/summary.json`` with :func:`steering.sweep.plot.plot_sweep` (the stage's own
plot) under a short title, into ``report_figures/steering_sweep.png``. If that fails (no matplotlib, a
summary of another schema), the report links the stage's own figure instead.

:func:`early_answer_figure` draws ``report_figures/early_answer_curves.png``: the same-answer fraction against
the fraction of the chain kept, one curve per task or level and the pooled curve, each with its interval band.

:func:`agreement_figure` draws ``report_figures/step_agreement.png`` from the numbers of the step-level agreement
table (:func:`behavioural.causal.agreement.step_agreement`): per pair of measures, the mean per-question Spearman
rho with its bootstrap interval, and the same-top-step rate with its Wilson interval beside chance.
"""
from __future__ import annotations

import json
import tempfile
from pathlib import Path

from loadbearing.figures import figure_bytes, pyplot
from loadbearing.files import atomic_write_bytes
from loadbearing.runs import SUMMARY

FIG_DIR = "report_figures"
SWEEP = f"{FIG_DIR}/steering_sweep.png"
EARLY_ANSWER = f"{FIG_DIR}/early_answer_curves.png"
AGREEMENT = f"{FIG_DIR}/step_agreement.png"


def sweep_title(summary: dict) -> str:
    code = summary.get("verdict_code") or "?"
    return f"Steering sweep: {code} (numbers in the report text)"


def steering_figure(out: str | Path) -> str | None:
    """Draw the report's sweep figure; its path relative to ``out``, or None when it cannot be drawn."""
    out = Path(out)
    src = out / "steering" / SUMMARY
    try:
        summary = json.loads(src.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
    if not isinstance(summary, dict) or not summary.get("settings"):
        return None
    try:
        from steering.sweep.plot import plot_sweep  # deferred: steering.sweep.plot loads numpy

        with tempfile.TemporaryDirectory() as td:
            tmp = Path(td) / "sweep.png"
            plot_sweep(dict(summary, verdict=sweep_title(summary)), tmp)
            data = tmp.read_bytes()
    except Exception:  # a figure must never stop the report; the stage's own figure is linked instead
        return None
    return _save(out, SWEEP, data)


def _png(fig, plt) -> bytes:
    """The figure's PNG bytes (no matplotlib version in the file: the same figure gives the same bytes), closed."""
    try:
        return figure_bytes(fig, dpi=110, metadata={"Software": None})
    finally:
        plt.close(fig)


def _save(out: Path, rel: str, data: bytes) -> str:
    target = out / rel
    target.parent.mkdir(exist_ok=True)
    if not target.is_file() or target.read_bytes() != data:
        atomic_write_bytes(target, data)
    return rel


def early_answer_figure(out: str | Path, curves: list[dict], group_name: str = "group") -> str | None:
    """Draw the early-answering curves (:func:`study.report.causal.early_answer_curves`: the pooled curve first,
    then one per ``group_name`` value) with their interval bands; the path relative to ``out``, or None when
    there is no curve or it cannot be drawn."""
    if not curves or not any(c["x"] for c in curves):
        return None
    try:
        plt = pyplot()

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
        data = _png(fig, plt)
    except Exception:  # a figure must never stop the report
        return None
    return _save(Path(out), EARLY_ANSWER, data)


def agreement_figure(out: str | Path, table: dict) -> str | None:
    """Draw the agreement table's pairs (module docstring); the path relative to ``out``, or None when the table
    has no pair or the figure cannot be drawn. A pair without a defined rho is drawn as an empty row, named n/a."""
    pairs = (table or {}).get("pairs") or []
    if not pairs:
        return None
    try:
        plt = pyplot()

        names = [f"{p['a']} vs {p['b']}" for p in pairs]
        ys = list(range(len(pairs)))[::-1]
        fig, (a1, a2) = plt.subplots(1, 2, figsize=(9, 0.45 * len(pairs) + 1.6), sharey=True)
        for y, p in zip(ys, pairs):
            rho, (lo, hi) = p["mean_spearman"], p["ci"]
            if rho is None:
                a1.text(0, y, "n/a", ha="center", va="center", fontsize=8, color="grey")
                continue
            err = [[rho - lo], [hi - rho]] if lo is not None and hi is not None else None
            a1.errorbar([rho], [y], xerr=err, fmt="o", color="C0", capsize=3, ms=5)
            a1.text(1.02, y, f"{p['n_questions_rho']} q", va="center", fontsize=7, transform=a1.get_yaxis_transform())
        a1.axvline(0, color="grey", lw=0.8, ls=":")
        a1.set_xlim(-1.05, 1.05)
        a1.set_xlabel("mean per-question Spearman rho\n(95% percentile bootstrap over questions)", fontsize=8)
        for y, p in zip(ys, pairs):
            r = p["same_top_step"]
            if not r.get("n"):
                a2.text(0.5, y, "n/a", ha="center", va="center", fontsize=8, color="grey")
                continue
            v = r["k"] / r["n"]
            a2.errorbar([v], [y], xerr=[[v - r["lo"]], [r["hi"] - v]], fmt="s", color="C1", capsize=3, ms=5,
                        label="same top step" if y == ys[0] else None)
            if p["chance_same_top"] is not None:
                a2.plot([p["chance_same_top"]], [y], "|", color="black", ms=12, mew=2,
                        label="chance" if y == ys[0] else None)
            a2.text(1.02, y, f"{r['k']}/{r['n']}", va="center", fontsize=7, transform=a2.get_yaxis_transform())
        a2.set_xlim(-0.02, 1.02)
        a2.set_xlabel("both measures pick the same top step\n(Wilson 95%; | = chance)", fontsize=8)
        a1.set_yticks(ys, names, fontsize=8)
        fig.suptitle("Step-level measures: do they rank the steps alike?", fontsize=9)
        fig.tight_layout()
        data = _png(fig, plt)
    except Exception:  # a figure must never stop the report
        return None
    return _save(Path(out), AGREEMENT, data)


__all__ = ["AGREEMENT", "EARLY_ANSWER", "FIG_DIR", "SWEEP", "agreement_figure", "early_answer_figure", "steering_figure",
           "sweep_title"]
