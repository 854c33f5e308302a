"""The labelling stage as library calls: label a run's continuations into ``labels/<name>/`` (resumable), and
read a run or a labelling back. The command and its files are described in :mod:`behavioural.labels.stage`."""
from __future__ import annotations

import itertools
import json
import re
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from behavioural.labels.judge import JudgeLabeller
from behavioural.labels.label_summary import summarize
from behavioural.labels.labellers import make_labeller
from behavioural.labels.records import FINAL_RULE, SCHEMA_VERSION, SUMMARY_FILE, LabelError, make_record
from behavioural.labels.rule import RuleLabeller
from loadbearing.cli import check_device, check_model_file, check_number
from loadbearing.files import JsonlWriter, RunDirError, check_jsonl_tail, file_sha256, read_json, read_jsonl, write_json
from loadbearing.locks import output_lock
from loadbearing.provenance import git_info, now
from loadbearing.runs import BASELINES, CONTINUATIONS, LABEL_SETTINGS, LABELS_DIR, LABELS_FILE, Run
from loadbearing.stage.parser import option

__all__ = ["LabelConfig", "build_labellers", "check_tail", "is_complete",
           "label_run", "label_stage", "load_labels", "load_run", "read_run"]


#: the help groups of ``python -m behavioural.label`` (its parser is built from :class:`LabelConfig`)
RUN_GROUP, JUDGE_GROUP = "the run and its labelling", "the judge model"


@dataclass(frozen=True)
class LabelConfig:
    """The labelling stage's configuration (what ``python -m behavioural.label RUN_DIR ...`` parses into)."""

    run_dir: str | Path = option(positional=True, group=RUN_GROUP, help="run directory written by python -m "
                                 "behavioural.run")
    labellers: tuple[str, ...] = option(("rule",), flag="--labeller", action="append", cli_default=None, parse=tuple,
                                        metavar="SPEC", group="labellers",
                                        help="'rule' (transparent notice detector) or 'judge:<model>' (any model "
                                             "load_model can load); repeat to combine (default: rule; with --resume: "
                                             "the labelling's own)")
    final: str | None = option(None, group="labellers", help="labeller whose notice verdict splits correct answers "
                               "into A/B: a --labeller spec, or 'judge' when there is one judge (default: the first "
                               "--labeller)")
    name: str | None = option(None, flag="--labelling", deprecated=("--name",), metavar="NAME", group=RUN_GROUP,
                              help="labelling directory name under RUN_DIR/labels (default: from the labellers; an "
                                   "existing name is an error); with --resume: the labelling to continue; with "
                                   "--import-sheet: the labelling to compare against (the newest when omitted)")
    resume: bool = option(False, group=RUN_GROUP, help="continue the unfinished labelling (--labelling, or the only "
                          "unfinished one) with its stored labellers")
    allow_incomplete: bool = option(False, group=RUN_GROUP, help="label a run whose manifest does not say it finished "
                                    "(its rates cover a partial run)")
    device: str | None = option(None, group=JUDGE_GROUP, help="judge device: cpu, cuda, cuda:N or auto")
    dtype: str | None = option(None, group=JUDGE_GROUP, help="judge dtype: float32, float16, bfloat16 or auto")
    quantize: str | None = option(None, choices=("4bit", "8bit"), group=JUDGE_GROUP,
                                  help="load the judge quantized (bitsandbytes)")
    judge_batch_size: int = option(8, type=int, group=JUDGE_GROUP, help="judge generation batch size")
    judge_max_new_tokens: int = option(16, type=int, group=JUDGE_GROUP, help="tokens a judge may write per prompt (a "
                                       "longer reply whose last line is not a verdict is null)")
    judge_all: bool = option(False, group="labellers", help="judge every continuation, not only those with a correct "
                             "answer")
    progress: bool = option(True, negate="--quiet", deprecated=("--no-progress",), group="output",
                            help="no progress bars")
    command: tuple[str, ...] | None = option(None, cli=False, help="the command line, recorded in the labelling")


