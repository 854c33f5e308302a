"""Write ``report.md``, ``report.txt`` and ``report.html`` for a study directory from what each stage left there.

    python -m study.report runs/study-20261129-150000

Layout (the first screen answers the study's three questions):

1. **Verdicts** - one line each, with interval, n questions and command (:mod:`study.report.verdicts`): does the
   error propagate, does the probe beat the metadata, does steering move the outcome. A stage that did not
   run, or had too little data, says so and why.
2. **Study** - model, data, code version, and the one counting convention (:mod:`study.report.counting`).
3. The stages' sections (:data:`study.stages.STAGES`), each built as report objects (:mod:`loadbearing.report`)
   from the stage's JSON by the stage's own ``summary_blocks`` (:data:`STAGE_BLOCKS`), with the report's edits
   made on the objects: headings kept inside their section, empty columns dropped, a table footnote kept a
   footnote, tables longer than :data:`FOLD_ROWS` rows folded (``<details>`` in HTML, a pointer line to the
   stage's file in markdown and text). The behaviour section is laid out from ``summary.json`` by
   :mod:`study.report.behaviour`; the steering figure is redrawn with a short title (:mod:`study.report.figures`).
   A stage without ``summary_blocks`` shows its own rendered summary as it is (:class:`loadbearing.report.Preformatted`).
4. The optional sections of :data:`study.report.sections.SECTIONS` whose files exist (the causal tests side by
   side, :mod:`study.report.causal`, with the early-answering curves; activation patching; the
   counting-conventions appendix last). **To add a section for a new stage**, register a
   :class:`study.report.sections.ReportSection` there (its docstring says how, in three steps).

``report.md``, ``report.txt`` and ``report.html`` are the same objects through the three renderers
(:func:`loadbearing.report.render_markdown`, :func:`~loadbearing.report.render_text`, :mod:`loadbearing.report.html`);
nothing is parsed back from text, and each table row carries the trace-browser filter it links to.

The report is deterministic: the same study files give the same three files (the wall time appears only
when the driver passes it). A stage that has not finished is reported as missing, not as empty numbers.
"""
from __future__ import annotations

import argparse
import sys
from collections.abc import Callable
from dataclasses import dataclass, fields, is_dataclass, replace
from pathlib import Path
from typing import TypeVar

from loadbearing.cli import run_cli
from loadbearing.files import RunDirError, atomic_write_text, read_json
from loadbearing.report.blocks import (
    Block,
    Code,
    Figure,
    Paragraph,
    Preformatted,
    Section,
    Table,
    Tight,
    blocks_markdown,
    fold_long_tables,
    render_markdown,
    render_text,
)
from loadbearing.runs import ACTIVATIONS, SKIPPED_STAGE, SUMMARY, Run
from loadbearing.stage.parser import config_from_parsed, option, parser_from_config
from loadbearing.stats import FEW_CLUSTERS_MARK, FEW_CLUSTERS_NOTE
from study.report.behaviour import behaviour_blocks
from study.report.counting import CONVENTION
from study.report.figures import steering_figure
from study.report.html import write_report_html
from study.report.sections import SECTIONS
from study.report.verdicts import read_verdicts
from study.stages.checks import read_skipped
from study.stages.core import STAGES, Stage

#: the files :func:`write_report` writes into the study directory (it may add ``report_figures/``)
REPORT_FILES = ("report.md", "report.txt", "report.html")
#: tables longer than this are folded
FOLD_ROWS = 12
VERDICTS_TITLE = "Verdicts"
#: where each stage's full tables live (the pointer line of a folded table)
POINTERS = {"probes": ("full per-layer table", ("probes/results.json", "probes/summary.md")),
            "gradient": ("full table", ("gradient/gradient.json", "gradient/gradient.md")),
            "steering": ("full table", ("steering/summary.json",)),
            "patching": ("full table", ("patching/patching.json", "patching/patching.md"))}
_LABELS_NOTE = ("_Counts: per generation, by recorded cell: each generation once, under the (strategy, position) "
                "cell it was recorded with (the behaviour section counts it in every group it fills)._")
_GRADIENT_NOTE = ("_Counts: per generation, as in section 1: every rate and Table 4 count each distinct generation "
                  "once in every group whose cell it fills (positions one generation fills for one strategy being one "
                  "merged position, e.g. middle=late), and Table 4's total is the verdict's._")
