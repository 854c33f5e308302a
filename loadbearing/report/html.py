"""The HTML renderer of the report objects (:mod:`loadbearing.report`): one self-contained page, figures embedded.

    from loadbearing.report.html import render_page
    page = render_page(sections, title="Study report: demo", base=study_dir, link=lambda f: "browse.html#...")

Every piece of text is escaped, then its inline markup rendered (```code```, ``**bold**``, ``_italic_``,
``[text](url)`` with http(s) or relative urls only), so nothing in a section can inject markup. Figures (PNG,
SVG, JPEG under ``base``) are embedded as base64 ``data:`` images. A table row that carries a filter gets a
*browse* link (``link(filter)`` is its href; no ``link``: no links), and a cell with its own filter links on
its own (a label count). A folded table is a ``<details>`` with its pointer line.
"""
from __future__ import annotations

import base64
import html
import os
import re
from collections.abc import Callable, Iterable, Sequence
from pathlib import Path

from loadbearing.report.blocks import (
    Block,
    Bullets,
    Code,
    Figure,
    Filter,
    Heading,
    Paragraph,
    Preformatted,
    Section,
    Table,
    Tight,
    VerdictLine,
)

Link = Callable[[Filter], str]
_ESCAPES = {"\\*": "\x01", "\\_": "\x02", "\\`": "\x03", "\\|": "\x06"}
_MIME = {".png": "image/png", ".svg": "image/svg+xml", ".jpg": "image/jpeg", ".jpeg": "image/jpeg"}


def inline(text: str) -> str:
    """Escape, then render `code`, **bold**, *italic* / _italic_ and [text](url) (http(s) or relative only).
    Emphasis may span a code span (``_Counts ... `gen` ..._``): the code spans are set aside as placeholders
    while the emphasis is rendered over the whole text, then put back."""
    codes: list[str] = []

    def hold(m: re.Match[str]) -> str:
        codes.append(f"<code>{html.escape(m.group(1))}</code>")
        return f"\x04{len(codes) - 1}\x05"

    for k, v in _ESCAPES.items():  # a backslash-escaped \\* \\_ \\` \\| is that character, not markup
        text = text.replace(k, v)
    t = _emph(re.sub(r"`([^`]+)`", hold, text))
    for k, v in _ESCAPES.items():
        t = t.replace(v, k[1])
    return re.sub("\x04(\\d+)\x05", lambda m: codes[int(m.group(1))], t)


def _emph(text: str) -> str:
    t = html.escape(text)
    t = re.sub(r"\*\*(\S(?:.*?\S)?)\*\*", r"<b>\1</b>", t)
    t = re.sub(r"(?<![\w*])\*(\S(?:[^*]*?\S)?)\*(?![\w*])", r"<i>\1</i>", t)
    t = re.sub(r"(?<![\w])_(\S(?:[^_]*?\S)?)_(?![\w])", r"<i>\1</i>", t)

    def link(m: re.Match[str]) -> str:
        href = html.unescape(m.group(2))
        if re.match(r"^[a-z][a-z0-9+.-]*:", href, re.I) and not href.lower().startswith(("http:", "https:")):
            return m.group(0)  # javascript:, data: ... stay text
        return f'<a href="{html.escape(href, quote=True)}">{m.group(1)}</a>'

    return re.sub(r"\[([^\]]+)\]\(([^)\s]+)\)", link, t)


def nowrap_numbers(cell_html: str) -> str:
    """Each whitespace-free token holding a digit (``[-87.8,+87.8]``, ``0/3``, ``12.5%``) in one unbreakable
    span, so a narrow table column breaks between numbers, never inside one (tags are left as they are)."""
    parts = re.split(r"(<[^>]+>)", cell_html)
    return "".join(p if p.startswith("<") else re.sub(r"(\S*\d\S*)", r'<span class="nw">\1</span>', p)
                   for p in parts)


def _desc(f: Filter) -> str:
    return html.escape(", ".join(f"{k}={v}" for k, v in f.items()), quote=True)


def table_html(t: Table, link: Link | None = None) -> str:
    """A table; rows with a filter get a *browse* link column, cells with their own filter a link each."""
    any_link = link is not None and any(r.filter for r in t.rows)
    head = "".join(f"<th>{inline(c)}</th>" for c in t.header) + ("<th>samples</th>" if any_link else "")
    body = []
    for r in t.rows:
        own = dict(r.cell_filters) if link else {}
        cells = ""
        for k, c in enumerate(tuple(r.cells) + ("",) * (len(t.header) - len(r.cells))):
            f = own.get(k)
            if f is not None and link is not None:
                cells += (f'<td><a class="browse-label" href="{html.escape(link(f), quote=True)}" title="{_desc(f)}">'
                          f"{nowrap_numbers(inline(c))}</a></td>")
            else:
                cells += f"<td>{nowrap_numbers(inline(c))}</td>"
        if any_link and link is not None:
            cells += (f'<td><a class="browse" href="{html.escape(link(r.filter), quote=True)}" title="{_desc(r.filter)}">'
                      "browse</a></td>" if r.filter else "<td></td>")
        body.append(f"<tr>{cells}</tr>")
    out = f"<table><thead><tr>{head}</tr></thead><tbody>{''.join(body)}</tbody></table>"
    if t.fold is not None:
        out = (f"<details><summary>{inline(t.folded_title())}</summary>{out}"
               f'<p class="pointer">{inline(t.fold)}</p></details>')
    elif t.caption:
        out = f"<p>{inline(t.caption)}</p>{out}"
    if t.footnote:
        out += f"<p>{inline(t.footnote)}</p>"
    return out


