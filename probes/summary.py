"""The probes stage's own summary of ``results.json``, as text or markdown (the report only joins these).

    python -c "import json; from probes.summary import format_summary; \\
print(format_summary(json.load(open('runs/demo/probes/results.json')), style='md'))"
"""
from __future__ import annotations

from pathlib import Path
from typing import Any

from loadbearing.report.blocks import Block, Bullets, Item, Paragraph, blocks_markdown, table
from loadbearing.stats import FEW_CLUSTERS_MARK, FEW_CLUSTERS_NOTE, format_rate


def _pp(v: float | None, signed: bool = True) -> str:
    if v is None:
        return "n/a"
    return f"{100 * v:+.1f}" if signed else f"{100 * v:.1f}"


def _gain(g: dict | None) -> str:
    """``"+3.1 pp [-1.2, +7.0] (206 rows; 15 q)"``."""
    if not g or g.get("value") is None:
        return "n/a"
    ci = "[n/a]" if g.get("lo") is None else f"[{_pp(g['lo'])}, {_pp(g['hi'])}]"
    return f"{_pp(g['value'])} pp {ci} ({g['n_rows']} rows; {g['n_questions']} q)"


def _p(v: float | None) -> str:
    return "n/a" if v is None else f"{v:.3f}"


def _acc(r: dict | None, style: str) -> str:
    return format_rate(r, style=style) if r and "k" in r else "n/a"


def _layer_rows(results: dict[str, Any], res: dict[str, Any]) -> tuple[list[str], list[list[str]]]:
    hdr = ["layer", "accuracy (question-clustered 95% CI)", "metadata", "majority", "gain over metadata (pp)",
           "control (mean of perms)", "p"]
    meta_rate = (results.get("metadata_baseline") or {}).get("accuracy", {}).get("rate")
    maj = results["majority_baseline"]["accuracy"].get("rate")
    rows = [[str(e["layer"]), _acc(e["accuracy"], "text"), _pp(meta_rate, False), _pp(maj, False),
             _gain(e.get("gain_over_metadata")).split(" (")[0], _pp(e["control"]["accuracy"].get("rate"), False),
             _p(e.get("control_p_value"))] for e in res["layers"]]
    return hdr, rows


def summary_blocks(results: dict[str, Any]) -> tuple[Block, ...]:
    """The probes section as report blocks: the data and baselines, the headline, each probe's per-layer table
    with its within-cell accuracy, the transfer."""
    blocks: list[Block] = [Bullets(tuple(x[2:] for x in _head(results, "md")))]
    for pk, res in results.get("probes", {}).items():
        hdr, rows = _layer_rows(results, res)
        blocks += [Paragraph(f"**{pk}** per layer"), table(hdr, rows)]
        wc = res.get("within_cell")
        if wc:
            pooled = wc["pooled"]
            blocks.append(Bullets((Item(
                f"{pk} within strategy x position (x level) cells (headline predictions): probe "
                f"{_pp(pooled['probe'], False)}% vs smoothed cell lookup {_pp(pooled['cell_majority'], False)}% "
                f"over {pooled['n_rows']} rows",
                tuple(f"{c}: {v['n_rows']} rows / {v['n_questions']} q, probe {_pp(v['probe'], False)}% vs majority "
                      f"{_pp(v['cell_majority'], False)}%" for c, v in wc["cells"].items())),)))
    for pk, t in results.get("transfer", {}).items():
        if "leave_one_strategy_out" in t:
            subs = []
            for e in t["leave_one_strategy_out"]:
                ind = e.get("in_distribution", {}).get("accuracy")
                subs.append(f"held out {e['held_out']}: {_acc(e['transfer']['accuracy'], 'md')}"
                            + (f" vs in-distribution {_acc(ind, 'md')}" if ind else ""))
            blocks.append(Bullets((Item(f"{pk} leave-one-strategy-out transfer (layer {t['layer']}):", tuple(subs)),)))
    return tuple(blocks)