Blocks = tuple[Block, ...]


# ------------------------------------------------------------------------------------------ the stages' blocks
def _behaviour(out: Path) -> Blocks | None:
    """The behaviour section from ``summary.json`` (:mod:`study.report.behaviour`), None until the stage is done."""
    # deferred: keeps behavioural.protocol (and 9 more modules) out of `python -m study.report`'s start-up
    from behavioural.run import is_complete

    summary = Run(out).summary() if is_complete(out) else None
    return behaviour_blocks(summary) if summary else None


def _labels(out: Path) -> Blocks | None:
    # deferred: keeps behavioural.labels (and 5 more modules) out of `python -m study.report`'s start-up
    from behavioural.labels.label_summary import summary_blocks

    # deferred: keeps behavioural.labels (and 11 more modules) out of `python -m study.report`'s start-up
    from behavioural.labels.stage import is_complete

    root = out / "labels"
    parts: list[Block] = []
    for d in sorted(root.iterdir()) if root.is_dir() else []:
        if is_complete(d):
            parts += summary_blocks(read_json(d / SUMMARY))
    return tuple(parts) or None


def _activations(out: Path) -> Blocks | None:
    # deferred: keeps activations (and 12 more modules) out of `python -m study.report`'s start-up
    from activations.cache import is_complete, summarize, summary_blocks

    store = out / ACTIVATIONS
    return summary_blocks(summarize(store)) if is_complete(store) else None


def _probes(out: Path) -> Blocks | None:
    # deferred: keeps probes (and 4 more modules) out of `python -m study.report`'s start-up
    from probes.summary import summary_blocks
    from probes.train import RESULTS, is_complete  # deferred: probes.train loads sklearn

    d = out / "probes"
    return summary_blocks(read_json(d / RESULTS)) if is_complete(d) else None


def _steering(out: Path) -> Blocks | None:
    # deferred: keeps probes (and 22 more modules) out of `python -m study.report`'s start-up
    from steering.sweep.cli import is_complete

    # deferred: keeps steering.sweep.text out of `python -m study.report`'s start-up
    from steering.sweep.text import summary_blocks

    d = out / "steering"
    return summary_blocks(read_json(d / SUMMARY)) if is_complete(d) else None


def _gradient(out: Path) -> Blocks | None:
    # deferred: keeps behavioural.gradient (and 6 more modules) out of `python -m study.report`'s start-up
    from behavioural.gradient import JSON_NAME, is_complete

    # deferred: keeps behavioural.gradient (and 7 more modules) out of `python -m study.report`'s start-up
    from behavioural.gradient.render import summary_blocks

    d = out / "gradient"
    if (d / SKIPPED_STAGE).is_file():
        return (Paragraph("One task/level only: no difficulty gradient (see python -m behavioural.gradient)."),)
    return summary_blocks(read_json(d / JSON_NAME)) if is_complete(d) else None


def _browser(out: Path) -> Blocks | None:
    f = out / "browse.html"
    if not f.is_file():
        return None
    return (Paragraph("Open [browse.html](browse.html) (self-contained, works offline) to read every trace: filters, "
                      "search, j/k keys, permalinks.", f"Open {f} in a browser to read every trace."),)


#: the stages whose section is built from their JSON as report objects (name -> study dir -> blocks, or None when
#: the stage has not finished); the others show their own rendered summary as it is
STAGE_BLOCKS: dict[str, Callable[[Path], Blocks | None]] = {
    "behaviour": _behaviour, "labels": _labels, "gradient": _gradient, "activations": _activations,
    "probes": _probes, "steering": _steering, "browser": _browser}


def _stage(out: Path, st: Stage) -> Blocks | None:
    """A stage's blocks; where the study skipped it for too little data, that reason in one line."""
    fn = STAGE_BLOCKS.get(st.name)
    if fn is None:  # a stage without report objects: its own summary, shown as it is
        md = st.render(out, "md")
        return None if md is None else (Preformatted(md, st.render(out, "text") or md),)
    why = read_skipped(out).get(st.name)
    if why:
        return (Paragraph(f"**Skipped:** {why}.", f"Skipped: {why}."),)
    return fn(out)


