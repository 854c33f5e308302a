"""Loaders of the published benchmarks (GSM8K, MMLU, BBH) and of question files, into :class:`Question` lists.

    from loadbearing.questions.loaders import load_local, load_hub, load_jsonl
    load_local("bbh", ("navigate",), Path("../shared/data"), "test")   # the upstream files, as published
    load_hub("mmlu", ("anatomy",), "test", revision=None)              # the Hugging Face hub (lazy `datasets`)
    load_jsonl(Path("my_questions.jsonl"), "custom", None)             # {id, question, answer} rows

Local copies keep the upstream layouts exactly as published (``gsm8k/test.jsonl``,
``mmlu/test/<subject>_test.csv``, ``mmlu/dev/<subject>_dev.csv``, ``bbh/<task>.json``); the folder may be the
root holding ``gsm8k/``, ``mmlu/`` and ``bbh/`` or the dataset's own folder. Ids are ``gsm8k/<split>/<row>``,
``mmlu/<subject>/<split>/<row>`` and ``bbh/<task>/<row>``, with 0-based row numbers in the published file.
Every bad input raises :class:`DataError` with a one-line message that names the problem and the fix.
Most callers want :func:`loadbearing.questions.data.load_questions`, which picks the source and dedupes.
"""

from __future__ import annotations

import csv
import json
import re
from collections.abc import Sequence
from pathlib import Path

from loadbearing.questions.base import DataError, Question

__all__ = ["BBH_TASKS", "MMLU_LETTERS", "MMLU_SUBJECTS", "check_task", "load_hub", "load_jsonl", "load_local"]

MMLU_SUBJECTS = (
    "abstract_algebra", "anatomy", "astronomy", "business_ethics", "clinical_knowledge",
    "college_biology", "college_chemistry", "college_computer_science", "college_mathematics",
    "college_medicine", "college_physics", "computer_security", "conceptual_physics", "econometrics",
    "electrical_engineering", "elementary_mathematics", "formal_logic", "global_facts",
    "high_school_biology", "high_school_chemistry", "high_school_computer_science",
    "high_school_european_history", "high_school_geography", "high_school_government_and_politics",
    "high_school_macroeconomics", "high_school_mathematics", "high_school_microeconomics",
    "high_school_physics", "high_school_psychology", "high_school_statistics", "high_school_us_history",
    "high_school_world_history", "human_aging", "human_sexuality", "international_law", "jurisprudence",
    "logical_fallacies", "machine_learning", "management", "marketing", "medical_genetics",
    "miscellaneous", "moral_disputes", "moral_scenarios", "nutrition", "philosophy", "prehistory",
    "professional_accounting", "professional_law", "professional_medicine", "professional_psychology",
    "public_relations", "security_studies", "sociology", "us_foreign_policy", "virology",
    "world_religions",
)

BBH_TASKS = (
    "boolean_expressions", "causal_judgement", "date_understanding", "disambiguation_qa",
    "dyck_languages", "formal_fallacies", "geometric_shapes", "hyperbaton",
    "logical_deduction_five_objects", "logical_deduction_seven_objects",
    "logical_deduction_three_objects", "movie_recommendation", "multistep_arithmetic_two", "navigate",
    "object_counting", "penguins_in_a_table", "reasoning_about_colored_objects", "ruin_names",
    "salient_translation_error_detection", "snarks", "sports_understanding", "temporal_sequences",
    "tracking_shuffled_objects_five_objects", "tracking_shuffled_objects_seven_objects",
    "tracking_shuffled_objects_three_objects", "web_of_lies", "word_sorting",
)

MMLU_LETTERS = ("A", "B", "C", "D")
_BBH_OPTION_RE = re.compile(r"^\(([A-Z])\)\s?(.*)$")
_HUB_IDS = {"gsm8k": "openai/gsm8k", "mmlu": "cais/mmlu", "bbh": "lukaemon/bbh"}


def load_local(dataset: str, tasks: tuple[str, ...], data_dir: str | Path, split: str) -> list[Question]:
    """The questions of ``dataset`` (gsm8k, mmlu or bbh) from a local copy of the upstream files, in file order."""
    root = _dataset_dir(Path(data_dir), dataset)
    if dataset == "gsm8k":
        return _gsm8k_local(root, split)
    if dataset == "mmlu":
        return [q for s in tasks for q in _mmlu_local(root, s, split)]
    return [q for t in tasks for q in _bbh_local(root, t)]


