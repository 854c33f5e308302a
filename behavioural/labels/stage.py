"""Label a run's continuations A/B/C (resumable), and measure agreement with blind human annotators.

    python -m behavioural.labels.stage RUN_DIR [--labeller rule] [--labeller judge:<model>] [--final rule|judge|...] [--name NAME]
    python -m behavioural.labels.stage RUN_DIR --resume [--name NAME]       # continue an interrupted labelling
    python -m behavioural.labels.stage RUN_DIR --export-sheet N --seed S     # blind annotation (behavioural.labels.sheets)
    python -m behavioural.labels.stage RUN_DIR --import-sheet FILE [FILE ...] [--key KEY] [--name LABELLING]

Labelling never touches the generation records: it reads the run through :class:`loadbearing.runs.Run`
(refusing a run whose manifest is not finished, unless ``--allow-incomplete``, or whose
``continuations.jsonl`` ends in a half-written line: finish or repair it with
``python -m behavioural.run --resume RUN_DIR``) and writes a new directory ``RUN_DIR/labels/<name>/`` with

* ``labels.jsonl`` - one :class:`LabelRecord` per continuation, keyed by the continuation ``id``, in the
  run's order, appended and flushed per chunk of records (so an interrupted labelling keeps what it wrote):
  the final label, why, and every labeller's verdict with its evidence (rule: spans; judge: each variant's
  reply and parsed verdict);
* ``summary.json`` (written atomically at the end) - A/B/C counts and rates with intervals, perturbed and
  control reported separately, broken down by position, strategy, task and difficulty; every labeller's own
  A/B/C; the judge's agreement across prompt variants; agreement between labellers;
* ``settings.json`` - labellers (specs and full settings: prompts, model provenance), the final-label rule,
  the source file's hash, status (``running`` until ``ok``).

``--resume`` continues the newest unfinished labelling (or ``--name``) with its stored labellers, and gives
records identical to an uninterrupted labelling. One writer per labelling (``labels/<name>/.lock``).

The automatic name joins the labellers' names (``rule``, ``rule+judge-smollm2-135m-instruct``; ``_final-<x>``
when the final labeller is not the first) and is suffixed ``-2``, ``-3``... when taken: a finished labelling
is never overwritten. An explicit ``--name`` that exists is an error (``--resume`` continues it).

**Final label rule** (:data:`FINAL_RULE`, recorded in settings and summary): C from correctness alone - a
parseable wrong answer is ``C``; an unparseable answer is null. For a correct answer the chosen (``--final``)
labeller decides: noticed -> ``B`` (noticed and repaired), not noticed -> ``A`` (bypass), undecided (e.g. no
strict majority of judge variants) -> null. Controls are labelled by the same rule and reported separately
(a control's A/B tells how often the labeller "sees" a repair where no error was injected).

Blind annotation sheets and Cohen's kappa live in :mod:`behavioural.labels.sheets`.
"""
from __future__ import annotations

import argparse
import itertools
import json
import re
import sys
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from behavioural.labels.labellers import JudgeLabeller, RuleLabeller, kappa, make_labeller, variant_agreement
from behavioural.labels.sheets import (  # noqa: F401  (re-exported: the sheet API used to live here)
    SHEET_COLUMNS,
    SheetError,
    _unique_path,
    compare_sheets,
    export_sheet,
    format_agreement,
    read_sheet,
)
from loadbearing.errors import LoadBearingError
from loadbearing.files import JsonlWriter, RunDirError, check_jsonl_tail, file_sha256, read_json, read_jsonl, write_json
from loadbearing.locks import output_lock
from loadbearing.provenance import git_info, now
from loadbearing.records import _Record
from loadbearing.runs import CONTINUATIONS, LABEL_SETTINGS, LABELS_DIR, LABELS_FILE, Run
from loadbearing.stats import format_rate, rate

SCHEMA_VERSION = 1
LABELS = ("A", "B", "C")
GROUP_KEYS = ("position", "strategy", "task", "difficulty")
SUMMARY_FILE = "summary.json"
FINAL_RULE = (
    "C if the answer is parseable and wrong; null if the answer is unparseable; for a correct answer the final "
    "labeller decides: noticed -> B (noticed and repaired), not noticed -> A (bypass), undecided -> null. "
    "Controls follow the same rule and are reported separately."
)


class LabelError(LoadBearingError, ValueError):
    """A labelling request that cannot be carried out; the message names the problem and the fix."""


