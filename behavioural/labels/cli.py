"""The labelling command's parser and ``main`` (run as ``python -m behavioural.label``; see that module)."""
from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence
from pathlib import Path

from behavioural.labels.label_summary import format_summary
from behavioural.labels.labelling import LabelConfig, label_stage
from behavioural.labels.records import SUMMARY_FILE, LabelError
from behavioural.labels.sheets import SheetError, compare_sheets, export_sheet, format_agreement, unique_path
from loadbearing.cli import OneLineParser, add_labelling, add_quiet, run_cli
from loadbearing.files import RunDirError, read_json, write_json

__all__ = ["build_parser", "main"]


def build_parser() -> argparse.ArgumentParser:
    ap = OneLineParser(
        prog="python -m behavioural.label",
        description="Label a run's continuations A/B/C (new labels/<name>/ per run, never overwritten; --resume continues "
                    "an interrupted one), or export/import blind human annotation sheets and report Cohen's kappa.",
    )
    inp = ap.add_argument_group("the run and its labelling")
    inp.add_argument("run_dir", help="run directory written by python -m behavioural.run")
    add_labelling(inp, "labelling directory name under RUN_DIR/labels (default: from the labellers; an existing name "
                       "is an error); with --resume: the labelling to continue; with --import-sheet: the labelling to "
                       "compare against (the newest when omitted)", dest="name", deprecated=("--name",))
    inp.add_argument("--resume", action="store_true",
                     help="continue the unfinished labelling (--labelling, or the only unfinished one) with its stored "
                          "labellers")
    inp.add_argument("--allow-incomplete", action="store_true",
                     help="label a run whose manifest does not say it finished (its rates cover a partial run)")
    lab = ap.add_argument_group("labellers")
    lab.add_argument("--labeller", action="append", default=None, metavar="SPEC",
                     help="'rule' (transparent notice detector) or 'judge:<model>' (any model load_model can load); "
                          "repeat to combine (default: rule; with --resume: the labelling's own)")
    lab.add_argument("--final", default=None,
                     help="labeller whose notice verdict splits correct answers into A/B: a --labeller spec, or 'judge' "
                          "when there is one judge (default: the first --labeller)")
    lab.add_argument("--judge-all", action="store_true",
                     help="judge every continuation, not only those with a correct answer")
    judge = ap.add_argument_group("the judge model")
    judge.add_argument("--device", default=None, help="judge device: cpu, cuda, cuda:N or auto")
    judge.add_argument("--dtype", default=None, help="judge dtype: float32, float16, bfloat16 or auto")
    judge.add_argument("--quantize", default=None, choices=("4bit", "8bit"),
                       help="load the judge quantized (bitsandbytes)")
    judge.add_argument("--judge-batch-size", type=int, default=8, help="judge generation batch size")
    judge.add_argument("--judge-max-new-tokens", type=int, default=16,
                       help="tokens a judge may write per prompt (a longer reply whose last line is not a verdict is "
                            "null)")
    sheets = ap.add_argument_group("human annotation sheets")
    sheets.add_argument("--export-sheet", type=int, default=None, metavar="N",
                        help="write a blind annotation sheet of N seeded perturbed continuations + a private key")
    sheets.add_argument("--seed", type=int, default=0, help="sampling seed for --export-sheet")
    sheets.add_argument("--import-sheet", nargs="+", default=None, metavar="FILE",
                        help="filled annotation sheet(s), one per annotator: report Cohen's kappa")
    sheets.add_argument("--key", default=None,
                        help="the export's .key.json (default: the only one in RUN_DIR/annotation)")
    add_quiet(ap.add_argument_group("output"), deprecated=("--no-progress",))
    return ap


def _sheets(args: argparse.Namespace, rd: Path) -> int:
    if args.labeller or args.final or args.resume:
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
        config = LabelConfig(
            run_dir=rd, labellers=tuple(args.labeller or ["rule"]), final=args.final, name=args.name, resume=args.resume,
            allow_incomplete=args.allow_incomplete, device=args.device, dtype=args.dtype, quantize=args.quantize,
            judge_batch_size=args.judge_batch_size, judge_max_new_tokens=args.judge_max_new_tokens,
            judge_all=args.judge_all, progress=not args.quiet, command=tuple(argv))
        out = label_stage(config)
        print(format_summary(read_json(out / SUMMARY_FILE)))
        print(f"wrote {out}")
        return 0

    return run_cli(body, errors=(LabelError, SheetError, ValueError),
                   interrupted_hint=f"continue with: python -m behavioural.label {rd} --resume")