# ----------------------------------------------------------------------------------------------------
# validation helpers


def check_task(dataset: str, task: str | None) -> tuple[str, ...]:
    """The tasks a request names: all of the dataset's (``task`` None), the ones named (one name or a comma
    list, e.g. ``"navigate,date_understanding"``; repeats dropped, order kept), or () for gsm8k."""
    valid = MMLU_SUBJECTS if dataset == "mmlu" else BBH_TASKS if dataset == "bbh" else ()
    if dataset == "gsm8k":
        if task is not None:
            raise DataError(f"gsm8k has no tasks, got task={task!r}; leave task unset")
        return ()
    if task is None:
        return valid
    names = tuple(dict.fromkeys(t.strip() for t in str(task).split(",") if t.strip()))
    bad = [t for t in names if t not in valid]
    if bad or not names:
        what = f"task(s) {', '.join(map(repr, bad))}" if bad else f"task {task!r}"
        raise DataError(f"unknown {dataset} {what}; choose from {', '.join(valid)} (one name or a comma list; "
                        "none for all)")
    return names


def _dataset_dir(data_dir: Path, dataset: str) -> Path:
    if not data_dir.is_dir():
        raise DataError(f"data directory {data_dir} does not exist; "
            f"pass --data-dir pointing at a folder holding gsm8k/, mmlu/ and bbh/")
    if (data_dir / dataset).is_dir():
        return data_dir / dataset
    if data_dir.name == dataset:
        return data_dir
    raise DataError(f"no {dataset}/ folder in data directory {data_dir}; "
        f"pass --data-dir pointing at the folder that holds {dataset}/")


def _need_file(path: Path) -> Path:
    if not path.is_file():
        raise DataError(f"missing data file {path}; put the upstream file there or fix --data-dir")
    return path


def _gsm8k_gold(answer: str) -> str:
    """Gold of a GSM8K worked solution: the text after the last ``####``, commas removed."""
    if "####" not in answer:
        raise DataError("GSM8K answer has no '####' final line; use the upstream gsm8k files unchanged")
    return answer.rsplit("####", 1)[1].strip().replace(",", "")


def _mmlu_question_text(question: str, options: Sequence[str]) -> str:
    return "\n".join([question.strip(), *(f"{L}. {o}" for L, o in zip(MMLU_LETTERS, options))])


def _bbh_choices(text: str) -> tuple[str, ...] | None:
    """Option texts of a BBH input with an ``Options:`` block of ``(A) foo`` lines, else None."""
    lines = text.splitlines()
    try:
        start = next(i for i, line in enumerate(lines) if line.strip() == "Options:")
    except StopIteration:
        return None
    opts = []
    for line in lines[start + 1:]:
        m = _BBH_OPTION_RE.match(line.strip())
        if not m:
            break
        opts.append(m.group(2).strip())
    return tuple(opts) or None


# ----------------------------------------------------------------------------------------------------
# local files


def _gsm8k_local(root: Path, split: str) -> list[Question]:
    path = _need_file(root / f"{split}.jsonl")
    out = []
    with path.open(encoding="utf-8") as f:
        for i, line in enumerate(f):
            try:
                row = json.loads(line)
                out.append(Question(f"gsm8k/{split}/{i}", "gsm8k", None, row["question"], _gsm8k_gold(row["answer"])))
            except (json.JSONDecodeError, KeyError, TypeError) as e:
                raise DataError(f"{path}:{i + 1}: bad GSM8K row ({type(e).__name__}: {e}); "
                    f"use the upstream file unchanged") from None
    return out


def _mmlu_local(root: Path, subject: str, split: str) -> list[Question]:
    path = _need_file(root / split / f"{subject}_{split}.csv")
    out = []
    with path.open(newline="", encoding="utf-8") as f:
        for i, row in enumerate(csv.reader(f)):
            if len(row) != 6 or row[5].strip() not in MMLU_LETTERS:
                raise DataError(f"{path}: row {i + 1} is not 'question,A,B,C,D,answer'; use the upstream CSV unchanged")
            out.append(_mmlu_question(subject, split, i, row[0], row[1:5], row[5].strip()))
    return out


def _mmlu_question(subject: str, split: str, i: int, question: str, options: Sequence[str], letter: str) -> Question:
    opts = tuple(str(o) for o in options)
    return Question(
        f"mmlu/{subject}/{split}/{i}", "mmlu", subject, _mmlu_question_text(question, opts), letter, choices=opts
    )


