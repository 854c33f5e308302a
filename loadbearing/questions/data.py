"""Benchmark questions: one record type and the loaders that fill it.

Every benchmark ends up as a list of :class:`Question` records with a stable id, the full prompt text
of the question and a normalised gold answer::

    from loadbearing.questions.data import load_questions, sample
    qs = load_questions("gsm8k", data_dir="../shared/data")          # 1,319 GSM8K test problems
    qs = load_questions("mmlu", task="anatomy", data_dir="../shared/data")
    qs = load_questions("bbh", data_dir="../shared/data")             # all 27 tasks, 6,511 examples
    qs = load_questions("arith", n_per_level=20, seed=0)              # synthetic difficulty ladder
    qs = load_questions("custom", input_file="my_questions.jsonl")
    qs = sample(qs, 100, seed=0)

Sources, in order of precedence:

* ``input_file``: JSON Lines of ``{"id", "question", "answer"[, "choices"][, "task"][, "difficulty"]}``.
* ``data_dir``: a local copy in the upstream layouts exactly as published (``gsm8k/test.jsonl``,
  ``mmlu/test/<subject>_test.csv``, ``mmlu/dev/<subject>_dev.csv``, ``bbh/<task>.json``). The folder may be
  the root holding ``gsm8k/``, ``mmlu/`` and ``bbh/`` or the dataset's own folder.
* otherwise the Hugging Face hub through ``datasets`` (imported lazily, only then).
* ``arith`` needs no files: it is generated from the seed.

Ids are ``gsm8k/<split>/<row>``, ``mmlu/<subject>/<split>/<row>``, ``bbh/<task>/<row>`` and
``arith/<level>/<i>``, with 0-based row numbers in the published file, so they do not depend on which
subset was loaded. Every bad input raises :class:`DataError` with a one-line message that names the
problem and the fix. Importing this module reads no file and touches no global state.
"""

from __future__ import annotations

import csv
import hashlib
import itertools
import json
import logging
import random
import re
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path

from loadbearing.errors import LoadBearingError

__all__ = [
    "ARITH_LEVELS",
    "BBH_TASKS",
    "DATASETS",
    "DataError",
    "MMLU_SUBJECTS",
    "Question",
    "QuestionList",
    "dedupe",
    "normalise_question",
    "arith_level_size",
    "arith_few_shot",
    "dataset_fingerprint",
    "load_questions",
    "question_key",
    "sample",
]

DATASETS = ("gsm8k", "mmlu", "bbh", "arith")
"""Built-in datasets. ``"custom"`` is also accepted together with ``input_file``."""

SPLITS = {"gsm8k": ("test", "train"), "mmlu": ("test", "dev"), "bbh": ("test",), "arith": ("test",)}

ARITH_LEVELS = ("s2_o3", "s2_o5", "s3_o5", "s2_o9", "s3_o9")
"""Default arith ladder: ``s{steps}_o{max operand}``, easiest first."""

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
_ARITH_LEVEL_RE = re.compile(r"s([1-9]\d*)_o([1-9]\d*)")
_BBH_OPTION_RE = re.compile(r"^\(([A-Z])\)\s?(.*)$")
_log = logging.getLogger(__name__)
_HUB_IDS = {"gsm8k": "openai/gsm8k", "mmlu": "cais/mmlu", "bbh": "lukaemon/bbh"}


class DataError(LoadBearingError, ValueError):
    """A bad data request or a bad data file; the message names the problem and the fix."""


