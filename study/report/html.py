"""report.html: the study's report as one self-contained HTML page (figures embedded, no network).

    from study.report.html import write_report_html
    write_report_html(out_dir, sections, browse="browse.html")

``sections`` are report objects (:class:`loadbearing.report.Section`, built by :func:`study.report.sections`),
rendered by :mod:`loadbearing.report.html`: every piece of text escaped, so nothing in a section can inject
markup; figures (paths relative to ``out_dir``) embedded as base64 ``data:`` images.

Each table row that carries a browser filter (:class:`loadbearing.report.Row`'s ``filter``, set where the row
is built) gets a link into the trace browser filtered to its samples
(``browse.html#f=condition:perturbed,strategy:contradiction,label:C``; the fragment syntax is documented in
:mod:`study.browse`), and a cell with its own filter (a non-zero A/B/C count) links to that label's samples.
Rows without a filter get no link: nothing is guessed from the table's text.
"""
from __future__ import annotations

import os
from collections.abc import Callable, Iterable
from pathlib import Path

from loadbearing.files import atomic_write_text
from loadbearing.report.blocks import Filter, Section
from loadbearing.report.html import render_page
from study.browse.page import fragment

#: how much deeper a stage's own heading is shown than the stage writes it (its ``#`` is an ``<h5>`` under the
#: section's ``<h2>``, as in report.md where it is a ``###``)
HEADING_OFFSET = 4


def browse_link(browse: str) -> Callable[[Filter], str]:
    """The href of the trace browser ``browse`` filtered by a row's filter."""
    return lambda f: f"{browse}{fragment(dict(f))}"


def render_report_html(sections: Iterable[Section], *, title: str = "Load-bearing chain-of-thought study",
                       browse: str | None = "browse.html", base: str | os.PathLike[str] | None = None) -> str:
    """The report page as a string (see :func:`write_report_html`)."""
    return render_page(sections, title=title, link=browse_link(browse) if browse else None, browse=browse, base=base,
                       level=HEADING_OFFSET)


def write_report_html(out_dir: str | os.PathLike[str], sections: Iterable[Section], *,
                      browse: str | None = "browse.html", title: str = "Load-bearing chain-of-thought study") -> Path:
    """Write ``out_dir/report.html`` atomically and return its path; ``browse``: the trace browser's path relative
    to ``out_dir`` for the per-row links (None: no links). Write the browser next to it with
    ``study.browse.write_browser(out_dir)``."""
    out = Path(out_dir) / "report.html"
    return atomic_write_text(out, render_report_html(sections, title=title, browse=browse, base=out_dir))


__all__ = ["HEADING_OFFSET", "browse_link", "render_report_html", "write_report_html"]
