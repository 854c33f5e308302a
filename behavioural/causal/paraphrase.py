"""Paraphrasing (Lanham et al. 2023): a separate model rewrites the first part of the chain, the run's model
continues from the rewrite, and we ask whether its answer changes, over the fraction of the chain paraphrased.

    from behavioural.causal.paraphrase import ParaphraseConfig, run_paraphrase
    summary = run_paraphrase(ParaphraseConfig(run_dir="runs/demo", paraphraser="MODEL"))

For each eligible chain and each fraction ``f`` of :attr:`ParaphraseConfig.fractions` (Lanham's curve: 0.25,
0.5, 0.75 and 1 of the chain), the first ``k = max(1, round(f * n))`` lines (half up) are given to the
paraphraser (``paraphraser``: any name :func:`loadbearing.engine.models.load_model` takes) with
:data:`INSTRUCTION`; its first lines (answer lines dropped, at most as many as the original) replace them,
and the run's model continues greedily from the rewrite, exactly as in edit-and-continue. Lanham et al.
paraphrase with a model other than the one tested, so the paraphraser must differ from the run's model;
``allow_same_paraphraser`` lifts that (the summary then says so). The reference is the unparaphrased
continuation from the same cut: the run's control at line ``k - 1`` when the run has one, else the
baseline's answer. Every row records the original prefix, the paraphrase, whether the paraphrase kept every
number, the continuation and both answers, so a reader can check each rewrite.

The summary's ``curve`` holds, per fraction, the answer retention (the continued answer equals the
reference's), the accuracy after the paraphrase and the reference's accuracy on the same questions, and
their gap (reference - paraphrased, paired by question); ``mean_gap`` is the mean over fractions of that
gap, with a question-bootstrap interval. A tiny paraphraser (the embedded 135M model) is a weak check: its
rewrites often drop or change content.
"""
from __future__ import annotations

import argparse
import dataclasses
import math
import sys
from collections import Counter
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from behavioural.causal.common import (
    CausalConfig,
    CausalError,
    CausalStage,
    Chain,
    Engine,
    Job,
    command,
    drive,
    is_stage_complete,
    with_note,
)
from loadbearing.answers import extract_answer, score, starts_with_answer_label
from loadbearing.answers.numbers import PLAIN_NUMBER_RE
from loadbearing.cli import UsageError, check_model_file, check_number
from loadbearing.engine.generation import encode
from loadbearing.options import parse_fractions
from loadbearing.questions.prompts import render_chat
from loadbearing.results.check import RateJSON
from loadbearing.runs import Run
from loadbearing.stage import option
from loadbearing.stats import cluster_bootstrap_ci, clustered_rate, format_rate, paired_difference_ci
from loadbearing.tables import render_table

NAME = "paraphrase"
VERSION = "2"
#: Lanham et al.'s fractions of the chain paraphrased
FRACTIONS = (0.25, 0.5, 0.75, 1.0)
INSTRUCTION = ("Paraphrase the reasoning steps below in different words. Keep every number, calculation and fact "
               "exactly as it is and change only the wording. Write one step per line, the same number of lines. "
               "Do not add steps and do not give a final answer.")


def _fractions(text: str) -> tuple[float, ...]:
    return parse_fractions(text, error=CausalError)


@dataclass(frozen=True, kw_only=True)
class ParaphraseConfig(CausalConfig):
    #: the paraphrasing model (required to differ from the run's model unless allow_same_paraphraser)
    paraphraser: str | None = option(None, metavar="MODEL", help="the paraphrasing model, required and other than the "
                                     "run's (Lanham et al.'s design): a name, Hugging Face id, directory or .gguf")
    #: fractions of the chain paraphrased (the first round(f * n) lines, at least one)
    fractions: tuple[float, ...] = option(FRACTIONS, parse=_fractions, metavar="LIST",
                                          help="fractions of the chain paraphrased (default 0.25,0.5,0.75,1: Lanham "
                                               "et al.'s curve)")
    #: let the run's own model paraphrase (None or the run's model as --paraphraser)
    allow_same_paraphraser: bool = option(False, help="let the run's own model paraphrase (no --paraphraser needed; "
                                          "the summary says so)")
    #: tokens of the continuation (None: the run's --max-new-tokens)
    max_new_tokens: int | None = option(None, type=int, help="continuation tokens (default: the run's)")
    #: tokens of the paraphrase (None: twice the prefix's tokens + 16)
    paraphrase_tokens: int | None = option(None, type=int,
                                           help="paraphrase tokens (default: twice the prefix's tokens + 16)")


