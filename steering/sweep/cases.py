"""python -m steering.sweep RUN_DIR --directions RUN_DIR/probes  (this module: which cases are steered)

A *case* is one perturbed continuation of the run, re-generated under each setting. The sample is:

* distinct inputs only: continuations with the same ``input_text`` are one model input, kept once;
* disjoint from the directions' fitting questions: a case whose question the directions were fitted on
  (recorded by the probes in ``directions.h5``, or listed with ``--exclude-questions FILE``) is never
  steered; when the file records a held-out list, only those questions are steered;
* stratified over questions: questions are visited in a seeded random order, round-robin, taking at most
  ``per_question`` C cases from each, until ``max_cases`` - so a small sample spans as many questions as
  it can, and no question dominates.

Questions are identified by their key, :func:`loadbearing.runs.question_key_of` (the record's
``question_key``, else its ``question_id``); a record written before runs recorded ``question_key`` gets the
key of its question text (:func:`loadbearing.questions.data.question_key`) first. The sample records both.
"""
from __future__ import annotations

import json
from collections import defaultdict
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from loadbearing.questions.data import question_key
from loadbearing.runs import question_key_of
from steering.sweep.config import SweepError

CASE_FIELDS = ("id", "question_id", "question_key", "label", "input_text", "dataset", "task", "gold", "strategy",
               "position")


def text_key(text: str) -> str:
    """The question key of a question text (:func:`loadbearing.questions.data.question_key`)."""
    return question_key(text)


def case_dict(rec: Any, question_texts: dict[str, str]) -> dict[str, Any]:
    """A continuation record (dataclass or dict) as the sweep's case dict (see ``CASE_FIELDS``)."""
    d = rec if isinstance(rec, dict) else rec.to_dict()
    if not d.get("question_key") and question_texts.get(d["question_id"]):  # a record from before question_key
        d = dict(d, question_key=question_key(question_texts[d["question_id"]]))
    return {"id": d["id"], "question_id": d["question_id"], "question_key": question_key_of(d), "label": d.get("label"),
            "input_text": d["input_text"], "dataset": d.get("dataset"), "task": d.get("task"), "gold": d["gold"],
            "strategy": d.get("strategy"), "position": d.get("position")}


def read_question_list(path: str | Path) -> set[str]:
    """Question keys or ids, one per line (``#`` comments allowed) or a JSON list."""
    p = Path(path)
    if not p.is_file():
        raise SweepError(f"--exclude-questions file {str(p)!r} not found; pass a file with one question key or id per line")
    text = p.read_text(encoding="utf-8")
    if text.lstrip().startswith("["):
        try:
            items = json.loads(text)
        except ValueError as e:
            raise SweepError(f"{str(p)!r} is not a valid JSON list ({e}); write one question key or id per line") from None
        return {str(x) for x in items}
    return {ln.split("#", 1)[0].strip() for ln in text.splitlines() if ln.split("#", 1)[0].strip()}


@dataclass
class CaseSample:
    c: list[dict[str, Any]]
    non_c: list[dict[str, Any]]
    stats: dict[str, Any] = field(default_factory=dict)

    @property
    def all(self) -> list[dict[str, Any]]:
        return self.c + self.non_c


def _in(case: dict[str, Any], keys: set[str]) -> bool:
    return case["question_key"] in keys or str(case["question_id"]) in keys


def _stratified(pool: list[dict[str, Any]], n: int | None, per_question: int, rng: np.random.Generator) -> list[dict[str, Any]]:
    by_q: dict[str, list[dict]] = defaultdict(list)
    for c in sorted(pool, key=lambda c: c["id"]):
        by_q[c["question_key"]].append(c)
    qs = sorted(by_q)
    qs = [qs[i] for i in rng.permutation(len(qs))]
    for q in qs:
        lst = by_q[q]
        by_q[q] = [lst[i] for i in rng.permutation(len(lst))][:per_question]
    out: list[dict] = []
    for rnd in range(per_question):  # round-robin: every question's first case before any second one
        for q in qs:
            if n is not None and len(out) >= n:
                return out
            if rnd < len(by_q[q]):
                out.append(by_q[q][rnd])
    return out


def select_cases(cases: Sequence[dict[str, Any]], *, which: str = "C", max_cases: int | None = None,
                 per_question: int = 2, n_non_c: int | None = None, seed: int = 0,
                 exclude: Iterable[str] | None = None, include: Iterable[str] | None = None) -> CaseSample:
    """The seeded, question-stratified sample of C cases (and, with ``which="all"``, of non-C cases).

    ``exclude``: question keys/ids never steered (the directions' fitting questions); ``include``: when given,
    only these questions are steered (the recorded held-out set).
    """
    exclude_s = set(exclude or ())
    include_s = set(include) if include is not None else None
    seen_inputs: set[str] = set()
    distinct: list[dict[str, Any]] = []
    n_dup = 0
    for c in sorted(cases, key=lambda c: c["id"]):
        if c["input_text"] in seen_inputs:
            n_dup += 1
            continue
        seen_inputs.add(c["input_text"])
        distinct.append(c)
    kept = [c for c in distinct if not _in(c, exclude_s) and (include_s is None or _in(c, include_s))]
    n_fit = len(distinct) - len(kept)
    rng = np.random.default_rng(seed)
    pool_c = [c for c in kept if c["label"] == "C"]
    c_sample = _stratified(pool_c, max_cases, per_question, rng)
    non: list[dict[str, Any]] = []
    if which == "all":
        pool_n = [c for c in kept if c["label"] == "non-C"]
        n = len(c_sample) if n_non_c is None else n_non_c
        non = _stratified(pool_n, n, per_question, rng)
    stats = {
        "n_perturbed": len(cases),
        "n_distinct_inputs": len(distinct),
        "n_duplicate_inputs_dropped": n_dup,
        "n_excluded_fit_questions": n_fit,
        "n_c_available": len(pool_c),
        "n_c_questions_available": len({c["question_key"] for c in pool_c}),
        "n_c_cases": len(c_sample),
        "n_c_questions": len({c["question_key"] for c in c_sample}),
        "n_non_c_cases": len(non),
        "per_question": per_question,
        "max_cases": max_cases,
        "seed": seed,
    }
    return CaseSample(c_sample, non, stats)


__all__ = ["CASE_FIELDS", "CaseSample", "case_dict", "read_question_list", "select_cases", "text_key"]
