"""``accuracy_vs_layer.png``: held-out accuracy per layer with the question-clustered bands the report prints,
the shuffled-label control (mean and central 95% of the permutations), the majority-class and metadata-only
baselines and the nested-CV headline, labelled with the report's own ``format_rate`` (matplotlib, Agg)."""
from __future__ import annotations

from pathlib import Path

from loadbearing.files import atomic_write_bytes
from loadbearing.stats import Rate, format_rate

COLORS = {"logistic": "tab:blue", "mass_mean": "tab:orange", "mlp": "tab:green"}


def _band(acc: dict) -> tuple[float, float]:
    """The interval the report prints for an accuracy (question-clustered ``lo``/``hi``, as
    :func:`loadbearing.stats.format_rate` reads it; a legacy dict's Wilson interval)."""
    r = Rate.from_dict(acc)
    if r.lo is not None and r.hi is not None:
        return r.lo, r.hi
    return (r.value or 0.0), (r.value or 0.0)


def plot_accuracy_vs_layer(results: dict, path) -> Path:
    import matplotlib  # deferred: matplotlib is heavy to import

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt  # deferred: matplotlib is heavy to import

    fig, ax = plt.subplots(figsize=(8, 4.5))
    maj = results["majority_baseline"]["accuracy"]["rate"]
    for kind, res in results["probes"].items():
        c = COLORS.get(kind, None)
        rows = res["layers"]
        L = [r["layer"] for r in rows]
        acc = [r["accuracy"]["rate"] for r in rows]
        lo = [_band(r["accuracy"])[0] for r in rows]
        hi = [_band(r["accuracy"])[1] for r in rows]
        ax.plot(L, acc, "o-", color=c, label=f"{kind} (held-out)", ms=3)
        ax.fill_between(L, lo, hi, color=c, alpha=0.2, lw=0)
        cacc = [r["control"]["accuracy"]["rate"] for r in rows]
        clo = [r["control"]["accuracy"]["wilson"][0] for r in rows]
        chi = [r["control"]["accuracy"]["wilson"][1] for r in rows]
        ax.plot(L, cacc, "x--", color=c, alpha=0.7, label=f"{kind} shuffled-label control (mean, 95% of perms)", ms=3)
        ax.fill_between(L, clo, chi, color=c, alpha=0.08, lw=0)
        nest = res.get("nested", {}).get("accuracy", {})
        if nest.get("rate") is not None:  # the label is the text's own number (format_rate, one call for both)
            ax.axhline(nest["rate"], color=c, ls=":", lw=1.5, label=f"{kind} nested-CV headline {format_rate(nest)}")
    if maj is not None:
        ax.axhline(maj, color="gray", ls="-.", lw=1, label=f"majority baseline {maj:.3f}")
    meta = (results.get("metadata_baseline") or {}).get("accuracy", {})
    if meta.get("rate") is not None:
        ax.axhline(meta["rate"], color="black", ls="--", lw=1,
                   label=f"metadata-only baseline {meta['rate']:.3f} (no activations)")
    s = results["settings"]
    ax.set_xlabel("layer (hidden_states index; 0 = embeddings)")
    ax.set_ylabel("accuracy (held-out, 95% CI clustered by question)")
    ax.set_title(f"{s['target']} probe, {s['position']}, {s['folds']}-fold CV grouped by {s['group']} "
                 f"(n={results['data']['n_rows']})", fontsize=9)
    ax.set_ylim(0, 1.02)
    ax.grid(alpha=0.3)
    ax.legend(fontsize=7, loc="lower right")
    fig.tight_layout()
    path = Path(path)
    try:
        atomic_write_bytes(path, lambda f: fig.savefig(f, format="png", dpi=120), fsync=False)
    finally:
        plt.close(fig)
    return path