@dataclass(frozen=True)
class Question:
    """One benchmark question with its normalised gold answer."""

    id: str  # stable, e.g. "gsm8k/test/17", "mmlu/abstract_algebra/test/3", "bbh/navigate/12"
    dataset: str  # gsm8k | mmlu | bbh | arith | custom
    task: str | None  # MMLU subject, BBH task, arith level; None for GSM8K
    question: str  # full prompt text (MMLU: question then "A. ..." .. "D. ..." lines)
    answer: str  # gold: GSM8K/arith number string, MMLU letter, BBH target as published
    choices: tuple[str, ...] | None = None  # option texts for multiple choice, else None
    difficulty: str | None = None  # arith level name, else None

    def to_dict(self) -> dict:
        """Plain JSON-ready dict (choices as a list)."""
        return {
            "id": self.id,
            "dataset": self.dataset,
            "task": self.task,
            "question": self.question,
            "answer": self.answer,
            "choices": list(self.choices) if self.choices is not None else None,
            "difficulty": self.difficulty,
        }

    @classmethod
    def from_dict(cls, d: dict) -> Question:
        """Inverse of :meth:`to_dict`; unknown keys are ignored."""
        missing = [k for k in ("id", "dataset", "question", "answer") if k not in d]
        if missing:
            raise DataError(f"question record is missing key(s) {missing}; write records with Question.to_dict()")
        choices = d.get("choices")
        return cls(
            id=str(d["id"]),
            dataset=str(d["dataset"]),
            task=d.get("task"),
            question=str(d["question"]),
            answer=str(d["answer"]),
            choices=tuple(str(c) for c in choices) if choices is not None else None,
            difficulty=d.get("difficulty"),
        )


# ----------------------------------------------------------------------------------------------------
# public entry points


def load_questions(
    dataset: str,
    *,
    task: str | None = None,
    data_dir: str | Path | None = None,
    input_file: str | Path | None = None,
    split: str = "test",
    revision: str | None = None,
    n_per_level: int | None = None,
    seed: int = 0,
) -> list[Question]:
    """Load a benchmark as a list of :class:`Question`, in the published order.

    ``task`` selects an MMLU subject, a BBH task or arith level(s) (one name or a comma list); None means
    all. ``split`` is "test" everywhere, or "train" (GSM8K) / "dev" (MMLU). ``revision`` pins the hub
    dataset revision (ignored for local files). ``n_per_level`` (default 50) and ``seed`` apply to
    arith only; they are ignored elsewhere.

    Questions are deduplicated by normalised text (:func:`question_key`): the first occurrence is kept, and
    the returned :class:`QuestionList` says how many were dropped (``duplicates_dropped``, also logged).
    """
    qs = _load_questions(dataset, task=task, data_dir=data_dir, input_file=input_file, split=split,
                         revision=revision, n_per_level=n_per_level, seed=seed)
    return dedupe(qs, source=dataset if input_file is None else str(input_file))


class QuestionList(list):
    """A list of :class:`Question` that remembers how many duplicate texts the loader dropped."""

    duplicates_dropped: int = 0
    dropped_ids: tuple[str, ...] = ()


def dedupe(questions: Iterable[Question], source: str = "questions") -> QuestionList:
    """Keep the first question of each normalised text; report (log) how many were dropped."""
    out, seen, dropped = QuestionList(), set(), []
    for q in questions:
        k = question_key(q.question)
        if k in seen:
            dropped.append(q.id)
            continue
        seen.add(k)
        out.append(q)
    out.duplicates_dropped = len(dropped)
    out.dropped_ids = tuple(dropped)
    if dropped:
        _log.warning("%s: dropped %d duplicate question text(s) (kept the first of each; e.g. %s)",
                     source, len(dropped), ", ".join(dropped[:3]))
    return out


