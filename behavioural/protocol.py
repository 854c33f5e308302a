"""The edit-and-continue protocol as a library (the CLI in :mod:`behavioural.run` is a thin layer on it).

    from behavioural.protocol import Settings, run_protocol
    summary = run_protocol(lm, questions, Settings(...), run_dir)

1. Baselines: greedy, chat template with a format instruction (and few-shot turns where the dataset's
   default asks for them); stop at end of turn or once the answer line is complete.
2. Split the visible trace into reasoning lines; eligible = correct with >= ``min_lines`` lines.
3. For each eligible baseline, strategy and position: edit the line at ``min(n-2, floor(n*f))``, cut the
   trace right after it, continue greedily from the assistant prefix (no end-of-turn token); also
   continue from the unedited prefix cut at the same line (the control).
4. Score each continuation strictly: C (parseable and wrong), non-C (correct), None (unparseable).

One generation per distinct model input: cells that share an input (the unedited control is the same for
every strategy; positions that land on the same line) get ONE record listing all of them in ``memberships``.

Records are appended and flushed as they are produced; a run can be resumed after any interruption
and produces the same records as an uninterrupted one.
"""
from __future__ import annotations

import dataclasses
import hashlib
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from behavioural.results import BehaviourSummary
from behavioural.strategies import NotApplicable, apply
from behavioural.summary import format_table, summarise
from loadbearing import files as rundir
from loadbearing import provenance as provenance_mod
from loadbearing import runs as runs_mod
from loadbearing.answers import PARSER_VERSION, STOP_RULE, score
from loadbearing.engine.generation import encode, generate
from loadbearing.engine.oom import for_generate_fn
from loadbearing.errors import LoadBearingError
from loadbearing.questions.data import dataset_fingerprint, dedupe, question_key
from loadbearing.questions.prompts import assistant_prefix, build_prompt, position_index, split_trace
from loadbearing.records import SCHEMA_VERSION, Baseline, Continuation, Skipped, label_for
from loadbearing.runs import BASELINES, CONTINUATIONS, MANIFEST, SKIPPED, SUMMARY, Run
from loadbearing.shards import parse_shard, select

#: bump whenever results could change (prompting, splitting, strategies, scoring, stopping)
PROTOCOL_VERSION = "1.1"  # docs/protocol.md, "Changes from 1.0"


@dataclass(frozen=True)
class Settings:
    """Every setting that can change a result (compared on --resume)."""

    model: str
    dataset: str
    strategies: tuple[str, ...]
    positions: tuple[str, ...] = ("early", "middle", "late")
    task: str | None = None
    seed: int = 42
    max_examples: int | None = 100
    max_new_tokens: int = 4096
    min_lines: int = 3
    few_shot: bool | None = None
    model_revision: str | None = None
    dataset_revision: str | None = None
    quantize: str | None = None
    dtype: str | None = None
    n_per_level: int | None = None
    data_dir: str | None = None
    input_file: str | None = None
    #: "I/N": this run holds shard I of N of the question sample (loadbearing.shards; merge with behavioural.merge)
    shard: str | None = None
    #: settings that do not change results and may differ on resume
    batch_size: int = field(default=8, compare=False)
    backend: str = field(default="hf", compare=False)

    def result_settings(self) -> dict[str, Any]:
        return {f.name: getattr(self, f.name) for f in dataclasses.fields(self) if f.compare}

    def to_dict(self) -> dict[str, Any]:
        d = dataclasses.asdict(self)
        d["strategies"], d["positions"] = list(self.strategies), list(self.positions)
        return d


class ProtocolError(LoadBearingError, RuntimeError):
    pass


def _settings_diff(old: dict, new: dict) -> list[str]:
    out = []
    for k in sorted(set(old) | set(new)):
        a, b = old.get(k), new.get(k)
        if isinstance(a, list):
            a = tuple(a)
        if isinstance(b, list):
            b = tuple(b)
        if a != b:
            out.append(f"{k}: {old.get(k)!r} -> {new.get(k)!r}")
    return out


def _hash_ids(ids) -> str:
    return hashlib.sha256("\n".join(ids).encode()).hexdigest()


