"""python -m study.export_inspect RUN_DIR [--output-file FILE.eval|FILE.json] [--labelling NAME] [--allow-incomplete]

Write a run as an inspect_ai eval log, so ``inspect view`` shows its samples and ``inspect_ai.analysis.samples_df``
reads them (default output ``RUN_DIR/inspect/continuations.eval``; then ``inspect view --log-dir RUN_DIR/inspect``).
``--output-file FILE.json`` writes the JSON format instead (inspect_ai 0.3.285's ``samples_df`` reads a .json log when
given ``read_eval_log(FILE)``, not the path; the .eval format needs neither).

One sample per continuation record (one generation; see :mod:`loadbearing.records`):

* ``id``: the continuation id; ``input``: what the model saw as chat turns - the system line, the few-shot
  turns, the question, and the assistant prefix that ends with the edited line (:mod:`study.export_inspect.chat`
  rebuilds them and checks them against ``input_text``; where they cannot be checked, the templated text as
  one user message); ``description``: the edit in one line (strategy, position, line: original -> edited), so
  the viewer's first screen names it; ``output``: the continuation; ``target``: the gold answer. ``messages``
  are the input turns and the continuation, for the viewer's transcript; ``metadata.input_text`` keeps the
  exact templated string.
* ``scores``: ``outcome`` = ``"C"`` (the error propagated: parseable and wrong) or ``"non-C"``, with the parsed
  answer; ``propagated`` = 1.0 / 0.0, so its mean is the propagation rate; ``abc`` = ``"A"``/``"B"``/``"C"`` of
  the labelling (``--labelling``, default the newest). A score with no value (an unparseable answer; an
  unlabelled or undecided case) is left out of that sample: unscored, never counted as 0.
* ``metadata``: ``continuation_id`` (the sample id, under the name the other APIs use), ``condition``, ``strategy``
  (None for a control: it edits nothing), ``position`` (merged where one generation fills several positions of its
  strategy: ``middle=late``; ``recorded_position`` the record's), ``cells`` (every ``strategy/position`` cell the
  generation counts in), ``question_id``, ``question_key``, ``line_index``, ``n_lines``, ``edit`` (``original_line
  -> edited_line``), ``original_line``, ``edited_line``, ``edit_span``, ``dataset``, ``task``, ``difficulty``,
  ``parsed_answer``, ``correct``, ``finish_reason``, ``input_tokens``, ``new_tokens``, ``labelling``.

The log's results give the propagation rate of the perturbed and of the control samples (per generation) and
the A/B/C shares of the perturbed ones; ``propagated_by_group`` / ``control_error_by_group`` give the rate per
strategy, position and level, each with its question-clustered interval in the metric's metadata
(:mod:`study.export_inspect.groups`). Every sample also carries the ``cell`` score (strategy, position, level,
label, moved), and the log's viewer configuration shows those as the sample list's first columns, sorted by
level. The causal tests (early answering, filler, paraphrase, resampling) that finished in the run are written
beside it, one log per stage (``RUN_DIR/inspect/early_answer.eval``...; :mod:`study.export_inspect.causal`).
Built only with inspect_ai's public log API (``inspect_ai.log``,
``inspect_ai.scorer.Score``, ``inspect_ai.model``); the eval and run ids are derived from the run's
continuations file, so exporting the same run twice describes it the same way.
"""
from __future__ import annotations

import argparse
import tempfile
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from loadbearing.cli import OneLineParser, UsageError, add_labelling, add_output, run_cli
from loadbearing.files import atomic_write_bytes, file_sha256
from loadbearing.frames import NEWEST
from loadbearing.provenance import now, package_versions
from loadbearing.records import Continuation
from loadbearing.runs import CONTINUATIONS, Run, question_key_of
from study.export_inspect.causal import build_stage_logs
from study.export_inspect.chat import chat_turns, edit_description, sample_position
from study.export_inspect.groups import CELL, cell_score, grouped_score, moved, viewer_config

if TYPE_CHECKING:
    from inspect_ai.log import EvalLog, EvalResults, EvalSample