def check_tail(path: Path, run_dir: Path) -> None:
    """Refuse a JSONL file whose last line is half-written (see :func:`loadbearing.files.check_jsonl_tail`)."""
    check_jsonl_tail(path, run_dir)


def read_run(run_dir: str | Path, *, allow_incomplete: bool = False) -> tuple[Run, list[dict[str, Any]], dict[str, str]]:
    """(run, continuation dicts, question id -> question text); refuses unfinished or damaged runs."""
    run = Run(run_dir)
    run.require_complete(allow_incomplete=allow_incomplete, flag="--allow-incomplete")
    check_tail(run.path / CONTINUATIONS, run.path)
    conts = run.continuation_dicts(required=True)
    return run, conts, run.question_texts()


def load_run(run_dir: str | Path) -> tuple[list[dict[str, Any]], dict[str, str]]:
    """(continuation dicts, question id -> question text) of a run directory (any status)."""
    _, conts, questions = read_run(run_dir, allow_incomplete=True)
    return conts, questions


def load_labels(run_dir: str | Path, name: str | None = None) -> tuple[str | None, dict[str, str | None]]:
    """(labelling name, continuation id -> final label); ``(None, {})`` when the run has no finished labelling."""
    return Run(run_dir).labels(name)


def is_complete(out_path: str | Path) -> bool:
    """True when ``out_path`` (a ``labels/<name>`` directory) holds a finished labelling."""
    p = Path(out_path)
    try:
        s = json.loads((p / LABEL_SETTINGS).read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return False
    return isinstance(s, dict) and s.get("status") == "ok" and (p / SUMMARY_FILE).is_file() and (p / LABELS_FILE).is_file()


def _resolve_final(final: str | None, names: list[str]) -> str:
    if final is None:
        return names[0]
    if final in names:
        return final
    if final == "judge":
        judges = [n for n in names if n.startswith("judge:")]
        if len(judges) == 1:
            return judges[0]
        raise LabelError(f"--final judge is ambiguous or absent among labellers {names}; name one of them exactly")
    raise LabelError(f"--final {final!r} is not one of the labellers {names}; add it with --labeller or pick one of those")


def _check_name(name: str) -> None:
    if not re.fullmatch(r"[A-Za-z0-9][A-Za-z0-9._+\-]*", name):
        raise LabelError(f"labelling name {name!r} has odd characters; use letters, digits, '.', '_', '+', '-'")


def _status(d: Path) -> str | None:
    try:
        s = json.loads((d / LABEL_SETTINGS).read_text(encoding="utf-8"))
        return s.get("status") if isinstance(s, dict) else None
    except (OSError, ValueError):
        return None


def _claim_dir(root: Path, name: str, explicit: bool) -> Path:
    _check_name(name)
    root.mkdir(parents=True, exist_ok=True)
    for i in itertools.count(1):
        cand = root / (name if i == 1 else f"{name}-{i}")
        try:
            cand.mkdir()  # exclusive: two processes can never claim the same labelling
            return cand
        except FileExistsError:
            if explicit:
                st = _status(cand)
                if st != "ok":
                    raise RunDirError(f"labelling {str(cand)!r} already exists unfinished (status {st!r}); continue it "
                                      f"with --resume --labelling {cand.name}, or pick another --labelling") from None
                raise RunDirError(
                    f"labelling {str(cand)!r} already exists and labellings are never overwritten; pick another --labelling "
                    "or omit --labelling for an automatic one"
                ) from None
    raise AssertionError("unreachable")


def _find_resumable(root: Path, name: str | None, run_dir: Path) -> Path:
    if name:
        _check_name(name)
        d = root / name
        if not (d / LABEL_SETTINGS).is_file():
            raise RunDirError(f"--resume: labelling {str(d)!r} not found; start it with python -m behavioural.label "
                              f"{run_dir} --labelling {name}")
        return d
    cands = [p.parent for p in sorted(root.glob(f"*/{LABEL_SETTINGS}"))] if root.is_dir() else []
    unfinished = [d for d in cands if _status(d) != "ok"]
    if len(unfinished) == 1:
        return unfinished[0]
    if not unfinished:
        raise RunDirError(f"--resume: no unfinished labelling in {root}; start one with python -m behavioural.label "
                          f"{run_dir}")
    raise RunDirError(f"--resume: several unfinished labellings in {root} ({', '.join(d.name for d in unfinished)}); "
                      "pick one with --labelling")


def _jsonable(x: Any) -> Any:
    return json.loads(json.dumps(x, default=str))


def label_run(
    run_dir: str | Path,
    labellers: Sequence[RuleLabeller | JudgeLabeller] | None = None,
    *,
    final: str | None = None,
    name: str | None = None,
    progress: bool = True,
    command: Sequence[str] | None = None,
    resume: bool = False,
    allow_incomplete: bool = False,
    specs: Sequence[str] | None = None,
    chunk: int = 64,
) -> Path:
    """Label every continuation of ``run_dir`` into ``labels/<name>/`` (a new one, or the unfinished one with
    ``resume=True``); returns that directory. An interrupted labelling keeps every chunk it wrote."""
    rd = Path(run_dir)
    labellers = list(labellers) if labellers else [RuleLabeller()]
    names = [lab.name for lab in labellers]
    if len(set(names)) != len(names):
        raise LabelError(f"labeller given twice in {names}; pass each --labeller once")
    final_name = _resolve_final(final, names)
    if chunk < 1:
        raise LabelError(f"chunk must be >= 1, got {chunk}")
    run, conts, questions = read_run(rd, allow_incomplete=allow_incomplete)
    missing_q = sorted({c["question_id"] for c in conts} - set(questions))
    if missing_q and any(isinstance(lab, JudgeLabeller) for lab in labellers):
        raise RunDirError(f"{rd / BASELINES} lacks questions for {missing_q[:3]}; the judge needs the question text")
    by_name = dict(zip(names, labellers))
    lab_settings = _jsonable([lab.settings() for lab in labellers])
    src_hash = file_sha256(rd / CONTINUATIONS)
    root = rd / LABELS_DIR
    if resume:
        out = _find_resumable(root, name, rd)
        with output_lock(out):
            old = read_json(out / LABEL_SETTINGS)
            if old.get("status") == "ok" and is_complete(out):
                return out
            diffs = []
            if old.get("labellers") != lab_settings:
                diffs.append(f"labellers {[s.get('name') for s in old.get('labellers') or []]} vs {names} (or their settings)")
            if old.get("final_labeller") != final_name:
                diffs.append(f"final labeller {old.get('final_labeller')!r} vs {final_name!r}")
            if old.get("continuations_sha256") != src_hash:
                diffs.append("the run's continuations.jsonl changed since the labelling started")
            if diffs:
                raise RunDirError(f"cannot resume labelling {str(out)!r}: {'; '.join(diffs)}; resume with its own "
                                  "labellers (omit --labeller/--final) or start a new labelling")
            settings = dict(old, status="running", resumed=int(old.get("resumed", 0)) + 1)
            write_json(out / LABEL_SETTINGS, settings)
            return _label_into(out, settings, conts, questions, labellers, names, final_name, progress, chunk)
    auto = "+".join(lab.slug for lab in labellers)
    if final_name != names[0]:
        auto += f"_final-{by_name[final_name].slug}"
    out = _claim_dir(root, name or auto, explicit=name is not None)
    with output_lock(out):
        settings = {
            "schema_version": SCHEMA_VERSION,
            "name": out.name,
            "created": now(),
            "status": "running",
            "run_dir": str(rd.resolve()),
            "continuations_sha256": src_hash,
            "n_continuations": len(conts),
            "labeller_specs": list(specs) if specs is not None else None,
            "labellers": lab_settings,
            "final_labeller": final_name,
            "final_rule": FINAL_RULE,
            "command": list(command) if command is not None else None,
            "git": git_info(),
        }
        write_json(out / LABEL_SETTINGS, settings)
        return _label_into(out, settings, conts, questions, labellers, names, final_name, progress, chunk)


def _label_into(out: Path, settings: dict, conts: list[dict], questions: dict[str, str], labellers: list,
                names: list[str], final_name: str, progress: bool, chunk: int) -> Path:
    path = out / LABELS_FILE
    try:
        done = read_jsonl(path, repair=True)  # a record cut off by a kill is dropped, then redone
        ids = [c["id"] for c in conts]
        got = [r.get("id") if isinstance(r, dict) else None for r in done]
        if got != ids[: len(got)]:
            raise RunDirError(f"{path}: its records do not follow the run's continuations (edited by hand, or another "
                              "writer?); start a new labelling")
        todo = conts[len(got):]
        bar = None
        if progress and todo:
            from tqdm.auto import tqdm  # deferred: tqdm is heavy to import

            bar = tqdm(total=len(conts), initial=len(got), desc=f"labelling {out.name}")
        with JsonlWriter(path, fsync=False) as w:
            for i in range(0, len(todo), chunk):
                part = todo[i : i + chunk]
                results = {lab.name: lab.label(part, questions, progress=False) for lab in labellers}
                for j, c in enumerate(part):
                    w.write(make_record(c, {n: results[n][j] for n in names}, names, final_name))
                if bar is not None:
                    bar.update(len(part))
        if bar is not None:
            bar.close()
        records = read_jsonl(path)
        summary = summarize(records, labellers, final_name)
        summary["labelling"] = out.name
        write_json(out / SUMMARY_FILE, summary)
    except BaseException as e:
        settings.update(status="interrupted" if isinstance(e, KeyboardInterrupt) else "failed", error=repr(e)[:500],
                        finished=now())
        write_json(out / LABEL_SETTINGS, settings)
        raise
    settings.update(status="ok", finished=now())
    settings.pop("error", None)
    write_json(out / LABEL_SETTINGS, settings)
    return out


def build_labellers(config: LabelConfig, specs: Sequence[str] | None = None) -> list:
    specs = list(specs if specs is not None else config.labellers)
    if len(set(specs)) != len(specs):
        raise LabelError(f"labeller given twice in {specs}; pass each --labeller once")
    for s in specs:
        if s != "rule" and not (s.startswith("judge:") and len(s) > len("judge:")):
            raise LabelError(f"unknown labeller {s!r}; use 'rule' or 'judge:<model>' (e.g. judge:smollm2-135m-instruct)")
        if s.startswith("judge:"):
            check_model_file(s[len("judge:"):], option="--labeller judge:")
    return [make_labeller(s, device=config.device, dtype=config.dtype, quantize=config.quantize,
                          max_new_tokens=config.judge_max_new_tokens, batch_size=config.judge_batch_size,
                          judge_all=config.judge_all) for s in specs]


def label_stage(config: LabelConfig) -> Path:
    """The labelling stage as a library call: validate the run, build the labellers, label (or resume)."""
    check_number(config.judge_batch_size, "--judge-batch-size", minimum=1)
    check_number(config.judge_max_new_tokens, "--judge-max-new-tokens", minimum=1)
    if config.name is not None:
        _check_name(config.name)
    read_run(config.run_dir, allow_incomplete=config.allow_incomplete)  # refuse before loading any judge model
    specs = list(config.labellers)
    if any(s.startswith("judge:") for s in specs):
        check_device(config.device)
    if config.resume:
        out = _find_resumable(Path(config.run_dir) / LABELS_DIR, config.name, Path(config.run_dir))
        stored = read_json(out / LABEL_SETTINGS)
        if not config.command or "--labeller" not in config.command:  # resume alone: the stored labellers
            specs = stored.get("labeller_specs") or specs
        final = config.final if config.final is not None else stored.get("final_labeller")
        labellers = build_labellers(config, specs)
        return label_run(config.run_dir, labellers, final=final, name=out.name, progress=config.progress,
                         command=config.command, resume=True, allow_incomplete=config.allow_incomplete, specs=specs)
    labellers = build_labellers(config, specs)
    return label_run(config.run_dir, labellers, final=config.final, name=config.name, progress=config.progress,
                     command=config.command, allow_incomplete=config.allow_incomplete, specs=specs)
