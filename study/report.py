"""Write ``report.md``, ``report.txt`` (and ``report.html``) for a study directory from what each stage left there.

    python -m study.report runs/study-20261129-150000

The report only joins each stage's own rendered summary (``format_summary(summary, style="md"|"text")``
of :mod:`behavioural.run`, :mod:`behavioural.labels.stage`, :mod:`activations.cache`, :mod:`probes.train`,
:mod:`steering.sweep`) under a header naming the model, data and code version. A stage that has not
finished is reported as missing, not as empty numbers.
"""
from __future__ import annotations

import sys
from pathlib import Path

from loadbearing.cli import OneLineParser, run_cli
from loadbearing.files import RunDirError, atomic_write_text
from loadbearing.runs import Run
from study.html import sections_from_markdown, write_report_html
from study.stages import STAGES

#: the files :func:`write_report` writes into the study directory
REPORT_FILES = ("report.md", "report.txt", "report.html")


def _header(out: Path, seconds: float | None, style: str) -> list[str]:
    try:
        m = Run(out).manifest
    except RunDirError:
        m = {}
    model = m.get("model") or {}
    s = m.get("settings") or {}
    git = m.get("git") or {}
    line = (f"Model {model.get('name')} (weights sha256 {str(model.get('weights_hash'))[:16]}...), dataset "
            f"{s.get('dataset')} task {s.get('task')}, strategies {s.get('strategies')}, positions {s.get('positions')}; "
            f"protocol {m.get('protocol_version')}; git {git.get('commit')}{' (dirty)' if git.get('dirty') else ''}."
            + (f" Wall time {seconds / 60:.1f} min." if seconds else ""))
    title = f"Study report: {out.name}"
    return [f"# {title}", "", line] if style == "md" else [title, "=" * len(title), line]


def render(out: str | Path, *, style: str = "md", seconds: float | None = None) -> str:
    """The whole report as one string (markdown or text)."""
    out = Path(out)
    parts = _header(out, seconds, style)
    for i, st in enumerate(STAGES, 1):
        title = f"{i}. {st.title}"
        try:
            body = st.render(out, style)
        except Exception as e:  # a damaged stage output is reported, not fatal to the report
            body = f"(could not render: {type(e).__name__}: {e})"
        if body is None:
            body = f"_{st.name}: not run yet, or not finished._" if style == "md" else f"({st.name}: not run yet)"
        elif style == "md" and st.name == "labels" and "|" not in body:
            body = f"```\n{body}\n```"
        figs = sorted(p.relative_to(out) for p in st.output(out).glob("*.png")) if st.output(out).is_dir() and \
            st.output(out) != out else []
        if style == "md":
            parts += ["", f"## {title}", "", body] + [f"\n![{f.stem}]({f.as_posix()})" for f in figs]
        else:
            parts += ["", title, "-" * len(title), body] + [f"figure: {f.as_posix()}" for f in figs]
    return "\n".join(parts) + "\n"


def is_written(out: str | Path) -> bool:
    """Whether every file of :data:`REPORT_FILES` is in the study directory."""
    return all((Path(out) / name).is_file() for name in REPORT_FILES)


def write_report(out: str | Path, *, seconds: float | None = None) -> Path:
    """Write ``report.md``, ``report.txt`` and ``report.html`` into the study directory (each atomically);
    returns the markdown path."""
    out = Path(out)
    md = render(out, style="md", seconds=seconds)
    path = atomic_write_text(out / "report.md", md)
    atomic_write_text(out / "report.txt", render(out, style="text", seconds=seconds))
    browse = "browse.html" if (out / "browse.html").is_file() else None
    write_report_html(out, sections_from_markdown(md), browse=browse)
    return path


def main(argv: list[str] | None = None) -> int:
    ap = OneLineParser(prog="python -m study.report", description=(__doc__ or "").split("\n\n")[0])
    ap.add_argument("study_dir", help="a study directory written by python -m study")
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
