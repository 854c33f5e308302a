"""The comparison's report section and figure (:mod:`study.compare`; issue #36).

    from study.compare.render import render, write
    print(render(result))                 # markdown: the paired table, then the models x datasets table
    write(result, Path("runs/cmp"))        # compare.md, compare.json, compare.png (a forest plot of the differences)

Differences are in percentage points for the rates and in AOC units (x 100) for AOC, each with its 95%
interval, the exact test's p-value, its Holm-adjusted value and the minimum detectable difference (MDD).
"""
from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from loadbearing.figures import figure_bytes, pyplot
from loadbearing.files import atomic_write_bytes, atomic_write_text
from loadbearing.stats import FEW_CLUSTERS, format_rate
from loadbearing.tables import markdown_table

MD, JSON, PNG = "compare.md", "compare.json", "compare.png"


def _pp(x: float | None) -> str:
    return "n/a" if x is None else f"{100 * x:+.1f}"


def _p(x: float | None) -> str:
    return "n/a" if x is None else ("<0.001" if x < 0.001 else f"{x:.3f}")


def paired_table(res: dict[str, Any]) -> str:
    head = ["measure", "group", "A", "B", "q", "pairs", "A rate", "B rate", "A - B (pp) [95% CI]", "p", "p (Holm)",
            "MDD (pp)", "test"]
    rows = []
    for r in res["comparisons"]:
        lo, hi = r["ci"]
        ci = "[n/a]" if lo is None else f"[{_pp(lo)}, {_pp(hi)}]"
        few = "\u2020" if (r["n_questions"] or 0) < FEW_CLUSTERS else ""
        rows.append([r["measure"], r["group"], r["a"], r["b"], r["n_questions"], r["n_pairs"] or "-",
                     "n/a" if r["rate_a"] is None else f"{100 * r['rate_a']:.1f}",
                     "n/a" if r["rate_b"] is None else f"{100 * r['rate_b']:.1f}", f"{_pp(r['estimate'])} {ci}{few}",
                     _p(r["p_value"]), _p(r.get("p_holm")), "n/a" if r["mdd"] is None else f"{100 * r['mdd']:.1f}",
                     r["test"]])
    return markdown_table(head, rows)


def models_by_datasets(res: dict[str, Any]) -> str:
    """The paper's layout: one row per model, one column per dataset; each cell the run's propagation rate
    (question-clustered) and baseline accuracy. Runs of one model and dataset under several settings are
    listed as separate rows, named by run."""
    datasets = sorted({r["dataset"] for r in res["runs"]})
    keys = sorted({r["model"] for r in res["runs"]})
    cells: dict[tuple[str, str], list[str]] = {}
    for r in res["runs"]:
        cells.setdefault((r["model"], r["dataset"]), []).append(
            f"{r['name']}: prop. {format_rate(r['propagation'], 'md')}; acc. {format_rate(r['baseline accuracy'], 'md')}")
    rows = [[m, *["<br>".join(cells.get((m, d), ["-"])) for d in datasets]] for m in keys]
    return markdown_table(["model", *datasets], rows)


def render(res: dict[str, Any], *, full: bool = True) -> str:
    by = f" by {res['by']}" if res["by"] else ""
    shared = "; ".join(f"{k}: {v} shared questions" for k, v in res["shared_questions"].items())
    out = [f"## Paired comparison{by}", "", shared + ".", "", paired_table(res), "",
           f"Differences A - B in percentage points (AOC x 100). {res['family']} (every exact test in this table). "
           "Intervals: question-clustered for rows paired across runs, t over per-question differences for "
           "question-level pairs; tests: McNemar exact with one pair per question, else a sign-flip permutation "
           "test over questions; probe accuracy is unpaired (no per-question predictions are stored). MDD: the "
           "difference a 5% test would detect with 80% power at this size. \u2020 fewer than 20 questions."]
    if full or len(res["runs"]) > 2:
        out += ["", "## Models x datasets", "", models_by_datasets(res)]
    return "\n".join(out) + "\n"


def figure(res: dict[str, Any]) -> bytes | None:
    """A forest plot of every paired difference with its interval, or None (nothing to draw, no matplotlib)."""
    rows = [r for r in res["comparisons"] if r["estimate"] is not None]
    if not rows:
        return None
    try:
        plt = pyplot()
        fig, ax = plt.subplots(figsize=(7, 0.35 * len(rows) + 1.2))
        for i, r in enumerate(rows):
            lo, hi = r["ci"]
            y = len(rows) - 1 - i
            if lo is not None:
                ax.plot([100 * lo, 100 * hi], [y, y], color=f"C{i % 10}", lw=2)
            ax.plot([100 * r["estimate"]], [y], "o", color=f"C{i % 10}")
        ax.axvline(0, color="grey", lw=0.8)
        ax.set_yticks(range(len(rows)))
        ax.set_yticklabels([f"{r['measure']} [{r['group']}] {r['a']} - {r['b']}" for r in reversed(rows)], fontsize=7)
        ax.set_xlabel("paired difference A - B (percentage points; AOC x 100), 95% intervals")
        fig.tight_layout()
        data = figure_bytes(fig, dpi=110, metadata={"Software": None})
        plt.close(fig)
        return data
    except Exception:  # noqa: BLE001 - a figure never stops the comparison
        return None


def write(res: dict[str, Any], out: Path) -> Path:
    """Write compare.md (with the figure linked when drawn), compare.json and compare.png into ``out``."""
    out.mkdir(parents=True, exist_ok=True)
    png = figure(res)
    text = render(res)
    if png is not None:
        atomic_write_bytes(out / PNG, png)
        text += f"\n![paired differences]({PNG})\n"
    atomic_write_text(out / JSON, json.dumps(res, indent=2, sort_keys=True) + "\n")
    atomic_write_text(out / MD, text)
    return out / MD


__all__ = ["JSON", "MD", "PNG", "figure", "models_by_datasets", "paired_table", "render", "write"]
