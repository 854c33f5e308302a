"""Early answering (Lanham et al. 2023): cut each eligible chain after 0, 1, ..., n reasoning lines, force the
answer, and ask how early the answer is already the full chain's.

    from behavioural.causal.early_answer import EarlyAnswerConfig, run_early_answer
    summary = run_early_answer(EarlyAnswerConfig(run_dir="runs/demo"))

One row per generation in ``RUN_DIR/early_answer/records.jsonl`` (the cut ``k``, the assistant text the
answer was forced after, the generation, the parsed answer and its score); ``summary.json`` holds each
question's curve and AOC, the pooled AOC with question-bootstrap intervals (overall and by dataset, task and
level), the per-length curves, and the agreement with the run's edit-and-continue propagation. The
definitions are in :mod:`behavioural.causal.aoc`.
"""
from __future__ import annotations

from collections import defaultdict
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from behavioural.causal import aoc as aoc_mod
from behavioural.causal.common import (
    Chain,
    Engine,
    Job,
    Stage,
    drive,
    forced_input,
    is_stage_complete,
    score_forced,
    with_note,
)
from loadbearing.runs import Run
from loadbearing.stats import clustered_rate, format_rate
from loadbearing.tables import render_table

NAME = "early_answer"
VERSION = "1"
GROUPS = ("dataset", "task", "difficulty")


@dataclass(frozen=True)
class EarlyAnswerConfig:
    run_dir: str | Path
    #: tokens generated after "Answer:" (the first line is the answer)
    max_answer_tokens: int = 16
    shard: str | None = None
    resume: bool = field(default=False, compare=False)
    batch_size: int = field(default=16, compare=False)
    device: str | None = field(default=None, compare=False)
    n_boot: int = field(default=2000, compare=False)
    seed: int = field(default=0, compare=False)
    progress: bool = field(default=True, compare=False)


def plan(config: EarlyAnswerConfig, chains: list[Chain], run: Run) -> list[Job]:
    return [Job(f"{c.baseline.question_id}|k={k}", c, {"k": k, "assistant": c.prefix(k)})
            for c in chains for k in range(c.n + 1)]


def execute(config: EarlyAnswerConfig, jobs: list[Job], engine: Engine) -> list[dict]:
    texts = [forced_input(j.chain, j.data["assistant"]) for j in jobs]
    gens = engine.generate(texts, max_new_tokens=config.max_answer_tokens, desc=f"{NAME} ({len(jobs)} cuts)")
    rows = []
    for j, g in zip(jobs, gens):
        answer_text, parsed, correct = score_forced(g.text, j.chain.baseline)
        k, n = j.data["k"], j.chain.n
        rows.append({"id": j.id, **j.chain.meta(), "k": k, "fraction": k / n, "assistant_text": j.data["assistant"],
                     "generation": g.text, "answer_text": answer_text, "parsed_answer": parsed, "correct": correct,
                     "baseline_answer": j.chain.baseline.parsed_answer, "new_tokens": g.new_tokens})
    return rows


# ------------------------------------------------------------------------------------------------ summary
def question_curves(rows: list[dict]) -> list[dict[str, Any]]:
    """Per question: its cuts, the forced answers, same-as-full-chain per cut (None: unparsed) and its AOC."""
    by_q: dict[str, list[dict]] = defaultdict(list)
    for r in rows:
        by_q[r["question_id"]].append(r)
    out = []
    for rs in by_q.values():
        rs = sorted(rs, key=lambda r: r["k"])
        n = rs[0]["n_lines"]
        full = next((r["parsed_answer"] for r in rs if r["k"] == n), None)
        same = [None if full is None or r["parsed_answer"] is None else int(r["parsed_answer"] == full) for r in rs]
        out.append({k: rs[0][k] for k in ("question_id", "question_key", "dataset", "task", "difficulty", "n_lines")}
                   | {"k": [r["k"] for r in rs], "answers": [r["parsed_answer"] for r in rs], "same": same,
                      "full_chain_answer": full, "baseline_answer": rs[0]["baseline_answer"],
                      "aoc": aoc_mod.question_aoc(n, [(r["k"], s) for r, s in zip(rs, same)])})
    return out


def _points(curves: list[dict]) -> tuple[list[str], list[aoc_mod.Point]]:
    keys, pts = [], []
    for c in curves:
        for k, s in zip(c["k"], c["same"]):
            if s is not None:
                keys.append(c["question_key"])
                pts.append((c["n_lines"], k, s))
    return keys, pts