def _load_questions(
    dataset: str,
    *,
    task: str | None,
    data_dir: str | Path | None,
    input_file: str | Path | None,
    split: str,
    revision: str | None,
    n_per_level: int | None,
    seed: int,
) -> list[Question]:
    if input_file is not None:
        return _load_jsonl(Path(input_file), dataset or "custom", task)
    if dataset == "custom":
        raise DataError("dataset 'custom' needs a question file; "
            "pass input_file (--input-file) with JSONL rows {id, question, answer}")
    if dataset not in DATASETS:
        raise DataError(f"unknown dataset {dataset!r}; choose one of {', '.join(DATASETS)} (or 'custom' with an input file)")
    if split not in SPLITS[dataset]:
        raise DataError(f"unknown split {split!r} for {dataset}; choose one of {', '.join(SPLITS[dataset])}")
    if dataset == "arith":
        return _arith_questions(task, 50 if n_per_level is None else n_per_level, seed)
    tasks = _check_task(dataset, task)
    if data_dir is not None:
        root = _dataset_dir(Path(data_dir), dataset)
        if dataset == "gsm8k":
            return _gsm8k_local(root, split)
        if dataset == "mmlu":
            return [q for s in tasks for q in _mmlu_local(root, s, split)]
        return [q for t in tasks for q in _bbh_local(root, t)]
    return _load_hub(dataset, tasks, split, revision)


def normalise_question(text: str) -> str:
    """The text that identifies a question: lowercased, whitespace runs collapsed to one space, stripped."""
    return " ".join(str(text).lower().split())


def question_key(text: str) -> str:
    """Stable key of a question: the first 16 hex digits of sha256 of its normalised text.

    Two draws of the same text are one question; grouping, cross-validation folds and bootstraps use this key.
    """
    return hashlib.sha256(normalise_question(text).encode("utf-8")).hexdigest()[:16]


def sample(questions: Sequence[Question], n: int | None, seed: int) -> list[Question]:
    """Deterministic seeded subset of ``n`` questions, returned in their original order.

    The chosen questions are those with the smallest ``sha256(f"{seed}:{id}")``, so the choice depends
    only on the ids (not on list order or on Python's hash seed), and a smaller sample is always a subset
    of a larger one with the same seed. ``n`` None or ``>= len(questions)`` returns all of them.
    """
    qs = QuestionList(questions)
    qs.duplicates_dropped = getattr(questions, "duplicates_dropped", 0)
    qs.dropped_ids = getattr(questions, "dropped_ids", ())
    if n is None or n >= len(qs):
        return qs
    if n < 0:
        raise DataError(f"sample size must be >= 0, got {n}; pass a non-negative n or None for all")

    def key(q: Question) -> str:
        return hashlib.sha256(f"{seed}:{q.id}".encode()).hexdigest()

    chosen = {q.id for q in sorted(qs, key=key)[:n]}
    out = QuestionList(q for q in qs if q.id in chosen)
    out.duplicates_dropped, out.dropped_ids = qs.duplicates_dropped, qs.dropped_ids
    return out


def dataset_fingerprint(questions: Iterable[Question]) -> str:
    """sha256 hex digest over each question's id, question text, answer and choices.

    The digest is taken over the questions sorted by id, so it identifies the *set* of questions and does
    not change when the same questions come in another order.
    """
    h = hashlib.sha256()
    for q in sorted(questions, key=lambda q: q.id):
        row = [q.id, q.question, q.answer, list(q.choices) if q.choices is not None else None]
        h.update(json.dumps(row, ensure_ascii=False).encode("utf-8"))
        h.update(b"\n")
    return h.hexdigest()


def arith_few_shot() -> list[tuple[str, str]]:
    """Two worked (question, answer_text) pairs in the format the arith ladder expects.

    The answer opens with ``We start with N.``, has one ``a + b = c`` / ``a - b = c`` line per step and
    ends with ``Answer: N``.
    """
    examples = [(7, [("+", 2), ("-", 4)]), (3, [("+", 5), ("-", 2), ("+", 4)])]
    return [(_arith_question_text(start, ops), _arith_solution_text(start, ops)) for start, ops in examples]


# ----------------------------------------------------------------------------------------------------
# validation helpers


