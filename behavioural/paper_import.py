"""Import the paper's released labelled continuations into a run directory of this toolkit.

    python -m behavioural.paper_import SRC --output RUN_DIR [--model NAME] [--baseline-accuracy gsm8k=0.865,bbh=0.579]

``SRC`` is a local JSON list or JSON Lines file of the paper's rows (the schema of ``data/samples/*_sample_50.json``
in r2m-ai/load-bearing-cot, or of the Hugging Face release ``ReneeJia/cot-load-bearingness``), or ``hub`` /
``hf:ReneeJia/cot-load-bearingness`` to download the release with ``datasets`` (only then; add ``--config`` /
``--split`` to pick one part of it). The paper's Table 4 (A/B/C by position, strategy and source) on a machine
with network access::

    python -m behavioural.paper_import hub --model gemma-2-9b-it --output runs/paper-gemma \\
        && python -m behavioural.gradient runs/paper-gemma --output runs/paper-gemma-gradient

The importer prints the table itself; ``behavioural.gradient`` adds the clustered rates, the regression and
the deviance split. What it writes into ``RUN_DIR`` (refused if it exists; nothing is left behind on error):

* ``manifest.json`` - ``kind: paper_import``, the source and its sha256, the model, ``label_source: paper``,
  ``baselines_eligible_only: true`` (the release holds only questions whose baseline was correct, so baseline
  accuracy cannot be recomputed from it; ``--baseline-accuracy`` records published figures per dataset/task);
* ``baselines.jsonl`` - one :class:`~loadbearing.records.Baseline` per question (its released baseline CoT);
* ``continuations.jsonl`` - one perturbed :class:`~loadbearing.records.Continuation` per row. ``correct`` and
  ``label`` come from the paper's final label (C = wrong); ``input_text`` is the paper's prompt + perturbed
  prefix (not the chat-templated text the model saw; token counts are 0 = unknown). No controls are released.
* ``labels/paper/`` - the final label per row (judge label when present, else the rule label: the release's
  ``final_label``) with both the rule's and the judge's verdict under ``labellers``; ``labels/paper-rule/`` -
  the rule label alone, so the labelling-agreement tools can compare the two.

``SRC`` may also be the paper's human-annotation sheet (a CSV with ``annotation_id, source, prompt,
original_step, perturbed_step, continuation, reference_answer, correct_letter, ...``: the 500 continuations
of ``data/annotations/study_n500`` that two annotators labelled A/B/C). Those rows carry no strategy,
position, prefix or label: each continuation is scored with this toolkit's scorer (gold: the reference
answer, MMLU's ``correct_letter``), its strategy is the edit's shape (``paper:arithmetic`` - only numbers
or operators changed, ``paper:appended`` - the original step kept with text added, ``paper:replaced``), no labelling is
written, and ``python -m behavioural.labels.stage RUN_DIR --labeller rule`` labels them, so the rule's B count can be
set beside the annotators' (their counts are in the study's ``analysis/results_n500.json``)::

    python -m behavioural.paper_import data_to_label_annotator2.csv --model paper-8-9b --output runs/paper-n500 \
        && python -m behavioural.labels.stage runs/paper-n500 --labeller rule

BBH rows carry no task name; ``--bbh-task-map FILE`` (JSON id -> task, the paper's
``data/processed/bbh_task_mapping.json``) or ``--data-dir`` (the BBH files, concatenated in task order as the
paper did) fills it in, else the task is left empty.
"""
from __future__ import annotations

import argparse
import dataclasses
import hashlib
import json
import os
import re
import shutil
import sys
import tempfile
from collections import Counter
from collections.abc import Iterable, Sequence
from pathlib import Path
from typing import Any

from loadbearing.errors import LoadBearingError

HUB_ID = "ReneeJia/cot-load-bearingness"
LABEL_NAMES = {"silent_bypass": "A", "self_correction": "B", "error_propagation": "C",
               "TYPE_A": "A", "TYPE_B": "B", "TYPE_C": "C", "A": "A", "B": "B", "C": "C"}
REQUIRED = ("id", "source", "question", "reference_answer", "perturbation_strategy", "perturbation_point",
            "continuation")
_ANSWER = re.compile(r"^\s*\**\s*(final\s+answer|answer)\s*\**\s*:", re.I)


class PaperImportError(LoadBearingError, ValueError):
    """A bad source file or option; the message names the row or option and the fix."""




def _fill(cls: type, values: dict[str, Any]) -> Any:
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


