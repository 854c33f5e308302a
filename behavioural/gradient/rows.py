"""Reading runs for the gradient: one flat row per scored perturbed cell, baselines per cell, and the
comparability check across runs.

    from behavioural.gradient.rows import load_runs
    data = load_runs(["runs/arith-s2_o3", "runs/arith-s3_o5"])   # refuses incomparable runs (GradientError)

Units (``docs``: DESIGN.md "Units of analysis"):

* the *cluster* is the question: ``question_key`` (hash of the normalised text) when the record carries it,
  else the key computed from the baseline's question text, else ``question_id``;
* a *generation* is one distinct model input (``input_text``). A continuation shared by several
  (strategy, position) cells carries ``memberships``; cell-level rows expand it (one row per strategy,
  flagged ``shared``, weight = its share of the memberships), pooled rates count the generation once;
* positions that share one generation are one position: a generation that is both the middle and the late
  edit of a strategy (3 or 4 reasoning lines) is one row at position ``middle=late``
  (:func:`loadbearing.stats.design.merged_position`; ``positions`` keeps the parts), so no table or fit counts one
  outcome as two positions. :func:`position_merges` says where that happened.
"""
from __future__ import annotations

from collections import defaultdict
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from behavioural.strategies import FAMILIES
from loadbearing.errors import LoadBearingError
from loadbearing.files import RunDirError
from loadbearing.questions.data import ARITH_LEVELS, question_key
from loadbearing.runs import Run, question_key_of
from loadbearing.stats.design import SEP, merged_position, position_sort_key

#: run statuses that mean "finished" (the protocol writes ok / insufficient_data; the lead's Run uses complete)
FINISHED = ("ok", "complete", "insufficient_data")
#: manifest facts that must agree across runs for their rates to be comparable (None = not recorded)
COMPARABLE = ("kind", "protocol_version", "parser", "stop_rule", "min_lines", "max_new_tokens", "label_source")
#: the paper's ordinal difficulty of its three datasets (used when baseline accuracy is unknown)
DATASET_ORDER = {"gsm8k": 0, "arith": 0, "mmlu": 1, "bbh": 2}


class GradientError(LoadBearingError, ValueError):
    """A user mistake (bad run set, incomparable runs, bad option); the message names the fix."""


def level_order(names: Sequence[str]) -> dict[str, int]:
    """Ordinal index of arith levels (the ladder's order, easiest first); unknown names after, by name."""
    known = [n for n in ARITH_LEVELS if n in names]
    rest = sorted(n for n in set(names) if n not in ARITH_LEVELS)
    return {n: i for i, n in enumerate(known + rest)}


def cell_name(dataset: str | None, task: str | None, difficulty: str | None) -> str:
    """The task-or-level a record belongs to: the arith level, else the MMLU subject / BBH task, else the dataset."""
    if difficulty:
        return str(difficulty)
    if task:
        return str(task)
    return str(dataset or "unknown")


def _family(strategy: str) -> str:
    return FAMILIES.get(strategy, "other")


def edit_type(family: str) -> str:
    """The paper's two-way coding of an edit: ``numerical`` (a changed number) or ``text`` (everything else:
    textual and logical edits), beside the three families."""
    return "numerical" if family == "numerical" else "text"


@dataclass
class RunInfo:
    path: str
    model: str
    kind: str
    signature: dict[str, Any]
    labelling: str | None
    external_accuracy: dict[str, Any]  # cell -> {"rate": float, "source": str} for imports without baselines
    baselines_eligible_only: bool


@dataclass
class Loaded:
    runs: list[RunInfo]
    rows: list[dict]  # one per (perturbed continuation, membership); label in {"C","non-C",None}
    controls: list[dict]
    baselines: list[dict]  # one per baseline record: model, dataset, cell, qkey, correct, parsed
    mixed: list[str] = field(default_factory=list)  # the differences --allow-mixed let through
    notes: list[str] = field(default_factory=list)


def _signature(run: Run) -> dict[str, Any]:
    m = run.manifest
    s = m.get("settings") or {}
    return {
        "kind": m.get("kind"),
        "protocol_version": m.get("protocol_version"),
        "parser": m.get("parser") or m.get("parser_version") or s.get("parser"),
        "stop_rule": m.get("stop_rule") or s.get("stop_rule"),
        "min_lines": s.get("min_lines"),
        "max_new_tokens": s.get("max_new_tokens"),
        "label_source": m.get("label_source", "protocol"),
    }


def check_comparable(runs: list[RunInfo], *, allow_mixed: bool) -> list[str]:
    """The list of differences; raises GradientError on any unless ``allow_mixed``."""
    diffs = []
    for key in COMPARABLE:
        vals = {r.path: r.signature.get(key) for r in runs}
        distinct = {repr(v) for v in vals.values()}
        if len(distinct) > 1:
            shown = ", ".join(f"{Path(p).name}={v!r}" for p, v in vals.items())
            diffs.append(f"{key} differs ({shown})")
    if diffs and not allow_mixed:
        raise GradientError(f"runs are not comparable: {diffs[0]}" + (f" (+{len(diffs) - 1} more)" if len(diffs) > 1 else "")
                            + "; rerun them under one protocol/settings, or pass --allow-mixed to combine them anyway "
                              "(recorded in gradient.json)")
    return diffs


def _get(rec: Any, name: str, default: Any = None) -> Any:
    return getattr(rec, name, default)


