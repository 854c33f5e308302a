"""Summaries of a protocol run: rates with question-clustered intervals, paired perturbed-minus-control
differences, broken down by position, strategy, task and difficulty.

    .venv/bin/python -m behavioural.summary runs/demo          # recompute and print a run's summary

The estimand: among baselines that were answered correctly and had enough visible reasoning lines
(eligible), the fraction of *parseable* perturbed continuations whose final answer is wrong. Unparseable
continuations are unscored (reported as coverage), and a rate with no denominator is null.

Units (DESIGN.md): a question is its normalised text (``question_key``); a generation is one distinct
model input (one Continuation record, which lists every (strategy, position) cell it belongs to in
``memberships``). So:

* pooled rates (``overall``, by task/difficulty) count each distinct generation once;
* per-strategy and per-position rates count a generation in every group it is a member of (once per group);
  positions that share one generation are one group (``middle=late``: with 3-4 reasoning lines the middle
  and late edits land on one line; :func:`loadbearing.stats.design.merged_position`), never two identical rows;
* where a question contributes several rows the interval is clustered by question (Korn-Graubard:
  Clopper-Pearson on a design-effect-adjusted n; :func:`loadbearing.stats.clustered_rate`); a row-level
  Wilson interval is used only where every row is a different question (e.g. baseline accuracy);
* every rate carries ``n_questions`` and ``n_generations``, and the tables print them.

Baseline accuracy is reported two ways (issue #13): the paper's definition (an unparseable answer counts as
wrong; ``baseline_accuracy``) and over parseable answers (``baseline_accuracy_parseable``), with
``baseline_coverage`` beside them.
"""
from __future__ import annotations

from collections import Counter, defaultdict
from collections.abc import Callable, Hashable, Iterable, Mapping, Sequence
from typing import Any, cast

from behavioural.results import BehaviourSummary, CollapsedPositions, GroupRates, PairedDifference
from loadbearing.cli import OneLineParser, run_cli
from loadbearing.records import LABEL_C
from loadbearing.results.check import RateJSON
from loadbearing.runs import Run, question_key_of
from loadbearing.stats import Rate, clustered_rate, format_rate, paired_difference_ci, wilson_rate
from loadbearing.stats.design import merged_position, position_sort_key
from loadbearing.tables import render_table

BREAKDOWNS = ("position", "strategy", "task", "difficulty")
#: breakdowns whose groups are (strategy, position) cells: a generation counts in every group it belongs to
CELL_BREAKDOWNS = ("position", "strategy")
N_BOOT = 2000


def _as_dict(r: Any) -> dict[str, Any]:
    return r if isinstance(r, dict) else r.to_dict()


def _cells(c: Mapping[str, Any]) -> list[tuple[str, str]]:
    ms = c.get("memberships") or []
    return [tuple(m) for m in ms] or [(c["strategy"], c["position"])]  # type: ignore[misc]


def rate_over(flags: Sequence[bool], groups: Sequence[Hashable], *, seed: int = 0, n_boot: int = N_BOOT,
              n_generations: int | None = None) -> Rate:
    """k/n of ``flags``: Wilson when every row is its own question, else clustered by question."""
    n_q = len(set(groups))
    if n_q == len(flags):
        return wilson_rate(sum(map(bool, flags)), len(flags), n_questions=n_q, n_generations=n_generations)
    return clustered_rate(flags, groups, n_boot=n_boot, seed=seed, n_generations=n_generations)


