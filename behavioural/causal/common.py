"""What every causal test shares: the eligible chains of a run, forcing the answer, and the stage driver.

* :func:`eligible_chains` - the run's eligible baselines (``Run(dir).baselines()``) re-split into reasoning
  lines (:class:`Chain`), optionally one shard of them (:mod:`loadbearing.shards`, by question key).
* :data:`ANSWER_PREFIX` / :func:`forced_input` / :func:`score_forced` - the answer forced after a (cut,
  replaced or paraphrased) chain: the assistant text, then ``Answer:`` (the line every prompt's format
  instruction asks for, :data:`loadbearing.questions.prompts.FORMAT_INSTRUCTIONS`); the model's first line
  after it is the answer, scored by the one scorer (:func:`loadbearing.answers.score`).
* :func:`drive` - one stage on a run directory: refuse bad input before anything is written, write
  ``RUN_DIR/<stage>/`` (``manifest.json``, ``records.jsonl`` one row per generation, ``summary.json``,
  ``summary.md``), resume (rows already written are skipped; a complete stage writes nothing), take a shard
  (``RUN_DIR/<stage>/shard-I-of-N/``; an unsharded run afterwards takes the shards' rows instead of
  generating them again, which merges them).
"""
from __future__ import annotations

import argparse
import dataclasses
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, ClassVar

from loadbearing import provenance
from loadbearing.answers import PARSER_VERSION, score
from loadbearing.cli import UsageError, check_device, check_number
from loadbearing.engine.generation import generate
from loadbearing.engine.oom import for_generate_fn
from loadbearing.errors import LoadBearingError
from loadbearing.files import JsonlWriter, RunDirError, atomic_write_text, read_json, read_jsonl, write_json
from loadbearing.locks import output_lock
from loadbearing.questions.prompts import Trace, assistant_prefix, split_trace
from loadbearing.records import Baseline
from loadbearing.runs import MANIFEST, RECORDS, SUMMARY, SUMMARY_MD, Run, question_key_of
from loadbearing.shards import parse_shard, select
from loadbearing.stage import RunDirOptions, Stage, SummarySection, option, result_settings

#: the answer-line label every dataset's format instruction asks for ("End with a line 'Answer: X'")
ANSWER_PREFIX = "Answer:"


class CausalError(LoadBearingError, RuntimeError):
    """A causal test cannot run on this input; the message names the problem and the fix."""


@dataclass(frozen=True, kw_only=True)
class CausalConfig(RunDirOptions):
    """What every causal test's config holds: the run directory, the shared options its command offers (resume,
    quiet, shard, device, batch size, seed) and the bootstrap's resamples. A test's config derives it and adds
    its own options (:func:`loadbearing.stage.option`)."""

    CLI_SHARED: ClassVar[tuple[str, ...]] = ("resume", "quiet", "shard", "device", "batch_size", "seed")

    resume: bool = option(False, help="continue an interrupted stage (rows already written are kept)", compare=False)
    seed: int = option(0, help="seed of the bootstrap", compare=False)
    n_boot: int = option(2000, help="question-bootstrap resamples for intervals", compare=False)


# ------------------------------------------------------------------------------------------------ chains
@dataclass(frozen=True)
class Chain:
    """An eligible baseline and its reasoning lines (the chain a causal test cuts, replaces or rewrites)."""

    baseline: Baseline
    trace: Trace

    @property
    def n(self) -> int:
        return len(self.trace.lines)

    @property
    def key(self) -> str:
        return question_key_of(self.baseline)

    def prefix(self, k: int) -> str:
        """The trace text through its first ``k`` reasoning lines, newline-terminated ("" for k = 0)."""
        if not 0 <= k <= self.n:
            raise ValueError(f"cut {k} outside 0..{self.n}")
        return "" if k == 0 else assistant_prefix(self.baseline.trace, self.trace, k - 1)[0]

    def lead(self) -> str:
        """What the trace holds before its first reasoning line (a ``<think>`` tag, blank lines)."""
        return self.baseline.trace[: self.trace.spans[0][0]] if self.trace.spans else ""

    def meta(self) -> dict[str, Any]:
        b = self.baseline
        return {"question_id": b.question_id, "question_key": self.key, "dataset": b.dataset, "task": b.task,
                "difficulty": b.difficulty, "n_lines": self.n}


