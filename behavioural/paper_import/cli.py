"""The importer's command: ``python -m behavioural.paper_import SRC --output-dir RUN_DIR`` (see the package)."""
from __future__ import annotations

import argparse
from collections.abc import Sequence
from dataclasses import dataclass

from behavioural.paper_import.rows import HUB_ID, PaperImportError
from behavioural.paper_import.write import import_rows, table4
from loadbearing.cli import run_cli
from loadbearing.stage.parser import config_from_parsed, option, parser_from_config

DESCRIPTION = "Import the paper's released labelled continuations into a run directory of this toolkit."

__all__ = ["build_parser", "main"]


_SRC, _META = "the released rows", "what the release leaves out"


@dataclass(frozen=True)
class ImportConfig:
    """What ``python -m behavioural.paper_import`` accepts (its parser is built from these fields)."""

    src: str = option(positional=True, group=_SRC, help="JSON list / JSONL file of the paper's rows, or 'hub' / "
                      f"'hf:OWNER/NAME' to download (default repository {HUB_ID})")
    model: str | None = option(None, group=_SRC, help="the model whose rows to import (required when rows name none or "
                               "several), e.g. gemma-2-9b-it")
    config: str | None = option(None, group=_SRC, help="hub only: dataset config holding the continuation rows")
    split: str | None = option(None, group=_SRC, help="hub only: split (default: all splits)")
    limit: int | None = option(None, type=int, group=_SRC, help="import only the first N rows (for a quick look)")
    bbh_task_map: str | None = option(None, group=_META,
                                      help="JSON id -> BBH task (the paper's bbh_task_mapping.json)")
    data_dir: str | None = option(None, group=_META, help="benchmark folder with bbh/<task>.json, to derive the BBH "
                                  "task map")
    baseline_accuracy: str | None = option(None, group=_META, help="published baseline accuracy per dataset/task, "
                                           "e.g. gsm8k=0.865,bbh=0.579 (the release holds only eligible baselines)")
    output: str = option(flag="--output-dir", deprecated=("--output",), metavar="DIR", required=True, group="output",
                         help="new run directory to write")


def build_parser() -> argparse.ArgumentParser:
    """The command's parser, built from :class:`ImportConfig`."""
    return parser_from_config(ImportConfig, prog="python -m behavioural.paper_import", description=DESCRIPTION,
                              groups=(_SRC, _META, "output"))


def main(argv: Sequence[str] | None = None) -> int:
    config: ImportConfig = config_from_parsed(ImportConfig, build_parser().parse_args(argv))
    return run_cli(lambda: _main(config), errors=(PaperImportError,))


def _main(args: ImportConfig) -> int:
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