def _rates(pert: list[dict[str, Any]], ctrl: list[dict[str, Any]], ctrl_by_line: dict[tuple[str, int], dict[str, Any]],
           seed: int, n_boot: int) -> GroupRates:
    """Rates over perturbed and control generations (each record once)."""
    scored_p = [c for c in pert if c["label"] is not None]
    scored_c = [c for c in ctrl if c["label"] is not None]
    pairs = []
    for p in pert:
        c = ctrl_by_line.get((p["question_id"], p["line_index"]))
        if c is None:
            continue
        a = None if p["label"] is None else float(p["label"] == LABEL_C)
        b = None if c["label"] is None else float(c["label"] == LABEL_C)
        pairs.append((question_key_of(p), a, b))
    diff = paired_difference_ci(pairs, seed=seed, n_boot=n_boot)

    def r(rows: list[dict[str, Any]], flags: list[bool]) -> RateJSON:
        return rate_over(flags, [question_key_of(c) for c in rows], seed=seed, n_boot=n_boot,
                         n_generations=len(rows)).to_dict()

    return {
        "perturbed": len(pert),
        "controls": len(ctrl),
        "coverage": r(pert, [c["label"] is not None for c in pert]),
        "propagation": r(scored_p, [c["label"] == LABEL_C for c in scored_p]),
        "control_error": r(scored_c, [c["label"] == LABEL_C for c in scored_c]),
        "paired_difference": cast(PairedDifference, diff),
        "questions": len({question_key_of(c) for c in pert}),
        "generations": len(pert) + len(ctrl),
    }


def _collapsed_positions(conts: list[dict[str, Any]]) -> CollapsedPositions:
    """Questions where two positions cut at the same line (so they share one generation)."""
    lines: dict[str, dict[str, int]] = defaultdict(dict)
    for c in conts:
        for _, pos in _cells(c):
            lines[question_key_of(c)][pos] = c["line_index"]
    pairs: Counter[str] = Counter()
    hit = 0
    for by_pos in lines.values():
        inv: dict[int, list[str]] = defaultdict(list)
        for pos, idx in by_pos.items():
            inv[idx].append(pos)
        same = [merged_position(ps) for ps in inv.values() if len(ps) > 1]
        hit += bool(same)
        pairs.update(same)
    return {"questions": hit, "of": len(lines), "pairs": dict(sorted(pairs.items()))}


def summarise(baselines: Iterable[Any], continuations: Iterable[Any], skipped: Iterable[Any] = (), *, seed: int = 0,
              n_boot: int = N_BOOT) -> BehaviourSummary:
    """The run's summary (``summary.json``); records may be dataclasses or their dicts."""
    baselines = [_as_dict(b) for b in baselines]
    conts = [_as_dict(c) for c in continuations]
    skipped = list(skipped)
    keys = [question_key_of(b) for b in baselines]
    parseable = [b for b in baselines if b["correct"] is not None]
    eligible = [b for b in baselines if b["eligible"]]
    reasons: dict[str, int] = defaultdict(int)
    for b in baselines:
        reasons[b["reason"].split("(")[0]] += 1

    def acc(rows: list[dict[str, Any]], flag: Callable[[dict[str, Any]], bool]) -> RateJSON:
        return rate_over([flag(b) for b in rows], [question_key_of(b) for b in rows], seed=seed, n_boot=n_boot).to_dict()

    pert = [c for c in conts if c["condition"] == "perturbed"]
    ctrl = [c for c in conts if c["condition"] == "control"]
    ctrl_by_line = {(c["question_id"], c["line_index"]): c for c in ctrl}
    n_cells = sum(len(_cells(c)) for c in conts)
    out: dict[str, Any] = {
        "questions": len(baselines),
        "distinct_questions": len(set(keys)),
        "baseline_accuracy": acc(baselines, lambda b: bool(b["correct"])),
        "baseline_accuracy_parseable": acc(parseable, lambda b: bool(b["correct"])),
        "baseline_coverage": acc(baselines, lambda b: b["correct"] is not None),
        "eligible": len(eligible),
        "eligible_questions": len({question_key_of(b) for b in eligible}),
        "ineligible_reasons": dict(sorted(reasons.items())),
        "continuations": len(conts),
        "generations": {
            "distinct": len({c["input_text"] for c in conts}),
            "records": len(conts),
            "perturbed": len(pert),
            "control": len(ctrl),
            "cells": n_cells,
            "shared": sum(len(_cells(c)) > 1 for c in conts),
        },
        "collapsed_positions": _collapsed_positions(pert + ctrl),
        "not_applicable": len(skipped),
        "overall": _rates(pert, ctrl, ctrl_by_line, seed, n_boot),
        "by": {},
    }
    for key in BREAKDOWNS:
        groups: dict[str, list[dict]] = defaultdict(list)
        for c in conts:
            if key == "strategy":
                names = {s for s, _ in _cells(c)}
            elif key == "position":  # per strategy, the positions this generation fills together: one group
                names = {merged_position(p for s2, p in _cells(c) if s2 == s) for s, _ in _cells(c)}
            else:
                names = {str(c.get(key))}
            for g in names:
                groups[g].append(c)
        if len(groups) <= 1 and key in ("task", "difficulty"):
            if not groups or next(iter(groups)) == "None":
                continue
        out["by"][key] = {
            g: _rates([c for c in rows if c["condition"] == "perturbed"], [c for c in rows if c["condition"] == "control"],
                      ctrl_by_line, seed, n_boot)
            for g, rows in sorted(groups.items(), key=lambda kv: position_sort_key(kv[0]) if key == "position"
                                  else (0.0, kv[0]))
        }
    # baseline accuracy and eligibility per difficulty level (the arith ladder's design check)
    levels: dict[str, list[dict]] = defaultdict(list)
    for b in baselines:
        levels[str(b.get("difficulty") or b.get("task"))].append(b)
    out["baseline_by_level"] = {
        lvl: {
            "questions": len(rows),
            "accuracy": acc(rows, lambda b: bool(b["correct"])),
            "accuracy_parseable": acc([b for b in rows if b["correct"] is not None], lambda b: bool(b["correct"])),
            "coverage": acc(rows, lambda b: b["correct"] is not None),
            "eligible": sum(b["eligible"] for b in rows),
        }
        for lvl, rows in sorted(levels.items())
    }
    return cast(BehaviourSummary, out)


