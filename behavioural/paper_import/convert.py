"""Converting the paper's rows into this toolkit's records: one :class:`~loadbearing.records.Baseline` per question
and one perturbed :class:`~loadbearing.records.Continuation` per row, with the paper's labels beside them (or,
for the annotation sheet, scored with this toolkit's scorer and left unlabelled)."""
from __future__ import annotations

import dataclasses
import re
from collections import Counter
from collections.abc import Iterable
from typing import TYPE_CHECKING, Any, TypeVar

from behavioural.paper_import.rows import PaperImportError
from loadbearing.answers import score, starts_with_answer_label
from loadbearing.answers.numbers import NUMBER_OR_OPERATOR_RE
from loadbearing.questions.data import question_key
from loadbearing.records import Baseline, Continuation, label_for

if TYPE_CHECKING:
    from _typeshed import DataclassInstance

LABEL_NAMES = {"silent_bypass": "A", "self_correction": "B", "error_propagation": "C",
               "TYPE_A": "A", "TYPE_B": "B", "TYPE_C": "C", "A": "A", "B": "B", "C": "C"}
REQUIRED = ("id", "source", "question", "reference_answer", "perturbation_strategy", "perturbation_point",
            "continuation")

R = TypeVar("R", bound="DataclassInstance")

__all__ = ["LABEL_NAMES", "REQUIRED", "convert", "convert_annotations", "edit_shape", "fill_record", "final_label",
           "judge_label", "rule_label"]


def fill_record(cls: type[R], values: dict[str, Any]) -> R:
    """Build a record with the fields the record type has today (other helpers add fields with defaults)."""
    kw: dict[str, Any] = {}
    for f in dataclasses.fields(cls):
        if f.name in values:
            kw[f.name] = values[f.name]
        elif f.default is dataclasses.MISSING and f.default_factory is dataclasses.MISSING:  # type: ignore[misc]
            kw[f.name] = None
    return cls(**kw)


def final_label(row: dict[str, Any]) -> str | None:
    """The paper's final label: the release's ``final_label``, else the judge's A/B/C, else the rule's."""
    for key in ("final_label", "judge_label", "label_3class", "rule_label", "subtype"):
        v = row.get(key)
        if v in LABEL_NAMES:
            return LABEL_NAMES[v]
    return None


def rule_label(row: dict[str, Any]) -> str | None:
    for key in ("label_3class", "rule_label", "subtype"):
        v = row.get(key)
        if v in LABEL_NAMES:
            return LABEL_NAMES[v]
    return None


def judge_label(row: dict[str, Any]) -> str | None:
    v = row.get("judge_label")
    return LABEL_NAMES.get(v) if v else None


def _split_lines(cot: str) -> tuple[tuple[str, ...], int | None]:
    raw = [ln for ln in (cot or "").splitlines() if ln.strip()]
    ans = max((i for i, ln in enumerate(raw) if starts_with_answer_label(ln)), default=None)
    lines = tuple(ln for i, ln in enumerate(raw) if i != ans)
    return lines, ans


def _dataset(row: dict[str, Any]) -> str:
    return str(row.get("source") or "unknown").lower()


_QUESTION = re.compile(r"Question:\s*(.*?)\s*(?:\n\s*Solution:\s*)?$", re.S)
_MMLU_OPTION = re.compile(r"^\s*\(?([A-J])\)\s*(.+?)\s*$", re.M)


def edit_shape(original: str, edited: str) -> str:
    """``arithmetic`` (only numbers or operators changed), ``appended`` (the original step kept, text added)
    or ``replaced``."""
    def masked(s: str) -> str:
        return NUMBER_OR_OPERATOR_RE.sub("#", s).strip()

    if masked(original) == masked(edited) and original.strip() != edited.strip():
        return "arithmetic"
    if original.strip() and original.strip() in edited:
        return "appended"
    return "replaced"


