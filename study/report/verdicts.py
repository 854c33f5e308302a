"""The report's first screen: the three answers a study exists for, one line each, read from the stages' files.

    from study.report.verdicts import read_verdicts, verdict_box
    print(verdict_box(read_verdicts("runs/study"), style="md"))

1. **Does the error propagate?** (``summary.json`` of the run): the pooled propagation rate (parseable
   perturbed continuations with a wrong answer; interval clustered by question) against the control error,
   with the paired perturbed - control difference. *yes* when that difference's 95% interval lies above 0.
2. **Does the probe beat the metadata?** (``probes/results.json``): the nested-CV headline's gain over the
   metadata-only baseline (same folds; the interval the probes stage computed, with its method) and its
   permutation p-values (of the gain, and of the accuracy). *yes* when the
   gain's interval lies above 0, *no* when below, *not shown* when it spans 0. With several probes the line
   gives the one with the largest gain, says how many there were, and answers *yes* only when that gain's
   p-value times the number of probes is below 0.05 (Bonferroni for the maximum). The shuffled-label p is
   described as what it tests: the probe against probes trained on labels exchanged between questions.
3. **Does steering move the outcome?** (``steering/summary.json``): the sweep's own verdict code (effect /
   harm / null / inconclusive / uninformative) with the strongest setting's moved-among-parsed difference
   from its matched control, its interval and its Holm-adjusted p, and the settings that broke the answer
   line (uninformative).

A stage that did not run, or left too little data for an interval, gets a line that says so and why. Every
line names its number of questions and the exact command that computes (or re-runs) it, with every setting
the stage recorded that is not its CLI's default and a fresh output directory (:mod:`study.report.commands`).
Only the files are read (the stage CLIs' parsers give the defaults), so the box renders for any study
directory, finished or not.
"""
from __future__ import annotations

import json
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

from loadbearing.report.blocks import VerdictLine
from loadbearing.runs import CONFIG, SUMMARY
from loadbearing.stats import FEW_CLUSTERS_MARK, FEW_CLUSTERS_NOTE, format_rate
from study.report.commands import probes_command, steering_command

#: answers that mean the stage gave no answer (the line says why)
NO_ANSWER = ("not run", "skipped", "too little data")


@dataclass(frozen=True)
class Verdict:
    """One line of the summary box."""

    key: str  #: "propagation" | "probe" | "steering"
    question: str
    answer: str  #: "yes" / "no" / "not shown" / a steering code / "not run" / "skipped" / "too little data"
    detail: str  #: the numbers (estimate, interval, counts) or why there are none
    n_questions: int | None
    command: str
    source: str  #: the file the line was read from, relative to the study directory

    @property
    def answered(self) -> bool:
        return self.answer not in NO_ANSWER

    def block(self) -> VerdictLine:
        """The line as a report object (:class:`loadbearing.report.VerdictLine`)."""
        return VerdictLine(self.question, self.answer, self.detail, self.source, self.command, self.n_questions)

    def line(self, style: str = "md") -> str:
        """The one line: question, answer, numbers, n questions, command."""
        return self.block().line(style)


def _read(path: Path) -> dict[str, Any] | None:
    try:
        d = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
    return d if isinstance(d, dict) else None


def _pp(v: float | None, signed: bool = True) -> str:
    if v is None:
        return "n/a"
    return f"{100 * v:+.1f}" if signed else f"{100 * v:.1f}"


def _interval(lo: float | None, hi: float | None) -> str:
    return "[n/a]" if lo is None or hi is None else f"[{_pp(lo)}, {_pp(hi)}]"


# ------------------------------------------------------------------------------------------ (a) propagation
def propagation_verdict(summary: dict[str, Any] | None, study: str = "DIR") -> Verdict:
    """Line (a) from a run's ``summary.json`` (None: the behavioural stage has not finished)."""
    cmd = f"python -m behavioural.summary {study}"
    q = "Does the error propagate?"
    src = SUMMARY
    if summary is None:
        return Verdict("propagation", q, "not run", "no summary.json: the behavioural stage has not finished "
                       f"(python -m study --resume {study})", None, f"python -m behavioural.run --resume {study}", src)
    overall = summary.get("overall") or {}
    prop, ctrl = overall.get("propagation") or {}, overall.get("control_error") or {}
    if not prop.get("n"):
        why = (f"no parseable perturbed continuation (eligible {summary.get('eligible', 0)} of "
               f"{summary.get('questions', 0)} questions: answered correctly with >= 3 reasoning lines)")
        return Verdict("propagation", q, "too little data", why, summary.get("eligible_questions"), cmd, src)
    nq = prop.get("n_questions")
    pd = overall.get("paired_difference") or {}
    lo, hi = (pd.get("ci") or [None, None])[:2]
    est = pd.get("estimate")
    if est is None:  # an older summary: compare the two intervals
        est = (prop.get("rate") or 0.0) - (ctrl.get("rate") or 0.0) if ctrl.get("n") else None
        lo = hi = None
    detail = (f"propagation {format_rate(prop)} of parseable perturbed continuations vs control error "
              f"{format_rate(ctrl)}")
    if est is not None:
        detail += f"; difference {_pp(est)} pp {_interval(lo, hi)}"
    if lo is None or hi is None:
        if prop.get("lo") is not None and ctrl.get("hi") is not None and prop["lo"] > ctrl["hi"]:
            answer = "yes"
        elif prop.get("lo") is None or not ctrl.get("n"):
            return Verdict("propagation", q, "too little data", detail + " (no interval: needs >= 2 questions and "
                           "control continuations)", nq, cmd, src)
        else:
            answer = "not shown"
    else:
        answer = "yes" if lo > 0 else ("no" if hi < 0 else "not shown")
    return Verdict("propagation", q, answer, detail, nq, cmd, src)