def _check_task(dataset: str, task: str | None) -> tuple[str, ...]:
    valid = MMLU_SUBJECTS if dataset == "mmlu" else BBH_TASKS if dataset == "bbh" else ()
    if dataset == "gsm8k":
        if task is not None:
            raise DataError(f"gsm8k has no tasks, got task={task!r}; leave task unset")
        return ()
    if task is None:
        return valid
    if task not in valid:
        raise DataError(f"unknown {dataset} task {task!r}; choose one of {', '.join(valid)} (or none for all)")
    return (task,)


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


def _load_jsonl(path: Path, dataset: str, task: str | None) -> list[Question]:
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


def _load_hub(dataset: str, tasks: tuple[str, ...], split: str, revision: str | None) -> list[Question]:
    """Load from the hub through ``datasets``; any failure becomes a one-line DataError."""
    name = _HUB_IDS[dataset]
    try:
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


# ----------------------------------------------------------------------------------------------------
# arith ladder


def _arith_levels(task: str | None) -> tuple[str, ...]:
    if task is None:
        return ARITH_LEVELS
    levels = tuple(t.strip() for t in task.split(",") if t.strip())
    bad = [t for t in levels if not _ARITH_LEVEL_RE.fullmatch(t)]
    if bad or not levels:
        raise DataError(
            f"unknown arith level(s) {bad or task!r}; "
                f"use names like s{{steps}}_o{{max operand}}, e.g. {', '.join(ARITH_LEVELS)} (comma list allowed)"
        )
    for t in levels:  # the generator enumerates a level's whole space: refuse one too large to enumerate
        steps, max_operand = (int(g) for g in _ARITH_LEVEL_RE.fullmatch(t).groups())  # type: ignore[union-attr]
        if steps < 1 or max_operand < 1 or max_operand ** (steps + 1) > ARITH_MAX_SPACE:
            raise DataError(f"arith level {t!r} is out of range: need >= 1 step and operand, and (max operand)^(steps+1) "
                            f"<= {ARITH_MAX_SPACE:,}; e.g. {', '.join(ARITH_LEVELS)}")
    return levels


#: the largest arith level space (start values x operand chains) the generator will enumerate
ARITH_MAX_SPACE = 2_000_000


#: how an arith question opens and closes (``{s}`` start value; entity forms name what is counted). The
#: operations are always "Add x." / "Subtract x.", so every wording keeps the few-shot answer shape
#: ("We start with N.", one ``a + b = c`` line per step, "Answer: N").
ARITH_WORDINGS: tuple[tuple[str, str], ...] = (
    ("Start with {s}.", "What is the result?"),
    ("Begin with {s}.", "What is the result?"),
    ("Start with {s}.", "What number do you get?"),
    ("Start with {s}.", "What is the final number?"),
    ("Begin with {s}.", "What number do you get?"),
    ("Begin with {s}.", "What is the final number?"),
    ("Start with the number {s}.", "What is the result?"),
    ("Start with the number {s}.", "What number do you get?"),
)
ARITH_ENTITIES: tuple[tuple[str, str], ...] = (
    ("apple", "apples"), ("marble", "marbles"), ("coin", "coins"), ("book", "books"),
    ("sticker", "stickers"), ("pencil", "pencils"), ("card", "cards"), ("shell", "shells"),
)
#: start values: 1..M at level s{N}_o{M}, as before the wordings were added (larger starts cost the embedded
#: model ~10 points of accuracy at s2_o3)


def _arith_question_text(start: int, ops: Sequence[tuple[str, int]], form: int = 0) -> str:
    """Question text; ``form`` < len(ARITH_WORDINGS) picks a plain wording, beyond it an entity wording."""
    words = " ".join(f"{'Add' if op == '+' else 'Subtract'} {x}." for op, x in ops)
    if form < len(ARITH_WORDINGS):
        opening, closing = ARITH_WORDINGS[form]
        return f"{opening.format(s=start)} {words} {closing}"
    one, many = ARITH_ENTITIES[form - len(ARITH_WORDINGS)]
    return f"Start with {start} {one if start == 1 else many}. {words} How many {many} are there now?"


