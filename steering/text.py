"""python -m steering.sweep RUN_DIR --directions RUN_DIR/probes  (this module: the sweep's text)

The one-line verdict (:func:`verdict_text`), the grid table (:func:`format_table`, text or markdown through
:func:`loadbearing.tables.render_table`) and the printed summary (:func:`format_summary`), all from a
``summary.json`` dict (:mod:`steering.analysis`).
"""
from __future__ import annotations

from typing import Any

from loadbearing.tables import render_table


def fmt_rate(r: dict[str, Any] | None, style: str = "text") -> str:
    """A rate through the one formatter, :func:`loadbearing.stats.format_rate`."""
    from loadbearing.stats import format_rate

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
    s = (f"L{d['layer']}{basis} k={d['k']} {how} moved {fmt_rate(d['moved_of_all'])} of all C "
         f"(coverage {_pct(d['coverage_c']['rate'])})")
    if d["control"]["kind"]:
        s += f" vs {d['control']['kind']} control {fmt_rate(d['control']['moved_of_all'])}"
    if est is not None:
        s += (f", difference {_pp(est)} pp (95% CI {_pp(ci[0])} to {_pp(ci[1])} pp over "
              f"{diff.get('n_questions')} questions)")
    if d["p_holm"] is not None:
        s += f", exact p={d['p_value']:.3g}, Holm p={d['p_holm']:.3g}"
        ex = d.get("exact") or {}
        if ex.get("min_p_two") is not None and ex["min_p_two"] >= 0.05:
            s += f" (smallest attainable p {ex['min_p_two']:.3g})"
    return s


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
    if code == "effect":
        winners = [d for d in settings if d["beats_control"]]
        top = max(winners, key=lambda d: d["moved_of_all"]["rate"])
        harm = sum(d["harms"] for d in settings)
        return (f"effect: {len(winners)}/{len(settings)} settings beat their control (Holm p < {lvl})"
                + (f", {harm} are worse than it" if harm else "") + f"; strongest: {_setting_str(top)}")
    if code == "harm":
        losers = [d for d in settings if d["harms"]]
        worst = min(losers, key=lambda d: d["exact"]["stat"])
        return (f"harm: no setting beats its control, and {len(losers)}/{len(settings)} are significantly worse "
                f"than it (Holm p < {lvl}); worst: {_setting_str(worst)}")
    if code == "null":
        return (f"null: no setting beats or falls behind its control and every 95% interval lies within +/-"
                f"{sesoi_pp:.0f} pp (equivalence); strongest: {_setting_str(best)}{power}")
    n_ex = sum(1 for d in settings if d["equivalent"])
    return (f"inconclusive: no setting beats its control (Holm p < {lvl}), but {len(settings) - n_ex}/"
            f"{len(settings)} intervals still reach beyond +/-{sesoi_pp:.0f} pp; strongest: {_setting_str(best)}{power}")


def _short(r: dict[str, Any] | None) -> str:
    if not r or not r["n"]:
        return "0/0"
    return f"{r['k']}/{r['n']} {_pct(r['rate'])}"


def _pairs(diff: dict[str, Any]) -> str:
    if not diff:
        return ""
    s = f"{diff.get('n_cases', 0)}"
    extra = []
    if diff.get("n_unparsed_pairs"):
        extra.append(f"{diff['n_unparsed_pairs']} unparsed")
    if diff.get("n_dropped"):
        extra.append(f"{diff['n_dropped']} dropped")
    return s + (f" ({', '.join(extra)})" if extra else "")