def summarise_run(run: Any, *, seed: int | None = None, n_boot: int = N_BOOT) -> BehaviourSummary:
    """Summarise a :class:`loadbearing.runs.Run` (seed: the run's own unless given)."""
    if seed is None:
        seed = int((run.manifest.get("settings") or {}).get("seed", 0))
    return summarise(run.baselines(), run.continuations(), run.skipped(), seed=seed, n_boot=n_boot)


# ------------------------------------------------------------------------------------------ rendering
def _cov(r: Mapping[str, Any]) -> str:
    v = Rate.from_dict(r).value
    return "n/a" if v is None else f"{100 * v:.0f}%"


def _diff(d: Mapping[str, Any]) -> str | None:
    if not d or d.get("estimate") is None:
        return None
    lo, hi = (d.get("ci") or [None, None])[:2]
    ci = "[n/a]" if lo is None else f"[{100 * lo:.1f}, {100 * hi:.1f}]"
    dropped = d.get("n_dropped")
    return (f"{100 * d['estimate']:.1f} pp {ci} over {d['n_pairs']} pairs / {d['n_clusters']} questions "
            "(question-clustered interval)"
            + (f"; {dropped} pair(s) left out because a side is unparsed" if dropped else ""))


def _headline(s: Mapping[str, Any], style: str) -> list[str]:
    g = s.get("generations") or {}
    acc = format_rate(s["baseline_accuracy"], style)
    parts = [f"questions {s['questions']} ({s.get('distinct_questions', s['questions'])} distinct)",
             f"baseline accuracy {acc} (unparseable counts as wrong)"]
    if "baseline_accuracy_parseable" in s:
        parts.append(f"over parseable answers {format_rate(s['baseline_accuracy_parseable'], style)}, "
                     f"coverage {_cov(s['baseline_coverage'])}")
    parts.append(f"eligible {s['eligible']}")
    gen = (f"continuations {s['continuations']} distinct generations ({g.get('perturbed', '?')} perturbed, "
           f"{g.get('control', '?')} control) filling {g.get('cells', '?')} (strategy, position) cells"
           if g else f"continuations {s['continuations']}")
    lines = [", ".join(parts) + ";", gen + f"; not applicable {s['not_applicable']}"]
    cp = s.get("collapsed_positions") or {}
    if cp.get("questions"):
        pairs = ", ".join(f"{k} in {v}" for k, v in cp["pairs"].items())
        lines.append(f"positions collapsed: in {cp['questions']} of {cp['of']} questions two positions edit the same "
                     f"line ({pairs}), so they share one generation")
    if s.get("ineligible_reasons"):
        lines.append("baselines by reason: " + ", ".join(f"{k} {v}" for k, v in s["ineligible_reasons"].items()))
    return lines