DEFAULT_OUTPUT = Path("inspect") / "continuations.eval"
FORMATS = {".eval": "eval", ".json": "json"}
TASK = "loadbearing/edit_and_continue"


def sample_metadata(c: Continuation, labelling: str | None) -> dict[str, Any]:
    """The metadata of one continuation's sample (flat, so ``samples_df`` gives one column each)."""
    perturbed = c.condition == "perturbed"
    return {
        "continuation_id": c.id,  # the name continuations_df, read_sweep and the activation store use
        "condition": c.condition,
        "strategy": c.strategy if perturbed else None,
        "position": sample_position(c),  # merged where one generation fills several (middle=late)
        "recorded_position": c.position,
        "cells": [f"{s}/{p}" for s, p in c.cells()],
        "question_id": c.question_id,
        "question_key": question_key_of(c),
        "line_index": c.line_index,
        "n_lines": c.n_lines,
        "edit": f"{c.original_line} -> {c.edited_line}" if perturbed else None,
        "original_line": c.original_line,
        "edited_line": c.edited_line,
        "edit_span": list(c.edit_span),
        "dataset": c.dataset,
        "task": c.task,
        "difficulty": c.difficulty,
        "parsed_answer": c.parsed_answer,
        "correct": c.correct,
        "finish_reason": c.finish_reason,
        "input_tokens": c.input_tokens,
        "new_tokens": c.new_tokens,
        "labelling": labelling,
    }


def sample_scores(c: Continuation, abc: str | None, labelling: str | None, reference: str | None = None
                  ) -> dict[str, Any]:
    """The sample's scores; ``reference``: the unedited chain's answer (the ``cell`` score's ``moved``)."""
    from inspect_ai.scorer import Score  # deferred: inspect_ai is heavy and used only to export

    out: dict[str, Any] = {CELL: cell_score(strategy=c.strategy if c.condition == "perturbed" else "control",
                                            position=sample_position(c), level=c.difficulty or c.task,
                                            label=abc if abc is not None else c.label,
                                            moved=moved(c.parsed_answer, reference))}
    if c.label is not None:
        why = "wrong answer: the error propagated" if c.label == "C" else "correct answer"
        out["outcome"] = Score(value=c.label, answer=c.parsed_answer, explanation=f"{why} (gold {c.gold})")
        out["propagated"] = Score(value=1.0 if c.label == "C" else 0.0, answer=c.parsed_answer)
    if abc is not None:
        out["abc"] = Score(value=abc, answer=c.parsed_answer, explanation=f"labelling {labelling}",
                           metadata={"labelling": labelling})
    return out


def to_sample(c: Continuation, abc: str | None, labelling: str | None, model: str,
              turns: list[dict[str, str]] | None = None, reference: str | None = None) -> EvalSample:
    """One sample. ``turns`` (:func:`study.export_inspect.chat.chat_turns`): the input as chat messages ending
    with the assistant prefix; None: the templated text as one user message."""
    # deferred (both): inspect_ai is heavy and used only to export
    from inspect_ai.log import EvalSample
    from inspect_ai.model import ChatMessageAssistant, ChatMessageSystem, ChatMessageUser, ModelOutput, ModelUsage

    output = ModelOutput.from_content(model, c.continuation,
                                      stop_reason="max_tokens" if c.finish_reason == "length" else "stop")
    output.usage = ModelUsage(input_tokens=c.input_tokens, output_tokens=c.new_tokens,
                              total_tokens=c.input_tokens + c.new_tokens)
    kinds = {"system": ChatMessageSystem, "user": ChatMessageUser, "assistant": ChatMessageAssistant}
    if turns:
        inp: Any = [kinds[t["role"]](content=t["content"]) for t in turns]
        msgs = [*inp, ChatMessageAssistant(content=c.continuation)]
    else:
        inp, msgs = c.input_text, [ChatMessageUser(content=c.input_text), ChatMessageAssistant(content=c.continuation)]
    md = sample_metadata(c, labelling) | {"input_text": c.input_text, "input_as": "chat turns" if turns else "text"}
    return EvalSample(id=c.id, epoch=1, input=inp, target=c.gold, description=edit_description(c), messages=msgs,
                      output=output, scores=sample_scores(c, abc, labelling, reference), metadata=md)


