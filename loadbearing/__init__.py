"""The shared base package: files, locks, runs, records, statistics, tables, CLI helpers, shards, the
generation engine (``loadbearing.engine``), question loaders (``loadbearing.questions``) and the answer
parser. It imports no stage. Importing it loads no model, and no module until a name below is asked for.

The public notebook API (docs/api.md walks through it)::

    from loadbearing import Run, score
    run = Run("runs/demo")                          # a run directory written by python -m behavioural.run
    df = run.continuations_df()                     # one row per (generation, cell), A/B/C labels joined
    df[df.condition == "perturbed"].groupby("position").propagated.mean()   # error-propagation rate
    score("2 + 3 = 5\\nAnswer: 5", {"dataset": "arith", "gold": "5"})      # Score(parsed='5', correct=True)

The stages' readers: ``probes.read_results(RUN_DIR)`` (tidy probe scores), ``steering.read_sweep(RUN_DIR)``
(steered generations), ``python -m study.export_inspect RUN_DIR`` (the run as an inspect_ai eval log).
"""
from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

#: public name -> the module (under ``loadbearing``) that defines it; imported on first access
_LAZY = {
    "Run": "runs",
    "question_key_of": "runs",
    "ModelMismatchError": "runs",
    "continuations_df": "frames",
    "baselines_df": "frames",
    "Baseline": "records",
    "Continuation": "records",
    "Skipped": "records",
    "Question": "questions.data",
    "load_questions": "questions.data",
    "question_key": "questions.data",
    "score": "answers",
    "Score": "answers",
    "extract_answer": "answers",
    "Rate": "stats",
    "wilson_rate": "stats",
    "clustered_rate": "stats",
    "format_rate": "stats",
    "render_table": "tables",
    "load_model": "engine.models",
    "LoadBearingError": "errors",
    "RunDirError": "files",
}

#: the same names as _LAZY (a test checks), written out for linters and type checkers
__all__ = ["Baseline", "Continuation", "LoadBearingError", "ModelMismatchError", "Question", "Rate", "Run",
           "RunDirError", "Score", "Skipped", "baselines_df", "clustered_rate", "continuations_df", "extract_answer",
           "format_rate", "load_model", "load_questions", "question_key", "question_key_of", "render_table", "score",
           "wilson_rate"]

if TYPE_CHECKING:  # for type checkers and IDEs; at run time the names load lazily
    from loadbearing.answers import Score, extract_answer, score
    from loadbearing.engine.models import load_model
    from loadbearing.errors import LoadBearingError
    from loadbearing.files import RunDirError
    from loadbearing.frames import baselines_df, continuations_df
    from loadbearing.questions.data import Question, load_questions, question_key
    from loadbearing.records import Baseline, Continuation, Skipped
    from loadbearing.runs import ModelMismatchError, Run, question_key_of
    from loadbearing.stats import Rate, clustered_rate, format_rate, wilson_rate
    from loadbearing.tables import render_table


def __getattr__(name: str) -> Any:
    mod = _LAZY.get(name)
    if mod is None:
        raise AttributeError(f"module 'loadbearing' has no attribute {name!r}")
    value = getattr(importlib.import_module(f"loadbearing.{mod}"), name)
    globals()[name] = value  # later lookups skip __getattr__
    return value


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(_LAZY))