def eligible_chains(run: Run, shard: str | None = None) -> list[Chain]:
    """The run's eligible baselines as chains (one shard of them with ``shard="I/N"``); refuses none."""
    eligible = [b for b in run.baselines() if b.eligible]
    if not eligible:
        raise CausalError(f"run {str(run.path)!r} has no eligible baselines (correct, with enough reasoning lines), so "
                          "there is no chain to test; rerun python -m behavioural.run with more --max-examples or an "
                          "easier --task")
    chains = []
    for b in select(eligible, parse_shard(shard), key=question_key_of):
        tr = split_trace(b.trace, b.dataset, b.task)
        if tuple(tr.lines) != tuple(b.lines):
            raise CausalError(f"baseline {b.question_id}: its trace re-splits into other lines than recorded (written by "
                              "another protocol version?); rerun python -m behavioural.run")
        chains.append(Chain(b, tr))
    return chains


def forced_input(chain: Chain, assistant: str) -> str:
    """The model input that forces the answer after ``assistant`` (the chain text, cut, replaced or rewritten)."""
    return chain.baseline.prompt + assistant + ANSWER_PREFIX


def score_forced(generation: str, baseline: Baseline) -> tuple[str, str | None, bool | None]:
    """``(answer_text, parsed, correct)``: the forced answer is ``Answer:`` and the first generated line."""
    text = ANSWER_PREFIX + generation.split("\n", 1)[0]
    parsed, correct = score(text, baseline)
    return text, parsed, correct


# ------------------------------------------------------------------------------------------------ engine
@dataclass
class Engine:
    """Generation for a stage: the model, the generate function (the batched greedy fast path by default).
    A call that runs out of accelerator memory is retried at half the batch size (``sizer``,
    :mod:`loadbearing.engine.oom`; the stage's manifest records it as ``batching``)."""

    lm: Any
    generate_fn: Callable[..., list] | None = None
    batch_size: int = 16
    progress: bool = True
    extras: dict = dataclasses.field(default_factory=dict)  # what the stage's ``prepare`` loaded (a paraphraser)
    sizer: Any = None  # loadbearing.engine.oom.BatchSize (made from batch_size when not given)

    def __post_init__(self) -> None:
        if self.sizer is None:
            self.sizer = for_generate_fn(self.generate_fn, self.batch_size)

    def generate(self, texts: Sequence[str], *, max_new_tokens: int, desc: str, lm: Any = None, **kwargs: Any) -> list:
        """``generate_fn(lm, texts, max_new_tokens=..., batch_size=..., progress=..., desc=..., **kwargs)``."""
        fn = self.generate_fn or generate
        return self.sizer.call(fn, lm or self.lm, list(texts), max_new_tokens=max_new_tokens, progress=self.progress,
                               desc=desc, **kwargs)


@dataclass(frozen=True)
class Job:
    """One generation a stage plans (``id`` names its row; ``data`` is what the stage needs to run it)."""

    id: str
    chain: Chain
    data: dict


@dataclass(frozen=True)
class CausalStage:
    """A causal test as the driver sees it."""

    name: str  # the directory under the run, and the command: python -m behavioural.<name>
    version: str
    plan: Callable[[Any, list[Chain], Run], list[Job]]
    execute: Callable[[Any, list[Job], Engine], list[dict]]  # one row per job, in order
    summarise: Callable[[Any, list[dict], list[Chain], Run], dict]
    format_summary: Callable[[dict, str], str]
    prepare: Callable[[Any, Run], dict] | None = None  # extra checks/loads before anything is written
    #: config fields that change only the summary (not a record): a finished stage resumed with other values
    #: is summarised again from its records, generating nothing
    summary_options: tuple[str, ...] = ()

    @property
    def kind(self) -> str:
        return f"behavioural.{self.name}"


def stage_dir(run_dir: str | Path, name: str, shard: str | None = None) -> Path:
    s = parse_shard(shard)
    base = Path(run_dir) / name
    return base if s is None else base / f"shard-{s.index}-of-{s.count}"


def stage_complete(out: Path, kind: str) -> bool:
    try:
        m = read_json(out / MANIFEST)
    except RunDirError:
        return False
    return m.get("kind") == kind and m.get("status") == "ok" and (out / SUMMARY).is_file()


def check_common(config: Any) -> None:
    """Refuse bad common options before anything is read or written."""
    check_number(config.batch_size, "--batch-size", minimum=1)
    check_number(config.n_boot, "--n-boot", minimum=0)
    parse_shard(config.shard)  # a bad --shard is the shards' own one-line ShardError
    check_device(config.device)


def _diff(old: dict, new: dict) -> list[str]:
    return [f"{k}: {old.get(k)!r} -> {new.get(k)!r}" for k in sorted(set(old) | set(new)) if old.get(k) != new.get(k)]