@dataclass(frozen=True)
class LabelRecord(_Record):
    """One line of ``labels/<name>/labels.jsonl``."""

    id: str  # the continuation id
    question_id: str
    condition: str  # perturbed | control
    dataset: str
    task: str | None
    difficulty: str | None
    strategy: str
    position: str
    correct: bool | None
    outcome: str | None  # "C" | "non-C" | None (unparseable), from correctness alone
    label: str | None  # final "A" | "B" | "C" | None
    reason: str
    final_labeller: str
    labellers: dict  # labeller name -> {"label", "noticed", ...evidence / variants}
    schema_version: int = SCHEMA_VERSION


@dataclass(frozen=True)
class LabelConfig:
    """The labelling stage's configuration (what ``python -m behavioural.labels.stage RUN_DIR ...`` parses into)."""

    run_dir: str | Path
    labellers: tuple[str, ...] = ("rule",)  # specs: "rule", "judge:<model>"
    final: str | None = None
    name: str | None = None
    resume: bool = False
    allow_incomplete: bool = False
    device: str | None = None
    dtype: str | None = None
    quantize: str | None = None
    judge_batch_size: int = 8
    judge_max_new_tokens: int = 16
    judge_all: bool = False
    progress: bool = True
    command: tuple[str, ...] | None = None


def final_label(correct: bool | None, noticed: bool | None) -> tuple[str | None, str]:
    """Apply :data:`FINAL_RULE`: (label, reason)."""
    if correct is None:
        return None, "unparseable answer"
    if correct is False:
        return "C", "wrong answer"
    if noticed is None:
        return None, "correct answer, notice undecided"
    return ("B", "correct answer, error noticed") if noticed else ("A", "correct answer, error not noticed")


# ----------------------------------------------------------------------------------------------------
# reading a run


def check_tail(path: Path, run_dir: Path) -> None:
    """Refuse a JSONL file whose last line is half-written (see :func:`loadbearing.files.check_jsonl_tail`)."""
    check_jsonl_tail(path, run_dir)


def read_run(run_dir: str | Path, *, allow_incomplete: bool = False) -> tuple[Run, list[dict], dict[str, str]]:
    """(run, continuation dicts, question id -> question text); refuses unfinished or damaged runs."""
    run = Run(run_dir)
    run.require_complete(allow_incomplete=allow_incomplete, flag="--allow-incomplete")
    check_tail(run.path / CONTINUATIONS, run.path)
    conts = run.continuation_dicts(required=True)
    return run, conts, run.question_texts()


def load_run(run_dir: str | Path) -> tuple[list[dict], dict[str, str]]:
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


# ----------------------------------------------------------------------------------------------------
# labelling


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
                                      f"with --resume --name {cand.name}, or pick another --name") from None
                raise RunDirError(
                    f"labelling {str(cand)!r} already exists and labellings are never overwritten; pick another --name "
                    "or omit --name for an automatic one"
                ) from None
    raise AssertionError("unreachable")


def _find_resumable(root: Path, name: str | None, run_dir: Path) -> Path:
    if name:
        _check_name(name)
        d = root / name
        if not (d / LABEL_SETTINGS).is_file():
            raise RunDirError(f"--resume: labelling {str(d)!r} not found; start it with python -m behavioural.labels.stage "
                              f"{run_dir} --name {name}")
        return d
    cands = [p.parent for p in sorted(root.glob(f"*/{LABEL_SETTINGS}"))] if root.is_dir() else []
    unfinished = [d for d in cands if _status(d) != "ok"]
    if len(unfinished) == 1:
        return unfinished[0]
    if not unfinished:
        raise RunDirError(f"--resume: no unfinished labelling in {root}; start one with python -m behavioural.labels.stage "
                          f"{run_dir}")
    raise RunDirError(f"--resume: several unfinished labellings in {root} ({', '.join(d.name for d in unfinished)}); "
                      "pick one with --name")


def _jsonable(x: Any) -> Any:
    return json.loads(json.dumps(x, default=str))


