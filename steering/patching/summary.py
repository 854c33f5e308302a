"""The patching summary: mean restored fraction per (layer, group) with 95% intervals over questions, the
controls' means, the heat map (``patching.png``) and the markdown section (``patching.md``).

Cases are one per question (:mod:`steering.patching.cases`), so each interval is
:func:`loadbearing.stats.cluster_bootstrap_ci` over questions (seeded percentile bootstrap of the mean).
Cases whose clean and edited runs barely differ (``excluded``: ``|ld_clean - ld_edited| < min_gap``) have no
restored fraction and are counted, not averaged.
"""
from __future__ import annotations

from collections import defaultdict
from pathlib import Path
from typing import Any

import numpy as np

from loadbearing.figures import pyplot, save_figure
from loadbearing.report.blocks import Block, Figure, Heading, Paragraph, blocks_markdown, table
from loadbearing.stats import cluster_bootstrap_ci, clustered_rate, format_rate
from steering.patching.align import GROUPS


def _mean(vals: list) -> float | None:
    return float(np.mean(vals)) if vals else None


def _cell(pairs: list[tuple[str, float]], seed: int, n_boot: int) -> dict[str, Any]:
    res = cluster_bootstrap_ci([q for q, _ in pairs], [v for _, v in pairs], _mean, n_boot=n_boot, seed=seed)
    return {"mean": res["estimate"], "ci": res["ci"], "n_cases": len(pairs), "n_questions": res["n_clusters"],
            "method": "cluster-bootstrap (percentile, over questions)", "n_boot": n_boot, "label": res["label"],
            "note": res["note"]}


def summarise(rows: list[dict[str, Any]], layers: list[int], *, seed: int = 0, n_boot: int = 2000) -> dict[str, Any]:
    """``{"cells", "controls": {"random_position", "random_layer"}, "n_cases", "n_excluded", "flips"}``."""
    by: dict[tuple[str, int | None, str], list[tuple[str, float]]] = defaultdict(list)
    for r in rows:
        for x in r["results"]:
            if x["restored"] is not None:
                key = (x["kind"], None if x["kind"] == "random-layer" else x["layer"], x["group"])
                by[key].append((r["question_key"], x["restored"]))
    cells = [{"layer": lay, "group": g} | _cell(by[("sweep", lay, g)], seed, n_boot) for lay in layers for g in GROUPS]
    rand_pos = [{"layer": lay, "group": g} | _cell(by[("random-position", lay, g)], seed, n_boot)
                for lay in layers for g in GROUPS if by.get(("random-position", lay, g))]
    rand_layer = [{"group": g} | _cell(by[("random-layer", None, g)], seed, n_boot) for g in GROUPS]
    out: dict[str, Any] = {"cells": cells, "controls": {"random_position": rand_pos, "random_layer": rand_layer},
                           "n_cases": len(rows), "n_excluded": sum(bool(r["excluded"]) for r in rows),
                           "n_questions": len({r["question_key"] for r in rows})}
    flips = [(r["question_key"], f) for r in rows for f in r.get("flips", []) if f["group"] != "none"]
    if flips:  # a rate: loadbearing.stats.clustered_rate (Wilson over questions when every case agrees)
        fl: dict[tuple[int, str], list[tuple[str, bool]]] = defaultdict(list)
        for q, f in flips:
            if f["correct"] is not None:  # unparseable greedy answers stay unscored
                fl[(f["layer"], f["group"])].append((q, bool(f["correct"])))
        out["flips"] = [{"layer": lay, "group": g, "rate": clustered_rate([v for _, v in fl[(lay, g)]],
                                                                          [q for q, _ in fl[(lay, g)]],
                                                                          seed=seed, n_boot=n_boot).to_dict()}
                        for lay in layers for g in GROUPS]
    return out


def _fmt(c: dict[str, Any]) -> str:
    if c.get("mean") is None:
        return "n/a"
    lo, hi = c["ci"]
    ci = "[n/a]" if lo is None else f"[{lo:.2f}, {hi:.2f}]"
    return f"{c['mean']:.2f} {ci}"