def _results(recs: list[Continuation], labels: dict[str, str | None]) -> EvalResults:
    from inspect_ai.log import EvalMetric, EvalResults, EvalScore  # deferred: inspect_ai is heavy and used only to export

    def share(flags: list[bool]) -> dict[str, Any]:
        return {"value": sum(flags) / len(flags)} if flags else {}

    prop: dict[str, EvalMetric] = {}
    for cond in ("perturbed", "control"):
        flags = [c.label == "C" for c in recs if c.condition == cond and c.label is not None]
        if flags:  # a rate with no denominator is left out, never 0
            prop[cond] = EvalMetric(name=cond, **share(flags))
    abc: dict[str, EvalMetric] = {}
    labelled = [labels.get(c.id) for c in recs if c.condition == "perturbed" and labels.get(c.id) is not None]
    for lab in ("A", "B", "C"):
        if labelled:
            abc[f"perturbed_{lab}"] = EvalMetric(name=f"perturbed_{lab}", **share([x == lab for x in labelled]))
    n_scored = sum(c.label is not None for c in recs)
    n_lab = sum(labels.get(c.id) is not None for c in recs)
    scores = [EvalScore(name="propagated", scorer="propagated", scored_samples=n_scored,
                        unscored_samples=len(recs) - n_scored, metrics=prop,
                        metadata={"unit": "generation", "denominator": "parseable answers"})]
    if labels:
        scores.append(EvalScore(name="abc", scorer="abc", scored_samples=n_lab, unscored_samples=len(recs) - n_lab,
                                metrics=abc, metadata={"unit": "generation"}))
    for cond, name in (("perturbed", "propagated_by_group"), ("control", "control_error_by_group")):
        rows = [(None if c.label is None else c.label == "C", question_key_of(c),
                 {"strategy": c.strategy if cond == "perturbed" else None, "position": sample_position(c),
                  "level": c.difficulty or c.task}) for c in recs if c.condition == cond]
        if rows:
            scores.append(grouped_score("propagated", rows, name=name))
    return EvalResults(total_samples=len(recs), completed_samples=len(recs), scores=scores)


def build_log(run: Run, *, labelling: str | None = NEWEST) -> EvalLog:
    """The run as an ``inspect_ai.log.EvalLog`` (samples, results, spec); nothing is written."""
    # deferred: inspect_ai is heavy and used only to export
    from inspect_ai.log import EvalConfig, EvalDataset, EvalLog, EvalSpec, EvalStats
    from inspect_ai.model import GenerateConfig  # deferred: inspect_ai is heavy and used only to export

    recs = run.continuations(required=True)
    baselines = {b.question_id: b for b in run.baselines()}
    name, labels = run.labels(None if labelling == NEWEST else labelling)
    spec = run.model_spec
    model = f"loadbearing/{spec.get('name') or 'unknown'}"
    digest = file_sha256(run.file(CONTINUATIONS))
    m = run.manifest
    settings: dict[str, Any] = m["settings"] if isinstance(m.get("settings"), dict) else {}
    created = m.get("created") or now()
    datasets = sorted({c.dataset for c in recs})
    eval_spec = EvalSpec(
        eval_id=digest[:22], run_id=digest[:22], created=created, task=TASK, task_version=m.get("protocol_version", 0),
        task_display_name=f"edit and continue ({', '.join(datasets)})",
        dataset=EvalDataset(name=", ".join(datasets), location=str(run.file(CONTINUATIONS)), samples=len(recs),
                            sample_ids=[c.id for c in recs]),
        model=model, model_generate_config=GenerateConfig(max_tokens=settings.get("max_new_tokens"), temperature=0.0),
        config=EvalConfig(), packages={k: str(v) for k, v in package_versions().items() if v},
        metadata={"run_dir": str(run.path), "run_status": run.status, "labelling": name, "model": spec,
                  "continuations_sha256": digest, "settings": settings, "git": m.get("git")},
        viewer=viewer_config(["outcome", "abc"]),
    )
    return EvalLog(
        status="success" if run.complete else "cancelled", eval=eval_spec,
        results=_results(recs, labels), stats=EvalStats(started_at=created, completed_at=m.get("updated") or created),
        samples=[to_sample(c, labels.get(c.id), name, model, chat_turns(c, baselines.get(c.question_id), settings),
                           getattr(baselines.get(c.question_id), "parsed_answer", None)) for c in recs],
    )