def make_manifest(lm, questions, settings: Settings, status: str, extra: dict | None = None) -> dict[str, Any]:
    m = {
        "kind": "behavioural.run",
        "protocol_version": PROTOCOL_VERSION,
        "parser": PARSER_VERSION,
        "stop_rule": STOP_RULE,
        "schema_version": SCHEMA_VERSION,
        "settings": settings.to_dict(),
        "model": lm.provenance() | {"name": settings.model, "revision": settings.model_revision,
                                    "quantize": settings.quantize, "dtype_requested": settings.dtype},
        "chat_template": lm.chat_template,
        "dataset": {"name": settings.dataset, "task": settings.task, "fingerprint": dataset_fingerprint(questions),
                    "n_questions": len(questions), "sample_ids_sha256": _hash_ids([q.id for q in questions]),
                    "revision": settings.dataset_revision,
                    "n_distinct_questions": len({question_key(q.question) for q in questions}),
                    "duplicates_dropped": getattr(questions, "duplicates_dropped", None)},
        "packages": provenance_mod.package_versions(),
        "git": provenance_mod.git_info(),
        "status": status,
        "created": provenance_mod.now(),
        "updated": provenance_mod.now(),
    }
    if extra:
        m.update(extra)
    return m


def check_resume(run_dir: Path, settings: Settings, questions) -> dict[str, Any]:
    """Load a run's manifest and refuse to resume it with different settings or questions."""
    manifest = check_manifest(run_dir, settings)
    want = _hash_ids([q.id for q in questions])
    if manifest["dataset"]["sample_ids_sha256"] != want:
        raise ProtocolError(f"cannot resume {run_dir}: the question sample differs from the original run; "
                            "check --data-dir/--max-examples")
    return manifest


def check_manifest(run_dir: Path, settings: Settings) -> dict[str, Any]:
    """Load a run's manifest and refuse to resume it with different settings, schema or protocol version
    (what can be checked without loading the questions)."""
    manifest = rundir.read_json(run_dir / MANIFEST)
    if manifest.get("kind") != "behavioural.run":
        raise ProtocolError(f"{run_dir} is not a behavioural run directory (manifest kind {manifest.get('kind')!r})")
    old = {k: v for k, v in manifest["settings"].items() if k in settings.result_settings()}
    diff = _settings_diff(old, settings.result_settings())
    if diff:
        raise ProtocolError(f"cannot resume {run_dir}: settings differ ({'; '.join(diff)}); "
                            "rerun with the original settings or start a new --output-dir")
    if manifest.get("schema_version", 1) != SCHEMA_VERSION:
        raise ProtocolError(f"cannot resume {run_dir}: its records use schema {manifest.get('schema_version', 1)}, this "
                            f"version writes schema {SCHEMA_VERSION}; start a new --output-dir")
    if manifest.get("protocol_version") != PROTOCOL_VERSION:
        raise ProtocolError(f"cannot resume {run_dir}: written by protocol {manifest.get('protocol_version')}, "
                            f"this is {PROTOCOL_VERSION}; start a new --output-dir")
    return manifest


def _baseline_record(q, prompt: str, prompt_tokens: int, gen, min_lines: int) -> Baseline:
    trace = split_trace(gen.text, q.dataset, q.task)
    parsed, correct = score(gen.text, q)  # the one scorer (parser + gold + choices)
    if parsed is None:
        eligible, reason = False, "unparseable"
    elif not correct:
        eligible, reason = False, "wrong"
    elif len(trace.lines) < min_lines:
        eligible, reason = False, f"too_few_lines({len(trace.lines)}<{min_lines})"
    else:
        eligible, reason = True, "eligible"
    return Baseline(
        question_id=q.id, dataset=q.dataset, task=q.task, difficulty=q.difficulty, question=q.question,
        prompt=prompt, prompt_tokens=prompt_tokens, trace=gen.text, lines=trace.lines,
        answer_line=trace.answer_line, parsed_answer=parsed, gold=q.answer, correct=correct, eligible=eligible,
        reason=reason, finish_reason=gen.finish_reason, new_tokens=gen.new_tokens,
        question_key=question_key(q.question),
    )


@dataclass(frozen=True)
class _Job:
    id: str
    question: object
    baseline: dict
    strategy: str
    position: str
    line_index: int
    edited: str
    condition: str
    prefix_text: str
    input_text: str
    edit_span: tuple[int, int]
    memberships: tuple[tuple[str, str], ...] = ()