def _head(results: dict[str, Any], style: str) -> list[str]:
    """The data, baselines and headline lines (``md``: bullets)."""
    md = style == "md"
    d = results["data"]
    lines: list[str] = []
    bullet = "- " if md else ""
    cc = ", ".join(f"{c}: {v['rows']} rows / {v['questions']} q" for c, v in d["class_counts"].items())
    lines.append(f"{bullet}{d['n_rows']} rows, {d['n_questions']} questions (grouped by {d.get('group_key', 'question_id')}); "
                 f"classes {cc}")
    lines.append(f"{bullet}majority baseline: {_acc(results['majority_baseline']['accuracy'], style)}")
    mb = results.get("metadata_baseline")
    if mb:
        feats = ", ".join(mb.get("features") or []) or "none"
        won = ", ".join(f"{k} {v}" for k, v in (mb.get("chosen_counts") or {}).items())
        merged = mb.get("merged_columns") or []
        lines.append(f"{bullet}metadata-only baseline ({feats}; no activations): {_acc(mb['accuracy'], style)}"
                     + (f"; candidate chosen per fold: {won}" if won else "")
                     + (f"; {len(merged)} duplicate one-hot column(s) merged before fitting "
                        f"({'; '.join(m.split(':')[0] for m in merged[:3])}{'; ...' if len(merged) > 3 else ''})"
                        if merged else ""))
    for pk, h in results.get("headline", {}).items():
        lines.append(f"{bullet}**{pk} headline** (nested CV, layers {h.get('chosen_layer_counts')}): "
                     f"{_acc(h['accuracy'], style)}; gain over metadata {_gain(h.get('gain_over_metadata'))}; "
                     f"gain p = {_p(h.get('gain_p_value'))}; shuffled-label p = {_p(h.get('control_p_value'))}" if md
                     else
                     f"{pk} HEADLINE (nested CV, layers {h.get('chosen_layer_counts')}): {_acc(h['accuracy'], style)}; "
                     f"gain over metadata {_gain(h.get('gain_over_metadata'))}; gain p = {_p(h.get('gain_p_value'))}; "
                     f"shuffled-label p = {_p(h.get('control_p_value'))}")
    scheme = results.get("control_scheme") or {}
    if scheme.get("fallback") not in (None, "none"):
        lines.append(f"{bullet}shuffled-label control: {scheme['fallback']}")
    if any(FEW_CLUSTERS_MARK in ln for ln in lines):
        lines.append(f"{bullet}{FEW_CLUSTERS_NOTE}")
    return lines


def format_summary(results: dict[str, Any], style: str = "text") -> str:
    """The probes section: data, baselines, the headline as a gain over the metadata baseline, the per-layer
    table, controls, within-cell accuracy and transfer. ``style``: ``"text"`` or ``"md"``."""
    if style not in ("text", "md"):
        raise ValueError(f"unknown style {style!r}; choose 'text' or 'md'")
    if style == "md":
        return blocks_markdown(summary_blocks(results))
    lines = _head(results, style)
    for pk, res in results.get("probes", {}).items():
        lines.append("")
        hdr, rows = _layer_rows(results, res)
        # the compact one-line-per-layer form of the console summary
        lines.append(f"{pk}: " + " | ".join(hdr))
        lines += ["  " + " | ".join(cells) for cells in rows]
        wc = res.get("within_cell")
        if wc:
            pooled = wc["pooled"]
            lines.append("")
            lines.append(f"{pk} within strategy x position (x level) cells (headline predictions): probe "
                         f"{_pp(pooled['probe'], False)}% vs smoothed cell lookup {_pp(pooled['cell_majority'], False)}% "
                         f"over {pooled['n_rows']} rows")
            for c, v in wc["cells"].items():
                lines.append(f"    {c}: {v['n_rows']} rows / {v['n_questions']} q, probe "
                             f"{_pp(v['probe'], False)}% vs majority {_pp(v['cell_majority'], False)}%")
    for pk, t in results.get("transfer", {}).items():
        if "leave_one_strategy_out" in t:
            lines.append("")
            lines.append(f"{pk} leave-one-strategy-out transfer (layer {t['layer']}):")
            for e in t["leave_one_strategy_out"]:
                ind = e.get("in_distribution", {}).get("accuracy")
                lines.append(f"    held out {e['held_out']}: {_acc(e['transfer']['accuracy'], style)}"
                             + (f" vs in-distribution {_acc(ind, style)}" if ind else ""))
    return "\n".join(lines)


def print_summary(results: dict[str, Any], out: Path) -> None:
    print("\n" + format_summary(results, style="text"))
    print(f"\nwrote {out}/results.json, accuracy_vs_layer.png" + (", directions.h5" if results.get("directions") else ""))
