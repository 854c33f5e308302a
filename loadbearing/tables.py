"""Tables: the one renderer of a table as markdown, plain text or HTML.

    from loadbearing.tables import render_table
    print(render_table(["level", "rate"], [["s2_o3", "62.9%"]], style="md"))

Cells are rendered with ``str``; ``None`` becomes an empty cell. In markdown a ``|`` inside a cell is escaped;
in HTML every cell is escaped as text.
"""
from __future__ import annotations

import html
from collections.abc import Iterable, Sequence
from typing import Any

STYLES = ("md", "text", "html")


def _cell(v: Any) -> str:
    return "" if v is None else str(v)


def markdown_table(header: Sequence[Any], rows: Iterable[Sequence[Any]]) -> str:
    """A GitHub-flavoured markdown table (no trailing newline)."""
    def line(cells: Sequence[Any]) -> str:
        return "| " + " | ".join(_cell(c).replace("|", "\\|").replace("\n", " ") for c in cells) + " |"
    out = [line(header), "|" + "---|" * len(header)]
    out += [line(r) for r in rows]
    return "\n".join(out)


def text_table(header: Sequence[Any], rows: Iterable[Sequence[Any]]) -> str:
    """A plain-text table with columns padded to their widest cell (no trailing newline)."""
    body = [[_cell(c) for c in r] for r in rows]
    head = [_cell(c) for c in header]
    widths = [max([len(head[i])] + [len(r[i]) for r in body if i < len(r)]) for i in range(len(head))]
    def line(cells: Sequence[str]) -> str:
        return "  ".join(c.ljust(w) for c, w in zip(cells, widths)).rstrip()
    return "\n".join([line(head), line(["-" * w for w in widths])] + [line(r) for r in body])


def html_table(header: Sequence[Any], rows: Iterable[Sequence[Any]], *, cls: str | None = None) -> str:
    """An HTML ``<table>`` with every cell escaped as text."""
    attr = f' class="{html.escape(cls)}"' if cls else ""
    head = "".join(f"<th>{html.escape(_cell(c))}</th>" for c in header)
    body = "".join("<tr>" + "".join(f"<td>{html.escape(_cell(c))}</td>" for c in r) + "</tr>" for r in rows)
    return f"<table{attr}><thead><tr>{head}</tr></thead><tbody>{body}</tbody></table>"


def render_table(header: Sequence[Any], rows: Iterable[Sequence[Any]], style: str = "md") -> str:
    """The table in ``style``: ``md`` (markdown), ``text`` or ``html``."""
    if style == "md":
        return markdown_table(header, rows)
    if style == "text":
        return text_table(header, rows)
    if style == "html":
        return html_table(header, rows)
    raise ValueError(f"unknown table style {style!r}; use one of {', '.join(STYLES)}")
