"""python -m steering.sweep RUN_DIR --directions RUN_DIR/probes  (this module: ``sweep.png``)

Moved-of-all fraction of the C cases against alpha, one line per k (one panel per layer), with
question-clustered bands; the matched control dashed; the alpha-0 rerun dotted; the verdict as the title.
Ablate settings (no alpha) get their own panel per layer: moved-of-all against k, the probe basis ablated
beside the random bases ablated, with the same bands.
"""
from __future__ import annotations

import textwrap
from pathlib import Path
from typing import Any

from loadbearing.figures import pyplot, save_figure


def plot_sweep(summary: dict[str, Any], path: str | Path) -> None:
    """Draw ``summary`` (from :func:`steering.sweep.analysis.summarize_records`) to ``path``."""
    plt = pyplot()

    settings = [d for d in summary["settings"] if d.get("operator", "add") == "add"]
    ablated = [d for d in summary["settings"] if d.get("operator") == "ablate"]
    layers = sorted({d["layer"] for d in settings})
    ab_layers = sorted({d["layer"] for d in ablated})
    ncol = max(len(layers) + len(ab_layers), 1)
    fig, axes = plt.subplots(1, ncol, figsize=(5 * ncol, 4), squeeze=False)
    for ax, L in zip(axes[0][len(layers):], ab_layers):
        _ablate_panel(ax, sorted([d for d in ablated if d["layer"] == L], key=lambda d: d["k"]), L, summary)
    for ax, L in zip(axes[0], layers):
        # one line per basis (the paper design steers two) and k; a control line once per k (the bases share it)
        lines = sorted({(d.get("directions") or "basis", d["k"]) for d in settings if d["layer"] == L},
                       key=lambda t: (t[1], t[0]))
        seen_k: set[int] = set()
        for i, (basis, k) in enumerate(lines):
            ds = sorted([d for d in settings if d["layer"] == L and d["k"] == k
                         and (d.get("directions") or "basis") == basis], key=lambda d: d["alpha_rel"])
            color = f"C{i}"
            name = f"k={k}" if basis == "basis" else f"{basis} k={k}"
            parts = (("probe", "-o", 0.2),) + ((("control", "--", 0.08),) if k not in seen_k else ())
            seen_k.add(k)
            for which, style, fill in parts:
                xs, ys, lo, hi = [], [], [], []
                for d in ds:
                    r = d["moved_of_all"] if which == "probe" else d["control"]["moved_of_all"]
                    if r["rate"] is None:
                        continue
                    xs.append(d["alpha_rel"])
                    ys.append(r["rate"])
                    lo.append(r["lo"] if r.get("lo") is not None else r["rate"])
                    hi.append(r["hi"] if r.get("hi") is not None else r["rate"])
                if xs:
                    label = name if which == "probe" else f"k={k} {ds[0]['control']['kind']} control"
                    ax.plot(xs, ys, style, color=color, label=label)
                    ax.fill_between(xs, lo, hi, color=color, alpha=fill)
        b = summary.get("baseline")
        if b and b["moved_of_all"]["rate"] is not None:
            ax.axhline(b["moved_of_all"]["rate"], color="gray", lw=1, ls=":", label="alpha=0 rerun")
        ax.set_title(f"layer {L}")
        ax.set_xlabel("alpha (x mean residual norm)")
        ax.set_ylabel("C cases moved to correct (of all)")
        ax.set_ylim(-0.02, 1.02)
        if ax.get_legend_handles_labels()[0]:
            ax.legend(fontsize=7)
    width = max(60, 14 * 5 * ncol)
    fig.suptitle("\n".join(textwrap.wrap(summary["verdict"], width)[:4]), fontsize=7)
    fig.tight_layout()
    save_figure(fig, path, dpi=110)


def _band(r: dict[str, Any]) -> tuple[float, float]:
    lo = r["lo"] if r.get("lo") is not None else r["rate"]
    hi = r["hi"] if r.get("hi") is not None else r["rate"]
    return max(r["rate"] - lo, 0.0), max(hi - r["rate"], 0.0)  # an interval's end may round past the rate


def _ablate_panel(ax: Any, ds: list[dict[str, Any]], L: int, summary: dict[str, Any]) -> None:
    """Moved-of-all against k for the ablated probe basis and its random-basis control (error bars: the rates'
    intervals)."""
    for which, fmt, dx in (("probe", "o", -0.08), ("control", "s", 0.08)):
        pts = [(d["k"], d["moved_of_all"] if which == "probe" else d["control"]["moved_of_all"]) for d in ds]
        pts = [(k, r) for k, r in pts if r and r.get("rate") is not None]
        if not pts:
            continue
        kind = "/".join(dict.fromkeys(str(d["control"]["kind"]) for d in ds))  # e.g. random (k=1)/random_cov (k>1)
        err = list(zip(*[_band(r) for _, r in pts]))
        ax.errorbar([k + dx for k, _ in pts], [r["rate"] for _, r in pts], yerr=err, fmt=fmt, capsize=3,
                    ls="-" if which == "probe" else "--", label="probe basis ablated" if which == "probe"
                    else f"{kind} bases ablated")
    b = summary.get("baseline")
    if b and b["moved_of_all"]["rate"] is not None:
        ax.axhline(b["moved_of_all"]["rate"], color="gray", lw=1, ls=":", label="unsteered rerun")
    ax.set_title(f"layer {L}, ablation")
    ax.set_xlabel("k (directions projected out)")
    ax.set_xticks(sorted({d["k"] for d in ds}))
    ax.set_ylabel("C cases moved to correct (of all)")
    ax.set_ylim(-0.02, 1.02)
    if ax.get_legend_handles_labels()[0]:
        ax.legend(fontsize=7)


__all__ = ["plot_sweep"]