def _make_record(c: dict, per_lab: dict[str, dict], names: list[str], final_name: str) -> LabelRecord:
    per = {}
    for n in names:
        r = dict(per_lab[n])
        r["label"], _ = final_label(c.get("correct"), r.get("noticed"))
        per[n] = r
    lab, reason = final_label(c.get("correct"), per[final_name].get("noticed"))
    if c.get("correct") is True and per[final_name].get("noticed") is not None:
        reason += f" ({final_name})"
    correct = c.get("correct")
    return LabelRecord(
        id=c["id"], question_id=c["question_id"], condition=c["condition"], dataset=c.get("dataset", ""),
        task=c.get("task"), difficulty=c.get("difficulty"), strategy=c.get("strategy", ""),
        position=c.get("position", ""), correct=correct,
        outcome=None if correct is None else ("non-C" if correct else "C"),
        label=lab, reason=reason, final_labeller=final_name, labellers=per,
    )


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
        raise RunDirError(f"{rd / 'baselines.jsonl'} lacks questions for {missing_q[:3]}; the judge needs the question text")
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
            from tqdm.auto import tqdm

            bar = tqdm(total=len(conts), initial=len(got), desc=f"labelling {out.name}")
        with JsonlWriter(path, fsync=False) as w:
            for i in range(0, len(todo), chunk):
                part = todo[i : i + chunk]
                results = {lab.name: lab.label(part, questions, progress=False) for lab in labellers}
                for j, c in enumerate(part):
                    w.write(_make_record(c, {n: results[n][j] for n in names}, names, final_name))
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
            from loadbearing.cli import check_model_file

            check_model_file(s[len("judge:"):], option="--labeller judge:")
    return [make_labeller(s, device=config.device, dtype=config.dtype, quantize=config.quantize,
                          max_new_tokens=config.judge_max_new_tokens, batch_size=config.judge_batch_size,
                          judge_all=config.judge_all) for s in specs]


def label_stage(config: LabelConfig) -> Path:
    """The labelling stage as a library call: validate the run, build the labellers, label (or resume)."""
    from loadbearing.cli import check_device, check_number

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


# ----------------------------------------------------------------------------------------------------
# summary


def _block(labels: list[str | None], corrects: list[bool | None], groups: list[str] | None = None) -> dict:
    """Counts and rates of one group of label records. With ``groups`` (each record's question) the
    propagation and B-among-correct intervals are clustered by question (a question contributes several
    records); without it they are row-level Wilson intervals."""
    from loadbearing.stats import clustered_rate

    n = len(labels)
    cnt = {k: labels.count(k) for k in LABELS}
    cnt["null"] = labels.count(None)
    n_lab = cnt["A"] + cnt["B"] + cnt["C"]
    n_parse = sum(c is not None for c in corrects)
    if groups is not None:
        parse = [(lab == "C", g) for lab, c, g in zip(labels, corrects, groups) if c is not None]
        ab = [(lab == "B", g) for lab, g in zip(labels, groups) if lab in ("A", "B")]
        propagation = clustered_rate([x for x, _ in parse], [g for _, g in parse]).to_dict()
        b_correct = clustered_rate([x for x, _ in ab], [g for _, g in ab]).to_dict()
    else:
        propagation, b_correct = rate(cnt["C"], n_parse), rate(cnt["B"], cnt["A"] + cnt["B"])
    return {
        "n": n,
        "counts": cnt,
        "n_labelled": n_lab,
        "rates": {k: rate(cnt[k], n_lab) for k in LABELS},  # over labelled (non-null) continuations
        "null": rate(cnt["null"], n),
        "propagation": propagation,  # C over parseable answers (the protocol's rate), clustered by question
        "B_among_correct_labelled": b_correct,
    }


def _section(rows: list[dict], key=lambda r: r["label"], breakdown: bool = True) -> dict:
    out = _block([key(r) for r in rows], [r["correct"] for r in rows], [str(r.get("question_id")) for r in rows])
    if breakdown:
        out["by"] = {}
        for g in GROUP_KEYS:
            vals = sorted({str(r.get(g)) for r in rows})
            out["by"][g] = {v: _block([key(r) for r in rows if str(r.get(g)) == v],
                                      [r["correct"] for r in rows if str(r.get(g)) == v],
                                      [str(r.get("question_id")) for r in rows if str(r.get(g)) == v]) for v in vals}
    return out


