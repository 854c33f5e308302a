"""report.html (study.report.html): the report's objects in HTML (escaping, figures kept inside the study) and
each table row's link into the trace browser, filtered to its group."""
from __future__ import annotations

import pytest
from helpers.browse_runs import study_html as _study_html


def test_report_tables_and_links(tmp_path):
    from loadbearing.report.blocks import Bullets, Code, Figure, Paragraph, Row, Section, Table, facet_filter, label_cell_filters

    write_report_html = _study_html()
    png = tmp_path / "fig.png"
    png.write_bytes(b"\x89PNG\r\n\x1a\n" + b"\0" * 20)
    head = ("group", "propagation", "control")
    blocks = (Paragraph("Intro with **bold** and `code` and <script>alert(1)</script> [bad](javascript:alert(1))."),
              Table(head, (Row(("overall", "50%", "0%"), filter=facet_filter()),
                           Row(("strategy=contradiction", "10%", "0%"), filter=facet_filter(strategy="contradiction")),
                           Row(("position=early, C", "1", "2"), filter=facet_filter(position="early", label="C")),
                           Row(("note", "x", "y")))),
              Table(("level", "accuracy"), (Row(("s2_o5", "40%"), filter=facet_filter(difficulty="s2_o5")),)),
              Bullets(("item *one*", "item two")), Code("<b>code</b>"), Figure("fig.png", "fig"),
              Figure("missing.png", "missing"))
    out = write_report_html(tmp_path, [Section("Behaviour", blocks)])
    page = out.read_text()
    assert out.name == "report.html"
    assert "<script>" not in page and "&lt;script&gt;" in page and 'href="javascript' not in page
    assert page.count("<table>") == 2 and "<b>bold</b>" in page and "<code>code</code>" in page
    assert "&lt;b&gt;code&lt;/b&gt;" in page and "<li>item <i>one</i></li>" in page
    assert 'href="browse.html#f=condition:perturbed,strategy:contradiction"' in page
    assert 'href="browse.html#f=condition:perturbed,position:early,label:C"' in page
    assert 'href="browse.html#f=condition:perturbed"' in page  # overall
    assert 'href="browse.html#f=condition:perturbed,level:s2_o5"' in page  # a difficulty group is the level facet
    assert page.count('class="browse"') == 4  # the "note" row carries no filter
    assert page.count("data:image/png;base64,") == 1 and "[missing figure missing.png]" in page
    lab_head = ("perturbed, by", "n", "A", "B", "C")
    cells = ("strategy=contradiction", "5", "2", "0", "3")
    f = facet_filter(strategy="contradiction")
    lab = write_report_html(tmp_path, [Section("Labels", (Table(lab_head, (Row(cells, f, label_cell_filters(f, lab_head,
                                                                                                              cells)),)),))],
                            browse="b.html").read_text()
    assert 'href="b.html#f=condition:perturbed,strategy:contradiction,label:C"' in lab
    assert 'href="b.html#f=condition:perturbed,strategy:contradiction,label:A"' in lab and "label:B" not in lab
    with pytest.raises(ValueError, match="unknown browser facet 'colour'"):
        facet_filter(colour="red")


def test_report_figures_stay_inside_the_study(tmp_path):
    from loadbearing.report.blocks import Figure, Section

    (tmp_path / "probes").mkdir()
    (tmp_path / "probes" / "acc.png").write_bytes(b"\x89PNG\r\n\x1a\n" + b"\1" * 20)
    (tmp_path.parent / "secret.png").write_bytes(b"\x89PNG\r\n\x1a\n")
    secs = [Section("2. Probes", (Figure("probes/acc.png", "acc"), Figure("../secret.png", "up")))]
    page = _study_html()(tmp_path, secs).read_text()
    assert page.count("data:image/png;base64,") == 1 and "[missing figure ../secret.png]" in page


def test_study_report_rows_carry_their_browser_filters(tmp_path):
    """The behaviour and labels tables of a study's report link each group row (and each non-zero label count)
    to the browser filtered to that group: the filters are set where the rows are built, from the group keys."""
    from behavioural.labels.label_summary import summary_blocks
    from loadbearing.report.blocks import Table
    from study.report.behaviour import behaviour_blocks

    rate = {"k": 1, "n": 2, "rate": 0.5, "lo": 0.1, "hi": 0.9, "method": "wilson", "n_questions": 2}
    row = {"propagation": rate, "control_error": rate, "coverage": rate, "questions": 2, "generations": 4}
    s = {"questions": 2, "baseline_accuracy": rate, "eligible": 2, "continuations": 4, "overall": row,
         "by": {"strategy": {"contradiction": row}, "difficulty": {"s2_o5": row}}}
    t = next(b for b in behaviour_blocks(s) if isinstance(b, Table))
    assert [r.filter for r in t.rows] == [{"condition": "perturbed"}, {"condition": "perturbed", "strategy": "contradiction"},
                                          {"condition": "perturbed", "level": "s2_o5"}]
    counts = {"A": 1, "B": 0, "C": 2, "null": 0}
    cond = {"n": 3, "counts": counts, "propagation": rate, "B_among_correct_labelled": rate}
    lab = {"labelling": "rule", "final_labeller": "rule", "control": cond,
           "perturbed": dict(cond, by={"position": {"early": {"n": 3, "counts": counts}}})}
    by_cond, by_group = [b for b in summary_blocks(lab) if isinstance(b, Table)]
    assert by_cond.rows[1].filter == {"condition": "control"}
    assert dict(by_group.rows[0].cell_filters) == {2: {"condition": "perturbed", "position": "early", "label": "A"},
                                                   4: {"condition": "perturbed", "position": "early", "label": "C"}}
