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

This is the public face of the questions: the pieces live in :mod:`~loadbearing.questions.base` (the record,
its key, dedupe and sampling), :mod:`~loadbearing.questions.loaders` (the benchmark files and the hub) and
:mod:`~loadbearing.questions.arith` (the generated ladder); import their names from here.
"""

from __future__ import annotations

from pathlib import Path

from loadbearing.questions.arith import (
    ARITH_ENTITIES,
    ARITH_LEVELS,
    ARITH_MAX_SPACE,
    ARITH_WORDINGS,
    arith_few_shot,
    arith_level_size,
    arith_questions,
)
from loadbearing.questions.base import (
    DataError,
    Question,
    QuestionList,
    dataset_fingerprint,
    dedupe,
    normalise_question,
    question_key,
    sample,
)
from loadbearing.questions.loaders import BBH_TASKS, MMLU_LETTERS, MMLU_SUBJECTS, check_task, load_hub, load_jsonl, load_local

__all__ = [
    "ARITH_ENTITIES",
    "ARITH_LEVELS",
    "ARITH_MAX_SPACE",
    "ARITH_WORDINGS",
    "BBH_TASKS",
    "DATASETS",
    "DataError",
    "MMLU_LETTERS",
    "MMLU_SUBJECTS",
    "Question",
    "QuestionList",
    "SPLITS",
    "arith_few_shot",
    "arith_level_size",
    "dataset_fingerprint",
    "dedupe",
    "load_questions",
    "normalise_question",
    "question_key",
    "sample",
]

DATASETS = ("gsm8k", "mmlu", "bbh", "arith")
"""Built-in datasets. ``"custom"`` is also accepted together with ``input_file``."""

SPLITS = {"gsm8k": ("test", "train"), "mmlu": ("test", "dev"), "bbh": ("test",), "arith": ("test",)}


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
        return load_jsonl(Path(input_file), dataset or "custom", task)
    if dataset == "custom":
        raise DataError("dataset 'custom' needs a question file; "
            "pass input_file (--input-file) with JSONL rows {id, question, answer}")
    if dataset not in DATASETS:
        raise DataError(f"unknown dataset {dataset!r}; choose one of {', '.join(DATASETS)} (or 'custom' with an input file)")
    if split not in SPLITS[dataset]:
        raise DataError(f"unknown split {split!r} for {dataset}; choose one of {', '.join(SPLITS[dataset])}")
    if dataset == "arith":
        return arith_questions(task, 50 if n_per_level is None else n_per_level, seed)
    tasks = check_task(dataset, task)
    if data_dir is not None:
        return load_local(dataset, tasks, data_dir, split)
    return load_hub(dataset, tasks, split, revision)