def plan_continuations(baseline: dict, question, settings: Settings) -> tuple[list[_Job], list[Skipped]]:
    """The perturbed and control jobs (and not-applicable edits) for one eligible baseline.

    One job per distinct model input: a cell whose input an earlier cell already has (the control, shared by
    every strategy at a line; two positions cutting at one line) joins that job's ``memberships``.
    """
    trace = split_trace(baseline["trace"], question.dataset, question.task)
    if tuple(trace.lines) != tuple(baseline["lines"]):
        raise ProtocolError(f"baseline {baseline['question_id']}: trace re-split differs from the recorded lines")
    n = len(trace.lines)
    jobs: list[_Job] = []
    skipped: list[Skipped] = []
    by_input: dict[str, int] = {}  # model input -> index of its job
    for strategy in settings.strategies:
        for position in settings.positions:
            idx = position_index(n, position)
            original = trace.lines[idx]
            edited = apply(strategy, original, question, settings.seed)
            if isinstance(edited, NotApplicable):
                skipped.append(Skipped(question.id, strategy, position, idx, edited.reason))
                continue
            off = len(baseline["prompt"])
            cell_jobs = []
            for condition, line in (("perturbed", edited), ("control", original)):
                prefix, (s, e) = assistant_prefix(baseline["trace"], trace, idx, line)
                cell_jobs.append(_Job(
                    id=f"{question.id}|{strategy}|{position}|{condition}", question=question, baseline=baseline,
                    strategy=strategy, position=position, line_index=idx, edited=line, condition=condition,
                    prefix_text=prefix, input_text=baseline["prompt"] + prefix, edit_span=(off + s, off + e),
                    memberships=((strategy, position),),
                ))
            if cell_jobs[0].input_text == cell_jobs[1].input_text:  # the edit left the prefix unchanged
                skipped.append(Skipped(question.id, strategy, position, idx, "edited prefix equals the unedited prefix"))
                continue
            for job in cell_jobs:
                prev = by_input.get(job.input_text)
                if prev is None:
                    by_input[job.input_text] = len(jobs)
                    jobs.append(job)
                else:
                    first = jobs[prev]
                    jobs[prev] = dataclasses.replace(first, memberships=first.memberships + ((strategy, position),))
    return jobs, skipped


def _continuation_record(job: _Job, gen, input_tokens: int) -> Continuation:
    q: Any = job.question
    b = job.baseline
    parsed, correct = score(gen.text, q)  # the one scorer (parser + gold + choices)
    return Continuation(
        id=job.id, question_id=q.id, dataset=q.dataset, task=q.task, difficulty=q.difficulty,
        strategy=job.strategy, position=job.position, line_index=job.line_index, n_lines=len(b["lines"]),
        original_line=b["lines"][job.line_index], edited_line=job.edited, condition=job.condition,
        prefix_text=job.prefix_text, input_text=job.input_text, input_tokens=input_tokens, edit_span=job.edit_span,
        continuation=gen.text, new_tokens=gen.new_tokens, finish_reason=gen.finish_reason, parsed_answer=parsed,
        gold=q.answer, correct=correct, label=label_for(correct),
        question_key=question_key(q.question), memberships=job.memberships,
    )


def _chunks(seq, n):
    for i in range(0, len(seq), n):
        yield seq[i : i + n]


