"""Label a run's continuations A/B/C (resumable), and measure agreement with blind human annotators.

    python -m behavioural.label RUN_DIR [--labeller rule] [--labeller judge:<model>] [--final rule|judge|...] [--labelling NAME]
    python -m behavioural.label RUN_DIR --resume [--labelling NAME]       # continue an interrupted labelling
    python -m behavioural.label RUN_DIR --export-sheet N --seed S     # blind annotation (behavioural.labels.sheets)
    python -m behavioural.label RUN_DIR --import-sheet FILE [FILE ...] [--key KEY] [--labelling NAME]

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

``--resume`` continues the newest unfinished labelling (or ``--labelling``) with its stored labellers, and gives
records identical to an uninterrupted labelling. One writer per labelling (``labels/<name>/.lock``).

The automatic name joins the labellers' names (``rule``, ``rule+judge-smollm2-135m-instruct``; ``_final-<x>``
when the final labeller is not the first) and is suffixed ``-2``, ``-3``... when taken: a finished labelling
is never overwritten. An explicit ``--labelling`` that exists is an error (``--resume`` continues it).

**Final label rule** (:data:`FINAL_RULE`, recorded in settings and summary): C from correctness alone - a
parseable wrong answer is ``C``; an unparseable answer is null. For a correct answer the chosen (``--final``)
labeller decides: noticed -> ``B`` (noticed and repaired), not noticed -> ``A`` (bypass), undecided (e.g. no
strict majority of judge variants) -> null. Controls are labelled by the same rule and reported separately
(a control's A/B tells how often the labeller "sees" a repair where no error was injected).

Blind annotation sheets and Cohen's kappa live in :mod:`behavioural.labels.sheets`. This module is the stage's
public face and the command's home; the pieces live in :mod:`behavioural.labels.labelling` (labelling, resuming,
reading), :mod:`behavioural.labels.records` (the record and the final-label rule),
:mod:`behavioural.labels.label_summary` (summary and its text/markdown form) and :mod:`behavioural.labels.cli`.
"""
from __future__ import annotations

import sys

from behavioural.labels.cli import build_parser, main
from behavioural.labels.label_summary import format_summary, summarize
from behavioural.labels.labellers import JudgeLabeller, RuleLabeller, kappa, make_labeller, variant_agreement
from behavioural.labels.labelling import (
    LabelConfig,
    build_labellers,
    check_tail,
    is_complete,
    label_run,
    label_stage,
    load_labels,
    load_run,
    read_run,
)
from behavioural.labels.records import (
    FINAL_RULE,
    GROUP_KEYS,
    LABELS,
    SCHEMA_VERSION,
    SUMMARY_FILE,
    LabelError,
    LabelRecord,
    final_label,
    make_record,
)
from behavioural.labels.sheets import (
    SHEET_COLUMNS,
    SheetError,
    compare_sheets,
    export_sheet,
    format_agreement,
    read_sheet,
)

_make_record = make_record  # the old private name (tests/test_answers.py imports it)

__all__ = [
    "FINAL_RULE", "GROUP_KEYS", "LABELS", "SCHEMA_VERSION", "SHEET_COLUMNS", "SUMMARY_FILE",
    "JudgeLabeller", "LabelConfig", "LabelError", "LabelRecord", "RuleLabeller", "SheetError",
    "build_labellers", "build_parser", "check_tail", "compare_sheets", "export_sheet", "final_label",
    "format_agreement", "format_summary", "is_complete", "kappa", "label_run", "label_stage", "load_labels",
    "load_run", "main", "make_labeller", "make_record", "read_run", "read_sheet", "summarize", "variant_agreement",
]

if __name__ == "__main__":
    sys.exit(main())
