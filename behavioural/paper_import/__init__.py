"""Import the paper's released labelled continuations into a run directory of this toolkit.

    python -m behavioural.paper_import SRC --output-dir RUN_DIR [--model NAME] [--baseline-accuracy gsm8k=0.865,bbh=0.579]

``SRC`` is a local JSON list or JSON Lines file of the paper's rows (the schema of ``data/samples/*_sample_50.json``
in r2m-ai/load-bearing-cot, or of the Hugging Face release ``ReneeJia/cot-load-bearingness``), a local copy of the
release (a directory laid out as the dataset repository: ``data/continuations/*.jsonl``), or ``hub`` /
``hf:ReneeJia/cot-load-bearingness`` to download the release with ``datasets`` (only then; add ``--config`` /
``--split`` to pick one part of it). The paper's Table 4 (A/B/C by position, strategy and source) on a machine
with network access::

    python -m behavioural.paper_import hub --model gemma-2-9b-it --output-dir runs/paper-gemma \\
        && python -m behavioural.gradient runs/paper-gemma --output-dir runs/paper-gemma-gradient

The importer prints the table itself and writes it as ``RUN_DIR/table4.csv`` in the paper's layout
(``Category,Setting,Behavior,Count,Percentage``, its setting names: ``early (25%)``, ``GSM8K``...; the release's
``aggregates/behavioral_taxonomy.csv``); ``behavioural.gradient`` adds the clustered rates, the regression and
the deviance split. With the released model's weights, the probes follow on the imported rows (their inputs
are the prompt + perturbed prefix as released, not the chat-templated text; the release gives no token counts,
so none is checked)::

    python -m activations.cache runs/paper-gemma --labelling paper \
        && python -m probes.train runs/paper-gemma/activations.h5 --probe logistic,mlp --paper-table

What it writes into ``RUN_DIR`` (refused if it exists; nothing is left behind on error):

* ``manifest.json`` - ``kind: paper_import``, the source and its sha256, the model, ``label_source: paper``,
  ``baselines_eligible_only: true`` (the release holds only questions whose baseline was correct, so baseline
  accuracy cannot be recomputed from it; ``--baseline-accuracy`` records published figures per dataset/task);
* ``baselines.jsonl`` - one :class:`~loadbearing.records.Baseline` per question (its released baseline CoT);
* ``continuations.jsonl`` - one perturbed :class:`~loadbearing.records.Continuation` per row. ``correct`` and
  ``label`` come from the paper's final label (C = wrong); ``input_text`` is the paper's prompt + perturbed
  prefix (not the chat-templated text the model saw; token counts are 0 = unknown). No controls are released.
* ``table4.csv`` - the paper's Table 4 from the final labels (above);
* ``labels/paper/`` - the final label per row (judge label when present, else the rule label: the release's
  ``final_label``) with both the rule's and the judge's verdict under ``labellers``; ``labels/paper-rule/`` -
  the rule label alone, so the labelling-agreement tools can compare the two.

``SRC`` may also be the paper's human-annotation sheet (a CSV with ``annotation_id, source, prompt,
original_step, perturbed_step, continuation, reference_answer, correct_letter, ...``: the 500 continuations
of ``data/annotations/study_n500`` that two annotators labelled A/B/C). Those rows carry no strategy,
position, prefix or label: each continuation is scored with this toolkit's scorer (gold: the reference
answer, MMLU's ``correct_letter``), its strategy is the edit's shape (``paper:arithmetic`` - only numbers
or operators changed, ``paper:appended`` - the original step kept with text added, ``paper:replaced``), no labelling is
written, and ``python -m behavioural.label RUN_DIR --labeller rule`` labels them, so the rule's B count can be
set beside the annotators' (their counts are in the study's ``analysis/results_n500.json``)::

    python -m behavioural.paper_import data_to_label_annotator2.csv --model paper-8-9b --output-dir runs/paper-n500 \
        && python -m behavioural.label runs/paper-n500 --labeller rule

BBH rows carry no task name; ``--bbh-task-map FILE`` (JSON id -> task, the paper's
``data/processed/bbh_task_mapping.json``) or ``--data-dir`` (the BBH files, concatenated in task order as the
paper did) fills it in, else the task is left empty.
"""
from __future__ import annotations

from behavioural.paper_import.cli import build_parser, main
from behavioural.paper_import.convert import (
    LABEL_NAMES,
    REQUIRED,
    convert,
    convert_annotations,
    edit_shape,
    final_label,
    judge_label,
    rule_label,
)
from behavioural.paper_import.rows import HUB_ID, PaperImportError, bbh_task_map, parse_accuracy, read_rows
from behavioural.paper_import.write import TABLE4_COLUMNS, TABLE4_FILE, import_rows, label_records, table4, write_table4

__all__ = ["HUB_ID", "LABEL_NAMES", "REQUIRED", "PaperImportError", "bbh_task_map", "build_parser", "convert",
           "convert_annotations", "edit_shape", "final_label", "import_rows", "judge_label", "label_records", "main",
           "parse_accuracy", "read_rows", "rule_label", "table4", "TABLE4_COLUMNS", "TABLE4_FILE", "write_table4"]