def _shard_rows(out: Path, stage: CausalStage, settings: dict) -> list[dict[str, Any]]:
    """Rows of this stage's shard directories written with the same settings (an unsharded run merges them)."""
    rows: list[dict] = []
    for d in sorted(out.glob("shard-*-of-*")):
        try:
            m = read_json(d / MANIFEST)
        except RunDirError:
            continue
        theirs = {k: v for k, v in (m.get("settings") or {}).items() if k != "shard"}
        if m.get("kind") == stage.kind and theirs == {k: v for k, v in settings.items() if k != "shard"}:
            rows += read_jsonl(d / RECORDS)
    return rows


def drive(stage: CausalStage, config: Any, *, lm: Any = None, generate_fn: Callable[..., list] | None = None,
          echo: Callable[[str], Any] | None = print) -> dict[str, Any]:
    """Run (or resume) ``stage`` on ``config.run_dir``; returns its summary. Refusals write nothing."""
    say = echo or (lambda m: None)
    check_common(config)
    run = Run(config.run_dir)
    if not run.complete:
        raise CausalError(f"run {str(run.path)!r} has status {run.status!r}: it has not finished; finish it with "
                          f"python -m behavioural.run --resume {run.path} first")
    chains = eligible_chains(run, config.shard)
    out = stage_dir(run.path, stage.name, config.shard)
    settings = result_settings(config)
    if (out / MANIFEST).is_file():
        if not config.resume:
            raise RunDirError(f"{str(out)!r} already exists; continue it with --resume, or remove it to start again")
        old = read_json(out / MANIFEST)
        diff = _diff(old.get("settings") or {}, settings)
        if old.get("kind") != stage.kind or old.get("version") != stage.version or diff:
            why = "; ".join(diff) or f"written by {old.get('kind')} {old.get('version')}"
            raise RunDirError(f"cannot resume {str(out)!r}: settings differ ({why}); rerun with the original settings or "
                              "remove the directory")
        if stage_complete(out, stage.kind):
            done = read_json(out / SUMMARY)
            had = done.get("summary_options") or {}
            if {k: had.get(k) for k in stage.summary_options} == _summary_options(stage, config):
                say(f"{out} is already complete; nothing to do")
                return done
            say(f"{out} is complete; summarising its records again with {_summary_options(stage, config)}")
            rows = [r for r in read_jsonl(out / RECORDS) if r.get("id") in {j.id for j in stage.plan(config, chains, run)}]
            with output_lock(out):
                return _finish(stage, config, run, chains, out, settings, rows, say)
    extras = stage.prepare(config, run) if stage.prepare else {}
    if lm is None:
        lm = run.load_model(device=config.device)
    else:
        run.check_model(lm)
    engine = Engine(lm, generate_fn, config.batch_size, config.progress, extras)
    out.mkdir(parents=True, exist_ok=True)
    with output_lock(out):
        manifest = {"kind": stage.kind, "version": stage.version, "settings": settings, "run_dir": str(run.path),
                    "parser": PARSER_VERSION, "model": lm.provenance() if hasattr(lm, "provenance") else None,
                    "extra": {k: v for k, v in extras.items() if k.endswith("_provenance")},
                    "n_chains": len(chains), "git": provenance.git_info(), "status": "running",
                    "created": provenance.now(), "updated": provenance.now()}
        if (out / MANIFEST).is_file():
            manifest["created"] = read_json(out / MANIFEST).get("created", manifest["created"])
        write_json(out / MANIFEST, manifest)
        try:
            summary = _execute(stage, config, run, chains, out, settings, engine, say)
        except BaseException as e:
            manifest.update(status="interrupted" if isinstance(e, KeyboardInterrupt) else "failed",
                            error=f"{type(e).__name__}: {e}", updated=provenance.now(), batching=engine.sizer.record())
            write_json(out / MANIFEST, manifest)
            raise
        manifest.update(status="ok", updated=provenance.now(), batching=engine.sizer.record())
        manifest.pop("error", None)
        write_json(out / MANIFEST, manifest)
    return summary