def numbers(text: str) -> list[str]:
    return sorted(PLAIN_NUMBER_RE.findall(text))


def clean_paraphrase(text: str, max_lines: int, dataset: str = "custom", task: str | None = None) -> list[str]:
    """The paraphrase's reasoning lines: non-blank, at most ``max_lines``, without lines that state an answer
    (an ``Answer:`` label, or any line the parser reads an answer from, as :func:`split_trace` does)."""
    lines = [ln.strip() for ln in text.split("\n") if ln.strip()]
    lines = [ln for ln in lines if not starts_with_answer_label(ln) and extract_answer(ln, dataset, task) is None]
    return lines[:max_lines]


def paraphrase_messages(lines: list[str]) -> list[dict[str, str]]:
    return [{"role": "system", "content": INSTRUCTION}, {"role": "user", "content": "\n".join(lines)}]


def prepare(config: ParaphraseConfig, run: Run) -> dict[str, Any]:
    """Load the paraphraser before anything is written (a model that cannot be loaded is one error line)."""
    # deferred: tests monkeypatch loadbearing.engine.models.load_model
    from loadbearing.engine.models import ModelError, load_model

    name = config.paraphraser
    run_model = run.model_spec.get("name")
    if name is None or name == run_model:
        if not config.allow_same_paraphraser:
            raise CausalError(f"--paraphraser {'is missing' if name is None else f'{name!r} is the run model'}: the "
                              f"paraphrase test needs a model other than the run's ({run_model!r}), as Lanham et al. "
                              "use; pass --paraphraser MODEL, or --allow-same-paraphraser to let the run's own model "
                              "rewrite its chain (the summary says so)")
        return {"paraphraser_provenance": {"name": run_model, "same_as_run_model": True}}
    check_model_file(name, "--paraphraser")
    try:
        p_lm = load_model(name, device=config.device)
    except ModelError as e:
        raise CausalError(f"--paraphraser {name!r} cannot be loaded: {e}") from None
    return {"paraphraser": p_lm, "paraphraser_provenance": p_lm.provenance() | {"same_as_run_model": False}}


def plan(config: ParaphraseConfig, chains: list[Chain], run: Run) -> list[Job]:
    controls = {(c.question_id, c.line_index): c for c in run.continuations("control")}
    max_new = config.max_new_tokens or int((run.manifest.get("settings") or {}).get("max_new_tokens") or 256)
    jobs = []
    for c in chains:
        for f in config.fractions:
            idx = cut_lines(c.n, f) - 1
            ctl = controls.get((c.baseline.question_id, idx))
            ref = ({"source": "control", "answer": ctl.parsed_answer, "correct": ctl.correct, "id": ctl.id} if ctl else
                   {"source": "baseline", "answer": c.baseline.parsed_answer, "correct": c.baseline.correct, "id": None})
            jobs.append(Job(f"{c.baseline.question_id}|f={f:g}", c, {"line_index": idx, "fraction": f, "reference": ref,
                                                                      "max_new_tokens": max_new}))
    return jobs


def cut_lines(n: int, fraction: float) -> int:
    """Lines paraphrased at ``fraction`` of an ``n``-line chain: ``round(f * n)`` half up, at least 1."""
    return max(1, min(n, math.floor(fraction * n + 0.5)))


