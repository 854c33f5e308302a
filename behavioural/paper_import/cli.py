"""The importer's command: ``python -m behavioural.paper_import SRC --output-dir RUN_DIR`` (see the package)."""
from __future__ import annotations

import argparse
from collections.abc import Sequence

from behavioural.paper_import.rows import HUB_ID, PaperImportError
from behavioural.paper_import.write import import_rows, table4
from loadbearing.cli import OneLineParser, add_output, run_cli

DESCRIPTION = "Import the paper's released labelled continuations into a run directory of this toolkit."

__all__ = ["build_parser", "main"]


def build_parser() -> argparse.ArgumentParser:
    p = OneLineParser(prog="python -m behavioural.paper_import", description=DESCRIPTION)
    src = p.add_argument_group("the released rows")
    src.add_argument("src", help="JSON list / JSONL file of the paper's rows, or 'hub' / 'hf:OWNER/NAME' to download "
                     f"(default repository {HUB_ID})")
    src.add_argument("--model", default=None, help="the model whose rows to import (required when rows name none "
                     "or several), e.g. gemma-2-9b-it")
    src.add_argument("--config", default=None, help="hub only: dataset config holding the continuation rows")
    src.add_argument("--split", default=None, help="hub only: split (default: all splits)")
    src.add_argument("--limit", type=int, default=None, help="import only the first N rows (for a quick look)")
    meta = p.add_argument_group("what the release leaves out")
    meta.add_argument("--bbh-task-map", default=None, help="JSON id -> BBH task (the paper's bbh_task_mapping.json)")
    meta.add_argument("--data-dir", default=None, help="benchmark folder with bbh/<task>.json, to derive the BBH task "
                      "map")
    meta.add_argument("--baseline-accuracy", default=None, help="published baseline accuracy per dataset/task, e.g. "
                      "gsm8k=0.865,bbh=0.579 (the release holds only eligible baselines)")
    add_output(p.add_argument_group("output"), "dir", "new run directory to write", dest="output", required=True)
    return p


def main(argv: Sequence[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    return run_cli(lambda: _main(args), errors=(PaperImportError,))


def _main(args: argparse.Namespace) -> int:
    res = import_rows(args.src, args.output, model=args.model, config=args.config, split=args.split,
                      bbh_map_file=args.bbh_task_map, data_dir=args.data_dir,
                      baseline_accuracy=args.baseline_accuracy, limit=args.limit)
    lab = res["labels"]
    print(f"imported {res['rows']} continuations of {res['questions']} questions ({res['model']}) into {res['output']}; "
          f"labels A {lab['A']}, B {lab['B']}, C {lab['C']}, unlabelled {lab[None]}")
    for n in res["notes"]:
        print(f"note: {n}")
    if lab["A"] + lab["B"] + lab["C"] == 0:
        print(f"\nnext: python -m behavioural.label {res['output']} --labeller rule")
        return 0
    print(f"\nTable 4 (A/B/C by position, strategy, source; also {res['output']}/table4.csv):")
    print(table4(res["output"]))
    print(f"\nnext: python -m behavioural.gradient {res['output']} --output-dir {res['output']}-gradient")
    return 0