# ------------------------------------------------------------------------------------------ (b) probes
def probe_verdict(results: dict[str, Any] | None, study: str = "DIR") -> Verdict:
    """Line (b) from ``probes/results.json`` (None: the probes have not been trained)."""
    cmd = probes_command(study, (results or {}).get("settings"))
    q = "Does the probe beat the metadata?"
    src = "probes/results.json"
    if results is None:
        return Verdict("probe", q, "not run", "no probes/results.json: the probes have not been trained (needs the "
                       "activations of labelled continuations)", None, cmd, src)
    heads = {k: h for k, h in (results.get("headline") or {}).items() if isinstance(h, dict)}
    gains = {k: h.get("gain_over_metadata") or {} for k, h in heads.items()}
    scored = [k for k in heads if gains[k].get("value") is not None]
    nq = (results.get("data") or {}).get("n_questions")
    if not scored:
        notes = "; ".join(str(n) for n in (results.get("data") or {}).get("notes") or [])
        why = ("no nested-CV headline with a metadata baseline in results.json" if heads or results.get("probes")
               else "no probe was scored") + (f" ({notes})" if notes else "")
        return Verdict("probe", q, "too little data", why, nq, cmd, src)
    best = max(scored, key=lambda k: gains[k]["value"])  # ties: the first in the file's order
    g, h = gains[best], heads[best]
    meta = (results.get("metadata_baseline") or {}).get("accuracy")
    p, gp = h.get("control_p_value"), h.get("gain_p_value")
    how = f" ({g['method']})" if g.get("method") else ""
    detail = (f"{best} probe (nested CV) {format_rate(h.get('accuracy'))} vs metadata only "
              f"{format_rate(meta) if meta else 'n/a'}: gain {_pp(g['value'])} pp {_interval(g.get('lo'), g.get('hi'))}"
              f"{how}" + ("" if gp is None else f", gain p = {gp:.3f}")
              + f", shuffled-label p = {'n/a' if p is None else f'{p:.3f}'} (the probe against probes trained on "
              "labels exchanged between questions of the same design; not a test against the metadata)")
    n_p = len(scored)
    if n_p > 1:
        detail += f" (largest gain of {n_p} probes: {', '.join(scored)})"
    lo, hi = g.get("lo"), g.get("hi")
    if lo is None or hi is None:
        answer = "too little data"
        detail += " (no interval)"
    else:
        answer = "yes" if lo > 0 else ("no" if hi < 0 else "not shown")
        if answer == "yes" and n_p > 1:
            # the largest of n_p gains: Bonferroni on its gain p (the interval alone is not adjusted for the max)
            if gp is None or gp * n_p >= 0.05:
                answer = "not shown"
            detail += (f"; adjusted for the largest of {n_p} probes: gain p x {n_p} = "
                       + ("n/a" if gp is None else f"{min(1.0, gp * n_p):.3f}") + " (Bonferroni; yes needs < 0.05)")
    return Verdict("probe", q, answer, detail, g.get("n_questions", nq), cmd, src)


# ------------------------------------------------------------------------------------------ (c) steering
def _setting_name(d: dict[str, Any]) -> str:
    a = d.get("alpha_rel")
    return f"L{d.get('layer')} k={d.get('k')} alpha={'?' if a is None else f'{a:g}'}x|resid|"