def summarize(records: list[dict], labellers: Sequence, final_name: str) -> dict:
    """The ``summary.json`` of a labelling (see the module docstring)."""
    names = [lab.name for lab in labellers]
    conds = {c: [r for r in records if r["condition"] == c] for c in ("perturbed", "control")}
    out: dict = {"schema_version": SCHEMA_VERSION, "final_labeller": final_name, "final_rule": FINAL_RULE,
                 "rates_note": "A/B/C rates are over labelled continuations; propagation is C over parseable answers; "
                               "null counts unparseable answers and undecided notice verdicts"}
    for c, rows in conds.items():
        out[c] = _section(rows)
    out["labellers"] = {
        n: {c: _section(rows, key=lambda r, n=n: r["labellers"][n]["label"], breakdown=False) for c, rows in conds.items()}
        for n in names
    }
    # labellers vs each other on the A/B call (correct perturbed continuations)
    correct_p = [r for r in conds["perturbed"] if r["correct"] is True]
    out["labeller_agreement"] = [
        {"a": a, "b": b, "on": "noticed (A vs B), correct perturbed continuations",
         **kappa([r["labellers"][a]["noticed"] for r in correct_p], [r["labellers"][b]["noticed"] for r in correct_p])}
        for a, b in itertools.combinations(names, 2)
    ]
    out["judge_variant_agreement"] = {}
    for lab in labellers:
        if isinstance(lab, JudgeLabeller):
            vn = [v.name for v in lab.variants]
            out["judge_variant_agreement"][lab.name] = {
                c: variant_agreement([r["labellers"][lab.name] for r in rows], vn) for c, rows in conds.items()
            }
    return out


def _r(r: dict | None, style: str) -> str:
    return format_rate(r, style=style) if r else "n/a"


def format_summary(summary: dict, style: str = "text") -> str:
    """A labelling's summary as text (``style="text"``) or markdown (``style="md"``)."""
    if style not in ("text", "md"):
        raise ValueError(f"unknown style {style!r}; use 'text' or 'md'")
    if style == "md":
        lines = [f"Labelling `{summary.get('labelling')}` (final labeller: `{summary['final_labeller']}`).", "",
                 "| condition | n | A | B | C | null | propagation (C / parseable) | B among correct |",
                 "|---|---|---|---|---|---|---|---|"]
        for c in ("perturbed", "control"):
            s = summary[c]
            k = s["counts"]
            lines.append(f"| {c} | {s['n']} | {k['A']} | {k['B']} | {k['C']} | {k['null']} | "
                         f"{_r(s['propagation'], 'md')} | {_r(s['B_among_correct_labelled'], 'md')} |")
        by = summary["perturbed"].get("by", {})
        if by:
            lines += ["", "| perturbed, by | n | A | B | C | null |", "|---|---|---|---|---|---|"]
            for g in GROUP_KEYS:
                for v, b in by.get(g, {}).items():
                    k = b["counts"]
                    lines.append(f"| {g}={v} | {b['n']} | {k['A']} | {k['B']} | {k['C']} | {k['null']} |")
        for p in summary.get("labeller_agreement", []):
            kv = p["kappa"]
            lines += ["", f"{p['a']} vs {p['b']} on A/B: n={p['n']}, kappa {'n/a' if kv is None else f'{kv:.2f}'}."]
        return "\n".join(lines)
    lines = [f"labelling {summary.get('labelling')} (final labeller: {summary['final_labeller']})"]
    for c in ("perturbed", "control"):
        s = summary[c]
        cnt = s["counts"]
        lines.append(f"{c}: n={s['n']}  A={cnt['A']} B={cnt['B']} C={cnt['C']} null={cnt['null']}  "
                     f"propagation {_r(s['propagation'], 'text')}  B|correct {_r(s['B_among_correct_labelled'], 'text')}")
        if c == "perturbed":
            for g in GROUP_KEYS:
                for v, b in s["by"][g].items():
                    k = b["counts"]
                    lines.append(f"  {g}={v}: n={b['n']} A={k['A']} B={k['B']} C={k['C']} null={k['null']}")
    for n, agr in summary.get("judge_variant_agreement", {}).items():
        a = agr["perturbed"]
        k = a["mean_pairwise_kappa"]
        lines.append(f"{n} variants (perturbed): unanimous {_r(a['unanimous'], 'text')}, mean pairwise kappa "
                     f"{'n/a' if k is None else f'{k:.2f}'} over {a['n_pairs_with_kappa']} pairs")
    for p in summary.get("labeller_agreement", []):
        k = p["kappa"]
        lines.append(f"{p['a']} vs {p['b']} on A/B: n={p['n']} kappa {'n/a' if k is None else f'{k:.2f}'}")
    return "\n".join(lines)


# ----------------------------------------------------------------------------------------------------
# CLI


