"""The report's behaviour section, laid out from the run's ``summary.json`` (the numbers are the stage's).

    from study.report.behaviour import behaviour_section
    print(behaviour_section(read_json("runs/study/summary.json"), style="md"))

The stage's own ``behavioural.run.format_summary`` is what its CLI prints; the report lays the same numbers
out for reading: one bullet per fact (no run-on sentence), the group table with its counting convention in
its header and no empty column (``note`` appears only when some row has too few cases), then the paired
difference and the baseline per level.
"""
from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from loadbearing.report.blocks import Block, Bullets, Filter, Paragraph, Row, Table, blocks_markdown, blocks_text, facet_filter
from loadbearing.stats import Rate, format_rate

#: rows with fewer parseable perturbed continuations than this get a note
MIN_ROWS = 5

#: the convention of this section's group rows (the report states the convention once; this labels the table)
GROUP_CONVENTION = "per generation"


def _cov(r: Mapping[str, Any] | None) -> str:
    v = Rate.from_dict(r).value if r else None
    return "n/a" if v is None else f"{100 * v:.0f}%"


def _facts(s: Mapping[str, Any]) -> list[str]:
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


def _group_filter(key: str | None, value: str | None = None) -> Filter | None:
    """The browser filter of a group row (``overall``: all perturbed samples)."""
    try:
        return facet_filter() if key is None else facet_filter(**{key: str(value)})
    except ValueError:
        return None  # a group the browser has no facet for: no link


def behaviour_blocks(s: Mapping[str, Any]) -> tuple[Block, ...]:
    """The section's blocks from a :class:`behavioural.results.BehaviourSummary`: the facts, the counting note,
    the group table (each row linking to its samples in the trace browser), the baseline per level, the stage's
    message."""
    rows = [("overall", None, None, s["overall"])] + [(f"{k}={g}", k, g, r) for k, groups in (s.get("by") or {}).items()
                                                     for g, r in groups.items()]

    def flag(r: Mapping[str, Any]) -> str:
        n = (r.get("propagation") or {}).get("n", 0)
        return f"too few cases (n={n})" if n < MIN_ROWS else ""

    flagged = any(flag(r) for *_, r in rows)
    header = ["group", f"propagation ({GROUP_CONVENTION})", "control error", "coverage", "questions", "generations"]
    if flagged:
        header.append("note")
    note = ("intervals: 95%, clustered by question (Korn-Graubard) where a question contributes several rows, Wilson where each "
            "row is its own question; a group row counts a generation once in every group whose cell it fills, the "
            "overall row counts it once")
    cell = lambda v: "" if v is None else str(v)  # noqa: E731
    body = tuple(Row(tuple(cell(c) for c in [name, format_rate(r.get("propagation")), format_rate(r.get("control_error")),
                                             _cov(r.get("coverage")), r.get("questions"), r.get("generations", "")]
                       + ([flag(r)] if flagged else [])), filter=_group_filter(k, g)) for name, k, g, r in rows)
    out: list[Block] = [Bullets(tuple(_facts(s))), Paragraph(f"_{note}._", note), Table(tuple(header), body)]
    levels = s.get("baseline_by_level") or {}
    if levels:
        out.append(Table(("level", "questions", "accuracy (unparseable = wrong)", "accuracy (parseable)", "coverage",
                          "eligible"),
                         tuple(Row(tuple(cell(c) for c in [lvl, v["questions"], format_rate(v["accuracy"]),
                                                           format_rate(v.get("accuracy_parseable")),
                                                           _cov(v.get("coverage")), v["eligible"]]),
                                   filter=_group_filter("level", lvl)) for lvl, v in levels.items())))
    if s.get("message"):
        out.append(Paragraph(f"**{s['message']}**", s["message"]))
    return tuple(out)


def behaviour_section(s: Mapping[str, Any], style: str = "md") -> str:
    """The section as markdown (``md``) or plain text (``text``)."""
    blocks = behaviour_blocks(s)
    return blocks_markdown(blocks) if style == "md" else blocks_text(blocks)


__all__ = ["GROUP_CONVENTION", "MIN_ROWS", "behaviour_blocks", "behaviour_section"]
