"""Write ``report.md``, ``report.txt`` and ``report.html`` for a study directory from what each stage left there.

    python -m study.report runs/study-20261129-150000

Layout (the first screen answers the study's three questions):

1. **Verdicts** - one line each, with interval, n questions and command (:mod:`study.verdicts`): does the
   error propagate, does the probe beat the metadata, does steering move the outcome. A stage that did not
   run, or had too little data, says so and why.
2. **Study** - model, data, code version, and the one counting convention (:mod:`study.report_counting`).
3. The stages' sections (:data:`study.stages.STAGES`), each the stage's own summary with the report's edits
   (:mod:`study.report_markdown`): headings kept inside their section, empty columns dropped, a table
   footnote kept a footnote, tables longer than :data:`FOLD_ROWS` rows folded (``<details>`` in HTML, a
   pointer line to the stage's file in markdown and text). The behaviour section is laid out from
   ``summary.json`` by :mod:`study.report_behaviour`; the steering figure is redrawn with a short title
   (:mod:`study.report_figures`).
4. The optional sections of :data:`study.report_sections.SECTIONS` whose files exist (the causal tests side by
   side, :mod:`study.report_causal`, with the early-answering curves; activation patching; the
   counting-conventions appendix last). **To add a section for a new stage**, register a
   :class:`study.report_sections.ReportSection` there (its docstring says how, in three steps).

The report is deterministic: the same study files give the same three files (the wall time appears only
when the driver passes it). A stage that has not finished is reported as missing, not as empty numbers.
"""
from __future__ import annotations

import sys
from pathlib import Path

from loadbearing.cli import OneLineParser, run_cli
from loadbearing.files import RunDirError, atomic_write_text
from loadbearing.runs import Run
from study import report_markdown as rm
from study.html import write_report_html
from study.report_counting import CONVENTION
from study.report_sections import SECTIONS
from study.stages import STAGES
from study.verdicts import read_verdicts, verdict_box

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


def _pointer(out: Path, name: str) -> str:
    what, files = POINTERS.get(name, ("full table", ()))
    have = [f for f in files if (out / f).is_file()] or list(files[:1])
    return f"{what}: {' / '.join(have)}" if have else f"{what}: report.html"


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


def _verdicts(out: Path, style: str) -> str:
    box = verdict_box(read_verdicts(out), style=style)
    if (out / "study.json").is_file():
        tail = (f"Every stage ran under `python -m study` (settings in `study.json`; continue with "
                f"`python -m study --resume {out}`); each line's command recomputes or re-runs that stage alone, "
                f"with the settings the stage recorded, into `{out}/rerun/<stage>` (compare its summary with the study's).")
        box += "\n\n" + (tail if style == "md" else tail.replace("`", ""))
    return box


def _behaviour(out: Path, style: str) -> str | None:
    """The behaviour section from ``summary.json`` (:mod:`study.report_behaviour`), None until the stage is done."""
    from behavioural.run import is_complete
    from study.report_behaviour import behaviour_section

    summary = Run(out).summary() if is_complete(out) else None
    return behaviour_section(summary, style) if summary else None


def _stage_body(out: Path, name: str, body: str, style: str) -> str:
    """A stage's own rendered summary with the report's edits (module docstring)."""
    if style != "md":
        if name == "probes":
            body = rm.fold_text_layer_lines(body, _pointer(out, name))
        note = {"labels": _LABELS_NOTE, "gradient": _GRADIENT_NOTE}.get(name)
        return (note.strip("_").replace("`", "") + "\n" + body) if note else body
    if name == "labels":
        if "|" not in body:
            body = f"```\n{body}\n```"
        body = _LABELS_NOTE + "\n\n" + rm.relabel_header(body, "perturbed, by", "perturbed, by recorded cell")
    if name == "gradient":
        body = _GRADIENT_NOTE + "\n\n" + rm.relabel_header(body, "by", "by (per generation)")
    return _edit(body, _pointer(out, name))


def _edit(md: str, pointer: str) -> str:
    md = rm.escape_footnotes(rm.drop_empty_columns(rm.demote_headings(md)))
    return rm.fold_long_tables(md, pointer, min_rows=FOLD_ROWS)


def _figures(out: Path, name: str, output: Path) -> list[str]:
    if name == "steering":
        from study.report_figures import steering_figure

        fig = steering_figure(out)
        if fig:
            return [fig]
    if not output.is_dir() or output == out:
        return []
    return [p.relative_to(out).as_posix() for p in sorted(output.glob("*.png"))]


