"""Text / markdown tables and the figure of a gradient summary (see :mod:`behavioural.gradient`)."""
from __future__ import annotations

from dataclasses import replace
from pathlib import Path
from typing import Any

from loadbearing.figures import pyplot, save_figure
from loadbearing.report.blocks import Block, Filter, Heading, Paragraph, Table, Tight, blocks_markdown, facet_filter, table
from loadbearing.stats import format_rate
from loadbearing.tables import render_table


def _fr(r: dict | None, style: str = "text") -> str:
    if r is None:
        return "—" if style == "md" else "-"
    if r.get("method") == "published":
        return f"{100 * r['rate']:.1f}% (published)"
    return format_rate(r)  # plain text: render_table escapes what a markdown cell needs


def _p(x: float | None) -> str:
    if x is None:
        return "n/a"
    return "<0.001" if x < 0.001 else f"{x:.3f}"


class _Out:
    """The summary laid out once for both styles: ``text`` lines (what the CLI prints) or report blocks (``md``:
    a line right under another is one paragraph's next line, as in ``gradient.md``)."""

    def __init__(self, style: str) -> None:
        self.style, self._gap = style, True
        self.lines: list[str] = []
        self.blocks: list[Block] = []

    def _add(self, b: Paragraph | Table, gap: bool = False) -> None:
        self.blocks.append(b if gap or self._gap else Tight(b))
        self._gap = False

    def line(self, text: str, *, gap: bool = False) -> None:
        """One line; ``gap``: after a blank line."""
        if self.style == "md":
            self._add(Paragraph(text), gap)
        else:
            self.lines.append(text)

    def heading(self, title: str, level: int = 2) -> None:
        if self.style == "md":
            if self.blocks and isinstance(self.blocks[-1], Heading):
                self.blocks.append(Tight(Paragraph("")))  # an empty part: gradient.md keeps its blank line
            self.blocks.append(Heading(title, level))
            self._gap = True
        else:
            self.lines.append(f"\n== {title} ==")

    def table(self, header: list[str], rows: list[list[str]], filters: list[Filter | None] | None = None) -> None:
        """A table; ``filters``: each row's trace-browser filter (report.html links the row to its samples)."""
        if self.style == "md":
            t = table(header, rows)
            if filters:
                t = replace(t, rows=tuple(replace(r, filter=f) for r, f in zip(t.rows, filters)))
            self._add(t)
        else:
            self.lines.append(render_table(header, rows, "text"))


def _difficulty_test(t: dict[str, Any], out: _Out) -> None:
    """The cell-level test of difficulty (``behavioural.gradient.cells``): one line per model."""
    out.heading("Difficulty test (one observation per cell)")
    if not t.get("per_model"):
        out.line("skipped: no cell with scored continuations")
        return
    for model, e in t["per_model"].items():
        if e.get("status") == "ok":
            lo, hi = e["ci95"]
            out.line(f"{model}: slope {e['slope']:+.3f} per unit of {e['axis']} [{lo:+.2f}, {hi:+.2f}], "
                       f"p = {_p(e['p'])} ({e['test']}; between-cell variance {e['tau2']:.3f})")
        elif e.get("status") == "descriptive":
            out.line(f"{model}: slope {e['slope']:+.3f} (descriptive, no p-value: {e['message']})")
        else:
            out.line(f"{model}: {e.get('status')}: {e.get('message')}")


def summary_blocks(s: dict[str, Any]) -> tuple[Block, ...]:
    """The gradient summary as report blocks (``gradient.md`` is their markdown)."""
    out = _Out("md")
    out.heading("Difficulty gradient", 1)
    _lay_out(s, out)
    return tuple(out.blocks)


def format_summary(s: dict[str, Any], style: str = "text") -> str:
    if style not in ("text", "md"):
        raise ValueError(f"unknown style {style!r}; choose 'text' or 'md'")
    if style == "md":
        return blocks_markdown(summary_blocks(s))
    out = _Out("text")
    _lay_out(s, out)
    return "\n".join(out.lines)