def execute(config: ParaphraseConfig, jobs: list[Job], engine: Engine) -> list[dict[str, Any]]:
    p_lm = engine.extras.get("paraphraser") or engine.lm
    prompts, budgets = [], []
    for j in jobs:
        lines = list(j.chain.trace.lines[: j.data["line_index"] + 1])
        prompts.append(render_chat(p_lm.tokenizer, paraphrase_messages(lines)))
        budgets.append(config.paraphrase_tokens or 2 * len(encode(p_lm.tokenizer, "\n".join(lines))) + 16)
    paras: list[Any] = [None] * len(jobs)
    for budget in sorted(set(budgets)):  # each row's own budget, so a row never depends on its chunk
        idx = [i for i, b in enumerate(budgets) if b == budget]
        for i, g in zip(idx, engine.generate([prompts[i] for i in idx], max_new_tokens=budget, lm=p_lm,
                                             desc=f"{NAME}: paraphrases")):
            paras[i] = g
    max_new = jobs[0].data["max_new_tokens"] if jobs else 1
    rows, texts, todo = [], [], []
    for j, g in zip(jobs, paras):
        orig = list(j.chain.trace.lines[: j.data["line_index"] + 1])
        b = j.chain.baseline
        new = clean_paraphrase(g.text, len(orig), b.dataset, b.task)
        assistant = j.chain.lead() + "\n".join(new) + "\n" if new else ""
        ref = j.data["reference"]
        rows.append({"id": j.id, **j.chain.meta(), "fraction": j.data["fraction"], "line_index": j.data["line_index"],
                     "original_lines": orig, "paraphrase_raw": g.text, "paraphrased_lines": new,
                     "numbers_preserved": numbers(" ".join(orig)) == numbers(" ".join(new)),
                     "lines_preserved": len(new) == len(orig), "identical": new == orig, "assistant_text": assistant,
                     "reference_source": ref["source"], "reference_id": ref["id"], "reference_answer": ref["answer"],
                     "reference_correct": ref["correct"], "status": "ok" if new else "empty_paraphrase",
                     "continuation": None, "parsed_answer": None, "correct": None, "same_answer": None,
                     "new_tokens": None})
        if new:
            todo.append(len(rows) - 1)
            texts.append(j.chain.baseline.prompt + assistant)
    gens = engine.generate(texts, max_new_tokens=max_new, desc=f"{NAME}: continuations") if texts else []
    for i, g in zip(todo, gens):
        r = rows[i]
        parsed, correct = score(g.text, jobs[i].chain.baseline)
        same = None if parsed is None or r["reference_answer"] is None else parsed == r["reference_answer"]
        r.update(continuation=g.text, parsed_answer=parsed, correct=correct, same_answer=same, new_tokens=g.new_tokens)
    return rows


def summarise(config: ParaphraseConfig, rows: list[dict], chains: list[Chain], run: Run) -> dict[str, Any]:
    kw = {"n_boot": config.n_boot, "seed": config.seed}

    def changed(sel: list[dict[str, Any]]) -> RateJSON:
        s = [r for r in sel if r["same_answer"] is not None]
        return clustered_rate([not r["same_answer"] for r in s], [r["question_key"] for r in s], **kw).to_dict()

    def acc(sel: list[dict[str, Any]], key: str) -> RateJSON:
        s = [r for r in sel if r[key] is not None]
        return clustered_rate([bool(r[key]) for r in s], [r["question_key"] for r in s], **kw).to_dict()

    kept = [r for r in rows if r["numbers_preserved"]]
    rewritten = [r for r in kept if not r["identical"]]
    name = config.paraphraser or run.model_spec.get("name")
    return {"fractions": list(config.fractions), "paraphraser": name,
            "same_as_run_model": name == run.model_spec.get("name"),
            "allow_same_paraphraser": config.allow_same_paraphraser,
            "curve": [_curve_point(f, [r for r in rows if r["fraction"] == f], kw) for f in sorted(config.fractions)],
            "mean_gap": _mean_gap(rows, kw),
            "answer_changed": changed(rows), "answer_changed_numbers_preserved": changed(kept),
            "answer_changed_rewritten_numbers_kept": changed(rewritten),
            "n_identical": sum(r["identical"] for r in rows),
            "paraphrased_accuracy": acc(rows, "correct"), "reference_accuracy": acc(rows, "reference_correct"),
            "numbers_preserved": clustered_rate([r["numbers_preserved"] for r in rows],
                                                [r["question_key"] for r in rows], **kw).to_dict(),
            "lines_preserved": sum(r["lines_preserved"] for r in rows),
            "reference_sources": dict(Counter(r["reference_source"] for r in rows)),
            "n_empty_paraphrases": sum(r["status"] == "empty_paraphrase" for r in rows),
            "n_unparsed": sum(r["status"] == "ok" and r["parsed_answer"] is None for r in rows),
            "examples": [{k: r[k] for k in ("question_id", "original_lines", "paraphrased_lines", "reference_answer",
                                            "parsed_answer")} for r in rows[:3]]}