def sections(out: str | Path, *, style: str = "md", seconds: float | None = None) -> list[tuple[str, str]]:
    """The report as (title, body) pairs in order; ``md`` bodies keep their fold blocks (``report.html``
    renders them as ``<details>``; :func:`render` turns them into pointer lines)."""
    out = Path(out)
    secs = [(VERDICTS_TITLE, _verdicts(out, style)),
            ("Study", _header(out, seconds) + "\n\n" + (CONVENTION if style == "md" else CONVENTION.replace("*", "")))]
    n = 0
    for st in STAGES:
        try:
            body = _behaviour(out, style) if st.name == "behaviour" else st.render(out, style)
            if body is not None:
                body = _stage_body(out, st.name, body, style)
        except Exception as e:  # a damaged stage output is reported, not fatal to the report
            body = f"(could not render: {type(e).__name__}: {e})"
        if body is None and not st.default:
            continue  # an optional stage (another causal test) that this study did not run
        if body is None:
            body = f"_{st.name}: not run yet, or not finished._" if style == "md" else f"({st.name}: not run yet)"
        else:
            figs = _figures(out, st.name, st.output(out))
            body += "".join(f"\n\n![{Path(f).stem}]({f})" if style == "md" else f"\nfigure: {f}" for f in figs)
        n += 1  # numbered in the order shown (an optional stage that did not run takes no number)
        secs.append((f"{n}. {st.title}", _as_given(out, body)))
    for sec in SECTIONS:
        try:
            body = sec.render(out)
        except Exception as e:
            body = f"(could not render: {type(e).__name__}: {e})"
        if body is None:
            continue
        n += 1
        secs.append((f"{n}. {sec.title}", _edit(body, _pointer(out, sec.name)) if style == "md" else
                     rm.unfold(_edit(body, _pointer(out, sec.name)), "text")))
    return secs


def _as_given(out: Path, body: str) -> str:
    """A stage's text with this machine's absolute path of the study directory written as the study was named
    (a relative ``runs/study-...`` stays relative: the report reads the same on another machine)."""
    if out.is_absolute():
        return body
    return body.replace(str(out.resolve()), out.as_posix())


def _join(title: str, secs: list[tuple[str, str]], style: str) -> str:
    parts = [f"# {title}"] if style == "md" else [title, "=" * len(title)]
    for t, body in secs:
        body = rm.unfold(body, style)
        parts += ["", f"## {t}", "", body] if style == "md" else ["", t, "-" * len(t), body]
    return "\n".join(parts) + "\n"


def render(out: str | Path, *, style: str = "md", seconds: float | None = None) -> str:
    """The whole report as one string (``md`` or ``text``); folded tables as pointer lines."""
    out = Path(out)
    return _join(f"Study report: {out.name}", sections(out, style=style, seconds=seconds), style)


def is_written(out: str | Path) -> bool:
    """Whether every file of :data:`REPORT_FILES` is in the study directory."""
    return all((Path(out) / name).is_file() for name in REPORT_FILES)


def write_report(out: str | Path, *, seconds: float | None = None) -> Path:
    """Write ``report.md``, ``report.txt`` and ``report.html`` into the study directory (each atomically);
    returns the markdown path."""
    out = Path(out)
    secs = sections(out, style="md", seconds=seconds)
    title = f"Study report: {out.name}"
    path = atomic_write_text(out / "report.md", _join(title, secs, "md"))
    atomic_write_text(out / "report.txt", render(out, style="text", seconds=seconds))
    browse = "browse.html" if (out / "browse.html").is_file() else None
    write_report_html(out, secs, browse=browse, title=title, box=VERDICTS_TITLE)
    return path


def main(argv: list[str] | None = None) -> int:
    ap = OneLineParser(prog="python -m study.report", description=(__doc__ or "").split("\n\n")[0])
    ap.add_argument_group("input (the report is written into it)").add_argument(
        "study_dir", help="a study directory written by python -m study")
    args = ap.parse_args(argv)

    def body() -> int:
        d = Path(args.study_dir)
        if not d.is_dir():
            raise RunDirError(f"study directory {str(d)!r} does not exist; pass a directory written by python -m study")
        print(write_report(d))
        return 0

    return run_cli(body)


if __name__ == "__main__":
    sys.exit(main())