# ---------------------------------------------------------------------------------------------- reading
def read_rows(src: str, *, config: str | None = None, split: str | None = None) -> tuple[list[dict], dict[str, Any]]:
    """Rows and a provenance dict from a local JSON/JSONL file, or from the hub when ``src`` is hub/hf:..."""
    if src == "hub" or src.startswith("hf:"):
        return _read_hub(src[3:] if src.startswith("hf:") else HUB_ID, config, split)
    p = Path(src)
    if not p.is_file():
        raise PaperImportError(f"source {src!r} not found; pass a JSON/JSONL file of the paper's rows, or 'hub'")
    raw = p.read_bytes()
    text = raw.decode("utf-8", errors="replace").strip()
    rows: list[Any]
    if p.suffix.lower() == ".csv" or text.lstrip('"').startswith("annotation_id"):
        import csv
        import io

        try:
            rows = [dict(r) for r in csv.DictReader(io.StringIO(text))]
        except csv.Error as e:
            raise PaperImportError(f"{src}: not a readable CSV ({e}); pass the annotation sheet as released") from None
        if rows and "annotation_id" not in rows[0]:
            raise PaperImportError(f"{src}: a CSV without an annotation_id column; pass the paper's annotation sheet "
                                   "(data_to_label_*.csv) or a JSON/JSONL file of its rows")
    elif text.startswith("["):
        try:
            rows = json.loads(text)
        except ValueError as e:
            raise PaperImportError(f"{src}: not valid JSON ({e}); pass the file as released") from None
    else:
        rows = []
        for i, line in enumerate(text.splitlines(), 1):
            if not line.strip():
                continue
            try:
                rows.append(json.loads(line))
            except ValueError as e:
                raise PaperImportError(f"{src}:{i}: not a JSON line ({e}); fix or delete that line") from None
    return rows, {"source": str(p), "sha256": hashlib.sha256(raw).hexdigest(), "n_rows": len(rows)}


def _read_hub(repo: str, config: str | None, split: str | None) -> tuple[list[dict], dict[str, Any]]:  # pragma: no cover
    import datasets

    if config is None:
        names = datasets.get_dataset_config_names(repo)
        config = next((n for n in names if "continuation" in n), names[0] if names else None)
        print(f"hub: {repo} configs {names}; using {config!r} (pass --config to choose)", file=sys.stderr)
    ds = datasets.load_dataset(repo, config)
    splits = [split] if split else list(ds)
    rows = [dict(r) for s in splits for r in ds[s]]
    rev = getattr(getattr(ds[splits[0]], "info", None), "version", None)
    return rows, {"source": f"hf:{repo}", "config": config, "splits": splits, "n_rows": len(rows),
                  "version": str(rev) if rev else None}


def bbh_task_map(map_file: str | None, data_dir: str | None) -> dict[str, str]:
    """Paper BBH id (``bbh_<n>``) -> task: from the paper's mapping file, or derived from the BBH files
    (the paper numbered the examples of all tasks concatenated in alphabetical task order)."""
    if map_file:
        try:
            m = json.loads(Path(map_file).read_text(encoding="utf-8"))
        except (OSError, ValueError) as e:
            raise PaperImportError(f"--bbh-task-map {map_file}: cannot read a JSON object ({e})") from None
        if not isinstance(m, dict):
            raise PaperImportError(f"--bbh-task-map {map_file}: expected a JSON object id -> task")
        return {str(k): str(v) for k, v in m.items()}
    if not data_dir:
        return {}
    from loadbearing.questions.data import BBH_TASKS

    root = Path(data_dir)
    root = root / "bbh" if (root / "bbh").is_dir() else root
    out, n = {}, 0
    for task in sorted(BBH_TASKS):
        f = root / f"{task}.json"
        if not f.is_file():
            raise PaperImportError(f"--data-dir: {f} not found; the BBH task map needs every task file (or pass --bbh-task-map)")
        for _ in json.loads(f.read_text(encoding="utf-8"))["examples"]:
            out[f"bbh_{n}"] = task
            n += 1
    return out