def _rows(summary: dict[str, Any]) -> list[list[str]]:
    rows = []
    b = summary.get("baseline")
    if b:
        rows.append(["alpha=0 rerun", "none", _short(b["moved_of_all"]), _pct(b["coverage_c"]["rate"]), "", "", "", "",
                     "", "", "", _short(b["broken"])])
    for d in summary["settings"]:
        diff = d["difference"] or {}
        est, ci = diff.get("estimate"), diff.get("ci") or [None, None]
        ds = "n/a" if est is None else f"{_pp(est)} [{_pp(ci[0])},{_pp(ci[1])}]"
        ctrl = d["control"]
        cs = "n/a" if not ctrl["kind"] else f"{_pct(ctrl['moved_of_all']['rate'])} {ctrl['kind']} x{ctrl['m']}"
        iso = d.get("isotropic")
        if iso:
            cs += f"; iso {_pct(iso['moved_of_all']['rate'])} p={_f3(iso['p_value'])}"
        call = ("effect" if d["beats_control"] else "harm" if d["harms"] else "equiv" if d["equivalent"]
                else "" if d["p_value"] is None else "-")
        rows.append([d["key"] + (" *" if d["strongest"] else ""), d.get("operator", "add"), _short(d["moved_of_all"]),
                     _pct(d["coverage_c"]["rate"]), cs, ds, _pairs(diff), _f3(d["p_value"]),
                     _f3((d.get("exact") or {}).get("min_p_two")), _f3(d["p_holm"]), call, _short(d["broken"])])
    return rows


HEAD = ["setting", "operator", "moved C (of all)", "coverage", "control", "diff pp [95% CI]", "pairs", "p", "min p", "Holm",
        "call", "broken non-C"]
FOOT = ("* strongest setting of its operator (ranked by moved-of-all: unparsed answers count as not moved); operator = "
        "add (the directions added at alpha) or ablate (their span projected out; no alpha), each its own Holm family "
        "and verdict; coverage = parsed "
        "steered answers; control = random-direction moved rate (random: isotropic, random_cov: covariance-matched, "
        "xm: random generations per case, each its own direction); diff = probe minus control, per question then "
        "averaged, CI over questions; pairs = C cases compared (unparsed: a side did not parse and counts as not "
        "moved; dropped: no control generation); p = exact randomisation test, two-sided; min p = the smallest p "
        "these cases allow; call = effect / harm (Holm) / equiv (CI within +/- SESOI)")


def format_table(summary: dict[str, Any], style: str = "text") -> str:
    """The grid as a text or markdown table."""
    rows = _rows(summary)
    if style == "md":
        return "\n".join([render_table(HEAD, rows, style="md"), "", FOOT])
    widths = [max(len(h), *(len(r[i]) for r in rows)) if rows else len(h) for i, h in enumerate(HEAD)]
    fmt = lambda r: "  ".join(c.ljust(w) if i == 0 else c.rjust(w) for i, (c, w) in enumerate(zip(r, widths)))  # noqa: E731
    lines = [fmt(HEAD), "-" * (sum(widths) + 2 * (len(widths) - 1))] + [fmt(r) for r in rows]
    return "\n".join(lines + [FOOT])


def format_summary(summary: dict[str, Any], style: str = "text") -> str:
    """The sweep's summary as text or markdown: cases and split, the grid table, the verdict."""
    if style not in ("text", "md"):
        raise ValueError(f"style must be 'text' or 'md', got {style!r}")
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
    body = format_table(summary, style) if summary.get("settings") else ""
    verdicts = summary.get("verdicts") or {}
    note = "; ".join(notes)
    if len(verdicts) > 1:
        if style == "md":
            lines = "\n".join(f"- **{op}:** {v.get('verdict', '')}" for op, v in verdicts.items())
            return "\n\n".join(x for x in (head + ".", note, body, "**Verdict, per operator.**\n\n" + lines) if x)
        lines = "\n".join(f"verdict ({op}): {v.get('verdict', '')}" for op, v in verdicts.items())
        return "\n".join(x for x in (head, note, body, lines) if x)
    verdict = summary.get("verdict", "")
    if style == "md":
        return "\n\n".join(x for x in (head + ".", note, body, f"**Verdict.** {verdict}") if x)
    return "\n".join(x for x in (head, note, body, verdict) if x)


__all__ = ["HEAD", "fmt_rate", "format_summary", "format_table", "verdict_text"]
