"""A labelling's ``summary.json``: A/B/C counts and rates with intervals (perturbed and control apart, broken
down by position, strategy, task and difficulty), every labeller's own A/B/C, the judge's agreement across
prompt variants and the labellers' agreement; and the summary as text or markdown (:func:`format_summary`)."""
from __future__ import annotations

import itertools
from collections.abc import Callable, Mapping, Sequence
from typing import Any, cast

from behavioural.labels.agreement import kappa, variant_agreement
from behavioural.labels.judge import JudgeLabeller
from behavioural.labels.records import FINAL_RULE, GROUP_KEYS, LABELS, SCHEMA_VERSION
from behavioural.results import LabelSummary
from loadbearing.report.blocks import Block, Paragraph, Row, Table, blocks_markdown, facet_filter, label_cell_filters
from loadbearing.results.check import RateJSON
from loadbearing.stats import clustered_rate, format_rate, rate

__all__ = ["format_summary", "summarize"]


def _block(labels: list[str | None], corrects: list[bool | None], groups: list[str] | None = None) -> dict[str, Any]:
    """Counts and rates of one group of label records. With ``groups`` (each record's question) the
    propagation and B-among-correct intervals are clustered by question (a question contributes several
    records); without it they are row-level Wilson intervals."""
    n = len(labels)
    cnt = {k: labels.count(k) for k in LABELS}
    cnt["null"] = labels.count(None)
    n_lab = cnt["A"] + cnt["B"] + cnt["C"]
    n_parse = sum(c is not None for c in corrects)
    if groups is not None:
        parse = [(lab == "C", g) for lab, c, g in zip(labels, corrects, groups) if c is not None]
        ab = [(lab == "B", g) for lab, g in zip(labels, groups) if lab in ("A", "B")]
        propagation = clustered_rate([x for x, _ in parse], [g for _, g in parse]).to_dict()
        b_correct = clustered_rate([x for x, _ in ab], [g for _, g in ab]).to_dict()
    else:
        propagation, b_correct = cast(RateJSON, rate(cnt["C"], n_parse)), cast(RateJSON, rate(cnt["B"], cnt["A"] + cnt["B"]))
    return {
        "n": n,
        "counts": cnt,
        "n_labelled": n_lab,
        "rates": {k: rate(cnt[k], n_lab) for k in LABELS},  # over labelled (non-null) continuations
        "null": rate(cnt["null"], n),
        "propagation": propagation,  # C over parseable answers (the protocol's rate), clustered by question
        "B_among_correct_labelled": b_correct,
    }


def _section(rows: list[dict[str, Any]], key: Callable[[dict[str, Any]], str | None] = lambda r: r["label"],
             breakdown: bool = True) -> dict[str, Any]:
    out = _block([key(r) for r in rows], [r["correct"] for r in rows], [str(r.get("question_id")) for r in rows])
    if breakdown:
        out["by"] = {}
        for g in GROUP_KEYS:
            vals = sorted({str(r.get(g)) for r in rows})
            out["by"][g] = {v: _block([key(r) for r in rows if str(r.get(g)) == v],
                                      [r["correct"] for r in rows if str(r.get(g)) == v],
                                      [str(r.get("question_id")) for r in rows if str(r.get(g)) == v]) for v in vals}
    return out


def summarize(records: list[dict[str, Any]], labellers: Sequence[Any], final_name: str) -> LabelSummary:
    """The ``summary.json`` of a labelling (see the module docstring)."""
    names = [lab.name for lab in labellers]
    conds = {c: [r for r in records if r["condition"] == c] for c in ("perturbed", "control")}
    out: dict[str, Any] = {"schema_version": SCHEMA_VERSION, "final_labeller": final_name, "final_rule": FINAL_RULE,
                 "rates_note": "A/B/C rates are over labelled continuations; propagation is C over parseable answers; "
                               "null counts unparseable answers and undecided notice verdicts"}
    for c, rows in conds.items():
        out[c] = _section(rows)
    def by(name: str) -> Callable[[dict[str, Any]], str | None]:
        return lambda r: r["labellers"][name]["label"]

    out["labellers"] = {n: {c: _section(rows, key=by(n), breakdown=False) for c, rows in conds.items()} for n in names}
    # labellers vs each other on the A/B call (correct perturbed continuations)
    correct_p = [r for r in conds["perturbed"] if r["correct"] is True]
    out["labeller_agreement"] = [
        {"a": a, "b": b, "on": "noticed (A vs B), correct perturbed continuations",
         **kappa([r["labellers"][a]["noticed"] for r in correct_p], [r["labellers"][b]["noticed"] for r in correct_p])}
        for a, b in itertools.combinations(names, 2)
    ]
    out["judge_variant_agreement"] = {}
    for lab in labellers:
        if isinstance(lab, JudgeLabeller):
            vn = [v.name for v in lab.variants]
            out["judge_variant_agreement"][lab.name] = {
                c: variant_agreement([r["labellers"][lab.name] for r in rows], vn) for c, rows in conds.items()
            }
    return cast(LabelSummary, out)


