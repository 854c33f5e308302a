"""report.html's smaller things (issue #32, finding 9): the counting notes render as italics (not a literal
``_Counts..._``), subheadings are never smaller than the body, table cells break between numbers and never
inside one, and the report names the study directory as it was given, not by this machine's absolute path.

    .venv/bin/pytest -q tests/test_report_html.py
"""
from __future__ import annotations

import re
from pathlib import Path


def test_an_italic_note_with_code_inside_renders_as_italics():
    from study.html import markdown_to_html
    from study.report import _GRADIENT_NOTE, _LABELS_NOTE

    for note in (_LABELS_NOTE, _GRADIENT_NOTE, "_Counts: per cell where a rate shows both rows and `gen` (x)._"):
        out = markdown_to_html(note)
        assert out.startswith("<p><i>") and out.endswith("</i></p>") and "_Counts" not in out, out
    assert "<code>gen</code>" in markdown_to_html("_Counts: `gen` here._")
    assert markdown_to_html("keep max_cases and `a_b` as they are") == \
        "<p>keep max_cases and <code>a_b</code> as they are</p>"


def test_subheadings_are_not_smaller_than_the_body():
    from study.html import _CSS, markdown_to_html

    body = int(re.search(r"body\{font:(\d+)px", _CSS).group(1))
    for level in (3, 4, 5, 6):
        m = re.search(rf"(?:^|[}},])[^{{}}]*\bh{level}\b[^{{}}]*\{{font-size:(\d+)px", _CSS)
        assert m and int(m.group(1)) >= body, f"h{level}"
    assert "<h6>" in markdown_to_html("#### Per task or level")  # section 3's demoted headings are h5/h6


def test_table_cells_break_between_numbers_not_inside_them():
    from study.html import _CSS, markdown_to_html

    out = markdown_to_html("| setting | diff pp [95% CI] |\n|---|---|\n| L2\\|k1 | +0.0 [-87.8,+87.8] |")
    assert '<span class="nw">[-87.8,+87.8]</span>' in out and '<span class="nw">+0.0</span>' in out
    assert ".nw{white-space:nowrap}" in _CSS and not re.search(r"(^|[},])[^{}]*\btd\b[^{}]*\{overflow-wrap:anywhere", _CSS)


def test_the_report_names_the_study_as_given_not_by_its_absolute_path(tmp_path, monkeypatch):
    from study import report
    from study.stages import STAGES

    monkeypatch.chdir(tmp_path)
    (tmp_path / "runs" / "s").mkdir(parents=True)
    rel = Path("runs/s")
    absolute = str((tmp_path / "runs" / "s").resolve())
    import dataclasses

    st = dataclasses.replace(STAGES[-1], render=lambda out, style: f"wrote {absolute}/steering/sweep.png")
    monkeypatch.setattr(report, "STAGES", (*STAGES[:-1], st))
    text = dict(report.sections(rel))
    body = next(b for t, b in text.items() if t.endswith(st.title))
    assert absolute not in body and "wrote runs/s/steering/sweep.png" in body
