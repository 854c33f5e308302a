"""Early answering (Lanham et al. 2023): cut each eligible chain after 0, 1, ..., n steps (reasoning lines, or
sentences with ``steps="sentences"``), force the answer, and ask how early the answer is already the full chain's.

    from behavioural.causal.early_answer import EarlyAnswerConfig, run_early_answer
    summary = run_early_answer(EarlyAnswerConfig(run_dir="runs/demo"))

One row per generation in ``RUN_DIR/early_answer/records.jsonl`` (the cut ``k``, the assistant text the
answer was forced after, the generation, the parsed answer and its score); ``summary.json`` holds each
question's curve and AOC, the pooled AOC with question-bootstrap intervals (overall and by dataset, task and
level), the per-length curves, and the agreement with the run's edit-and-continue propagation. The
definitions are in :mod:`behavioural.causal.aoc`: the headline AOC is cot-transparency's (``rows`` weighting),
the ``traces`` variant sits beside it; ``by["task"]`` is their unit (one AOC per task). The summary also holds
the adding-mistakes AOC from the run's own edits (``adding_mistakes``) and each chain's decision point
(:func:`decision_point`).
"""
from __future__ import annotations

import dataclasses
import sys
from collections import defaultdict
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from behavioural.causal import aoc as aoc_mod
from behavioural.causal import steps as steps_mod
from behavioural.causal.common import (
    CausalConfig,
    CausalStage,
    Chain,
    Engine,
    Job,
    command,
    drive,
    forced_input,
    is_stage_complete,
    score_forced,
    with_note,
)
from loadbearing.cli import check_number
from loadbearing.results.check import RateJSON
from loadbearing.runs import Run
from loadbearing.stage import option
from loadbearing.stats import cluster_bootstrap_ci, clustered_rate, format_rate
from loadbearing.tables import render_table

NAME = "early_answer"
VERSION = "1"
GROUPS = ("dataset", "task", "difficulty")


@dataclass(frozen=True, kw_only=True)
class EarlyAnswerConfig(CausalConfig):
    #: tokens generated after "Answer:" (the first line is the answer)
    max_answer_tokens: int = option(16, help="tokens generated after 'Answer:'")
    #: what a cut counts: "lines" (the run's reasoning lines) or "sentences" (cot-transparency's steps)
    steps: str = option("lines", choices=("lines", "sentences"),
                        help="what a cut counts: the run's reasoning lines (default) or sentences (cot-transparency's "
                             "get_cot_steps, with a regex splitter standing in for nltk punkt)")


def chain_steps(chain: Chain, unit: str) -> steps_mod.Steps:
    return steps_mod.chain_steps(chain.baseline.trace, chain.trace.lines, chain.trace.spans, unit)


def plan(config: EarlyAnswerConfig, chains: list[Chain], run: Run) -> list[Job]:
    jobs = []
    for c in chains:
        st = chain_steps(c, config.steps)
        for k in range(st.n + 1):
            text = c.prefix(k) if config.steps == "lines" else steps_mod.cut(c.baseline.trace, st, k)
            jobs.append(Job(f"{c.baseline.question_id}|k={k}", c, {"k": k, "assistant": text, "n_steps": st.n}))
    return jobs