def _execute(stage: CausalStage, config: Any, run: Run, chains: list[Chain], out: Path, settings: dict, engine: Engine,
             say: Callable[[str], Any]) -> dict[str, Any]:
    jobs = stage.plan(config, chains, run)
    wanted = {j.id for j in jobs}
    done = {r["id"]: r for r in read_jsonl(out / RECORDS, repair=True) if r.get("id") in wanted}
    todo = [j for j in jobs if j.id not in done]
    with JsonlWriter(out / RECORDS) as w:
        if config.shard is None and todo:
            merged = {r["id"]: r for r in _shard_rows(out, stage, settings) if r.get("id") in wanted}
            for j in todo:
                if j.id in merged:
                    w.write(merged[j.id])
                    done[j.id] = merged[j.id]
            todo = [j for j in todo if j.id not in done]
        step = max(engine.batch_size * 4, 16)
        for i in range(0, len(todo), step):
            part = todo[i:i + step]
            for row in stage.execute(config, part, engine):
                w.write(row)
                done[row["id"]] = row
    return _finish(stage, config, run, chains, out, settings, [done[j.id] for j in jobs], say)


def _summary_options(stage: CausalStage, config: Any) -> dict[str, Any]:
    return {k: (list(v) if isinstance(v, tuple) else v) for k in stage.summary_options
            for v in [getattr(config, k)]}


def _finish(stage: CausalStage, config: Any, run: Run, chains: list[Chain], out: Path, settings: dict, rows: list[dict],
            say: Callable[[str], Any]) -> dict[str, Any]:
    summary = stage.summarise(config, rows, chains, run)
    summary.update(stage=stage.name, version=stage.version, run_dir=str(run.path), shard=config.shard,
                   n_rows=len(rows), n_questions=len(chains), status="ok", settings=settings,
                   summary_options=_summary_options(stage, config))
    write_json(out / SUMMARY, summary)
    atomic_write_text(out / SUMMARY_MD, stage.format_summary(summary, "md") + "\n")
    say(stage.format_summary(summary, "text"))
    return summary


def with_note(text: str) -> str:
    """``text`` with the note that explains the dagger :func:`loadbearing.stats.format_rate` puts on intervals
    resting on few questions, when one appears."""
    from loadbearing.stats import FEW_CLUSTERS_MARK, FEW_CLUSTERS_NOTE  # deferred: loadbearing.stats loads numpy

    return text + "\n" + FEW_CLUSTERS_NOTE if FEW_CLUSTERS_MARK in text else text


# ------------------------------------------------------------------------------------------------ the command
def command(name: str, config: type, run: Callable[..., dict], format_summary: Callable[[dict, str], str],
            title: str, *, backend: bool = False) -> Stage:
    """A causal test as a :class:`loadbearing.stage.Stage`: ``python -m behavioural.<name>``'s parser is built from
    ``config``'s fields, ``run`` is the test's library call, and its report section is its own summary.
    ``backend``: the test generates (forced answers, rollouts), so its command also takes ``--backend hf|vllm``
    and the vLLM engine's options (:func:`run_with_backend`)."""
    engine = None
    if backend:
        def engine(p: argparse.ArgumentParser) -> None:
            from loadbearing.engine.vllm_engine import add_backend_arguments  # deferred: vLLM's options only here

            add_backend_arguments(p, "the forced answers and rollouts run through vLLM, prefix cache on")

    return Stage(name, config, run=run, is_complete=lambda p: is_stage_complete(p, name),
                 report=lambda summary: SummarySection(title, summary, format_summary), title=title,
                 command=f"behavioural.causal.{name}", errors=(CausalError,), engine_options=engine,
                 execute=(lambda cfg, args: run_with_backend(run, cfg, args)) if backend else None)


def count_or_all(text: str) -> int | None:
    """``--max-questions N``: a sample of at most N eligible chains; 0 is all of them (None)."""
    try:
        n = int(text)
    except ValueError:
        raise UsageError(f"--max-questions {text!r} is not a whole number; give N >= 1, or 0 for all") from None
    check_number(n, "--max-questions", minimum=0)
    return n or None


def run_with_backend(run: Callable[..., dict], config: Any, args: argparse.Namespace) -> dict[str, Any]:
    """``run(config)``, with ``--backend vllm`` through a :class:`loadbearing.engine.vllm_engine.LazyVLLM` (checked
    before anything is loaded: vLLM importable; started at the first generation, shut down after)."""
    if getattr(args, "backend", "hf") != "vllm":
        return run(config)
    from loadbearing.engine.vllm_engine import LazyVLLM, backend_options, check_ready  # deferred: vLLM is optional

    opts = backend_options(args)
    check_ready(hooks=False)
    gen = LazyVLLM(**opts)
    try:
        return run(config, generate_fn=gen)
    finally:
        gen.shutdown()


def is_stage_complete(path: str | Path, stage_name: str) -> bool:
    """True when ``path`` (a stage directory, or the run directory holding it) has a finished stage."""
    p = Path(path)
    kind = f"behavioural.{stage_name}"
    return stage_complete(p, kind) or stage_complete(p / stage_name, kind)
