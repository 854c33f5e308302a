"""The report's behaviour section, laid out from the run's ``summary.json`` (the numbers are the stage's).

    from study.report_behaviour import behaviour_section
    print(behaviour_section(read_json("runs/study/summary.json"), style="md"))

The stage's own ``behavioural.run.format_summary`` is what its CLI prints; the report lays the same numbers
out for reading: one bullet per fact (no run-on sentence), the group table with its counting convention in
its header and no empty column (``note`` appears only when some row has too few cases), then the paired
difference and the baseline per level.
"""
from __future__ import annotations

from typing import Any

from loadbearing.stats import Rate, format_rate
from loadbearing.tables import render_table

#: rows with fewer parseable perturbed continuations than this get a note
MIN_ROWS = 5

#: the convention of this section's group rows (the report states the convention once; this labels the table)
GROUP_CONVENTION = "per generation"


def _cov(r: dict | None) -> str:
    v = Rate.from_dict(r).value if r else None
    return "n/a" if v is None else f"{100 * v:.0f}%"


def _facts(s: dict[str, Any]) -> list[str]:
    g = s.get("generations") or {}
    facts = [f"questions {s['questions']} ({s.get('distinct_questions', s['questions'])} distinct); baseline accuracy "
             f"{format_rate(s['baseline_accuracy'])} (unparseable counts as wrong)"
             + (f", over parseable answers {format_rate(s['baseline_accuracy_parseable'])}, coverage "
                f"{_cov(s.get('baseline_coverage'))}" if "baseline_accuracy_parseable" in s else "")]
    reasons = s.get("ineligible_reasons") or {}
    facts.append(f"eligible {s['eligible']} (answered correctly with >= 3 reasoning lines)"
                 + (f"; baselines by reason: {', '.join(f'{k} {v}' for k, v in reasons.items())}" if reasons else ""))
    if g:
        facts.append(f"continuations: {s['continuations']} distinct generations ({g.get('perturbed', '?')} perturbed, "
                     f"{g.get('control', '?')} control) filling {g.get('cells', '?')} (strategy, position) cells; "
                     f"not applicable {s.get('not_applicable', 0)}")
    else:
        facts.append(f"continuations: {s['continuations']}; not applicable {s.get('not_applicable', 0)}")
    cp = s.get("collapsed_positions") or {}
    if cp.get("questions"):
        pairs = ", ".join(f"{k} in {v}" for k, v in (cp.get("pairs") or {}).items())
        facts.append(f"positions collapsed: in {cp['questions']} of {cp['of']} questions two positions edit the same "
                     f"line ({pairs}), so they share one generation")
    pd = (s.get("overall") or {}).get("paired_difference") or {}
    if pd.get("estimate") is not None:
        lo, hi = (pd.get("ci") or [None, None])[:2]
        ci = "[n/a]" if lo is None else f"[{100 * lo:.1f}, {100 * hi:.1f}]"
        facts.append(f"perturbed - control (paired by question and line): {100 * pd['estimate']:.1f} pp {ci} over "
                     f"{pd.get('n_pairs')} pairs / {pd.get('n_clusters')} questions "
                     f"({pd.get('method') or 'clustered by question'})")
    return facts


def behaviour_section(s: dict[str, Any], style: str = "md") -> str:
    """The section as markdown (``md``) or plain text (``text``)."""
    rows = [("overall", s["overall"])] + [(f"{k}={g}", r) for k, groups in (s.get("by") or {}).items()
                                          for g, r in groups.items()]

    def flag(r: dict) -> str:
        n = (r.get("propagation") or {}).get("n", 0)
        return f"too few cases (n={n})" if n < MIN_ROWS else ""

    flagged = any(flag(r) for _, r in rows)
    header = ["group", f"propagation ({GROUP_CONVENTION})", "control error", "coverage", "questions", "generations"]
    body = [[name, format_rate(r.get("propagation")), format_rate(r.get("control_error")), _cov(r.get("coverage")),
             r.get("questions"), r.get("generations", "")] + ([flag(r)] if flagged else []) for name, r in rows]
    if flagged:
        header.append("note")
    note = ("intervals: 95%, clustered by question (Korn-Graubard) where a question contributes several rows, Wilson where each "
            "row is its own question; a group row counts a generation once in every group whose cell it fills, the "
            "overall row counts it once")
    facts = _facts(s)
    md = style == "md"
    out = [*(f"- {f}" for f in facts)] if md else [f"* {f}" for f in facts]
    out += ["", f"_{note}._" if md else note, "", render_table(header, body, style="md" if md else "text")]
    levels = s.get("baseline_by_level") or {}
    if levels:
        out += ["", render_table(
            ["level", "questions", "accuracy (unparseable = wrong)", "accuracy (parseable)", "coverage", "eligible"],
            [[lvl, v["questions"], format_rate(v["accuracy"]), format_rate(v.get("accuracy_parseable")),
              _cov(v.get("coverage")), v["eligible"]] for lvl, v in levels.items()], style="md" if md else "text")]
    if s.get("message"):
        out += ["", f"**{s['message']}**" if md else s["message"]]
    return "\n".join(out)


__all__ = ["GROUP_CONVENTION", "MIN_ROWS", "behaviour_section"]
