"""Optional report sections: a registry of (name, title, render) that the report appends after the stages.

A section's ``render(study_dir)`` returns its markdown, or None when its files are absent (then the report
leaves it out: an optional stage that did not run is not an error). The markdown may use headings (they are
demoted to stay inside the section), tables (long ones are folded), and images ``![alt](path)`` relative
to the study directory (embedded in ``report.html``).

How to add a section for a new stage (early answering, filler tokens, paraphrase, resampling importance...):

1. let the stage write its own markdown (say ``RUN_DIR/early_answering/early_answering.md``) beside its JSON;
2. register it, in this module (so that every report has it)::

       register(ReportSection("early_answering", "Early answering: does cutting the chain change the answer?",
                              included_markdown("early_answering/early_answering.md")))

   ``included_markdown(path)`` includes a stage's markdown file (its first heading dropped, its image links
   made relative to the study directory); or write any function ``Path -> str | None`` that reads the stage's
   JSON and lays out markdown itself. Keep it deterministic: the same files give the same text.
3. add a test in ``tests/test_report.py``: the section is absent without its files and present with them.

The stage must not be imported at module level: import it inside the render function, so that the report
renders for a study directory where that stage's package is missing or broken.
"""
from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from study.report_markdown import relink_images


@dataclass(frozen=True)
class ReportSection:
    """One optional section: ``render(study_dir)`` gives its markdown, or None when its files are absent."""

    name: str
    title: str
    render: Callable[[Path], str | None]


def included_markdown(relpath: str, *, figures: tuple[str, ...] = ()) -> Callable[[Path], str | None]:
    """A render function that includes the markdown file ``study_dir/relpath`` (None when it is absent): a
    leading heading is dropped (the section has its own title) and its image links are rewritten relative to
    the study directory; ``figures`` (relative to the file's folder) are appended when present and not
    already linked."""
    def render(out: Path) -> str | None:
        p = Path(out) / relpath
        if not p.is_file():
            return None
        md = p.read_text(encoding="utf-8").strip("\n")
        md = re.sub(r"\A#{1,6}\s+[^\n]*\n*", "", md)
        folder = Path(relpath).parent.as_posix()
        if folder and folder != ".":
            md = relink_images(md, folder)
        for f in figures:
            rel = f"{folder}/{f}" if folder and folder != "." else f
            if (Path(out) / rel).is_file() and f"({rel})" not in md:
                md += f"\n\n![{Path(f).stem}]({rel})"
        return md

    return render


def _counting(out: Path) -> str | None:
    from study.report_counting import counting_table

    return counting_table(out)


def _causal(out: Path) -> str | None:
    from study.report_causal import causal_section

    return causal_section(out)


#: the optional sections, in report order (after the stages' sections)
SECTIONS: list[ReportSection] = [
    ReportSection("causal", "Causal tests side by side: propagation, early answering, filler, paraphrase, resampling",
                  _causal),
    ReportSection("patching", "Activation patching: where is the error carried?",
                  included_markdown("patching/patching.md", figures=("patching.png",))),
    ReportSection("counting", "Counting conventions", _counting),
]


def register(section: ReportSection, *, before: str | None = "counting") -> None:
    """Add ``section`` (replacing one of the same name), placed before the section named ``before`` (default:
    before the counting appendix, which stays last; None: at the end)."""
    for i, s in enumerate(SECTIONS):
        if s.name == section.name:
            SECTIONS[i] = section
            return
    names = [s.name for s in SECTIONS]
    SECTIONS.insert(names.index(before) if before in names else len(SECTIONS), section)


__all__ = ["SECTIONS", "ReportSection", "included_markdown", "register"]
