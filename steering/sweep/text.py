"""python -m steering.sweep RUN_DIR --directions RUN_DIR/probes  (this module: the sweep's text)

The one-line verdict (:func:`verdict_text`), the grid table (:func:`format_table`, text or markdown through
:func:`loadbearing.tables.render_table`) and the printed summary (:func:`format_summary`), all from a
``summary.json`` dict (:mod:`steering.sweep.analysis`).
"""
from __future__ import annotations

from typing import Any

from loadbearing.report.blocks import Block, Bullets, Paragraph, Table, block_markdown, blocks_markdown, table
from loadbearing.stats import format_rate


def fmt_rate(r: dict[str, Any] | None, style: str = "text") -> str:
    """A rate through the one formatter, :func:`loadbearing.stats.format_rate`."""
    return format_rate(r, style=style) if r else "n/a"


def _pct(x: float | None) -> str:
    return "n/a" if x is None else f"{100 * x:.1f}%"


def _pp(x: float | None) -> str:
    return "n/a" if x is None else f"{100 * x:+.1f}"


def _f3(x: float | None) -> str:
    return "n/a" if x is None else f"{x:.3g}"


def _setting_str(d: dict[str, Any]) -> str:
    diff = d["difference"] or {}
    est, ci = diff.get("estimate"), diff.get("ci") or [None, None]
    how = ("ablated" if d.get("operator") == "ablate" else
           f"alpha={d['alpha']:g} raw ({d['alpha_rel']:.3g}x|resid|)" if "|raw" in d["key"] else
           f"alpha={d['alpha_rel']:g}x|resid|")
    basis = "" if (d.get("directions") or "basis") == "basis" else f" {d['directions']}"
    s = f"L{d['layer']}{basis} k={d['k']} {how} moved {fmt_rate(d['moved'])} of parsed C"
    if d["control"]["kind"]:
        s += f" vs {d['control']['kind']} control {fmt_rate(d['control']['moved'])}"
    if est is not None:
        s += (f", difference {_pp(est)} pp (95% CI {_pp(ci[0])} to {_pp(ci[1])} pp over "
              f"{diff.get('n_questions')} questions)")
    s += f"; {_parse_str(d)}"
    if d["p_holm"] is not None:
        s += f", exact p={d['p_value']:.3g}, Holm p={d['p_holm']:.3g}"
        rk = d.get("direction_rank")
        s += (f"; direction rank p={rk['p_greater']:.3g} among {rk['n_directions']} random directions (Holm "
              f"{rk.get('p_holm', float('nan')):.3g})" if rk else "; the direction itself is not ranked among random "
              "directions (--random-scope sweep)")
        ex = d.get("exact") or {}
        if ex.get("min_p_two") is not None and ex["min_p_two"] >= 0.05:
            s += f" (smallest attainable p {ex['min_p_two']:.3g})"
    return s


def _parse_str(d: dict[str, Any]) -> str:
    """The parse-rate outcome of a setting: probe vs control, the difference, its interval and exact p."""
    ctrl = (d.get("control") or {}).get("coverage_c") or {}
    s = f"parsed {_short(d['coverage_c'])}" + (f" vs control {_short(ctrl)}" if d["control"]["kind"] else "")
    pd = (d.get("parse") or {}).get("difference") or {}
    if pd.get("estimate") is not None:
        ci = pd.get("ci") or [None, None]
        p = (d.get("parse") or {}).get("p_value")
        s += f" (parse difference {_pp(pd['estimate'])} pp, 95% CI {_pp(ci[0])} to {_pp(ci[1])}, exact p={_f3(p)})"
    return s


def _unin_str(summary: dict[str, Any]) -> str:
    """Which tested settings are uninformative (their answer line broken), or nothing."""
    bad = [d for d in summary["settings"] if d.get("uninformative")]
    if not bad:
        return ""
    m = 100 * summary.get("parse_margin", 0.10)
    return (f"; uninformative (the parse rate differs from the control's by more than {m:.0f} pp, exact p < "
            f"{summary['level']}: neither null nor effect can be read from them): "
            + ", ".join(f"{d['key']} ({_parse_str(d)})" for d in bad))


def _power_str(summary: dict[str, Any]) -> str:
    pw = summary.get("power")
    if not pw:
        return ""
    sesoi_pp = 100 * summary["sesoi"]
    mde = "no effect up to 100 pp" if pw["mde"] is None else f"about {100 * pw['mde']:.0f} pp"
    need = (f"more than {pw['n_max']}" if pw["n_cases_for_null"] is None else f"about {pw['n_cases_for_null']}")
    return (f"; this sample ({pw['n_cases']} cases, m={pw['m']}, {pw['n_settings']} settings, random moves "
            f"{100 * pw['base_rate']:.0f}%) detects {mde} with 80% power (simulated); a null at {sesoi_pp:.0f} pp "
            f"would need {need} cases (one per question; plan with python -m steering.sweep --plan)")


