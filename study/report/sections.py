"""Optional report sections: a registry of (name, title, blocks) that the report appends after the stages.

A section's ``blocks(study_dir)`` returns its report blocks (:mod:`loadbearing.report`), or None when its files
are absent (then the report leaves it out: an optional stage that did not run is not an error). The blocks may
hold headings (shown inside the section), tables (long ones are folded; a row may carry the trace-browser filter
it links to), and figures (paths relative to the study directory, embedded in ``report.html``).

How to add a section for a new stage (early answering, filler tokens, paraphrase, resampling importance...):

1. let the stage lay out its summary as blocks from its JSON (``summary_blocks(summary) -> tuple[Block, ...]``;
   its own ``summary.md`` is then ``loadbearing.report.blocks_markdown`` of the same blocks);
2. register it, in this module (so that every report has it)::

       register(ReportSection("early_answering", "Early answering: does cutting the chain change the answer?",
                              _early_answering))

   where ``_early_answering(study_dir)`` reads the stage's JSON and returns its blocks, or None when it is
   absent. Keep it deterministic: the same files give the same blocks.
3. add a test in ``tests/test_report.py``: the section is absent without its files and present with them.

The stage must not be imported at module level: import it inside the function, so that the report renders for
a study directory where that stage's package is missing or broken.
"""
from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from loadbearing.files import read_json
from loadbearing.report.blocks import Block


@dataclass(frozen=True)
class ReportSection:
    """One optional section: ``blocks(study_dir)`` gives its blocks, or None when its files are absent."""

    name: str
    title: str
    blocks: Callable[[Path], tuple[Block, ...] | None]


def _patching(out: Path) -> tuple[Block, ...] | None:
    """The patching stage's section from ``patching/patching.json`` (its heat map beside it)."""
    from steering.patching.summary import section_blocks  # deferred: steering.patching.summary loads numpy

    p = Path(out) / "patching" / "patching.json"
    if not p.is_file():
        return None
    obj = read_json(p)
    return section_blocks(obj["summary"], obj["settings"]["layers"], obj["settings"], figure="patching/patching.png")


def _counting(out: Path) -> tuple[Block, ...] | None:
    from study.report.counting import counting_blocks  # deferred: study.report.counting loads numpy

    return counting_blocks(out)


def _causal(out: Path) -> tuple[Block, ...] | None:
    from study.report.causal import causal_blocks  # deferred: study.report.causal loads numpy

    return causal_blocks(out)


def _planted(out: Path) -> tuple[Block, ...] | None:
    from study.validate.shipped import report_blocks  # deferred: study.validate.shipped loads the report blocks

    return report_blocks(out)


#: the optional sections, in report order (after the stages' sections)
SECTIONS: list[ReportSection] = [
    ReportSection("causal", "Causal tests side by side: propagation, early answering, filler, paraphrase, resampling",
                  _causal),
    ReportSection("patching", "Activation patching: where is the error carried?", _patching),
    ReportSection("planted_truth", "Planted truth: which of these tests find a load-bearing chain?", _planted),
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


__all__ = ["SECTIONS", "ReportSection", "register"]