# ------------------------------------------------------------------------------------------ the report's edits
def _pointer(out: Path, name: str) -> str:
    what, files = POINTERS.get(name, ("full table", ()))
    have = [f for f in files if (out / f).is_file()] or list(files[:1])
    return f"{what}: {' / '.join(have)}" if have else f"{what}: report.html"


def _tables(blocks: Blocks, edit: Callable[[Table], Table]) -> Blocks:
    def one(b: Block) -> Block:
        if isinstance(b, Tight) and isinstance(b.block, Table):
            return Tight(edit(b.block))
        return edit(b) if isinstance(b, Table) else b

    return tuple(one(b) for b in blocks)


def _relabel(old: str, new: str) -> Callable[[Table], Table]:
    """Rename a table's first header cell ``old`` to ``new`` (a label, such as the counting convention)."""
    return lambda t: replace(t, header=(new, *t.header[1:])) if t.header and t.header[0] == old else t


def _note(md: str) -> Paragraph:
    return Paragraph(md, md.strip("_").replace("`", ""))


def _stage_edits(out: Path, name: str, blocks: Blocks) -> Blocks:
    """A stage's blocks with the report's edits (module docstring)."""
    if name == "labels":
        if not any(isinstance(b, Table) for b in blocks):
            blocks = (Code(blocks_markdown(blocks)),)
        blocks = (_note(_LABELS_NOTE), *_tables(blocks, _relabel("perturbed, by", "perturbed, by recorded cell")))
    if name == "gradient":
        blocks = (_note(_GRADIENT_NOTE), *_tables(blocks, _relabel("by", "by (per generation)")))
    return _edit(out, name, blocks)


def _edit(out: Path, name: str, blocks: Blocks) -> Blocks:
    return fold_long_tables(_tables(blocks, Table.without_empty_columns), _pointer(out, name), min_rows=FOLD_ROWS)


def _figures(out: Path, name: str, output: Path) -> list[str]:
    if name == "steering":
        fig = steering_figure(out)
        if fig:
            return [fig]
    if not output.is_dir() or output == out:
        return []
    return [p.relative_to(out).as_posix() for p in sorted(output.glob("*.png"))]


T = TypeVar("T")


def _map_text(obj: T, fn: Callable[[str], str]) -> T:
    """``obj`` (a block, a tuple of them, a string) with ``fn`` applied to every string in it."""
    if isinstance(obj, str):
        return fn(obj)  # type: ignore[return-value]
    if isinstance(obj, tuple):
        return tuple(_map_text(x, fn) for x in obj)  # type: ignore[return-value]
    if is_dataclass(obj) and not isinstance(obj, type):
        return replace(obj, **{f.name: _map_text(getattr(obj, f.name), fn) for f in fields(obj)
                               if isinstance(getattr(obj, f.name), (str, tuple)) or is_dataclass(getattr(obj, f.name))})
    return obj


def _as_given(out: Path, blocks: Blocks) -> Blocks:
    """A stage's blocks with this machine's absolute path of the study directory written as the study was named
    (a relative ``runs/study-...`` stays relative: the report reads the same on another machine)."""
    if out.is_absolute():
        return blocks
    absolute = str(out.resolve())
    return _map_text(blocks, lambda s: s.replace(absolute, out.as_posix()))


# ------------------------------------------------------------------------------------------ the sections
def _header(out: Path, seconds: float | None) -> str:
    try:
        m = Run(out).manifest
    except RunDirError:
        m = {}
    model = m.get("model") or {}
    s = m.get("settings") or {}
    git = m.get("git") or {}
    return (f"Model {model.get('name')} (weights sha256 {str(model.get('weights_hash'))[:16]}...), dataset "
            f"{s.get('dataset')} task {s.get('task')}, strategies {s.get('strategies')}, positions {s.get('positions')}; "
            f"protocol {m.get('protocol_version')}; git {git.get('commit')}{' (dirty)' if git.get('dirty') else ''}."
            + (f" Wall time {seconds / 60:.1f} min." if seconds else ""))