def verdict_text(summary: dict[str, Any]) -> str:
    """The one-line verdict (with the sweep's simulated MDE and the cases a null would need)."""
    code = summary["verdict_code"]
    settings = summary["settings"]
    sesoi_pp = 100 * summary["sesoi"]
    if code == "insufficient_data":
        return ("insufficient_data: no steered generation of a type-C case was recorded "
                f"({len(settings)} settings); check the run's C cases and max_new_tokens")
    best = next(d for d in settings if d["strongest"])
    power = _power_str(summary)
    lvl = summary["level"]
    unin = _unin_str(summary)
    if code == "uninformative":
        return (f"uninformative: every tested setting breaks the answer line, so the sweep can say neither null "
                f"nor effect{unin}")
    if code == "effect":
        winners = [d for d in settings if d["beats_control"]]
        top = max(winners, key=lambda d: d["moved"]["rate"] or 0.0)
        harm = sum(d["harms"] for d in settings)
        return (f"effect: {len(winners)}/{len(settings)} settings beat their control (Holm p < {lvl})"
                + (f", {harm} are worse than it" if harm else "") + f"; strongest: {_setting_str(top)}{unin}")
    if code == "harm":
        losers = [d for d in settings if d["harms"]]
        worst = min(losers, key=lambda d: d["exact"]["stat"])
        return (f"harm: no setting beats its control, and {len(losers)}/{len(settings)} are significantly worse "
                f"than it (Holm p < {lvl}); worst: {_setting_str(worst)}{unin}")
    if code == "null":
        pm = 100 * summary.get("parse_margin", 0.10)
        return (f"null: no setting beats or falls behind its control, every moved-among-parsed 95% interval lies "
                f"within +/-{sesoi_pp:.0f} pp and every parse-rate interval within +/-{pm:.0f} pp (equivalence); "
                f"strongest: {_setting_str(best)}{power}")
    n_ex = sum(1 for d in settings if d["equivalent"] or d.get("uninformative"))
    return (f"inconclusive: no setting beats its control (Holm p < {lvl}), but {len(settings) - n_ex}/"
            f"{len(settings)} settings are not shown equivalent (an interval reaches beyond +/-{sesoi_pp:.0f} pp, "
            f"or the parse rate is not shown kept); strongest: {_setting_str(best)}{unin}{power}")


def _short(r: dict[str, Any] | None) -> str:
    if not r or not r["n"]:
        return "0/0"
    return f"{r['k']}/{r['n']} {_pct(r['rate'])}"


def _pairs(diff: dict[str, Any]) -> str:
    if not diff:
        return ""
    s = f"{diff.get('n_cases', 0)}"
    extra = []
    for key, what in (("n_probe_unparsed", "probe unparsed"), ("n_controls_unparsed", "controls unparsed"),
                      ("n_unparsed_pairs", "unparsed"), ("n_dropped", "dropped")):
        if diff.get(key):
            extra.append(f"{diff[key]} {what}")
    return s + (f" ({', '.join(extra)})" if extra else "")


def _rows(summary: dict[str, Any]) -> list[list[str]]:
    rows = []
    b = summary.get("baseline")
    if b:
        rows.append(["alpha=0 rerun", "none", _short(b["moved"]), _short(b["coverage_c"]), "", "", "", "", "",
                     "", "", "", _short(b["broken"])])
    for d in summary["settings"]:
        diff = d["difference"] or {}
        est, ci = diff.get("estimate"), diff.get("ci") or [None, None]
        ds = "n/a" if est is None else f"{_pp(est)} [{_pp(ci[0])},{_pp(ci[1])}]"
        ctrl = d["control"]
        cs = ("n/a" if not ctrl["kind"] else f"{_pct(ctrl['moved']['rate'])} of {_pct(ctrl['coverage_c']['rate'])} "
              f"parsed, {ctrl['kind']} x{ctrl['m']}")
        iso = d.get("isotropic")
        if iso:
            cs += f"; iso {_pct(iso['moved']['rate'])} p={_f3(iso['p_value'])}"
        pd = (d.get("parse") or {}).get("difference") or {}
        pci = pd.get("ci") or [None, None]
        ps = ("n/a" if pd.get("estimate") is None else
              f"{_pp(pd['estimate'])} [{_pp(pci[0])},{_pp(pci[1])}] p={_f3(d['parse'].get('p_value'))}")
        call = d.get("setting_verdict") or ""
        rows.append([d["key"] + (" *" if d["strongest"] else ""), d.get("operator", "add"), _short(d["moved"]),
                     _short(d["coverage_c"]), cs, ds, _pairs(diff), _f3(d["p_value"]),
                     _f3((d.get("exact") or {}).get("min_p_two")), _f3(d["p_holm"]), ps, call, _short(d["broken"])])
    return rows


HEAD = ["setting", "operator", "moved C (of parsed)", "parsed C", "control", "diff pp [95% CI]", "pairs", "p", "min p",
        "Holm", "parse diff pp [95% CI] p", "verdict", "broken non-C"]