def _lay_out(s: dict[str, Any], out: _Out) -> None:
    style = out.style
    out.line(f"{len(s['runs'])} run(s), models: {', '.join(sorted({r['model'] for r in s['runs']}))}; "
             f"axis: {s['axis_description']}")
    if s.get("mixed"):
        out.line("MIXED RUNS (--allow-mixed): " + "; ".join(s["mixed"]))
    for n in s.get("notes", []):
        out.line(f"note: {n}")
    out.heading("Per task or level")
    rows = []
    for c in s["cells"]:
        rows.append([c["model"], c["cell"], _fr(c["baseline_accuracy"], style), _fr(c["baseline_coverage"], style),
                     _fr(c["propagation"], style), _fr(c["control_error"], style), str(c["n_questions"]),
                     str(c["n_generations"])])
    out.table(["model", "task/level", "baseline acc. (unparsed=wrong)", "baseline coverage",
               "propagation (q-clustered 95% CI)", "control error", "n q", "n gen"], rows,
              [facet_filter(model=c["model"]) for c in s["cells"]])
    out.line("(propagation: parseable perturbed continuations with a wrong answer; each distinct generation once; "
             "interval: Korn-Graubard, clustered by question; \u2020 = fewer than 20 questions)", gap=True)

    _difficulty_test(s.get("difficulty_test") or {}, out)
    reg = s["regression"]
    out.heading("Clustered logistic regression of C")
    if reg.get("status") != "ok":
        out.line(f"{reg.get('status')}: {reg.get('message')}")
    else:
        out.line(f"{reg['formula']}  (n={reg['n']}, {reg['n_questions']} questions; errors clustered by question)")
        rows = [[k, f"{v['coef']:+.3f}", "n/a" if v["se"] is None else f"{v['se']:.3f}",
                 "n/a" if v["ci95"][0] is None else f"[{v['ci95'][0]:+.2f}, {v['ci95'][1]:+.2f}]", _p(v["p"])]
                for k, v in reg["coefficients"].items()]
        out.table(["term", "coef", "cluster SE", "95% CI", "p"], rows)
        for pr in reg.get("problems", []):
            out.line(f"WARNING: {pr}")
        if reg.get("difficulty_note"):  # the row-level difficulty p is not the test of difficulty
            out.line(f"caveat: {reg['difficulty_note']}")
    for n in reg.get("notes", []) + reg.get("design_notes", []):
        out.line(f"note: {n}")
    dp = reg.get("deviance_partition") or {}
    out.heading("Sequential deviance partition (share of explained deviance)")
    if dp.get("status") != "ok":
        out.line(f"{dp.get('status', 'skipped')}: {dp.get('message')}")
    else:
        out.line(f"null deviance {dp['null_deviance']:.1f}, full model {dp['full_deviance']:.1f}, "
                   f"explained {dp['explained']:.1f} (n={dp['n']})")
        rows = []
        for order in ("difficulty_first", "type_first"):
            part = dp.get(order) or {}
            if part.get("status") == "failed":
                rows.append([order, part["message"], "", ""])
                continue
            rows.append([order.replace("_", " ")] + [
                "n/a" if part[k]["share"] is None else f"{100 * part[k]['share']:.1f}%"
                for k in ("difficulty", "type", "interaction")])
        out.table(["order", "difficulty", "type", "interaction"], rows)
        for pr in dp.get("problems", []):
            out.line(f"WARNING: {pr}")
        for n in dp.get("design_notes", []):
            out.line(f"note: {n}")

    out.heading("Within-dataset slope")
    for key, v in s["within_dataset"].items():
        if v.get("status") == "ok":
            sl = v["slope"]
            orr = v.get("odds_ratio_per_10_points") or v.get("odds_ratio_per_level")
            unit = "per 10 points of accuracy lost" if v.get("odds_ratio_per_10_points") else "per level"
            out.line(f"{key}: slope {sl['coef']:+.3f} (cluster SE {sl['se'] or float('nan'):.3f}, p {_p(sl['p'])}) "
                       f"over {v['n_tasks']} tasks; odds ratio {orr:.2f} {unit}")
        else:
            out.line(f"{key}: {v.get('message')}")

    pos = s["position"]
    out.heading("Position gradient (early / middle / late)")
    out.line("; ".join(f"{p}: {_fr(r, style)}" for p, r in pos["rates"].items()) or "no scored rows")
    if pos.get("status") == "ok":
        t = pos["trend_per_step"]
        out.line(f"trend per step: {t['coef']:+.3f} (odds ratio {pos['odds_ratio_per_step']:.2f}, p {_p(t['p'])}); "
                   f"{pos['model']}")
        if pos.get("dropped_cells"):
            out.line(f"cells without variation in C left out: {', '.join(pos['dropped_cells'])}")
    else:
        out.line(f"{pos.get('status')}: {pos.get('message')}")
    merged = (s.get("position_merges") or {}).get("merged") or {}
    if merged:
        of = s["position_merges"]["of"]
        out.line("merged positions (one generation edits the same line at both): "
                   + "; ".join(f"{k} in {n} of {of} questions" for k, n in merged.items()))
    for n in pos.get("design_notes", []):
        out.line(f"note: {n}")

    tbd = s["type_by_difficulty"]["family"]
    out.heading("Type against difficulty (rows: strategy family; columns: task or level)")
    for model, fams in tbd["table"].items():
        cols = [c["cell"] for c in s["cells"] if c["model"] == model]
        rows = [[fam] + [_fr(vals.get(cl), style) for cl in cols] for fam, vals in fams.items()]
        out.line(f"model {model}:")
        out.table(["family"] + cols, rows)
    if tbd["missing"]:
        out.line(f"cells that do not exist (no runs with that family there): {', '.join(tbd['missing'])}")

    out.heading("Perturbation uptake (edited value or claim reused in a later line)")
    rows = []
    for fam, u in s["uptake"].items():
        rows.append([fam, _fr(u["uptake_rate"], style), _fr(u["propagation_if_taken_up"], style),
                     _fr(u["propagation_if_not_taken_up"], style), str(u["undetermined"])])
    out.table(["family", "uptake", "propagation if taken up", "propagation if not taken up", "undetermined"], rows)

    cm = s["cross_model"]
    out.heading("Cross-model comparison (shared eligible questions)")
    if cm.get("status") != "ok":
        out.line(f"{cm.get('status')}: {cm.get('message')}")
    else:
        out.line(f"{cm['n_shared_questions']} shared questions; " +
                 "; ".join(f"{m}: {_fr(r, style)}" for m, r in cm["rates"].items()))
        for pair, d in cm["pairs"].items():
            est = d.get("estimate")
            ci = d.get("ci") or [None, None]
            ci_s = "n/a" if ci[0] is None else f"[{100 * ci[0]:+.1f}, {100 * ci[1]:+.1f}]"
            out.line(f"{pair}: " + ("n/a" if est is None else f"{100 * est:+.1f} pp {ci_s}") +
                     f" over {d.get('n_pairs', 0)} matched cells / {d.get('n_clusters', 0)} questions (paired, clustered)")
        rows = []
        for pair, cells in (cm.get("pairs_by_cell") or {}).items():
            for cell, d in cells.items():
                est, ci = d.get("estimate"), d.get("ci") or [None, None]
                rows.append([pair, cell, "n/a" if est is None else f"{100 * est:+.1f} pp",
                             "n/a" if ci[0] is None else f"[{100 * ci[0]:+.1f}, {100 * ci[1]:+.1f}]",
                             str(d.get("n_pairs", 0)), str(d.get("n_clusters", 0))])
        if rows:
            out.table(["pair", "task/level", "difference", "95% CI (clustered)", "pairs", "questions"], rows)

    tx = s["taxonomy"]
    out.heading("A/B/C taxonomy (the paper's Table 4)")
    if tx.get("status") != "ok":
        out.line(f"{tx.get('status')}: {tx.get('message')}")
    else:
        rows = []
        for key in ("position", "strategy", "dataset"):
            for g, v in tx[key].items():
                rows.append([key, g] + [f"{v[lbl]['count']} ({100 * v[lbl]['share']:.1f}%)" for lbl in ("A", "B", "C")])
        out.table(["by", "group", "A silent bypass", "B self-correction", "C error propagation"], rows)
        out.line(f"(perturbed generations only, {tx['n']} distinct labelled generations, each counted once per "
                 "group; the controls are left out)")