def run_protocol(lm, questions, settings: Settings, run_dir: str | Path, *, resume: bool = False,
                 progress: bool = True, chunk: int | None = None, generate_fn=None, echo=print) -> BehaviourSummary:
    """Run (or resume) the protocol into ``run_dir``; returns the summary dict.

    ``generate_fn(lm, texts, *, max_new_tokens, batch_size, progress, desc)`` defaults to the HF backend.
    Records are written in chunks of ``chunk`` prompts (default 4 batches) so an interruption loses at most
    one chunk of generation work and never a written record. A chunk that runs out of accelerator memory is
    generated again at half the batch size (:mod:`loadbearing.engine.oom`); the manifest's ``batching`` says
    which size was used.
    """
    gen_fn = generate_fn or generate
    sizer = for_generate_fn(gen_fn, settings.batch_size)
    run_dir = Path(run_dir)
    if len({question_key(q.question) for q in questions}) < len(questions):  # one question per normalised text
        dropped = getattr(questions, "duplicates_dropped", 0)
        questions = dedupe(questions, source="run_protocol")
        questions.duplicates_dropped += dropped
    shard_info = None
    if settings.shard:
        shard = parse_shard(settings.shard)
        assert shard is not None
        full = questions
        questions = select(full, shard, key=lambda q: question_key(q.question))
        shard_info = {"index": shard.index, "count": shard.count, "sample_ids": [q.id for q in full],
                      "dataset_fingerprint": dataset_fingerprint(full), "n_full_sample": len(full)}
    chunk = chunk or max(settings.batch_size * 4, 16)
    if resume:
        manifest = check_resume(run_dir, settings, questions)
        manifest["status"] = "running"
        manifest["resumed"] = manifest.get("resumed", 0) + 1
        manifest["settings"]["batch_size"] = settings.batch_size
    else:
        runs_mod.create_run_dir(run_dir)
        manifest = make_manifest(lm, questions, settings, "running", extra={"shard": shard_info} if shard_info else None)
    manifest["batching"] = sizer.record()
    rundir.write_json(run_dir / MANIFEST, manifest)

    def set_status(status: str, **extra):
        manifest.update(status=status, updated=provenance_mod.now(), batching=sizer.record(), **extra)
        rundir.write_json(run_dir / MANIFEST, manifest)

    try:
        # 1. baselines
        done = {b["question_id"]: b for b in rundir.read_jsonl(run_dir / BASELINES, repair=True)}
        todo = [q for q in questions if q.id not in done]
        if todo:
            with rundir.JsonlWriter(run_dir / BASELINES) as w:
                for part in _chunks(todo, chunk):
                    prompts = [build_prompt(lm.tokenizer, q, few_shot=settings.few_shot) for q in part]
                    gens = sizer.call(gen_fn, lm, prompts, max_new_tokens=settings.max_new_tokens, progress=progress,
                                      desc=f"baselines {len(done)}/{len(questions)}")
                    for q, p, g in zip(part, prompts, gens):
                        rec = _baseline_record(q, p, len(encode(lm.tokenizer, p)), g, settings.min_lines)
                        w.write(rec)
                        done[q.id] = rec.to_dict()
        by_id = {q.id: q for q in questions}
        baselines = [done[q.id] for q in questions]
        # 2-3. plan edits, then continue
        jobs, skipped = [], []
        for b in baselines:
            if b["eligible"]:
                j, sk = plan_continuations(b, by_id[b["question_id"]], settings)
                jobs += j
                skipped += sk
        old_skips = {(s["question_id"], s["strategy"], s["position"]) for s in rundir.read_jsonl(run_dir / SKIPPED, repair=True)}
        with rundir.JsonlWriter(run_dir / SKIPPED) as w:
            for s in skipped:
                if (s.question_id, s.strategy, s.position) not in old_skips:
                    w.write(s)
        written = {c["id"] for c in rundir.read_jsonl(run_dir / CONTINUATIONS, repair=True)}
        todo_jobs = [j for j in jobs if j.id not in written]
        if todo_jobs:
            with rundir.JsonlWriter(run_dir / CONTINUATIONS) as w:
                for part in _chunks(todo_jobs, chunk):
                    gens = sizer.call(gen_fn, lm, [j.input_text for j in part], max_new_tokens=settings.max_new_tokens,
                                      progress=progress, desc=f"continuations {len(written)}/{len(jobs)}")
                    for j, g in zip(part, gens):
                        w.write(_continuation_record(j, g, len(encode(lm.tokenizer, j.input_text))))
                        written.add(j.id)
        # 4. summary

        run = Run(run_dir)  # the one reader: validates every record written (and refuses duplicate ids)
        summary = summarise(baselines, run.continuations(), run.skipped(), seed=settings.seed)
        status = "ok" if summary["eligible"] > 0 else "insufficient_data"
        summary["status"], summary["protocol_version"], summary["run_dir"] = status, PROTOCOL_VERSION, str(run_dir)
        if status == "insufficient_data":
            summary["message"] = ("no eligible baselines (correct with >= "
                                  f"{settings.min_lines} reasoning lines): no propagation rate can be estimated")
        rundir.write_json(run_dir / SUMMARY, summary)
        set_status(status)
        if echo:
            echo(format_table(summary))
            if status == "insufficient_data":
                echo(f"\nINSUFFICIENT DATA: {summary['message']}")
        return summary
    except KeyboardInterrupt:
        set_status("interrupted")
        raise
    except BaseException as e:
        set_status("failed", error=f"{type(e).__name__}: {e}")
        raise


def load_run(run_dir: str | Path) -> dict[str, Any]:
    """Thin alias over :class:`loadbearing.runs.Run` (the one reader of run directories): the run's files as
    plain dicts (manifest, baselines, continuations, skipped, summary). New code: use ``Run`` directly."""
    run = Run(run_dir)
    return {"manifest": run.manifest, "baselines": [b.to_dict() for b in run.baselines()],
            "continuations": run.continuation_dicts(), "skipped": [x.to_dict() for x in run.skipped()],
            "summary": run.summary()}
