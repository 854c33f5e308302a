"""The labelling command's parser and ``main`` (run as ``python -m behavioural.label``; see that module)."""
from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence
from pathlib import Path

from behavioural.labels.label_summary import format_summary
from behavioural.labels.labelling import JUDGE_GROUP, RUN_GROUP, LabelConfig, label_stage
from behavioural.labels.records import SUMMARY_FILE, LabelError
from behavioural.labels.sheets import SheetError, compare_sheets, export_sheet, format_agreement, unique_path
from loadbearing.cli import run_cli
from loadbearing.files import RunDirError, read_json, write_json
from loadbearing.stage.parser import config_from_parsed, extra, parser_from_config

__all__ = ["build_parser", "main"]

SHEETS = "human annotation sheets"


#: the sheet options: a separate run that labels nothing, so they are not :class:`LabelConfig` fields
SHEET_OPTIONS = (
    extra("--export-sheet", type=int, default=None, metavar="N", group=SHEETS,
          help="write a blind annotation sheet of N seeded perturbed continuations + a private key"),
    extra("--seed", type=int, default=0, group=SHEETS, help="sampling seed for --export-sheet"),
    extra("--import-sheet", nargs="+", default=None, metavar="FILE", group=SHEETS,
          help="filled annotation sheet(s), one per annotator: report Cohen's kappa"),
    extra("--key", default=None, group=SHEETS,
          help="the export's .key.json (default: the only one in RUN_DIR/annotation)"),
)


def build_parser() -> argparse.ArgumentParser:
    """The command's parser: :class:`LabelConfig`'s fields and :data:`SHEET_OPTIONS`."""
    return parser_from_config(
        LabelConfig, prog="python -m behavioural.label",
        description="Label a run's continuations A/B/C (new labels/<name>/ per run, never overwritten; --resume continues "
                    "an interrupted one), or export/import blind human annotation sheets and report Cohen's kappa.",
        groups=(RUN_GROUP, "labellers", JUDGE_GROUP, SHEETS, "output"), extras=SHEET_OPTIONS)


def _sheets(args: argparse.Namespace, rd: Path) -> int:
    if args.labellers or args.final or args.resume:
        raise LabelError("labelling (--labeller/--final/--resume) and sheet export/import are separate runs; run them one "
                         "at a time")
    if args.export_sheet is not None:
        sheet, key = export_sheet(rd, args.export_sheet, args.seed)
        print(f"wrote blind sheet {sheet} and private key {key} (keep the key away from annotators)")
    if args.import_sheet is not None:
        rep = compare_sheets(rd, args.import_sheet, key=args.key, labelling=args.name)
        out = unique_path(rd / "annotation" / "agreement.json")
        out.parent.mkdir(parents=True, exist_ok=True)
        write_json(out, rep)
        print(format_agreement(rep))
        print(f"wrote {out}")
    return 0


def main(argv: Sequence[str] | None = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    args = build_parser().parse_args(argv)
    rd = Path(args.run_dir)

    def body() -> int:
        if not rd.is_dir():
            raise RunDirError(f"run directory {str(rd)!r} does not exist; pass a directory written by python -m behavioural.run")
        if args.export_sheet is not None or args.import_sheet is not None:
            return _sheets(args, rd)
        config: LabelConfig = config_from_parsed(LabelConfig, args, run_dir=rd, command=tuple(argv))
        out = label_stage(config)
        print(format_summary(read_json(out / SUMMARY_FILE)))
        print(f"wrote {out}")
        return 0

    return run_cli(body, errors=(LabelError, SheetError, ValueError),
                   interrupted_hint=f"continue with: python -m behavioural.label {rd} --resume")