def figure_html(path: Path, alt: str) -> str:
    data = base64.b64encode(path.read_bytes()).decode("ascii")
    return (f'<figure><img alt="{html.escape(alt, quote=True)}" src="data:{_MIME[path.suffix.lower()]};base64,{data}">'
            f"<figcaption>{html.escape(alt)}</figcaption></figure>")


def block_html(b: Block, *, link: Link | None = None, base: str | os.PathLike[str] | None = None, level: int = 2) -> str:
    """One block as HTML; ``level``: added to a heading's level (section titles are ``<h2>``)."""
    if isinstance(b, Tight):
        return block_html(b.block, link=link, base=base, level=level)
    if isinstance(b, Paragraph):
        return f"<p>{inline(b.md)}</p>" if b.md.strip() else ""
    if isinstance(b, Bullets):
        items = "".join(f"<li>{inline(i.text)}" + (f"<ul>{''.join(f'<li>{inline(s)}</li>' for s in i.sub)}</ul>"
                                                   if i.sub else "") + "</li>" for i in b.entries())
        return f"<ul>{items}</ul>"
    if isinstance(b, VerdictLine):
        return f"<ul><li>{inline(b.line('md'))}</li></ul>"
    if isinstance(b, Heading):
        n = min(6, b.level + level)
        return f"<h{n}>{inline(b.text)}</h{n}>"
    if isinstance(b, Table):
        return table_html(b, link)
    if isinstance(b, Code):
        return f"<pre>{html.escape(b.text)}</pre>"
    if isinstance(b, Preformatted):
        return f"<pre>{html.escape(b.text)}</pre>"
    if isinstance(b, Figure):
        if base is not None:
            root = Path(base).resolve()
            p = (root / b.path).resolve()
            if p.is_file() and p.suffix.lower() in _MIME and root in p.parents:
                return figure_html(p, b.alt or p.name)
        return f"<p>[missing figure {html.escape(b.path)}]</p>"
    raise TypeError(f"not a report block: {b!r}")


def blocks_html(blocks: Sequence[Block], **kw: object) -> str:
    """The blocks as HTML; consecutive verdict lines are one list."""
    out: list[str] = []
    for k, b in enumerate(blocks):
        h = block_html(b, **kw)  # type: ignore[arg-type]
        if isinstance(b, VerdictLine) and k and isinstance(blocks[k - 1], VerdictLine):
            out[-1] = out[-1][:-len("</ul>")] + h[len("<ul>"):]
        else:
            out.append(h)
    return "\n".join(out)


CSS = """body{font:14px/1.5 system-ui,sans-serif;max-width:1100px;margin:20px auto;padding:0 16px;color:#1d1d1f}
table{border-collapse:collapse;margin:8px 0}td,th{border:1px solid #ccc;padding:3px 8px;text-align:left}
th{background:#f3f3f3}pre{background:#f6f8fa;padding:8px;overflow:auto;white-space:pre-wrap;overflow-wrap:anywhere}
code{background:#f6f8fa;padding:0 3px}p,li{overflow-wrap:anywhere}td{overflow-wrap:break-word}.nw{white-space:nowrap}
h3{font-size:17px}h4{font-size:15px}h5,h6{font-size:14px}h3,h4,h5,h6{margin:12px 0 4px}
img{max-width:100%;border:1px solid #eee}
figure{margin:12px 0}figcaption{color:#666;font-size:12px}a.browse{font-size:12px}nav a{margin-right:10px}
h1{font-size:22px;margin:8px 0}section.box{border:2px solid #3a6ea5;border-radius:6px;background:#f5f9ff;
padding:4px 14px;margin:8px 0 12px}section.box h2{font-size:16px;margin:6px 0}section.box ul{margin:4px 0;
padding-left:18px}section.box li{margin:4px 0}details{margin:8px 0}details>summary{cursor:pointer;color:#3a6ea5}
p.pointer{color:#666;font-size:12px}"""


def render_page(sections: Iterable[Section], *, title: str, link: Link | None = None, browse: str | None = None,
                base: str | os.PathLike[str] | None = None, level: int = 2) -> str:
    """The report page: the title, the first ``box`` section framed right under it, a line pointing to the trace
    browser (``browse``: its href, None: no line), a table of contents, then the other sections in order;
    ``level``: added to the blocks' heading levels (section titles are ``<h2>``)."""
    secs = list(sections)
    kw = {"link": link, "base": base, "level": level}
    parts = [f"<h1>{html.escape(title)}</h1>"]
    lead = next((k for k, s in enumerate(secs) if s.box), None)
    if lead is not None:
        s = secs[lead]
        parts.append(f'<section id="s{lead}" class="box"><h2>{html.escape(s.title)}</h2>{blocks_html(s.blocks, **kw)}'
                     "</section>")
    if browse:
        parts.append(f'<p>Read the samples in the <a href="{html.escape(browse, quote=True)}">trace browser</a>; '
                     "each table row's <i>browse</i> link opens it filtered to that row.</p>")
    if len(secs) > 1:
        parts.append("<nav>" + "".join(f'<a href="#s{k}">{html.escape(s.title)}</a>' for k, s in enumerate(secs)) + "</nav>")
    for k, s in enumerate(secs):
        if k != lead:
            parts.append(f'<section id="s{k}"><h2>{html.escape(s.title)}</h2>{blocks_html(s.blocks, **kw)}</section>')
    return ("<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\"><link rel=\"icon\" href=\"data:,\">"
            f"<title>{html.escape(title)}</title><style>{CSS}</style></head><body>\n" + "\n".join(parts) + "\n</body></html>\n")


__all__ = ["CSS", "Link", "block_html", "blocks_html", "figure_html", "inline", "nowrap_numbers", "render_page",
           "table_html"]