def _r(r: Mapping[str, Any] | None) -> str:
    return format_rate(r) if r else "n/a"  # a markdown table cell escapes its own "|"


def summary_blocks(summary: Mapping[str, Any]) -> tuple[Block, ...]:
    """The labelling's summary as report blocks: the counts per condition and per group (each row linking to its
    samples in the trace browser, each non-zero A/B/C count to that label's), the labellers' agreement."""
    head = ("condition", "n", "A", "B", "C", "null", "propagation (C / parseable)", "B among correct")
    rows = []
    for c in ("perturbed", "control"):
        s = summary[c]
        k = s["counts"]
        cells = tuple(str(x) for x in (c, s["n"], k["A"], k["B"], k["C"], k["null"], _r(s["propagation"]),
                                      _r(s["B_among_correct_labelled"])))
        f = facet_filter(c)
        rows.append(Row(cells, filter=f, cell_filters=label_cell_filters(f, head, cells)))
    blocks: list[Block] = [Paragraph(f"Labelling `{summary.get('labelling')}` (final labeller: `{summary['final_labeller']}`)."),
                           Table(head, tuple(rows))]
    by = summary["perturbed"].get("by", {})
    if by:
        bhead = ("perturbed, by", "n", "A", "B", "C", "null")
        brows = []
        for g in GROUP_KEYS:
            for v, b in by.get(g, {}).items():
                cells = tuple(str(x) for x in (f"{g}={v}", b["n"], b["counts"]["A"], b["counts"]["B"], b["counts"]["C"],
                                               b["counts"]["null"]))
                f = facet_filter(**{g: v})
                brows.append(Row(cells, filter=f, cell_filters=label_cell_filters(f, bhead, cells)))
        blocks.append(Table(bhead, tuple(brows)))
    for p in summary.get("labeller_agreement", []):
        kv = p["kappa"]
        blocks.append(Paragraph(f"{p['a']} vs {p['b']} on A/B: n={p['n']}, kappa {'n/a' if kv is None else f'{kv:.2f}'}."))
    return tuple(blocks)


def format_summary(summary: Mapping[str, Any], style: str = "text") -> str:
    """A labelling's summary as text (``style="text"``) or markdown (``style="md"``)."""
    if style not in ("text", "md"):
        raise ValueError(f"unknown style {style!r}; use 'text' or 'md'")
    if style == "md":
        return blocks_markdown(summary_blocks(summary))
    lines = [f"labelling {summary.get('labelling')} (final labeller: {summary['final_labeller']})"]
    for c in ("perturbed", "control"):
        s = summary[c]
        cnt = s["counts"]
        lines.append(f"{c}: n={s['n']}  A={cnt['A']} B={cnt['B']} C={cnt['C']} null={cnt['null']}  "
                     f"propagation {_r(s['propagation'])}  B|correct {_r(s['B_among_correct_labelled'])}")
        if c == "perturbed":
            for g in GROUP_KEYS:
                for v, b in s["by"][g].items():
                    k = b["counts"]
                    lines.append(f"  {g}={v}: n={b['n']} A={k['A']} B={k['B']} C={k['C']} null={k['null']}")
    for n, agr in summary.get("judge_variant_agreement", {}).items():
        a = agr["perturbed"]
        k = a["mean_pairwise_kappa"]
        lines.append(f"{n} variants (perturbed): unanimous {_r(a['unanimous'])}, mean pairwise kappa "
                     f"{'n/a' if k is None else f'{k:.2f}'} over {a['n_pairs_with_kappa']} pairs")
    for p in summary.get("labeller_agreement", []):
        k = p["kappa"]
        lines.append(f"{p['a']} vs {p['b']} on A/B: n={p['n']} kappa {'n/a' if k is None else f'{k:.2f}'}")
    return "\n".join(lines)