def _arith_solution_text(start: int, ops: Sequence[tuple[str, int]]) -> str:
    lines = [f"We start with {start}."]
    cur = start
    for op, x in ops:
        nxt = cur + x if op == "+" else cur - x
        lines.append(f"{cur} {op} {x} = {nxt}")
        cur = nxt
    lines.append(f"Answer: {cur}")
    return "\n".join(lines)


def _arith_chains(steps: int, max_operand: int) -> list[tuple[int, tuple[tuple[str, int], ...]]]:
    """Every (start, ops) of a level: ``steps`` operations with operands in 1..max_operand, at least one equal
    to max_operand (so levels with the same steps never share a question), never below zero on the way."""
    moves = [(op, x) for op in "+-" for x in range(1, max_operand + 1)]
    out = []
    for start in range(1, max_operand + 1):
        for ops in itertools.product(moves, repeat=steps):
            if max(x for _, x in ops) != max_operand:
                continue
            cur = start
            for op, x in ops:
                cur = cur + x if op == "+" else cur - x
                if cur < 0:
                    break
            else:
                out.append((start, ops))
    return out


def _lazy_permutation(total: int, rng: random.Random) -> Iterator[int]:
    """A seeded permutation of range(total), produced lazily (sparse Fisher-Yates): any prefix is stable."""
    swapped: dict[int, int] = {}
    for i in range(total):
        j = rng.randrange(i, total)
        vi, vj = swapped.get(i, i), swapped.get(j, j)
        swapped[j] = vi
        swapped.pop(i, None)
        yield vj


def arith_level_size(level: str) -> int:
    """How many distinct questions a level holds (the most ``n_per_level`` can ask for)."""
    steps, max_operand = (int(g) for g in _ARITH_LEVEL_RE.fullmatch(level).groups())  # type: ignore[union-attr]
    return len(_arith_chains(steps, max_operand)) * (len(ARITH_WORDINGS) + len(ARITH_ENTITIES))


def _arith_questions(task: str | None, n_per_level: int, seed: int) -> list[Question]:
    """``n_per_level`` distinct questions per level, drawn without replacement from the level's whole space.

    Levels ``s{N}_o{M}`` are disjoint by construction (N operations, operands 1..M with at least one equal to
    M), and the few-shot questions are never drawn. A larger ``n_per_level`` keeps the first questions.
    """
    if n_per_level < 0:
        raise DataError(f"n_per_level must be >= 0, got {n_per_level}; pass a non-negative count")
    shots = {normalise_question(q) for q, _ in arith_few_shot()}
    forms = len(ARITH_WORDINGS) + len(ARITH_ENTITIES)
    out = []
    for level in _arith_levels(task):
        steps, max_operand = (int(g) for g in _ARITH_LEVEL_RE.fullmatch(level).groups())  # type: ignore[union-attr]
        chains = _arith_chains(steps, max_operand)
        total = len(chains) * forms
        if n_per_level > total - len(shots):
            raise DataError(f"arith level {level} holds only {total - len(shots)} distinct questions, asked for "
                            f"{n_per_level}; lower --n-per-level or use more levels")
        rng = random.Random(f"{seed}-{level}")  # str seed: stable across runs and Python hash seeds
        perm = _lazy_permutation(total, rng)
        seen: set[str] = set()
        while len(seen) < n_per_level:
            idx = next(perm)
            start, ops = chains[idx // forms]
            text = _arith_question_text(start, ops, idx % forms)
            key = normalise_question(text)
            if key in shots or key in seen:
                continue
            i = len(seen)
            seen.add(key)
            cur = start
            for op, x in ops:
                cur = cur + x if op == "+" else cur - x
            out.append(Question(f"arith/{level}/{i}", "arith", level, text, str(cur), difficulty=level))
    return out