def format_summary(summary: Mapping[str, Any], style: str = "text", min_rows: int = 5) -> str:
    """The behavioural summary as a text table (``style="text"``, what the CLI prints) or markdown (``"md"``)."""
    if style not in ("text", "md"):
        raise ValueError(f"unknown style {style!r}; use 'text' or 'md'")
    s = summary
    lines = _headline(s, style)
    note = ("intervals: 95%, clustered by question (Korn-Graubard) where a question contributes several rows, Wilson where "
            "each row is its own question; per-strategy/position rows count a generation in every group it belongs "
            "to, pooled rows count it once")
    rows = [("overall", s["overall"])] + [(f"{k}={g}", r) for k, groups in s.get("by", {}).items()
                                          for g, r in groups.items()]

    def flag(r: dict) -> str:
        n = r["propagation"]["n"]
        return f"too few cases (n={n})" if n < min_rows else ""

    if style == "md":
        out = [" ".join(lines), "", f"_{note}._", "",
               render_table(["group", "propagation", "control error", "coverage", "questions", "generations", "note"],
                            [[name, format_rate(r["propagation"]), format_rate(r["control_error"]), _cov(r["coverage"]),
                              r["questions"], r.get("generations", ""), flag(r)] for name, r in rows])]
    else:
        out = lines + ["", note, "",
                       f"{'group':<26} {'propagation':<38} {'control error':<38} {'coverage':>8} {'q':>4} {'gen':>5}"]
        for name, r in rows:
            out.append(f"{name:<26} {format_rate(r['propagation']):<38} {format_rate(r['control_error']):<38} "
                       f"{_cov(r['coverage']):>8} {r['questions']:>4} {r.get('generations', ''):>5}"
                       + (f"  <- {flag(r)}" if flag(r) else ""))
    d = _diff(s["overall"].get("paired_difference") or {})
    if d:
        out += ["", f"perturbed - control (paired by question and line): {d}"]
    levels = s.get("baseline_by_level") or {}
    if len(levels) > 1 or (style == "md" and levels):
        if style == "md":
            out += ["", render_table(
                ["level", "questions", "accuracy (unparseable = wrong)", "accuracy (parseable)", "coverage", "eligible"],
                [[lvl, v["questions"], format_rate(v["accuracy"]), format_rate(v.get("accuracy_parseable")),
                  _cov(v["coverage"]) if "coverage" in v else "", v["eligible"]] for lvl, v in levels.items()])]
        else:
            out += ["", "baseline by level (unparseable = wrong; parseable only; coverage):"]
            for lvl, v in levels.items():
                out.append(f"  {lvl:<10} {format_rate(v['accuracy'])}; {format_rate(v.get('accuracy_parseable'))}; "
                           f"{_cov(v['coverage']) if 'coverage' in v else ''}; eligible {v['eligible']}")
    if s.get("message"):
        out += ["", f"**{s['message']}**" if style == "md" else s["message"]]
    return "\n".join(out)


def format_table(summary: Mapping[str, Any], min_rows: int = 5) -> str:
    """The text table the CLI prints (``format_summary(summary, "text")``)."""
    return format_summary(summary, "text", min_rows=min_rows)


def main(argv: list[str] | None = None) -> int:
    """``python -m behavioural.summary RUN_DIR [--md]``: recompute a run's summary from its records and print it."""
    ap = OneLineParser(prog="python -m behavioural.summary", description=main.__doc__)
    ap.add_argument("run_dir", help="a run directory written by python -m behavioural.run")
    ap.add_argument("--md", action="store_true", help="markdown instead of text")
    args = ap.parse_args(argv)
    return run_cli(lambda: print(format_summary(summarise_run(Run(args.run_dir)), "md" if args.md else "text")))


__all__ = ["summarise", "summarise_run", "format_summary", "format_table", "rate_over", "BREAKDOWNS"]


if __name__ == "__main__":
    raise SystemExit(main())