def summarise(config: EarlyAnswerConfig, rows: list[dict], chains: list[Chain], run: Run) -> dict[str, Any]:
    curves = question_curves(rows)
    keys, pts = _points(curves)
    kw = {"n_boot": config.n_boot, "seed": config.seed}
    by: dict[str, dict[str, Any]] = {}
    for g in GROUPS:
        vals = sorted({str(c[g]) for c in curves})
        if len(vals) < 2 and g != "dataset":
            continue
        by[g] = {}
        for v in vals:
            sel = [i for i, c in enumerate(curves) if str(c[g]) == v]
            ks, ps = _points([curves[i] for i in sel])
            by[g][v] = aoc_mod.aoc_with_ci(ks, ps, **kw)
    with_ref = [c for c in curves if c["full_chain_answer"] is not None]
    props = aoc_mod.propagation_by_question(run.continuations("perturbed"))
    pairs = [(c["question_key"], c["aoc"], props[c["question_key"]][0] / props[c["question_key"]][1])
             for c in curves if c["aoc"] is not None and props.get(c["question_key"], (0, 0))[1] > 0]
    for c in curves:
        kc = props.get(c["question_key"])
        c["propagation"] = None if not kc or not kc[1] else kc[0] / kc[1]
        c["n_perturbed_scored"] = kc[1] if kc else 0
    n_unparsed = sum(r["parsed_answer"] is None for r in rows)
    return {
        "definition": "AOC = 1 - trapezoid(same answer as the full chain, x = k/n); pooled: per-length mean curves, "
                      "weighted by the number of chains of each length (cot-transparency get_aoc)",
        "aoc": aoc_mod.aoc_with_ci(keys, pts, **kw),
        "mean_question_aoc": _mean([c["aoc"] for c in curves]),
        "by": by,
        "curves_by_length": aoc_mod.curves_by_length(pts),
        "binned_curve": aoc_mod.binned_curve(pts),
        "full_chain_matches_baseline": clustered_rate(
            [c["full_chain_answer"] == c["baseline_answer"] for c in with_ref], [c["question_key"] for c in with_ref],
            **kw).to_dict(),
        "no_chain_accuracy": _accuracy([r for r in rows if r["k"] == 0], **kw),
        "full_chain_accuracy": _accuracy([r for r in rows if r["k"] == r["n_lines"]], **kw),
        "n_unparsed_rows": n_unparsed,
        "n_questions_without_reference": len(curves) - len(with_ref),
        "agreement": aoc_mod.agreement(pairs, **kw),
        "questions": curves,
    }


def _mean(vals: list[float | None]) -> float | None:
    v = [x for x in vals if x is not None]
    return sum(v) / len(v) if v else None


def _accuracy(rows: list[dict], *, n_boot: int, seed: int) -> dict:
    scored = [r for r in rows if r["correct"] is not None]
    return clustered_rate([bool(r["correct"]) for r in scored], [r["question_key"] for r in scored], n_boot=n_boot,
                          seed=seed).to_dict()


def _fmt(x: float | None, ci: list | None = None) -> str:
    if x is None:
        return "n/a"
    s = f"{x:.3f}"
    if ci and ci[0] is not None:
        s += f" [{ci[0]:.3f}, {ci[1]:.3f}]"
    return s


def format_summary(summary: dict[str, Any], style: str = "text") -> str:
    """The summary as tables (``style`` "text", "md" or "html")."""
    fs = "md" if style == "md" else "text"
    a = summary["aoc"]
    rows = [["all", _fmt(a["aoc"], a["ci"]), a["n_questions"], a["n_points"]]]
    for g, vals in summary.get("by", {}).items():
        rows += [[f"{g}={v}", _fmt(x["aoc"], x["ci"]), x["n_questions"], x["n_points"]] for v, x in vals.items()]
    out = ["Early answering: AOC (1 - area under the same-answer-as-full-chain curve; 0 = the answer is fixed before "
           "the chain, higher = the chain moves it), descriptive intervals: a percentile bootstrap over questions, "
           "not a calibrated 95% CI (coverage 0.83-0.90 at 5-16 questions, bench/calib_intervals.py)",
           render_table(["group", "AOC [bootstrap, descriptive]", "questions", "points"], rows, style),
           f"no chain accuracy {format_rate(summary['no_chain_accuracy'], fs)}; full chain accuracy "
           f"{format_rate(summary['full_chain_accuracy'], fs)}; full-chain forced answer = baseline answer "
           f"{format_rate(summary['full_chain_matches_baseline'], fs)}; unparsed forced answers: "
           f"{summary['n_unparsed_rows']}"]
    ag = summary["agreement"]
    rho = ag["spearman"]
    out.append(f"Agreement with edit-and-continue propagation ({ag['n_questions']} questions): Spearman rho "
               f"{_fmt(rho['rho'], rho['ci'])} ({rho.get('n_undefined_resamples', 0)} of {rho['n_boot']} resamples "
               "without a defined rho left out)")
    t = ag.get("table")
    if t:
        c = t["cells"]
        out.append(render_table(
            ["", "propagation >= median", "propagation < median"],
            [[f"AOC >= median ({t['median_aoc']:.3f})", c["high_aoc_high_prop"], c["high_aoc_low_prop"]],
             ["AOC < median", c["low_aoc_high_prop"], c["low_aoc_low_prop"]]], style))
        out.append(f"agree (both high or both low): {format_rate(t['agree'], fs)}; P(high propagation | high AOC) "
                   f"{format_rate(t['high_prop_given_high_aoc'], fs)}; P(high propagation | low AOC) "
                   f"{format_rate(t['high_prop_given_low_aoc'], fs)} (median propagation {t['median_propagation']:.3f})")
    out.append("rates: 95% intervals clustered by question (loadbearing.stats.clustered_rate); the 2x2 rates: Wilson, "
               "one row per question")
    return with_note("\n\n".join(out) if style != "text" else "\n".join(out))


STAGE = Stage(NAME, VERSION, plan, execute, summarise, format_summary)


def run_early_answer(config: EarlyAnswerConfig, lm: Any = None, *, generate_fn: Any = None, echo: Any = print) -> dict:
    """Run (or resume) early answering on ``config.run_dir``; returns the summary (see the module docstring)."""
    from loadbearing.cli import check_number

    check_number(config.max_answer_tokens, "--max-answer-tokens", minimum=1)
    return drive(STAGE, config, lm=lm, generate_fn=generate_fn, echo=echo)


def is_complete(path: str | Path) -> bool:
    """True when ``path`` (the run directory or its ``early_answer/``) holds a finished early-answering stage."""
    return is_stage_complete(path, NAME)