def _verdicts(out: Path) -> Blocks:
    lines = [v.block() for v in read_verdicts(out)]
    blocks: list[Block] = list(lines)
    if any(FEW_CLUSTERS_MARK in v.line("md") for v in lines):
        blocks.append(Paragraph(FEW_CLUSTERS_NOTE + "."))
    if (out / "study.json").is_file():
        tail = (f"Every stage ran under `python -m study` (settings in `study.json`; continue with "
                f"`python -m study --resume {out}`); each line's command recomputes or re-runs that stage alone, "
                f"with the settings the stage recorded, into `{out}/rerun/<stage>` (compare its summary with the study's).")
        blocks.append(Paragraph(tail, tail.replace("`", "")))
    return tuple(blocks)


def _failed(e: Exception) -> Blocks:
    return (Paragraph(f"(could not render: {type(e).__name__}: {e})"),)


def sections(out: str | Path, *, seconds: float | None = None) -> list[Section]:
    """The report as sections, in order: the verdicts (the box), the study, each stage, the optional sections."""
    out = Path(out)
    secs = [Section(VERDICTS_TITLE, _verdicts(out), box=True),
            Section("Study", (Paragraph(_header(out, seconds)), Paragraph(CONVENTION, CONVENTION.replace("*", "")))),
            ]
    n = 0
    for st in STAGES:
        blocks: Blocks | None
        try:
            blocks = _stage(out, st)
            if blocks is not None:
                blocks = _stage_edits(out, st.name, blocks)
        except Exception as e:  # a damaged stage output is reported, not fatal to the report
            blocks = _failed(e)
        if blocks is None and not st.default:
            continue  # an optional stage (another causal test) that this study did not run
        if blocks is None:
            blocks = (Paragraph(f"_{st.name}: not run yet, or not finished._", f"({st.name}: not run yet)"),)
        else:
            blocks += tuple(Figure(f, Path(f).stem) for f in _figures(out, st.name, st.output(out)))
        n += 1  # numbered in the order shown (an optional stage that did not run takes no number)
        secs.append(Section(f"{n}. {st.title}", _as_given(out, blocks)))
    for sec in SECTIONS:
        try:
            found = sec.blocks(out)
            blocks = None if found is None else _edit(out, sec.name, found)
        except Exception as e:
            blocks = _failed(e)
        if blocks is None:
            continue
        n += 1
        secs.append(Section(f"{n}. {sec.title}", blocks))
    return secs


def render(out: str | Path, *, style: str = "md", seconds: float | None = None) -> str:
    """The whole report as one string (``md`` or ``text``); folded tables as pointer lines."""
    out = Path(out)
    title = f"Study report: {out.name}"
    secs = sections(out, seconds=seconds)
    return render_markdown(secs, title=title) if style == "md" else render_text(secs, title=title)


def is_written(out: str | Path) -> bool:
    """Whether every file of :data:`REPORT_FILES` is in the study directory."""
    return all((Path(out) / name).is_file() for name in REPORT_FILES)


def write_report(out: str | Path, *, seconds: float | None = None) -> Path:
    """Write ``report.md``, ``report.txt`` and ``report.html`` into the study directory (each atomically);
    returns the markdown path."""
    out = Path(out)
    secs = sections(out, seconds=seconds)
    title = f"Study report: {out.name}"
    path = atomic_write_text(out / "report.md", render_markdown(secs, title=title))
    atomic_write_text(out / "report.txt", render_text(secs, title=title))
    browse = "browse.html" if (out / "browse.html").is_file() else None
    write_report_html(out, secs, browse=browse, title=title)
    return path


@dataclass(frozen=True)
class ReportConfig:
    """What ``python -m study.report`` accepts (its parser is built from this field)."""

    study_dir: str = option(positional=True, group="input (the report is written into it)",
                            help="a study directory written by python -m study")


def build_parser() -> argparse.ArgumentParser:
    """The command's parser, built from :class:`ReportConfig`."""
    return parser_from_config(ReportConfig, prog="python -m study.report", description=(__doc__ or "").split("\n\n")[0])


def main(argv: list[str] | None = None) -> int:
    args: ReportConfig = config_from_parsed(ReportConfig, build_parser().parse_args(argv))

    def body() -> int:
        d = Path(args.study_dir)
        if not d.is_dir():
            raise RunDirError(f"study directory {str(d)!r} does not exist; pass a directory written by python -m study")
        print(write_report(d))
        return 0

    return run_cli(body)


if __name__ == "__main__":
    sys.exit(main())