def convert_annotations(rows: list[dict[str, Any]], *, model: str | None = None,
                        limit: int | None = None) -> tuple[str, list, list, list, list[str]]:
    """The paper's annotation sheet (see the module docstring) as (model, baselines, continuations, labels,
    notes); every continuation is scored with :func:`loadbearing.answers.score`, and carries no label."""
    need = ("annotation_id", "source", "prompt", "original_step", "perturbed_step", "continuation",
            "reference_answer")
    for i, r in enumerate(rows):
        missing = [k for k in need if r.get(k) is None]
        if missing:
            raise PaperImportError(f"sheet row {i + 2} (annotation_id {r.get('annotation_id')!r}): missing "
                                   f"{', '.join(missing)}; is this the paper's annotation sheet?")
    if not model:
        raise PaperImportError("the annotation sheet names no model; pass --model (e.g. paper-8-9b)")
    rows = rows[:limit] if limit is not None else rows
    baselines: dict[str, Any] = {}
    conts: list = []
    unparsed = 0
    for r in rows:
        dataset = str(r["source"]).strip().lower()
        prompt = str(r["prompt"])
        m = _QUESTION.search(prompt)
        question = m.group(1) if m else prompt
        choices = None
        gold = str(r["reference_answer"]).strip()
        if dataset == "mmlu":
            opts = _MMLU_OPTION.findall(question)
            choices = [t for _, t in opts] if opts else None
            gold = str(r.get("correct_letter") or "").strip() or gold
        qkey = question_key(question)
        qid = f"{dataset}/{qkey}"
        if qid not in baselines:
            baselines[qid] = fill_record(Baseline, dict(
                question_id=qid, dataset=dataset, task=None, difficulty=None, question=question, prompt=prompt,
                prompt_tokens=0, trace="", lines=(), answer_line=None, parsed_answer=None, gold=gold, correct=True,
                eligible=True, reason="eligible", finish_reason="imported", new_tokens=0, question_key=qkey,
                choices=tuple(choices) if choices else None))
        original, edited = str(r["original_step"]), str(r["perturbed_step"])
        sc = score(str(r["continuation"]), {"dataset": dataset, "task": None, "gold": gold, "question": question,
                                            "choices": choices})
        unparsed += sc.correct is None
        input_text = prompt + "\n" + edited + "\n"
        start = len(prompt) + 1  # the edited step follows the prompt and its newline
        conts.append(fill_record(Continuation, dict(
            id=f"annotation-{r['annotation_id']}", question_id=qid, dataset=dataset, task=None, difficulty=None,
            strategy=f"paper:{edit_shape(original, edited)}", position="unknown", line_index=0, n_lines=0,
            original_line=original, edited_line=edited, condition="perturbed", prefix_text=edited + "\n",
            input_text=input_text, input_tokens=0, edit_span=(start, start + len(edited)),
            continuation=str(r["continuation"]), new_tokens=0, finish_reason="imported", parsed_answer=sc.parsed,
            gold=gold, correct=sc.correct, label=label_for(sc.correct), question_key=qkey)))
    notes = ["annotation sheet: no prefix before the edited step (input_text = prompt + edited step); "
             "correctness from this toolkit's scorer; no labels (run python -m behavioural.label)"]
    if unparsed:
        notes.append(f"{unparsed} continuation(s) have no parseable answer and stay unscored")
    return model, list(baselines.values()), conts, [(c.id, None, None, None) for c in conts], notes