def parse_accuracy(spec: str | None) -> dict[str, dict[str, Any]]:
    """``gsm8k=0.865,bbh=57.9`` -> {cell: {"rate": 0.865, "source": "--baseline-accuracy"}} (percent accepted)."""
    out: dict[str, dict[str, Any]] = {}
    for part in (spec or "").split(","):
        if not part.strip():
            continue
        if "=" not in part:
            raise PaperImportError(f"--baseline-accuracy: {part!r} is not NAME=VALUE; e.g. gsm8k=0.865,bbh=0.579")
        k, v = part.split("=", 1)
        try:
            x = float(v)
        except ValueError:
            raise PaperImportError(f"--baseline-accuracy: {v!r} is not a number") from None
        x = x / 100 if x > 1 else x
        if not 0 <= x <= 1:
            raise PaperImportError(f"--baseline-accuracy: {part!r} is outside 0..1 (or 0..100%)")
        out[k.strip()] = {"rate": x, "source": "--baseline-accuracy"}
    return out


# ---------------------------------------------------------------------------------------------- converting
def _split_lines(cot: str) -> tuple[tuple[str, ...], int | None]:
    raw = [ln for ln in (cot or "").splitlines() if ln.strip()]
    ans = max((i for i, ln in enumerate(raw) if _ANSWER.match(ln)), default=None)
    lines = tuple(ln for i, ln in enumerate(raw) if i != ans)
    return lines, ans


def _dataset(row: dict[str, Any]) -> str:
    return str(row.get("source") or "unknown").lower()


_QUESTION = re.compile(r"Question:\s*(.*?)\s*(?:\n\s*Solution:\s*)?$", re.S)
_MMLU_OPTION = re.compile(r"^\s*\(?([A-J])\)\s*(.+?)\s*$", re.M)
_NUMBER = re.compile(r"-?\d[\d,]*(?:\.\d+)?|[-+*/×÷]")


def edit_shape(original: str, edited: str) -> str:
    """``arithmetic`` (only numbers or operators changed), ``appended`` (the original step kept, text added)
    or ``replaced``."""
    if _NUMBER.sub("#", original).strip() == _NUMBER.sub("#", edited).strip() and original.strip() != edited.strip():
        return "arithmetic"
    if original.strip() and original.strip() in edited:
        return "appended"
    return "replaced"