FOOT = ("* strongest setting of its operator (ranked by moved among parsed, among the settings that keep the answer "
        "line); operator = add (the directions added at alpha) or ablate (their span projected out; no alpha), each "
        "its own Holm family and verdict; moved = C cases now correct among those whose answer parses; parsed C = "
        "steered C answers that parse (the co-primary outcome); control = random-direction moved rate of its parsed "
        "answers and its parse rate (random: isotropic, random_cov: covariance-matched, xm: random generations per "
        "case, each its own direction); diff = probe minus control moved-among-parsed, per question then averaged, "
        "CI over questions; pairs = C cases compared (a case needs its probe and one control parsed; probe "
        "unparsed / controls unparsed: left out); p = exact randomisation test, two-sided; min p = the smallest p "
        "these cases allow; parse diff = probe minus control parse rate with its own exact test; verdict = the "
        "setting's: uninformative (parse rates differ by more than the parse margin, exact p < level: never null "
        "or effect) / effect / harm (Holm) / null (moved CI within +/- SESOI and parse CI within +/- the parse "
        "margin) / inconclusive")


def grid_table(summary: dict[str, Any]) -> Table:
    """The grid as a report table (its footnote explains the columns)."""
    return table(HEAD, _rows(summary), footnote=FOOT)


def summary_blocks(summary: dict[str, Any]) -> tuple[Block, ...]:
    """The sweep's summary as report blocks: cases and split, the controls' note, the grid, the verdict(s)."""
    head, note = _head(summary)
    blocks: list[Block] = [Paragraph(head + ".")]
    if note:
        blocks.append(Paragraph(note))
    if summary.get("settings"):
        blocks.append(grid_table(summary))
    verdicts = summary.get("verdicts") or {}
    if len(verdicts) > 1:
        blocks += [Paragraph("**Verdict, per operator.**"),
                   Bullets(tuple(f"**{op}:** {v.get('verdict', '')}" for op, v in verdicts.items()))]
    else:
        blocks.append(Paragraph(f"**Verdict.** {summary.get('verdict', '')}"))
    return tuple(blocks)


def _head(summary: dict[str, Any]) -> tuple[str, str]:
    """The cases line and the controls' note."""
    cases = summary.get("cases") or {}
    split = summary.get("split") or {}
    head = (f"steered {summary.get('n_c_cases', 0)} type-C cases from {summary.get('n_c_questions', 0)} questions "
            f"(+{summary.get('n_non_c_cases', 0)} non-C), {summary.get('n_generations', 0)} generations")
    if cases:
        head += (f"; {cases.get('n_c_available', '?')} distinct C inputs from "
                 f"{cases.get('n_c_questions_available', '?')} questions were eligible "
                 f"(at most {cases.get('per_question')} per question, seed {cases.get('seed')})")
    if split:
        head += f"; directions/steered question split: {split.get('note', split.get('source'))}"
    notes = [n for n in (summary.get("controls_note"),) if n]
    if summary.get("n_random_directions") is not None and summary.get("settings"):
        nd = summary["n_random_directions"]
        notes.append(f"{nd} distinct random directions" + (" (fewer than 20: the control is thin)" if nd < 20 else ""))
    return head, "; ".join(notes)


def format_table(summary: dict[str, Any], style: str = "text") -> str:
    """The grid as a text or markdown table."""
    rows = _rows(summary)
    if style == "md":
        return block_markdown(grid_table(summary))
    widths = [max(len(h), *(len(r[i]) for r in rows)) if rows else len(h) for i, h in enumerate(HEAD)]
    fmt = lambda r: "  ".join(c.ljust(w) if i == 0 else c.rjust(w) for i, (c, w) in enumerate(zip(r, widths)))  # noqa: E731
    lines = [fmt(HEAD), "-" * (sum(widths) + 2 * (len(widths) - 1))] + [fmt(r) for r in rows]
    return "\n".join(lines + [FOOT])


def format_summary(summary: dict[str, Any], style: str = "text") -> str:
    """The sweep's summary as text or markdown: cases and split, the grid table, the verdict."""
    if style not in ("text", "md"):
        raise ValueError(f"style must be 'text' or 'md', got {style!r}")
    if style == "md":
        return blocks_markdown(summary_blocks(summary))
    head, note = _head(summary)
    body = format_table(summary, style) if summary.get("settings") else ""
    verdicts = summary.get("verdicts") or {}
    if len(verdicts) > 1:
        lines = "\n".join(f"verdict ({op}): {v.get('verdict', '')}" for op, v in verdicts.items())
        return "\n".join(x for x in (head, note, body, lines) if x)
    verdict = summary.get("verdict", "")
    return "\n".join(x for x in (head, note, body, verdict) if x)


__all__ = ["HEAD", "fmt_rate", "format_summary", "format_table", "verdict_text"]