def _bbh_local(root: Path, task: str) -> list[Question]:
    path = _need_file(root / f"{task}.json")
    try:
        examples = json.loads(path.read_text(encoding="utf-8"))["examples"]
    except (json.JSONDecodeError, KeyError, TypeError) as e:
        raise DataError(f"{path}: not a BBH task file ({type(e).__name__}: {e}); use the upstream file unchanged") from None
    return [_bbh_question(task, i, ex["input"], ex["target"]) for i, ex in enumerate(examples)]


def _bbh_question(task: str, i: int, text: str, target: str) -> Question:
    return Question(f"bbh/{task}/{i}", "bbh", task, text, str(target), choices=_bbh_choices(text))


def load_jsonl(path: Path, dataset: str, task: str | None) -> list[Question]:
    if not path.is_file():
        raise DataError(f"input file {path} does not exist; "
            f"pass --input-file pointing at a JSONL file of {{id, question, answer}} rows")
    out: list[Question] = []
    seen: set[str] = set()
    with path.open(encoding="utf-8") as f:
        for n, line in enumerate(f, start=1):
            if not line.strip():
                continue
            try:
                row = json.loads(line)
            except json.JSONDecodeError as e:
                raise DataError(f"{path}:{n}: malformed JSON ({e.msg}); fix that line so each line is one JSON object") from None
            if not isinstance(row, dict):
                raise DataError(f"{path}:{n}: expected a JSON object, got {type(row).__name__}; "
                    f"write one {{id, question, answer}} object per line")
            missing = [k for k in ("id", "question", "answer") if k not in row]
            if missing:
                raise DataError(f"{path}:{n}: missing key(s) {', '.join(missing)}; every line needs id, question and answer")
            choices = row.get("choices")
            if choices is not None and (not isinstance(choices, list) or not all(isinstance(c, str) for c in choices)):
                raise DataError(f"{path}:{n}: 'choices' must be a list of strings; fix or drop it on that line")
            qid = str(row["id"])
            if qid in seen:
                raise DataError(f"{path}:{n}: duplicate id {qid!r}; give every question a unique id")
            seen.add(qid)
            answer = str(row["answer"]).strip()
            if dataset == "gsm8k":
                answer = answer.replace(",", "")
            q = Question(
                id=qid,
                dataset=dataset,
                task=row.get("task"),
                question=str(row["question"]),
                answer=answer,
                choices=tuple(choices) if choices is not None else None,
                difficulty=row.get("difficulty"),
            )
            if task is None or q.task == task:
                out.append(q)
    return out


# ----------------------------------------------------------------------------------------------------
# Hugging Face hub


def load_hub(dataset: str, tasks: tuple[str, ...], split: str, revision: str | None) -> list[Question]:
    """Load from the hub through ``datasets``; any failure becomes a one-line DataError."""
    name = _HUB_IDS[dataset]
    try:
        # deferred: datasets is heavy to import
        import datasets  # lazy: heavy import, and only needed without local files

        def load(config: str, hub_split: str):
            return datasets.load_dataset(name, config, split=hub_split, revision=revision)

        if dataset == "gsm8k":
            return [
                Question(f"gsm8k/{split}/{i}", "gsm8k", None, r["question"], _gsm8k_gold(r["answer"]))
                for i, r in enumerate(load("main", split))
            ]
        if dataset == "mmlu":
            rows = load(tasks[0] if len(tasks) == 1 else "all", split)
            counters: dict[str, int] = {}
            out = []
            for r in rows:
                subject = r["subject"]
                if subject not in tasks:
                    continue
                i = counters.get(subject, 0)
                counters[subject] = i + 1
                out.append(_mmlu_question(subject, split, i, r["question"], r["choices"], MMLU_LETTERS[int(r["answer"])]))
            return out
        return [_bbh_question(t, i, r["input"], r["target"]) for t in tasks for i, r in enumerate(load(t, "test"))]
    except DataError:
        raise
    except Exception as e:  # offline, missing package, unknown revision, changed schema, ...
        reason = " ".join(f"{type(e).__name__}: {e}".split())[:200]
        raise DataError(
            f"could not load {dataset} from the Hugging Face hub ({name}; offline?); pass --data-dir pointing at a "
            f"local copy with the upstream layout (gsm8k/, mmlu/, bbh/) [{reason}]"
        ) from None
