"""Summaries of a protocol run: rates with Wilson and exact intervals, paired perturbed-minus-control
differences with a question-clustered bootstrap, broken down by position, strategy, task and difficulty.

The estimand: among baselines that were answered correctly and had enough visible reasoning lines
(eligible), the fraction of *parseable* perturbed continuations whose final answer is wrong. Unparseable
continuations are unscored (reported as coverage), and a rate with no denominator is null.
"""
from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterable

from .records import LABEL_C
from .stats import format_rate, paired_difference_ci, rate

BREAKDOWNS = ("position", "strategy", "task", "difficulty")


def _rates(conts: list[dict], seed: int) -> dict:
    pert = [c for c in conts if c["condition"] == "perturbed"]
    ctrl = [c for c in conts if c["condition"] == "control"]
    scored_p = [c for c in pert if c["label"] is not None]
    scored_c = [c for c in ctrl if c["label"] is not None]
    ctrl_by_key = {(c["question_id"], c["strategy"], c["position"]): c for c in ctrl}
    pairs = []
    for p in pert:
        c = ctrl_by_key.get((p["question_id"], p["strategy"], p["position"]))
        if c is None:
            continue
        a = None if p["label"] is None else float(p["label"] == LABEL_C)
        b = None if c["label"] is None else float(c["label"] == LABEL_C)
        pairs.append((p["question_id"], a, b))
    return {
        "perturbed": len(pert),
        "controls": len(ctrl),
        "coverage": rate(len(scored_p), len(pert)),
        "propagation": rate(sum(c["label"] == LABEL_C for c in scored_p), len(scored_p)),
        "control_error": rate(sum(c["label"] == LABEL_C for c in scored_c), len(scored_c)),
        "paired_difference": paired_difference_ci(pairs, seed=seed),
        "questions": len({c["question_id"] for c in pert}),
    }


def summarise(baselines: list[dict], continuations: list[dict], skipped: Iterable[dict] = (), *, seed: int = 0) -> dict:
    skipped = list(skipped)
    correct = [b for b in baselines if b["correct"] is not None]
    eligible = [b for b in baselines if b["eligible"]]
    reasons: dict[str, int] = defaultdict(int)
    for b in baselines:
        reasons[b["reason"].split("(")[0]] += 1
    out = {
        "questions": len(baselines),
        "baseline_coverage": rate(len(correct), len(baselines)),
        "baseline_accuracy": rate(sum(bool(b["correct"]) for b in correct), len(correct)),
        "eligible": len(eligible),
        "ineligible_reasons": dict(sorted(reasons.items())),
        "continuations": len(continuations),
        "not_applicable": len(skipped),
        "overall": _rates(continuations, seed),
        "by": {},
    }
    for key in BREAKDOWNS:
        groups: dict[str, list[dict]] = defaultdict(list)
        for c in continuations:
            groups[str(c.get(key))].append(c)
        if len(groups) <= 1 and key in ("task", "difficulty"):
            if not groups or next(iter(groups)) == "None":
                continue
        out["by"][key] = {g: _rates(rows, seed) for g, rows in sorted(groups.items())}
    # baseline accuracy and eligibility per difficulty level (the arith ladder's design check)
    levels: dict[str, list[dict]] = defaultdict(list)
    for b in baselines:
        levels[str(b.get("difficulty") or b.get("task"))].append(b)
    out["baseline_by_level"] = {
        lvl: {
            "questions": len(rows),
            "accuracy": rate(sum(bool(b["correct"]) for b in rows if b["correct"] is not None),
                             sum(b["correct"] is not None for b in rows)),
            "eligible": sum(b["eligible"] for b in rows),
        }
        for lvl, rows in sorted(levels.items())
    }
    return out


def format_table(summary: dict, min_rows: int = 5) -> str:
    """A readable text table of the summary (what the CLI prints)."""
    lines = []
    acc = summary["baseline_accuracy"]
    lines.append(f"questions {summary['questions']}, baseline accuracy {format_rate(acc)}, eligible {summary['eligible']}, "
                 f"continuations {summary['continuations']}, not applicable {summary['not_applicable']}")
    if summary["ineligible_reasons"]:
        lines.append("baselines by reason: " + ", ".join(f"{k} {v}" for k, v in summary["ineligible_reasons"].items()))
    lines.append("")
    lines.append(f"{'group':<28} {'propagation (95% Wilson)':<36} {'control error':<30} {'coverage':>9}")

    def row(name: str, r: dict) -> str:
        note = ""
        if r["propagation"]["n"] < min_rows:
            note = f"  <- too few eligible cases (n={r['propagation']['n']}) for a useful rate"
        cov = r["coverage"]["rate"]
        return (f"{name:<28} {format_rate(r['propagation']):<36} {format_rate(r['control_error']):<30} "
                f"{'' if cov is None else f'{100 * cov:.0f}%':>9}{note}")

    lines.append(row("overall", summary["overall"]))
    for key, groups in summary["by"].items():
        for g, r in groups.items():
            lines.append(row(f"{key}={g}", r))
    d = summary["overall"]["paired_difference"]
    if d["estimate"] is not None:
        lo, hi = d["ci"]
        ci = "n/a" if lo is None else f"[{100 * lo:.1f}, {100 * hi:.1f}]"
        lines.append(f"\nperturbed - control (paired, question-clustered bootstrap): {100 * d['estimate']:.1f} pp {ci} "
                     f"over {d['n_pairs']} pairs / {d['n_clusters']} questions")
    if summary.get("baseline_by_level") and len(summary["baseline_by_level"]) > 1:
        lines.append("\nbaseline by level: " + "; ".join(
            f"{lvl}: {format_rate(v['accuracy'])}, eligible {v['eligible']}" for lvl, v in summary["baseline_by_level"].items()))
    return "\n".join(lines)