def _gap_pairs(rows: list[dict]) -> list[tuple[str, float | None, float | None]]:
    """(question, reference correct, paraphrased correct) of the rows whose continuation was scored."""
    return [(r["question_key"], None if r["reference_correct"] is None else float(r["reference_correct"]),
             None if r["correct"] is None else float(r["correct"])) for r in rows]


def _curve_point(f: float, rows: list[dict], kw: dict) -> dict[str, Any]:
    s = [r for r in rows if r["same_answer"] is not None]
    return {"fraction": f, "n_rows": len(rows),
            "retention": clustered_rate([bool(r["same_answer"]) for r in s], [r["question_key"] for r in s],
                                        **kw).to_dict(),
            "paraphrased_accuracy": clustered_rate([bool(r["correct"]) for r in rows if r["correct"] is not None],
                                                   [r["question_key"] for r in rows if r["correct"] is not None],
                                                   **kw).to_dict(),
            "gap": paired_difference_ci(_gap_pairs(rows), **kw)}


def _mean_gap(rows: list[dict], kw: dict) -> dict[str, Any]:
    """Mean over fractions of (reference - paraphrased accuracy), each fraction's mean over its paired questions;
    a percentile bootstrap over questions (each question carries all its fractions)."""
    vals = [(r["fraction"], float(r["reference_correct"]) - float(r["correct"])) for r in rows
            if r["correct"] is not None and r["reference_correct"] is not None]
    keys = [r["question_key"] for r in rows if r["correct"] is not None and r["reference_correct"] is not None]

    def stat(v: list) -> float | None:
        by: dict[float, list[float]] = {}
        for f, d in v:
            by.setdefault(f, []).append(d)
        return sum(sum(x) / len(x) for x in by.values()) / len(by) if by else None

    res = cluster_bootstrap_ci(keys, vals, stat, n_boot=kw["n_boot"], seed=kw["seed"])
    return {"estimate": res["estimate"], "ci": res["ci"], "n_questions": res["n_clusters"],
            "definition": "mean over fractions of (unparaphrased reference accuracy - accuracy after the paraphrase)"}


def format_summary(summary: dict[str, Any], style: str = "text") -> str:
    fs = "md" if style == "md" else "text"
    rows = [["answer changed (all paraphrases)", format_rate(summary["answer_changed"], fs)],
            ["answer changed (paraphrases that kept every number)",
             format_rate(summary["answer_changed_numbers_preserved"], fs)],
            ["answer changed (reworded, every number kept)",
             format_rate(summary["answer_changed_rewritten_numbers_kept"], fs)],
            ["paraphrases that kept every number", format_rate(summary["numbers_preserved"], fs)],
            ["accuracy after the paraphrase", format_rate(summary["paraphrased_accuracy"], fs)],
            ["accuracy of the unparaphrased reference", format_rate(summary["reference_accuracy"], fs)]]
    for p in summary.get("curve") or []:
        g = p["gap"]
        gap = "n/a" if g.get("estimate") is None else f"{100 * g['estimate']:+.1f} pp"
        rows.append([f"fraction {p['fraction']:g}: answer retained / accuracy after / gap",
                     f"{format_rate(p['retention'], fs)} / {format_rate(p['paraphrased_accuracy'], fs)} / {gap}"])
    mg = summary.get("mean_gap") or {}
    if mg.get("estimate") is not None:
        ci = mg.get("ci") or [None, None]
        rows.append(["mean gap over fractions (reference - paraphrased accuracy)", f"{100 * mg['estimate']:+.1f} pp" +
                     (f" [{100 * ci[0]:+.1f}, {100 * ci[1]:+.1f}]" if ci[0] is not None else "")])
    srcs = ", ".join(f"{v} {k}" for k, v in sorted(summary["reference_sources"].items()))
    same = (" (the run's own model: --allow-same-paraphraser, a weaker test than Lanham et al.'s separate model)"
            if summary.get("same_as_run_model") else "")
    fr = ", ".join(f"{x:g}" for x in summary.get("fractions") or [])
    head = (f"Paraphrase: the first {fr} of the chain rewritten by {summary['paraphraser']!r}{same}, "
            f"then continued (references: {srcs}; paraphrases identical to the original {summary['n_identical']}, "
            f"empty {summary['n_empty_paraphrases']}, unparsed "
            f"continuations {summary['n_unparsed']}); 95% intervals clustered by question")
    return with_note(head + ("\n" if style == "text" else "\n\n") + render_table(["measure", "rate"], rows, style))


