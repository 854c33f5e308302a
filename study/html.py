"""report.html: the study's report as one self-contained HTML page (figures embedded, no network).

    from study.html import write_report_html
    write_report_html(out_dir, [("Behaviour", md_text), ...], [out_dir / "sweep.png"], browse="browse.html")

Each section is a (title, markdown) pair; the markdown subset the stages write is rendered (headings,
paragraphs, bullet lists, code blocks, inline code, bold/italic, pipe tables), every piece of text escaped, so
nothing in a section can inject markup. Figures (PNG) are embedded as base64 ``data:`` images.

Each table row that names browser facets gets a link into the trace browser filtered to its samples
(``browse.html#f=condition:perturbed,strategy:contradiction,label:C``; the fragment syntax is documented in
:mod:`study.browse`). A row names facets through a cell ``key=value`` (``strategy=contradiction``,
several joined by ``,``; a bare ``A``/``B``/``C`` is a label) or through a column whose header is a facet name
(``strategy``, ``position``, ``label``, ``task``, ``level``, ``model``, ``dataset``, ``condition``); a row
``overall`` links to all perturbed samples. Rows that name no facet get no link. In a row with a link, a
non-zero count under a column headed ``A``, ``B`` or ``C`` links to that row's samples with that label.
"""
from __future__ import annotations

import base64
import html
import os
import re
from collections.abc import Iterable, Sequence
from pathlib import Path

from loadbearing.files import atomic_write_text
from study.browse import FACETS, fragment
from study.report_markdown import FOLD_CLOSE, FOLD_OPEN

_ALIASES = {"difficulty": "level", "levels": "level", "strategies": "strategy", "positions": "position",
            "labels": "label", "tasks": "task", "models": "model", "conditions": "condition"}
_LABELS = {"A", "B", "C", "non-C"}


def _facet(name: str) -> str | None:
    n = name.strip().strip("*_`").lower()
    n = _ALIASES.get(n, n)
    return n if n in FACETS and n != "question" else None


def row_filters(header: Sequence[str], cells: Sequence[str]) -> dict[str, str] | None:
    """The browser filter a table row names (see the module docstring), or None when it names none."""
    f: dict[str, str] = {}
    overall = False
    for col, (h, cell) in enumerate(zip(header, cells)):
        text = cell.strip().strip("*_`").strip()
        hf = _facet(h)
        if hf and text and "=" not in text and text.lower() not in ("all", "overall", "total", "n/a"):
            f.setdefault(hf, text)
            continue
        for tok in (t.strip() for t in text.split(",")):
            m = re.fullmatch(r"([A-Za-z_]+)\s*=\s*(\S.*)", tok)
            if m and _facet(m.group(1)):
                f.setdefault(_facet(m.group(1)) or "", m.group(2).strip())
            elif tok in _LABELS and col == 0:
                f.setdefault("label", tok)
        if col == 0 and text.lower() == "overall":
            overall = True
    if not f and not overall:
        return None
    f.setdefault("condition", "perturbed")
    order = ["condition"] + [k for k in FACETS if k != "condition"]
    return {k: f[k] for k in order if k in f}


def _inline(text: str) -> str:
    """Escape, then render `code`, **bold**, *italic* / _italic_ and [text](url) (http(s) or relative only).
    Emphasis may span a code span (``_Counts ... `gen` ..._``): the code spans are set aside as placeholders
    while the emphasis is rendered over the whole text, then put back."""
    codes: list[str] = []

    def hold(m: re.Match) -> str:
        codes.append(f"<code>{html.escape(m.group(1))}</code>")
        return f"\x04{len(codes) - 1}\x05"

    t = _emph(re.sub(r"`([^`]+)`", hold, text))
    return re.sub("\x04(\\d+)\x05", lambda m: codes[int(m.group(1))], t)