def heatmap(summary: dict[str, Any], layers: list[int], path: str | Path, *, title: str = "") -> None:
    """Layers (rows) x groups (columns): mean restored fraction, each cell annotated with its mean and its
    descriptive bootstrap interval."""
    plt = pyplot()

    grid = np.full((len(layers), len(GROUPS)), np.nan)
    text = [["" for _ in GROUPS] for _ in layers]
    pos = {(c["layer"], c["group"]): c for c in summary["cells"]}
    for i, lay in enumerate(layers):
        for j, g in enumerate(GROUPS):
            c = pos[(lay, g)]
            if c["mean"] is not None:
                grid[i, j] = c["mean"]
            text[i][j] = _fmt(c)
    fig, ax = plt.subplots(figsize=(8, max(2.5, 0.32 * len(layers) + 1.5)))
    im = ax.imshow(grid, aspect="auto", cmap="RdBu_r", vmin=-1, vmax=1, interpolation="nearest")
    ax.set_xticks(range(len(GROUPS)), list(GROUPS))
    ax.set_yticks(range(len(layers)), [str(x) for x in layers])
    ax.set_xlabel("positions patched (clean -> edited)")
    ax.set_ylabel("layer (hidden_states index)")
    for i in range(len(layers)):
        for j in range(len(GROUPS)):
            dark = np.isfinite(grid[i, j]) and abs(grid[i, j]) > 0.6
            ax.text(j, i, text[i][j], ha="center", va="center", fontsize=7, color="white" if dark else "black")
    fig.colorbar(im, ax=ax, label="restored fraction (0 edited, 1 clean)")
    ax.set_title(title or f"activation patching ({summary['n_cases']} cases, {summary['n_questions']} questions)",
                 fontsize=9)
    fig.tight_layout()
    save_figure(fig, path, dpi=120)


TITLE = "Activation patching: where is the error carried?"


def section_blocks(summary: dict[str, Any], layers: list[int], settings: dict[str, Any], *,
                   figure: str = "patching.png") -> tuple[Block, ...]:
    """The report section: how it was measured, the map as a table, the controls, the heat map (``figure``: its
    path relative to where the section is shown)."""
    pos = {(c["layer"], c["group"]): c for c in summary["cells"]}
    rows = [[lay] + [_fmt(pos[(lay, g)]) for g in GROUPS] for lay in layers]
    blocks: list[Block] = [
        Paragraph(f"Command: `{settings['command']}`"),
        Paragraph(f"{summary['n_cases']} C cases ({summary['n_questions']} questions, one case per question); "
                  f"{summary['n_excluded']} excluded from the means (clean and edited runs within {settings['min_gap']} "
                  f"nats). Engine: {settings['engine']}. Cell: mean restored fraction of log P(correct) - log "
                  f"P(propagated) after `{settings['answer_prefix']}` (0 = edited run, 1 = clean run) with a percentile "
                  "bootstrap interval over questions: descriptive, not a calibrated 95% CI (coverage 0.83-0.90 at 5-16 "
                  "questions, bench/calib_intervals.py; none where every resample agrees)."),
        table(["layer", *GROUPS], rows),
        Paragraph("Controls (the same statistic):"),
        table(["random-layer control", "mean [bootstrap, descriptive]", "n"],
              [[c["group"], _fmt(c), c["n_cases"]] for c in summary["controls"]["random_layer"]]),
    ]
    rp = summary["controls"]["random_position"]
    if rp:
        blocks.append(table(["random-position control", "layer", "mean [bootstrap, descriptive]", "n"],
                            [[c["group"], c["layer"], _fmt(c), c["n_cases"]] for c in rp]))
    if summary.get("flips"):
        blocks += [Paragraph("Greedy answer flips to correct with the patch held (parseable cases; interval over "
                             "questions):"),
                   table(["layer", *GROUPS], [[lay] + [format_rate(c["rate"], style="md") for c in summary["flips"]
                                                       if c["layer"] == lay] for lay in layers])]
    blocks.append(Figure(figure, "patching heat map"))
    return tuple(blocks)


def markdown(summary: dict[str, Any], layers: list[int], settings: dict[str, Any]) -> str:
    """``patching.md``: the section's title and blocks."""
    return blocks_markdown((Heading(TITLE, 2), *section_blocks(summary, layers, settings))) + "\n"


__all__ = ["TITLE", "heatmap", "markdown", "section_blocks", "summarise"]