def output_path(run: Run, output: str | None) -> Path:
    out = Path(output) if output else run.path / DEFAULT_OUTPUT
    if out.suffix not in FORMATS:
        raise UsageError(f"--output-file {str(out)!r}: the log's format comes from its suffix; end it in .eval or .json")
    return out


def write_log(log: Any, out: Path) -> Path:
    """Write one ``EvalLog`` to ``out`` atomically, in the format its suffix names."""
    from inspect_ai.log import write_eval_log  # deferred: inspect_ai is heavy and used only to export

    out.parent.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(dir=out.parent, prefix=".export_inspect.") as tmp:
        part = Path(tmp) / out.name  # inspect writes the whole file; publish it in one rename
        write_eval_log(log, str(part), format=FORMATS[out.suffix])  # type: ignore[arg-type]
        atomic_write_bytes(out, part.read_bytes())
    return out


def export_causal(run_dir: str | Path, out_dir: str | Path, suffix: str = ".eval") -> list[Path]:
    """Write each finished causal test of the run (early answering, filler, paraphrase, resampling) as its own
    log ``out_dir/<stage><suffix>`` (:mod:`study.export_inspect.causal`); the paths written."""
    return [write_log(log, Path(out_dir) / f"{stage}{suffix}") for stage, log in build_stage_logs(Run(run_dir))]


def export_inspect(run_dir: str | Path, output: str | None = None, *, labelling: str | None = NEWEST,
                   allow_incomplete: bool = False, causal: bool = True) -> Path:
    """Write ``run_dir`` as an inspect eval log (atomically) and return its path; with ``causal``, the causal
    tests' logs go beside it (:func:`export_causal`, one per finished stage, in the same format).

    >>> from inspect_ai.log import read_eval_log                                   # doctest: +SKIP
    >>> log = read_eval_log(export_inspect("runs/demo"))                           # doctest: +SKIP
    >>> len(log.samples) == len(Run("runs/demo").continuations())                  # doctest: +SKIP
    True
    """
    run = Run(run_dir)
    run.require_complete(allow_incomplete=allow_incomplete)
    out = output_path(run, output)
    log = build_log(run, labelling=labelling)
    write_log(log, out)
    if causal:
        export_causal(run_dir, out.parent, out.suffix)
    return out


def build_parser() -> argparse.ArgumentParser:
    p = OneLineParser(prog="python -m study.export_inspect",
                      description="Write a run as an inspect_ai eval log (one sample per continuation).")
    inp = p.add_argument_group("inputs")
    inp.add_argument("run_dir", metavar="RUN_DIR", help="a run directory written by python -m behavioural.run")
    add_labelling(inp, "the labelling whose A/B/C labels are scored (default: the newest complete one)", default=NEWEST)
    inp.add_argument("--allow-incomplete", action="store_true", help="export a run that has not finished")
    add_output(p.add_argument_group("output"), "file", f"the log file, .eval or .json (default RUN_DIR/{DEFAULT_OUTPUT})",
               dest="output")
    return p


def main(argv: Sequence[str] | None = None) -> int:
    args = build_parser().parse_args(argv)

    def body() -> int:
        out = export_inspect(args.run_dir, args.output, labelling=args.labelling, allow_incomplete=args.allow_incomplete,
                             causal=False)
        for f in [out, *export_causal(args.run_dir, out.parent, out.suffix)]:
            print(f"wrote {f} ({f.stat().st_size / 1e6:.2f} MB)")
        print(f"view them with: inspect view --log-dir {out.parent}")
        return 0

    return run_cli(body)


if __name__ == "__main__":
    raise SystemExit(main())


__all__ = ["build_log", "build_parser", "export_causal", "export_inspect", "write_log", "main", "output_path",
           "sample_metadata", "sample_scores",
           "to_sample", "DEFAULT_OUTPUT", "TASK"]