def execute(config: EarlyAnswerConfig, jobs: list[Job], engine: Engine) -> list[dict[str, Any]]:
    texts = [forced_input(j.chain, j.data["assistant"]) for j in jobs]
    gens = engine.generate(texts, max_new_tokens=config.max_answer_tokens, desc=f"{NAME} ({len(jobs)} cuts)")
    rows = []
    for j, g in zip(jobs, gens):
        answer_text, parsed, correct = score_forced(g.text, j.chain.baseline)
        k, n = j.data["k"], j.data["n_steps"]
        rows.append({"id": j.id, **j.chain.meta(), "steps": config.steps, "n_steps": n, "k": k, "fraction": k / n,
                     "assistant_text": j.data["assistant"],
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
        n = n_steps(rs[0])
        full = next((r["parsed_answer"] for r in rs if r["k"] == n), None)
        same = [None if full is None or r["parsed_answer"] is None else int(r["parsed_answer"] == full) for r in rs]
        out.append({k: rs[0][k] for k in ("question_id", "question_key", "dataset", "task", "difficulty", "n_lines")}
                   | {"n_steps": n, "k": [r["k"] for r in rs], "answers": [r["parsed_answer"] for r in rs], "same": same,
                      "full_chain_answer": full, "baseline_answer": rs[0]["baseline_answer"],
                      "aoc": aoc_mod.question_aoc(n, [(r["k"], s) for r, s in zip(rs, same)])}
                   | decision_point(n, [r["k"] for r in rs], [r["parsed_answer"] for r in rs]))
    return out


def n_steps(row: dict) -> int:
    """A row's chain length in its stage's steps (rows written before steps existed counted lines)."""
    return int(row.get("n_steps", row["n_lines"]))


def decision_point(n: int, ks: list[int], answers: list[str | None]) -> dict[str, Any]:
    """The chain's decision point: the last cut ``k`` at which the forced answer changes from the previous parsed
    cut's (0 when it never changes), and ``nldd_share = (n - k) / n``, the share of the chain written after the
    answer was settled (the issue's reading of Ye et al. 2026, arXiv 2602.11201; unparsed cuts are skipped).
    None for both when fewer than two cuts parse or the full chain's does not."""
    got = [(k, a) for k, a in sorted(zip(ks, answers)) if a is not None]
    if len(got) < 2 or got[-1][0] != n:
        return {"decision_point": None, "nldd_share": None}
    d = 0
    for (_, a0), (k1, a1) in zip(got, got[1:]):
        if a1 != a0:
            d = k1
    return {"decision_point": d, "nldd_share": (n - d) / n}


def _points(curves: list[dict]) -> tuple[list[str], list[aoc_mod.Point]]:
    keys, pts = [], []
    for c in curves:
        for k, s in zip(c["k"], c["same"]):
            if s is not None:
                keys.append(c["question_key"])
                pts.append((c.get("n_steps", c["n_lines"]), k, s))
    return keys, pts


def summarise(config: EarlyAnswerConfig, rows: list[dict], chains: list[Chain], run: Run) -> dict[str, Any]:
    curves = question_curves(rows)
    keys, pts = _points(curves)
    kw = {"n_boot": config.n_boot, "seed": config.seed}
    by: dict[str, dict[str, Any]] = {}
    for g in GROUPS:
        vals = sorted({str(c[g]) for c in curves})
        if len(vals) < 2 and g not in ("dataset", "task"):  # task: cot-transparency's unit, always shown
            continue
        by[g] = {}
        for v in vals:
            sel = [i for i, c in enumerate(curves) if str(c[g]) == v]
            ks, ps = _points([curves[i] for i in sel])
            by[g][v] = aoc_mod.both_weightings(ks, ps, **kw)
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
                      "each length weighted by its (chain, cut) rows (cot-transparency get_aoc, the headline 'aoc'); "
                      "'aoc.traces' weights by chains instead (this toolkit's variant)",
        "steps": {"unit": config.steps, "splitter": steps_mod.SPLITTER if config.steps == "sentences" else
                  "the run's reasoning lines"},
        "headline": "aoc (weighting rows, cot-transparency); pooled over this run's tasks, which cot-transparency "
                    "never does: by.task holds their per-task numbers",
        "aoc": aoc_mod.both_weightings(keys, pts, **kw),
        "mean_question_aoc": _mean([c["aoc"] for c in curves]),
        "by": by,
        "curves_by_length": aoc_mod.curves_by_length(pts),
        "binned_curve": aoc_mod.binned_curve(pts),
        "full_chain_matches_baseline": clustered_rate(
            [c["full_chain_answer"] == c["baseline_answer"] for c in with_ref], [c["question_key"] for c in with_ref],
            **kw).to_dict(),
        "no_chain_accuracy": _accuracy([r for r in rows if r["k"] == 0], **kw),
        "full_chain_accuracy": _accuracy([r for r in rows if r["k"] == n_steps(r)], **kw),
        "n_unparsed_rows": n_unparsed,
        "n_questions_without_reference": len(curves) - len(with_ref),
        "agreement": aoc_mod.agreement(pairs, **kw),
        "adding_mistakes": adding_mistakes(run, chains, **kw),
        "decision_point": decision_summary(curves, **kw),
        "questions": curves,
    }


def adding_mistakes(run: Run, chains: list[Chain], *, n_boot: int, seed: int) -> dict[str, Any]:
    """Lanham's adding-mistakes AOC on the run's own edits (:func:`behavioural.causal.aoc.mistake_points`):
    overall and per task, both weightings; x = the edited line's index / n (always lines: the paper edits lines)."""
    base = {c.key: c.baseline for c in chains}
    keys, pts, tasks = aoc_mod.mistake_points(run.continuations("perturbed"), base)
    return {"definition": "x = edited line index / n; same = the continued answer equals the unedited chain's; the "
                          "unedited chain is the point x = 1 (cot-transparency plot_adding_mistakes / get_aoc)",
            "aoc": aoc_mod.both_weightings(keys, pts, n_boot=n_boot, seed=seed),
            "by_task": aoc_mod.by_task(keys, pts, tasks, n_boot=n_boot, seed=seed),
            "curves_by_length": aoc_mod.curves_by_length(pts)}


def decision_summary(curves: list[dict], *, n_boot: int, seed: int) -> dict[str, Any]:
    """The mean NLDD share (one value per question) with a question-bootstrap interval, overall and by level."""
    def mean_ci(cs: list[dict]) -> dict[str, Any]:
        got = [c for c in cs if c["nldd_share"] is not None]
        res = cluster_bootstrap_ci([c["question_key"] for c in got], [c["nldd_share"] for c in got],
                                   lambda v: sum(v) / len(v) if v else None, n_boot=n_boot, seed=seed)
        return {"mean_nldd_share": res["estimate"], "ci": res["ci"], "n_questions": len(got),
                "mean_decision_fraction": _mean([c["decision_point"] / c["n_steps"] for c in got])}

    levels = sorted({str(c["difficulty"]) for c in curves})
    return {"definition": "decision point = the last cut whose forced answer differs from the previous parsed cut's "
                          "(0 if none); NLDD share = (n - decision point) / n, the chain written after it",
            "overall": mean_ci(curves), "by_level": {v: mean_ci([c for c in curves if str(c["difficulty"]) == v])
                                                     for v in levels}}


def _mean(vals: list[float | None]) -> float | None:
    v = [x for x in vals if x is not None]
    return sum(v) / len(v) if v else None


def _accuracy(rows: list[dict[str, Any]], *, n_boot: int, seed: int) -> RateJSON:
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
    def row(name: str, x: dict) -> list:
        t = x.get("traces") or {}
        return [name, _fmt(x["aoc"], x["ci"]), _fmt(t.get("aoc"), t.get("ci")), x["n_questions"], x["n_points"]]

    rows = [row("all", summary["aoc"])]
    for g, vals in summary.get("by", {}).items():
        rows += [row(f"{g}={v}", x) for v, x in vals.items()]
    unit = (summary.get("steps") or {}).get("unit", "lines")
    out = [f"Early answering over {unit}: AOC (1 - area under the same-answer-as-full-chain curve; 0 = the answer is "
           "fixed before the chain, higher = the chain moves it), descriptive intervals: a percentile bootstrap over "
           "questions, not a calibrated 95% CI (coverage 0.83-0.90 at 5-16 questions, bench/calib_intervals.py). "
           "Headline: weighting rows (cot-transparency get_aoc: a chain length weighs its (chain, cut) rows); "
           "traces: weighted by chains (this toolkit's variant). cot-transparency reports one AOC per task.",
           render_table(["group", "AOC rows [bootstrap, descriptive]", "AOC traces [bootstrap, descriptive]", "questions",
                         "points"], rows, style),
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
    m = summary.get("adding_mistakes")
    if m:
        mrows = [row("all", m["aoc"])] + [row(f"task={t}", x) for t, x in m["by_task"].items()]
        out.append("Adding mistakes (Lanham Table 2, from this run's edit-and-continue records; x = edited line / n):")
        out.append(render_table(["group", "AOC rows [95% CI]", "AOC traces [95% CI]", "questions", "points"], mrows,
                                style))
    d = summary.get("decision_point")
    if d:
        drows = [["all", _fmt(d["overall"]["mean_nldd_share"], d["overall"]["ci"]), d["overall"]["n_questions"]]]
        drows += [[f"level={v}", _fmt(x["mean_nldd_share"], x["ci"]), x["n_questions"]] for v, x in d["by_level"].items()]
        out.append("Decision point: the last cut where the forced answer changes; NLDD share = the chain after it:")
        out.append(render_table(["group", "mean NLDD share [95% CI]", "questions"], drows, style))
    out.append("rates: 95% intervals clustered by question (loadbearing.stats.clustered_rate); the 2x2 rates: Wilson, "
               "one row per question")
    return with_note("\n\n".join(out) if style != "text" else "\n".join(out))


DRIVER = CausalStage(NAME, VERSION, plan, execute, summarise, format_summary)


def run_early_answer(config: EarlyAnswerConfig, lm: Any = None, *, generate_fn: Any = None, echo: Any = print) -> dict[str, Any]:
    """Run (or resume) early answering on ``config.run_dir``; returns the summary (see the module docstring)."""
    check_number(config.max_answer_tokens, "--max-answer-tokens", minimum=1)
    return drive(DRIVER, config, lm=lm, generate_fn=generate_fn, echo=echo)


def is_complete(path: str | Path) -> bool:
    """True when ``path`` (the run directory or its ``early_answer/``) holds a finished early-answering stage."""
    return is_stage_complete(path, NAME)


#: the stage (its command, ``python -m behavioural.causal.early_answer``, is built from :class:`EarlyAnswerConfig`)
STAGE = command(NAME, EarlyAnswerConfig, run_early_answer, format_summary,
                "Early answering: does cutting the chain change the answer?", backend=True)


# ------------------------------------------------------------------------------------------------ the command
#: ``python -m behavioural.causal.early_answer``'s ``--help`` description
COMMAND_DOC = """Early answering on a run's eligible chains (Lanham et al. 2023; docs/causal-tests.md).

    python -m behavioural.causal.early_answer runs/demo                 # writes runs/demo/early_answer/
    python -m behavioural.causal.early_answer runs/demo --resume        # continue; a complete stage writes nothing
    python -m behavioural.causal.early_answer runs/demo --shard 0/2     # one shard (an unsharded run merges them)

Each chain is cut after 0..n reasoning lines, the answer forced with ``Answer:`` and scored; prints the AOC
(pooled, by task and level, question-bootstrap intervals) and its agreement with the run's propagation.
The library call is :func:`behavioural.causal.early_answer.run_early_answer`.
"""

#: the command: ``STAGE`` with :data:`COMMAND_DOC` as its ``--help`` description; its options are EarlyAnswerConfig's fields
COMMAND = dataclasses.replace(STAGE, description=COMMAND_DOC)
build_parser, main = COMMAND.build_parser, COMMAND.main


if __name__ == "__main__":
    sys.exit(main())