def convert(rows: Iterable[dict[str, Any]], *, model: str | None = None, bbh_map: dict[str, str] | None = None,
            limit: int | None = None) -> tuple[str, list, list, list, list[str]]:
    """(model, baselines, continuations, label triples (id, final, rule, judge), notes). Validates every row."""
    rows = list(rows)
    if rows and isinstance(rows[0], dict) and "annotation_id" in rows[0]:
        return convert_annotations(rows, model=model, limit=limit)
    for i, r in enumerate(rows):
        if not isinstance(r, dict):
            raise PaperImportError(f"row {i}: a {type(r).__name__}, not an object; is this the paper's row file?")
        missing = [k for k in REQUIRED if r.get(k) is None]
        if missing:
            raise PaperImportError(f"row {i} (id {r.get('id')!r}): missing {', '.join(missing)}; is this the paper's "
                               "continuation schema (data/samples/*_sample_50.json or the HF release)?")
    models = Counter(str(r["model"]) for r in rows if r.get("model"))
    if model is None:
        if len(models) > 1:
            raise PaperImportError(f"rows hold {len(models)} models ({', '.join(sorted(models))}); pass --model to import one")
        if not models:
            raise PaperImportError("rows name no model; pass --model (e.g. gemma-2-9b-it)")
        model = next(iter(models))
    elif models:
        rows = [r for r in rows if str(r.get("model")) == model]
        if not rows:
            raise PaperImportError(f"no rows for model {model!r}; the source holds {', '.join(sorted(models))}")
    if limit is not None:
        rows = rows[:limit]
    bbh_map = bbh_map or {}
    notes: list[str] = []
    baselines: dict[str, Any] = {}
    conts: list = []
    labels: list[tuple[str, str | None, str | None, str | None]] = []
    seen: Counter[str] = Counter()
    no_task = 0
    for r in rows:
        dataset = _dataset(r)
        qid = str(r["id"])
        task = (r.get("subject") or r.get("task") or None) if dataset != "bbh" else (r.get("task") or bbh_map.get(qid))
        if dataset == "bbh" and not task:
            no_task += 1
        cot = r.get("faithful_cot") or r.get("baseline_cot") or ""
        prompt = str(r.get("prompt") or r["question"])
        if qid not in baselines:
            lines, ans = _split_lines(cot)
            baselines[qid] = fill_record(Baseline, dict(
                question_id=qid, dataset=dataset, task=task, difficulty=None, question=str(r["question"]),
                prompt=prompt, prompt_tokens=0, trace=cot, lines=lines, answer_line=ans,
                parsed_answer=r.get("faithful_answer") or r.get("baseline_answer"), gold=str(r["reference_answer"]),
                correct=True, eligible=True, reason="eligible", finish_reason="imported", new_tokens=0,
                question_key=question_key(str(r["question"])), choices=r.get("choices")))
        prefix = str(r.get("prefix") or r.get("perturbed_prefix") or "")
        edited = str(r.get("perturbed_step") or "")
        input_text = prompt + "\n" + prefix + ("\n" if prefix else "")
        start = input_text.rfind(edited) if edited else -1
        span = (start, start + len(edited)) if start >= 0 else (0, 0)
        lab = final_label(r)
        correct = None if lab is None else lab != "C"
        strategy, position = str(r["perturbation_strategy"]), str(r["perturbation_point"])
        base_id = f"{qid}|{strategy}|{position}|perturbed"
        seen[base_id] += 1
        cid = base_id if seen[base_id] == 1 else f"{base_id}#{seen[base_id]}"
        conts.append(fill_record(Continuation, dict(
            id=cid, question_id=qid, dataset=dataset, task=task, difficulty=None, strategy=strategy,
            position=position, line_index=int(r.get("target_step_idx") or 0), n_lines=int(r.get("total_steps") or 0),
            original_line=str(r.get("original_step") or ""), edited_line=edited, condition="perturbed",
            prefix_text=prefix + ("\n" if prefix else ""), input_text=input_text, input_tokens=0, edit_span=span,
            continuation=str(r["continuation"]), new_tokens=0, finish_reason="imported",
            parsed_answer=r.get("perturbed_answer"), gold=str(r["reference_answer"]), correct=correct,
            label=label_for(correct), question_key=question_key(str(r["question"])))))
        labels.append((cid, lab, rule_label(r), judge_label(r)))
    dup = sum(v - 1 for v in seen.values() if v > 1)
    if dup:
        notes.append(f"{dup} row(s) repeat a (question, strategy, position) and were kept under '#n' ids")
    if no_task:
        notes.append(f"{no_task} BBH row(s) have no task name (pass --bbh-task-map or --data-dir)")
    unl = sum(1 for _, lab, _, _ in labels if lab is None)
    if unl:
        notes.append(f"{unl} row(s) carry no label and stay unscored")
    return model, list(baselines.values()), conts, labels, notes