def plot(s: dict[str, Any], path: str | Path) -> dict[str, Any]:
    """gradient.png: propagation vs baseline accuracy per (model, task-or-level), both-way bars, fitted curves."""
    import numpy as np  # deferred: numpy is heavy to import

    plt = pyplot()

    use_acc = s["axis"] == "accuracy"
    fig, ax = plt.subplots(figsize=(7.5, 5.2))
    models = sorted({c["model"] for c in s["cells"]})
    colors = plt.rcParams["axes.prop_cycle"].by_key()["color"]
    plotted = 0
    for i, m in enumerate(models):
        col = colors[i % len(colors)]
        xs: list[float] = []
        for c in s["cells"]:
            if c["model"] != m or c["propagation"]["n"] == 0:
                continue
            p = c["propagation"]
            y = p["k"] / p["n"]
            ylo, yhi = (p["lo"], p["hi"]) if p.get("lo") is not None else (y, y)
            if use_acc:
                a = c["baseline_accuracy"]
                x = a["rate"]
                xlo, xhi = (a["lo"], a["hi"]) if a.get("lo") is not None else (x, x)
            else:
                x, xlo, xhi = c["difficulty"], c["difficulty"], c["difficulty"]
            ax.errorbar([100 * x], [100 * y], xerr=[[100 * (x - xlo)], [100 * (xhi - x)]],
                        yerr=[[100 * (y - ylo)], [100 * (yhi - y)]], fmt="o", color=col, capsize=3,
                        label=m if not xs else None)
            ax.annotate(c["cell"], (100 * x, 100 * y), textcoords="offset points", xytext=(4, 4), fontsize=7)
            xs.append(x)
            plotted += 1
        curve = (s.get("curves") or {}).get(m)
        if curve and xs:
            lo, hi = min(xs), max(xs)
            grid = np.linspace(lo, hi, 100)
            d = (1 - grid) if use_acc else grid
            yy = 1 / (1 + np.exp(-(curve["intercept"] + curve["slope"] * d)))
            ax.plot(100 * grid, 100 * yy, "-", color=col, alpha=0.6, lw=1.2)
    if use_acc:
        ax.set_xlabel("baseline accuracy, % (unparseable counted wrong; 95% Wilson)")
        ax.invert_xaxis()
    else:
        ax.set_xlabel("difficulty level (ordinal)")
    ax.set_ylabel("error propagation, % (95% CI clustered by question)")
    ax.set_ylim(-2, 102)
    ax.set_title("Propagation rises as the model's own accuracy falls?" if use_acc else "Propagation by difficulty level",
                 fontsize=10)
    if plotted:
        ax.legend(fontsize=8, loc="best")
    else:
        ax.text(0.5, 0.5, "no cell has a propagation rate (no eligible baselines)", ha="center", va="center",
                transform=ax.transAxes)
    ax.grid(alpha=0.3)
    fig.tight_layout()
    save_figure(fig, path, dpi=130)
    return {"path": Path(path).name, "points": plotted, "x": "baseline_accuracy" if use_acc else "difficulty_level"}