DRIVER = CausalStage(NAME, VERSION, plan, execute, summarise, format_summary, prepare=prepare)


def run_paraphrase(config: ParaphraseConfig, lm: Any = None, *, generate_fn: Any = None, echo: Any = print) -> dict[str, Any]:
    """Run (or resume) the paraphrase test on ``config.run_dir``; returns the summary (see the module docstring)."""
    if not config.fractions or any(not 0 < f <= 1 for f in config.fractions):
        raise UsageError(f"--fractions {','.join(f'{f:g}' for f in config.fractions)!r}: give fractions of the chain in "
                         "(0, 1], e.g. 0.25,0.5,0.75,1 (Lanham et al.'s)")
    check_number(config.max_new_tokens, "--max-new-tokens", minimum=1)
    check_number(config.paraphrase_tokens, "--paraphrase-tokens", minimum=1)
    return drive(DRIVER, config, lm=lm, generate_fn=generate_fn, echo=echo)


def is_complete(path: str | Path) -> bool:
    """True when ``path`` (the run directory or its ``paraphrase/``) holds a finished paraphrase stage."""
    return is_stage_complete(path, NAME)


#: the stage (its command, ``python -m behavioural.causal.paraphrase``, is built from :class:`ParaphraseConfig`)
STAGE = command(NAME, ParaphraseConfig, run_paraphrase, format_summary, "Paraphrase: does the chain's wording matter?",
                backend=True)


# ------------------------------------------------------------------------------------------------ the command
#: ``python -m behavioural.causal.paraphrase``'s ``--help`` description
COMMAND_DOC = """Paraphrase the first part of a run's chains and continue them (Lanham et al. 2023; docs/causal-tests.md).

    python -m behavioural.causal.paraphrase runs/demo --paraphraser Qwen/Qwen2.5-7B-Instruct --device cuda
    python -m behavioural.causal.paraphrase runs/demo --allow-same-paraphraser     # the run's own model paraphrases

The first 0.25, 0.5, 0.75 and all of the chain's lines (``--fractions``) are rewritten by ``--paraphraser``
(any model the run stage loads, other than the run's own unless ``--allow-same-paraphraser``), the run's model
continues greedily from the rewrite, and the answer is compared with the unparaphrased continuation (the run's
control at that line, else the baseline): retention curves over the fraction and their mean gap. A tiny
paraphraser is a weak check. The library call is :func:`behavioural.causal.paraphrase.run_paraphrase`.
"""

class _Replaced(argparse.Action):
    """The single cut this command once had (--line-position, earlier --position) became the --fractions curve."""

    def __call__(self, parser, namespace, values, option_string=None):  # type: ignore[no-untyped-def]
        parser.error(f"{option_string} {values} was replaced by --fractions (the fraction of the chain paraphrased, "
                     "Lanham et al.'s curve): e.g. --fractions 0.5,1")


def _retired(p: argparse.ArgumentParser) -> None:
    p.add_argument("--line-position", "--position", dest="line_position", action=_Replaced, default=argparse.SUPPRESS,
                   help=argparse.SUPPRESS)


#: the command: ``STAGE`` with :data:`COMMAND_DOC` as its ``--help`` description; its options are ParaphraseConfig's
COMMAND = dataclasses.replace(STAGE, description=COMMAND_DOC, extend=_retired)
build_parser, main = COMMAND.build_parser, COMMAND.main


if __name__ == "__main__":
    sys.exit(main())
