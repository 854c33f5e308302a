"""report.html's smaller things (issue #32, finding 9): the counting notes render as italics (not a literal
``_Counts..._``), subheadings are never smaller than the body, table cells break between numbers and never
inside one, and the report names the study directory as it was given, not by this machine's absolute path.

    .venv/bin/pytest -q tests/test_report_html.py
"""
from __future__ import annotations

import re
from pathlib import Path


def _html(*blocks):
    from loadbearing.report.html import blocks_html

    return blocks_html(blocks)


def test_an_italic_note_with_code_inside_renders_as_italics():
    from loadbearing.report.blocks import Paragraph
    from study.report.write import _GRADIENT_NOTE, _LABELS_NOTE

    for note in (_LABELS_NOTE, _GRADIENT_NOTE, "_Counts: per cell where a rate shows both rows and `gen` (x)._"):
        out = _html(Paragraph(note))
        assert out.startswith("<p><i>") and out.endswith("</i></p>") and "_Counts" not in out, out
    assert "<code>gen</code>" in _html(Paragraph("_Counts: `gen` here._"))
    assert _html(Paragraph("keep max_cases and `a_b` as they are")) == \
        "<p>keep max_cases and <code>a_b</code> as they are</p>"


def test_subheadings_are_not_smaller_than_the_body():
    from loadbearing.report.blocks import Heading
    from loadbearing.report.html import CSS, block_html
    from study.report.html import HEADING_OFFSET

    body = int(re.search(r"body\{font:(\d+)px", CSS).group(1))
    for level in (3, 4, 5, 6):
        m = re.search(rf"(?:^|[}},])[^{{}}]*\bh{level}\b[^{{}}]*\{{font-size:(\d+)px", CSS)
        assert m and int(m.group(1)) >= body, f"h{level}"
    # the gradient's "## Per task or level" (a "####" in report.md) is an h6 under the section's h2
    assert block_html(Heading("Per task or level", 2), level=HEADING_OFFSET) == "<h6>Per task or level</h6>"


def test_table_cells_break_between_numbers_not_inside_them():
    from loadbearing.report.blocks import table
    from loadbearing.report.html import CSS

    out = _html(table(["setting", "diff pp [95% CI]"], [["L2|k1", "+0.0 [-87.8,+87.8]"]]))
    assert '<span class="nw">[-87.8,+87.8]</span>' in out and '<span class="nw">+0.0</span>' in out and "L2|k1" in out
    assert ".nw{white-space:nowrap}" in CSS and not re.search(r"(^|[},])[^{}]*\btd\b[^{}]*\{overflow-wrap:anywhere", CSS)


def test_the_report_names_the_study_as_given_not_by_its_absolute_path(tmp_path, monkeypatch):
    from study.report import write as report
    from study.stages.core import STAGES

    monkeypatch.chdir(tmp_path)
    (tmp_path / "runs" / "s").mkdir(parents=True)
    rel = Path("runs/s")
    absolute = str((tmp_path / "runs" / "s").resolve())
    import dataclasses

    from loadbearing.report.blocks import Paragraph, blocks_markdown

    st = STAGES[-1]
    monkeypatch.setitem(report.STAGE_BLOCKS, st.name, lambda out: (Paragraph(f"wrote {absolute}/steering/sweep.png"),))
    secs = {s.title: s for s in report.sections(rel)}
    body = blocks_markdown(next(s for t, s in secs.items() if t.endswith(st.title)).blocks)
    assert absolute not in body and "wrote runs/s/steering/sweep.png" in body
    # a stage without report objects: its own rendered summary, with the path as given too
    legacy = dataclasses.replace(st, name="legacy", title="Legacy stage", render=lambda out, style: f"wrote {absolute}/x.png")
    monkeypatch.setattr(report, "STAGES", (*STAGES, legacy))
    body = blocks_markdown(next(s for s in report.sections(rel) if s.title.endswith(legacy.title)).blocks)
    assert absolute not in body and "wrote runs/s/x.png" in body