def _nowrap_numbers(cell_html: str) -> str:
    """Each whitespace-free token holding a digit (``[-87.8,+87.8]``, ``0/3``, ``12.5%``) in one unbreakable
    span, so a narrow table column breaks between numbers, never inside one (tags are left as they are)."""
    parts = re.split(r"(<[^>]+>)", cell_html)
    return "".join(p if p.startswith("<") else re.sub(r"(\S*\d\S*)", r'<span class="nw">\1</span>', p)
                   for p in parts)


_ESCAPES = {"\\*": "\x01", "\\_": "\x02", "\\`": "\x03"}


def _emph(text: str) -> str:
    for k, v in _ESCAPES.items():  # a backslash-escaped \\* \\_ \\` is that character, not markup
        text = text.replace(k, v)
    t = _emph_escaped(text)
    for k, v in _ESCAPES.items():
        t = t.replace(v, k[1])
    return t


def _emph_escaped(text: str) -> str:
    t = html.escape(text)
    t = re.sub(r"\*\*(\S(?:.*?\S)?)\*\*", r"<b>\1</b>", t)
    t = re.sub(r"(?<![\w*])\*(\S(?:[^*]*?\S)?)\*(?![\w*])", r"<i>\1</i>", t)
    t = re.sub(r"(?<![\w])_(\S(?:[^_]*?\S)?)_(?![\w])", r"<i>\1</i>", t)

    def link(m: re.Match) -> str:
        href = html.unescape(m.group(2))
        if re.match(r"^[a-z][a-z0-9+.-]*:", href, re.I) and not href.lower().startswith(("http:", "https:")):
            return m.group(0)  # javascript:, data: ... stay text
        return f'<a href="{html.escape(href, quote=True)}">{m.group(1)}</a>'

    return re.sub(r"\[([^\]]+)\]\(([^)\s]+)\)", link, t)


def _split_row(line: str) -> list[str]:
    s = line.strip()
    if s.startswith("|"):
        s = s[1:]
    if s.endswith("|") and not s.endswith("\\|"):
        s = s[:-1]
    return [c.strip().replace("\\|", "|") for c in re.split(r"(?<!\\)\|", s)]


def _is_sep(line: str) -> bool:
    return bool(re.fullmatch(r"\s*\|?\s*:?-{2,}:?\s*(\|\s*:?-{2,}:?\s*)*\|?\s*", line))


_MIME = {".png": "image/png", ".svg": "image/svg+xml", ".jpg": "image/jpeg", ".jpeg": "image/jpeg"}


def _figure(path: Path, alt: str) -> str:
    data = base64.b64encode(path.read_bytes()).decode("ascii")
    return (f'<figure><img alt="{html.escape(alt, quote=True)}" src="data:{_MIME[path.suffix.lower()]};base64,{data}">'
            f"<figcaption>{html.escape(alt)}</figcaption></figure>")