def load_runs(paths: Sequence[str | Path], *, allow_mixed: bool = False, allow_incomplete: bool = False,
              labelling: str | None = None) -> Loaded:
    """Read every run through :class:`loadbearing.runs.Run` and flatten it; validates before anything heavy."""
    if not paths:
        raise GradientError("no run directories given; pass one or more RUN_DIRs written by python -m behavioural.run")
    seen: set[str] = set()
    runs: list[tuple[Run, RunInfo]] = []
    abc_of: dict[str, dict[str, str | None]] = {}
    for p in paths:
        rp = str(Path(p).resolve())
        if rp in seen:
            raise GradientError(f"run directory {str(p)!r} given twice; pass each run once")
        seen.add(rp)
        try:
            run = Run(p)
            status = run.status
            if status not in FINISHED and not allow_incomplete:
                raise GradientError(f"run {str(p)!r} has status {status!r}, not finished; finish it with python -m "
                                    f"behavioural.run --resume {p}, or pass --allow-incomplete")
            m = run.manifest
            model = str(run.model_spec.get("name") or "unknown-model")
            lab_name, abc = run.labels(labelling)
            abc_of[str(p)] = abc
            info = RunInfo(path=str(p), model=model, kind=str(m.get("kind")), signature=_signature(run),
                           labelling=lab_name, external_accuracy=dict(m.get("external_baseline_accuracy") or {}),
                           baselines_eligible_only=bool(m.get("baselines_eligible_only")))
        except RunDirError as e:
            raise GradientError(str(e)) from None
        runs.append((run, info))
    mixed = check_comparable([i for _, i in runs], allow_mixed=allow_mixed)

    rows: list[dict] = []
    controls: list[dict] = []
    baselines: list[dict] = []
    notes: list[str] = []
    for run, info in runs:
        try:
            bls = run.baselines()
            conts = run.continuations("all")
        except RunDirError as e:
            raise GradientError(str(e)) from None
        qkey_of: dict[str, str] = {}
        for b in bls:
            key = _get(b, "question_key") or question_key(b.question)
            qkey_of[b.question_id] = key
            baselines.append({
                "model": info.model, "run": info.path, "dataset": b.dataset,
                "cell": cell_name(b.dataset, b.task, b.difficulty), "qkey": key, "correct": b.correct,
                "parsed": b.parsed_answer is not None, "eligible": b.eligible,
            })
        for c in conts:
            # a schema-1 record has no key of its own: its baseline's (from the text), else its id
            key = _get(c, "question_key") or qkey_of.get(c.question_id) or question_key_of(c)
            members = _get(c, "memberships") or [[c.strategy, c.position]]
            base = {
                "id": c.id, "model": info.model, "run": info.path, "dataset": c.dataset, "task": c.task,
                "difficulty_label": c.difficulty, "cell": cell_name(c.dataset, c.task, c.difficulty), "qkey": key,
                "question_id": c.question_id, "gen": c.input_text, "label": c.label,
                "abc": abc_of[info.path].get(c.id), "line_index": c.line_index, "n_lines": c.n_lines,
                "original_line": c.original_line, "edited_line": c.edited_line, "continuation": c.continuation,
                "condition": c.condition,
            }
            target = rows if c.condition == "perturbed" else controls
            by_strategy: dict[str, list[str]] = {}
            for strategy, position in members:  # one row per strategy; its positions merged (middle=late)
                by_strategy.setdefault(strategy, []).append(position or "unknown")
            for j, (strategy, poss) in enumerate(by_strategy.items()):
                fam = _family(strategy)
                target.append(dict(base, strategy=strategy, position=merged_position(poss), positions=tuple(poss),
                                   family=fam, edit_type=edit_type(fam), shared=len(members) > 1, first=(j == 0),
                                   weight=len(poss) / len(members)))
        if not conts:
            notes.append(f"{info.path}: no continuations (no eligible baselines)")
        if info.baselines_eligible_only and not info.external_accuracy:
            notes.append(f"{info.path}: imported rows hold only eligible baselines, so baseline accuracy is unknown "
                         "(pass --baseline-accuracy to the importer to record the published figure)")
    return Loaded(runs=[i for _, i in runs], rows=rows, controls=controls, baselines=baselines, mixed=mixed,
                  notes=notes)


def position_merges(rows: Sequence[dict]) -> dict[str, Any]:
    """Where positions were merged because they share one generation: ``{"merged": {"middle=late": n
    questions}, "of": n questions, "every_question": {label: bool}, "levels": [position levels in the fits],
    "note": one sentence or ""}`` (questions are (model, question) pairs of the perturbed rows)."""
    of = {(r["model"], r["qkey"]) for r in rows}
    hit: dict[str, set] = defaultdict(set)
    for r in rows:
        if SEP in r["position"]:
            hit[r["position"]].add((r["model"], r["qkey"]))
    levels = sorted({r["position"] for r in rows}, key=position_sort_key)
    merged = {k: len(v) for k, v in sorted(hit.items(), key=lambda kv: position_sort_key(kv[0]))}
    every = {k: n == len(of) for k, n in merged.items()}
    note = ""
    if merged:
        what = "; ".join(f"{k} in {n} of {len(of)} questions" for k, n in merged.items())
        note = (f"positions merged: {what}: the edited line is min(n - 2, floor(n x fraction)), so with few "
                "reasoning lines these positions edit the same line and share one generation; each such "
                "generation is one row at the merged position in every table and fit (position levels: "
                f"{', '.join(levels)}; trend index early=0, middle=1, late=2, a merged level the mean of its parts)")
    return {"merged": merged, "of": len(of), "every_question": every, "levels": levels, "note": note}


def by_key(rows: Sequence[dict], *keys: str) -> dict[tuple, list[dict]]:
    out: dict[tuple, list[dict]] = defaultdict(list)
    for r in rows:
        out[tuple(r[k] for k in keys)].append(r)
    return out