def build_parser() -> argparse.ArgumentParser:
    from loadbearing.cli import OneLineParser

    ap = OneLineParser(
        prog="python -m behavioural.labels.stage",
        description="Label a run's continuations A/B/C (new labels/<name>/ per run, never overwritten; --resume continues "
                    "an interrupted one), or export/import blind human annotation sheets and report Cohen's kappa.",
        formatter_class=argparse.ArgumentDefaultsHelpFormatter,
    )
    ap.add_argument("run_dir", help="run directory written by python -m behavioural.run")
    ap.add_argument("--labeller", action="append", default=None, metavar="SPEC",
                    help="'rule' (transparent notice detector) or 'judge:<model>' (any model load_model can load); "
                         "repeat to combine (default: rule; with --resume: the labelling's own)")
    ap.add_argument("--final", default=None,
                    help="labeller whose notice verdict splits correct answers into A/B: a --labeller spec, or 'judge' "
                         "when there is one judge (default: the first --labeller)")
    ap.add_argument("--name", default=None,
                    help="labelling directory name under RUN_DIR/labels (default: from the labellers; an existing name "
                         "is an error); with --resume: the labelling to continue; with --import-sheet: the labelling to "
                         "compare against (default: newest)")
    ap.add_argument("--resume", action="store_true",
                    help="continue the unfinished labelling (--name, or the only unfinished one) with its stored labellers")
    ap.add_argument("--allow-incomplete", action="store_true",
                    help="label a run whose manifest does not say it finished (its rates cover a partial run)")
    ap.add_argument("--device", default=None, help="judge device: cpu, cuda, cuda:N or auto")
    ap.add_argument("--dtype", default=None, help="judge dtype: float32, float16, bfloat16 or auto")
    ap.add_argument("--quantize", default=None, choices=("4bit", "8bit"), help="load the judge quantized (bitsandbytes)")
    ap.add_argument("--judge-batch-size", type=int, default=8, help="judge generation batch size")
    ap.add_argument("--judge-max-new-tokens", type=int, default=16,
                    help="tokens a judge may write per prompt (a longer reply whose last line is not a verdict is null)")
    ap.add_argument("--judge-all", action="store_true",
                    help="judge every continuation, not only those with a correct answer")
    ap.add_argument("--export-sheet", type=int, default=None, metavar="N",
                    help="write a blind annotation sheet of N seeded perturbed continuations + a private key")
    ap.add_argument("--seed", type=int, default=0, help="sampling seed for --export-sheet")
    ap.add_argument("--import-sheet", nargs="+", default=None, metavar="FILE",
                    help="filled annotation sheet(s), one per annotator: report Cohen's kappa")
    ap.add_argument("--key", default=None, help="the export's .key.json (default: the only one in RUN_DIR/annotation)")
    ap.add_argument("--no-progress", action="store_true", help="hide progress bars")
    return ap


def _sheets(args: argparse.Namespace, rd: Path) -> int:
    if args.labeller or args.final or args.resume:
        raise LabelError("labelling (--labeller/--final/--resume) and sheet export/import are separate runs; run them one "
                         "at a time")
    if args.export_sheet is not None:
        sheet, key = export_sheet(rd, args.export_sheet, args.seed)
        print(f"wrote blind sheet {sheet} and private key {key} (keep the key away from annotators)")
    if args.import_sheet is not None:
        rep = compare_sheets(rd, args.import_sheet, key=args.key, labelling=args.name)
        out = _unique_path(rd / "annotation" / "agreement.json")
        out.parent.mkdir(parents=True, exist_ok=True)
        write_json(out, rep)
        print(format_agreement(rep))
        print(f"wrote {out}")
    return 0


def main(argv: Sequence[str] | None = None) -> int:
    from loadbearing.cli import run_cli

    argv = list(sys.argv[1:] if argv is None else argv)
    args = build_parser().parse_args(argv)
    rd = Path(args.run_dir)

    def body() -> int:
        if not rd.is_dir():
            raise RunDirError(f"run directory {str(rd)!r} does not exist; pass a directory written by python -m behavioural.run")
        if args.export_sheet is not None or args.import_sheet is not None:
            return _sheets(args, rd)
        config = LabelConfig(
            run_dir=rd, labellers=tuple(args.labeller or ["rule"]), final=args.final, name=args.name, resume=args.resume,
            allow_incomplete=args.allow_incomplete, device=args.device, dtype=args.dtype, quantize=args.quantize,
            judge_batch_size=args.judge_batch_size, judge_max_new_tokens=args.judge_max_new_tokens,
            judge_all=args.judge_all, progress=not args.no_progress, command=tuple(argv))
        out = label_stage(config)
        print(format_summary(read_json(out / SUMMARY_FILE)))
        print(f"wrote {out}")
        return 0

    return run_cli(body, errors=(LabelError, SheetError, ValueError),
                   interrupted_hint=f"continue with: python -m behavioural.labels.stage {rd} --resume")


if __name__ == "__main__":
    sys.exit(main())