def markdown_to_html(md: str, *, browse: str | None = None, base: str | os.PathLike[str] | None = None) -> str:
    """Render the markdown subset (module docstring); tables get a browser link per row when ``browse`` is set.
    A line ``![alt](relative/path.png)`` embeds that image (base64) when it is a file under ``base``."""
    lines = md.splitlines()
    out: list[str] = []
    para: list[str] = []
    i = 0

    def flush() -> None:
        if para:
            out.append("<p>" + _inline(" ".join(para)) + "</p>")
            para.clear()

    while i < len(lines):
        line = lines[i]
        if line.startswith(FOLD_OPEN):
            flush()
            title, _, pointer = line[len(FOLD_OPEN):].rpartition(" | ")
            j, depth = i + 1, 1
            while j < len(lines):
                if lines[j].startswith(FOLD_OPEN):
                    depth += 1
                elif lines[j].strip() == FOLD_CLOSE:
                    depth -= 1
                    if not depth:
                        break
                j += 1
            inner = markdown_to_html("\n".join(lines[i + 1:j]), browse=browse, base=base)
            out.append(f"<details><summary>{_inline(title.strip() or pointer)}</summary>{inner}"
                       f'<p class="pointer">{_inline(pointer.strip())}</p></details>')
            i = j + 1
            continue
        if line.strip().startswith("```"):
            flush()
            j = i + 1
            while j < len(lines) and not lines[j].strip().startswith("```"):
                j += 1
            out.append("<pre>" + html.escape("\n".join(lines[i + 1:j])) + "</pre>")
            i = j + 1
            continue
        if "|" in line and i + 1 < len(lines) and _is_sep(lines[i + 1]):
            flush()
            header = _split_row(line)
            rows = []
            j = i + 2
            while j < len(lines) and "|" in lines[j] and lines[j].strip():
                rows.append(_split_row(lines[j]))
                j += 1
            out.append(_table(header, rows, browse))
            i = j
            continue
        img = re.fullmatch(r"\s*!\[([^\]]*)\]\(([^)\s]+)\)\s*", line)
        if img and base is not None:
            flush()
            root = Path(base).resolve()
            p = (root / img.group(2)).resolve()
            if p.is_file() and p.suffix.lower() in _MIME and root in p.parents:
                out.append(_figure(p, img.group(1) or p.name))
            else:
                out.append(f"<p>[missing figure {html.escape(img.group(2))}]</p>")
            i += 1
            continue
        m = re.match(r"^(#{1,6})\s+(.*)$", line)
        if m:
            flush()
            level = min(6, len(m.group(1)) + 2)  # section titles are h2
            out.append(f"<h{level}>{_inline(m.group(2))}</h{level}>")
        elif re.match(r"^\s*[-*]\s+", line):
            flush()
            items = []
            while i < len(lines) and re.match(r"^\s*[-*]\s+", lines[i]):
                items.append("<li>" + _inline(re.sub(r"^\s*[-*]\s+", "", lines[i])) + "</li>")
                i += 1
            out.append("<ul>" + "".join(items) + "</ul>")
            continue
        elif not line.strip():
            flush()
        else:
            para.append(line.strip())
        i += 1
    flush()
    return "\n".join(out)


def _table(header: list[str], rows: list[list[str]], browse: str | None) -> str:
    links = [row_filters(header, r) if browse else None for r in rows]
    any_link = any(links)
    h = "".join(f"<th>{_inline(c)}</th>" for c in header) + ("<th>samples</th>" if any_link else "")
    body = []
    label_cols = {k: name.strip() for k, name in enumerate(header) if name.strip() in _LABELS}
    for r, f in zip(rows, links):
        cells = ""
        for k, c in enumerate(r + [""] * (len(header) - len(r))):
            if f and k in label_cols and re.fullmatch(r"\s*[1-9]\d*\s*", c) and "label" not in f:
                lf = dict(f, label=label_cols[k])
                title = html.escape(", ".join(f"{a}={b}" for a, b in lf.items()), quote=True)
                href = html.escape(f"{browse}{fragment(dict(lf))}", quote=True)  # type: ignore[arg-type]
                cells += f'<td><a class="browse-label" href="{href}" title="{title}">{_nowrap_numbers(_inline(c))}</a></td>'
            else:
                cells += f"<td>{_nowrap_numbers(_inline(c))}</td>"
        if any_link:
            if f:
                desc = ", ".join(f"{k}={v}" for k, v in f.items())
                href = html.escape(f"{browse}{fragment(f)}", quote=True)  # type: ignore[arg-type]
                cells += f'<td><a class="browse" href="{href}" title="{html.escape(desc, quote=True)}">browse</a></td>'
            else:
                cells += "<td></td>"
        body.append(f"<tr>{cells}</tr>")
    return f"<table><thead><tr>{h}</tr></thead><tbody>{''.join(body)}</tbody></table>"