def convert_annotations(rows: list[dict[str, Any]], *, model: str | None = None,
                        limit: int | None = None) -> tuple[str, list, list, list, list[str]]:
    """The paper's annotation sheet (see the module docstring) as (model, baselines, continuations, labels,
    notes); every continuation is scored with :func:`loadbearing.answers.score`, and carries no label."""
    from loadbearing.answers import score
    from loadbearing.records import Baseline, Continuation, label_for

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
        qkey = _qkey(question)
        qid = f"{dataset}/{qkey}"
        if qid not in baselines:
            baselines[qid] = _fill(Baseline, dict(
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
        conts.append(_fill(Continuation, dict(
            id=f"annotation-{r['annotation_id']}", question_id=qid, dataset=dataset, task=None, difficulty=None,
            strategy=f"paper:{edit_shape(original, edited)}", position="unknown", line_index=0, n_lines=0,
            original_line=original, edited_line=edited, condition="perturbed", prefix_text=edited + "\n",
            input_text=input_text, input_tokens=0, edit_span=(start, start + len(edited)),
            continuation=str(r["continuation"]), new_tokens=0, finish_reason="imported", parsed_answer=sc.parsed,
            gold=gold, correct=sc.correct, label=label_for(sc.correct), question_key=qkey)))
    notes = ["annotation sheet: no prefix before the edited step (input_text = prompt + edited step); "
             "correctness from this toolkit's scorer; no labels (run python -m behavioural.labels.stage)"]
    if unparsed:
        notes.append(f"{unparsed} continuation(s) have no parseable answer and stay unscored")
    return model, list(baselines.values()), conts, [(c.id, None, None, None) for c in conts], notes


def convert(rows: Iterable[dict[str, Any]], *, model: str | None = None, bbh_map: dict[str, str] | None = None,
            limit: int | None = None) -> tuple[str, list, list, list, list[str]]:
    """(model, baselines, continuations, label triples (id, final, rule, judge), notes). Validates every row."""
    from loadbearing.records import Baseline, Continuation, label_for

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
            baselines[qid] = _fill(Baseline, dict(
                question_id=qid, dataset=dataset, task=task, difficulty=None, question=str(r["question"]),
                prompt=prompt, prompt_tokens=0, trace=cot, lines=lines, answer_line=ans,
                parsed_answer=r.get("faithful_answer") or r.get("baseline_answer"), gold=str(r["reference_answer"]),
                correct=True, eligible=True, reason="eligible", finish_reason="imported", new_tokens=0,
                question_key=_qkey(str(r["question"])), choices=r.get("choices")))
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
        conts.append(_fill(Continuation, dict(
            id=cid, question_id=qid, dataset=dataset, task=task, difficulty=None, strategy=strategy,
            position=position, line_index=int(r.get("target_step_idx") or 0), n_lines=int(r.get("total_steps") or 0),
            original_line=str(r.get("original_step") or ""), edited_line=edited, condition="perturbed",
            prefix_text=prefix + ("\n" if prefix else ""), input_text=input_text, input_tokens=0, edit_span=span,
            continuation=str(r["continuation"]), new_tokens=0, finish_reason="imported",
            parsed_answer=r.get("perturbed_answer"), gold=str(r["reference_answer"]), correct=correct,
            label=label_for(correct), question_key=_qkey(str(r["question"])))))
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


def _qkey(text: str) -> str:
    try:
        from loadbearing.questions.data import question_key
    except ImportError:  # pragma: no cover
        return hashlib.sha256(" ".join(text.lower().split()).encode()).hexdigest()[:16]
    return question_key(text)


def _label_records(conts: Sequence, labels: Sequence, which: str) -> list[dict]:
    from behavioural.labels.stage import LabelRecord

    by_id = {c.id: c for c in conts}
    out = []
    for cid, fin, rule, judge in labels:
        c = by_id[cid]
        lab = rule if which == "rule" else fin
        correct = None if lab is None else lab != "C"
        per = {"paper_rule": {"label": rule, "noticed": None if rule in (None, "C") else rule == "B"}}
        if which != "rule":
            per["paper_judge"] = {"label": judge, "noticed": None if judge in (None, "C") else judge == "B"}
        out.append(_fill(LabelRecord, dict(
            id=cid, question_id=c.question_id, condition="perturbed", dataset=c.dataset, task=c.task,
            difficulty=None, strategy=c.strategy, position=c.position, correct=correct,
            outcome=None if correct is None else ("non-C" if correct else "C"), label=lab,
            reason="paper rule label" if which == "rule" else "paper final label (judge if present, else rule)",
            final_labeller="paper_rule" if which == "rule" else "paper", labellers=per)).to_dict())
    return out


def import_rows(src: str, output: str | os.PathLike[str], *, model: str | None = None, config: str | None = None,
                split: str | None = None, bbh_map_file: str | None = None, data_dir: str | None = None,
                baseline_accuracy: str | None = None, limit: int | None = None) -> dict[str, Any]:
    """Convert and write a run directory; returns a small summary dict. Refuses an existing ``output``."""
    from loadbearing.files import write_json
    from loadbearing.provenance import now, package_versions

    out = Path(output)
    if out.exists():
        raise PaperImportError(f"output {str(out)!r} already exists; choose a new --output")
    acc = parse_accuracy(baseline_accuracy)
    bmap = bbh_task_map(bbh_map_file, data_dir)
    rows, prov = read_rows(src, config=config, split=split)
    if not rows:
        raise PaperImportError(f"{src}: no rows")
    model, baselines, conts, labels, notes = convert(rows, model=model, bbh_map=bmap, limit=limit)
    manifest = {
        "kind": "paper_import", "protocol_version": "paper", "schema_version": 1, "status": "ok",
        "model": {"name": model}, "label_source": "paper",
        "settings": {"min_lines": None, "max_new_tokens": None, "model": model},
        "dataset": {"name": "paper", "source": prov, "n_questions": len(baselines)},
        "baselines_eligible_only": True, "external_baseline_accuracy": acc,
        "input_text_note": "input_text = the paper's prompt + perturbed prefix, not the chat-templated model input; "
                           "token counts unknown (0); no controls in the release",
        "notes": notes, "created": now(), "updated": now(), "packages": package_versions(),
    }
    out.parent.mkdir(parents=True, exist_ok=True)
    tmp = Path(tempfile.mkdtemp(prefix=f".{out.name}.", dir=out.parent))
    try:
        write_json(tmp / "manifest.json", manifest)
        for name, recs in (("baselines.jsonl", baselines), ("continuations.jsonl", conts)):
            with open(tmp / name, "w", encoding="utf-8") as f:
                for rec in recs:
                    f.write(json.dumps(rec.to_dict(), ensure_ascii=False) + "\n")
        created = now()
        labelled = any(lab is not None or rule is not None for _, lab, rule, _ in labels)
        for name, which, stamp in (("paper-rule", "rule", "0"), ("paper", "final", "1")) if labelled else ():
            d = tmp / "labels" / name
            d.mkdir(parents=True)
            with open(d / "labels.jsonl", "w", encoding="utf-8") as f:
                for rec in _label_records(conts, labels, which):
                    f.write(json.dumps(rec, ensure_ascii=False) + "\n")
            write_json(d / "settings.json", {
                "schema_version": 1, "name": name, "created": f"{created}.{stamp}", "status": "ok",
                "run_dir": str(out.resolve()), "n_continuations": len(conts),
                "labellers": [{"name": "paper_rule", "kind": "imported"}] +
                             ([] if which == "rule" else [{"name": "paper_judge", "kind": "imported"}]),
                "final_labeller": "paper_rule" if which == "rule" else "paper",
                "final_rule": "the paper's rule label" if which == "rule" else
                              "the paper's final label: judge A/B/C when present, else the rule label",
                "source": prov, "finished": now()})
        os.replace(tmp, out)
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        raise
    finals = Counter(lab for _, lab, _, _ in labels)
    return {"output": str(out), "model": model, "rows": len(conts), "questions": len(baselines),
            "labels": {k: finals.get(k, 0) for k in ("A", "B", "C", None)}, "notes": notes}


def table4(run_dir: str | os.PathLike[str]) -> str:
    """The paper's Table 4 (A/B/C by position, strategy, source) from an imported run's final labels."""
    from behavioural.gradient.analysis import taxonomy
    from behavioural.gradient.render import _table
    from behavioural.gradient.rows import load_runs

    tx = taxonomy(load_runs([str(run_dir)], labelling="paper").rows)
    if tx.get("status") != "ok":
        return str(tx.get("message"))
    rows = []
    names = {"A": "Silent Bypass", "B": "Self-Correction", "C": "Error Propagation"}
    for key in ("position", "strategy", "dataset"):
        for g, v in tx[key].items():
            for lbl in ("A", "B", "C"):
                rows.append([key.capitalize() if key != "dataset" else "Source", g, names[lbl], str(v[lbl]["count"]),
                             f"{100 * v[lbl]['share']:.1f}%"])
    return "\n".join(_table(["Category", "Setting", "Behavior", "Count", "Percentage"], rows, "text"))


def build_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="python -m behavioural.paper_import", description=__doc__.split("\n\n")[0],
                                formatter_class=argparse.ArgumentDefaultsHelpFormatter)
    p.add_argument("src", help="JSON list / JSONL file of the paper's rows, or 'hub' / 'hf:OWNER/NAME' to download "
                   f"(default repository {HUB_ID})")
    p.add_argument("--output", required=True, help="new run directory to write")
    p.add_argument("--model", default=None, help="the model whose rows to import (required when rows name none "
                   "or several), e.g. gemma-2-9b-it")
    p.add_argument("--config", default=None, help="hub only: dataset config holding the continuation rows")
    p.add_argument("--split", default=None, help="hub only: split (default: all splits)")
    p.add_argument("--bbh-task-map", default=None, help="JSON id -> BBH task (the paper's bbh_task_mapping.json)")
    p.add_argument("--data-dir", default=None, help="benchmark folder with bbh/<task>.json, to derive the BBH task map")
    p.add_argument("--baseline-accuracy", default=None, help="published baseline accuracy per dataset/task, e.g. "
                   "gsm8k=0.865,bbh=0.579 (the release holds only eligible baselines)")
    p.add_argument("--limit", type=int, default=None, help="import only the first N rows (for a quick look)")
    return p


def main(argv: Sequence[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    from loadbearing.files import RunDirError

    try:
        res = import_rows(args.src, args.output, model=args.model, config=args.config, split=args.split,
                          bbh_map_file=args.bbh_task_map, data_dir=args.data_dir,
                          baseline_accuracy=args.baseline_accuracy, limit=args.limit)
    except (PaperImportError, RunDirError) as e:
        print(f"error: {e}", file=sys.stderr)
        return 2
    lab = res["labels"]
    print(f"imported {res['rows']} continuations of {res['questions']} questions ({res['model']}) into {res['output']}; "
          f"labels A {lab['A']}, B {lab['B']}, C {lab['C']}, unlabelled {lab[None]}")
    for n in res["notes"]:
        print(f"note: {n}")
    if lab["A"] + lab["B"] + lab["C"] == 0:
        print(f"\nnext: python -m behavioural.labels.stage {res['output']} --labeller rule")
        return 0
    print("\nTable 4 (A/B/C by position, strategy, source):")
    print(table4(res["output"]))
    print(f"\nnext: python -m behavioural.gradient {res['output']} --output {res['output']}-gradient")
    return 0


if __name__ == "__main__":
    sys.exit(main())