def steering_verdict(summary: dict[str, Any] | None, study: str = "DIR", config: dict[str, Any] | None = None) -> Verdict:
    """Line (c) from ``steering/summary.json`` (None: the sweep has not finished); ``config`` is the sweep's
    recorded settings (``steering/config.json`` ``config``), from which the re-run command is written."""
    cmd = steering_command(study, config, summary)
    q = "Does steering move the outcome?"
    src = "steering/summary.json"
    if summary is None:
        return Verdict("steering", q, "not run", "no steering/summary.json: the sweep has not finished (needs "
                       "probes/directions.h5 and type-C cases on held-out questions)", None, cmd, src)
    settings = [d for d in summary.get("settings") or [] if isinstance(d, dict)]
    code = str(summary.get("verdict_code") or "inconclusive")
    nq = summary.get("n_c_questions")
    verdict = str(summary.get("verdict") or "")
    if code == "insufficient_data" or not settings:
        why = verdict.split(":", 1)[1].strip() if verdict.startswith("insufficient_data:") else (verdict or "no setting")
        return Verdict("steering", q, "too little data", why, nq, cmd, src)
    best = next((d for d in settings if d.get("strongest")), settings[0])
    ctrl = best.get("control") or {}
    diff = best.get("difference") or {}
    lo, hi = (diff.get("ci") or [None, None])[:2]
    moved = "moved" if "parse" in best else "moved_of_all"  # summaries before the parse outcome: moved-of-all
    detail = (f"strongest setting {_setting_name(best)} moved {format_rate(best.get(moved))} of "
              + ("parsed " if moved == "moved" else "") + "C cases")
    if ctrl.get("kind"):
        detail += f" vs {ctrl['kind']} control {format_rate(ctrl.get(moved))}"
    if diff.get("estimate") is not None:
        detail += f"; difference {_pp(diff['estimate'])} pp {_interval(lo, hi)}"
    if best.get("p_holm") is not None:
        n_tests = (summary.get("multiple_comparisons") or {}).get("n_tests")
        detail += f", Holm p = {best['p_holm']:.3g}" + (f" over {n_tests} setting{'s' if n_tests != 1 else ''}"
                                                       if n_tests else "")
    sesoi = summary.get("sesoi")
    unin = [d for d in settings if d.get("uninformative")]
    if unin:
        margin = 100 * float(summary.get("parse_margin") or 0.10)
        detail += ("; uninformative (the answer line broken, parse rate off its control's by more than "
                   f"{margin:.0f} pp): " + ", ".join(
                       f"{_setting_name(d)} parsed {(d.get('coverage_c') or {}).get('k')}/"
                       f"{(d.get('coverage_c') or {}).get('n')} vs {((d.get('control') or {}).get('coverage_c') or {}).get('k')}/"
                       f"{((d.get('control') or {}).get('coverage_c') or {}).get('n')}" for d in unin))
    if code == "null" and sesoi:
        detail += f"; every interval within {100 * sesoi:.0f} pp"
    elif code == "inconclusive" and sesoi:
        power = summary.get("power") or {}
        need = power.get("n_cases_for_null") or best.get("n_questions_for_null")
        detail += f"; too few cases to exclude {100 * sesoi:.0f} pp" + (f" (a null would need about {need})"
                                                                         if need else "")
    if "[caution" in verdict:
        detail += " [caution: " + verdict.split("[caution", 1)[1].lstrip(": ").rstrip("]") + "]"
    return Verdict("steering", q, code, detail, nq, cmd, src)


# ------------------------------------------------------------------------------------------ the box
def read_verdicts(study_dir: str | Path) -> list[Verdict]:
    """The three lines for a study directory, each from its stage's file (absent files give "not run")."""
    out = Path(study_dir)
    s = str(out)
    summary = _read(out / SUMMARY)
    if summary is not None and "overall" not in summary:
        summary = None
    results = _read(out / "probes" / "results.json")
    steer = _read(out / "steering" / SUMMARY)
    if steer is not None and "verdict_code" not in steer:
        steer = None
    config = (_read(out / "steering" / CONFIG) or {}).get("config")
    verdicts = [propagation_verdict(summary, s), probe_verdict(results, s),
                steering_verdict(steer, s, config if isinstance(config, dict) else None)]
    skipped = (_read(out / "stages.json") or {}).get("skipped") or {}
    stage_of = {"probe": "probes", "steering": "steering"}
    for i, v in enumerate(verdicts):
        reason = skipped.get(stage_of.get(v.key, ""))
        if v.answer == "not run" and reason:
            # the study skipped the stage: say why (its recorded reason), not that it has not run yet
            verdicts[i] = replace(v, answer="skipped", detail=f"the study skipped this stage: {reason}")
    return verdicts


def verdict_box(verdicts: list[Verdict], style: str = "md") -> str:
    """The summary box: one line per verdict (markdown bullets, or plain lines for the text report)."""
    lines = [f"- {v.line('md')}" if style == "md" else f"* {v.line('text')}" for v in verdicts]
    if any(FEW_CLUSTERS_MARK in x for x in lines):
        lines += ["", FEW_CLUSTERS_NOTE + "."]
    return "\n".join(lines)


__all__ = ["NO_ANSWER", "Verdict", "probe_verdict", "propagation_verdict", "read_verdicts", "steering_verdict",
           "verdict_box"]