_CSS = """body{font:14px/1.5 system-ui,sans-serif;max-width:1100px;margin:20px auto;padding:0 16px;color:#1d1d1f}
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


def render_report_html(sections: Iterable[tuple[str, str]], figures: Iterable[str | os.PathLike[str]] = (), *,
                       title: str = "Load-bearing chain-of-thought study", browse: str | None = "browse.html",
                       base: str | os.PathLike[str] | None = None, box: str | None = None) -> str:
    """The report page as a string (see :func:`write_report_html`); ``base`` resolves markdown images; the
    section titled ``box`` (if any) comes first, right under the title, framed (``<section class="box">``)."""
    secs = list(sections)
    parts = [f"<h1>{html.escape(title)}</h1>"]
    lead = [(k, t, md) for k, (t, md) in enumerate(secs) if box is not None and t == box][:1]
    for k, t, md in lead:
        parts.append(f'<section id="s{k}" class="box"><h2>{html.escape(t)}</h2>'
                     f"{markdown_to_html(md, browse=browse, base=base)}</section>")
    if browse:
        parts.append(f'<p>Read the samples in the <a href="{html.escape(browse, quote=True)}">trace browser</a>; '
                     "each table row's <i>browse</i> link opens it filtered to that row.</p>")
    if len(secs) > 1:
        parts.append("<nav>" + "".join(f'<a href="#s{k}">{html.escape(t)}</a>' for k, (t, _) in enumerate(secs)) + "</nav>")
    for k, (t, md) in enumerate(secs):
        if lead and k == lead[0][0]:
            continue
        parts.append(f'<section id="s{k}"><h2>{html.escape(t)}</h2>{markdown_to_html(md, browse=browse, base=base)}</section>')
    figs = [Path(f) for f in figures]
    if figs:
        parts.append("<section><h2>Figures</h2>")
        for f in figs:
            if f.is_file() and f.suffix.lower() in _MIME:
                parts.append(_figure(f, f.name))
        parts.append("</section>")
    return ("<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\"><link rel=\"icon\" href=\"data:,\">"
            f"<title>{html.escape(title)}</title><style>{_CSS}</style></head><body>\n" + "\n".join(parts) + "\n</body></html>\n")


def write_report_html(out_dir: str | os.PathLike[str], sections: Iterable[tuple[str, str]],
                      figures: Iterable[str | os.PathLike[str]] = (), *, browse: str | None = "browse.html",
                      title: str = "Load-bearing chain-of-thought study", box: str | None = None) -> Path:
    """Write ``out_dir/report.html`` atomically and return its path.

    ``sections``: (title, markdown) pairs (a line ``![alt](path)`` relative to ``out_dir`` embeds that image
    in place); ``figures``: more PNG paths (relative ones are under ``out_dir``), embedded as base64 at the
    end (missing files are skipped); ``browse``: the trace browser's path relative to ``out_dir`` for the
    per-row links (None: no links); ``box``: the title of the section shown first, framed (the report's
    verdicts). A fold block (``::: details TITLE | POINTER`` ... ``:::``, :mod:`study.report_markdown`) becomes
    ``<details>``. From a whole markdown report:
    ``write_report_html(out, sections_from_markdown(md))``. Write the browser next to it with
    ``study.browse.write_browser(out_dir)``.
    """
    out = Path(out_dir) / "report.html"
    figs = [Path(f) if Path(f).is_absolute() else Path(out_dir) / f for f in figures]
    return atomic_write_text(out, render_report_html(sections, figs, title=title, browse=browse, base=out_dir, box=box))


def sections_from_markdown(md: str) -> list[tuple[str, str]]:
    """Split a markdown report at its ``## `` headings into (title, markdown) sections; text before the first
    one (a ``# `` title line dropped) becomes a section titled "Summary" when not empty."""
    sections: list[tuple[str, str]] = []
    title, body = "Summary", []  # type: ignore[var-annotated]
    for line in md.splitlines():
        m = re.match(r"^##\s+(.*)$", line)
        if m:
            if "\n".join(body).strip():
                sections.append((title, "\n".join(body).strip("\n")))
            title, body = m.group(1).strip(), []
        elif not re.match(r"^#\s", line):
            body.append(line)
    if "\n".join(body).strip():
        sections.append((title, "\n".join(body).strip("\n")))
    return sections


__all__ = ["sections_from_markdown", "write_report_html", "render_report_html", "markdown_to_html", "row_filters"]
