"""Report objects: a report is a list of :class:`Section`; each section a list of blocks, rendered to markdown or
plain text here and to HTML by :mod:`loadbearing.report.html`. Nothing reads rendered text back.

    from loadbearing.report.blocks import Bullets, Paragraph, Row, Section, Table, render_markdown
    sec = Section("1. Behaviour", (Bullets(("questions 24",)),
                                   Table(("group", "rate"), (Row(("overall", "50%"), filter={"condition": "perturbed"}),))))
    print(render_markdown([sec], title="Study report: demo"))

Blocks: :class:`Paragraph`, :class:`Bullets` (of :class:`Item`, one level of sub-items), :class:`Heading`,
:class:`Table` (of :class:`Row`; each row may carry the trace-browser filter it links to, and each cell one of its
own), :class:`Code`, :class:`Figure`, :class:`VerdictLine` and :class:`Preformatted` (a stage's own text, shown
as it is). Text in a paragraph, item or cell may use inline markup: ```code```, ``**bold**``, ``_italic_`` /
``*italic*`` and ``[text](relative-or-http-url)``; the markdown renderer writes it as it is, the text renderer
drops the markers, the HTML renderer escapes the text and renders the markers.

Blocks are separated by a blank line. A table may carry a caption (the short line above it), a footnote (the line
below it) and a fold (where its full version lives: the markdown and text renderers write one pointer line in
its place, HTML a ``<details>``).
"""
from __future__ import annotations

import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field, replace

from loadbearing.tables import markdown_table, text_table

#: a trace-browser filter: facet name -> value (``{"condition": "perturbed", "strategy": "contradiction"}``)
Filter = Mapping[str, str]
#: the trace browser's facets, in the order a filter lists them (``study.browse`` filters by these)
FACETS = ("condition", "strategy", "position", "label", "correct", "task", "level", "model", "dataset", "steered",
          "question")
#: the summaries' group keys that name a facet under another name
_FACET_OF = {"difficulty": "level", "edit_position": "position"}
LABEL_COLUMNS = ("A", "B", "C", "non-C")


def facet_filter(condition: str | None = "perturbed", **facets: str) -> dict[str, str]:
    """A browser filter in the facets' order: ``facet_filter(strategy="x")`` is
    ``{"condition": "perturbed", "strategy": "x"}``; a group key such as ``difficulty`` names its facet
    (``level``); an unknown facet is an error."""
    f: dict[str, str] = {} if condition is None else {"condition": condition}
    for k, v in facets.items():
        name = _FACET_OF.get(k, k)
        if name not in FACETS:
            raise ValueError(f"unknown browser facet {k!r}; use one of {', '.join(FACETS)}")
        f.setdefault(name, str(v))
    return {k: f[k] for k in FACETS if k in f}


def label_cell_filters(row: Filter | None, header: Sequence[str], cells: Sequence[str]) -> tuple[tuple[int, Filter], ...]:
    """The cells of a row with a filter that link on their own: a non-zero count under a column headed ``A``,
    ``B``, ``C`` or ``non-C`` links to that row's samples with that label."""
    if not row or "label" in row:
        return ()
    return tuple((k, {**row, "label": h}) for k, (h, c) in enumerate(zip(header, cells))
                 if h in LABEL_COLUMNS and re.fullmatch(r"[1-9]\d*", c.strip()))


@dataclass(frozen=True)
class Paragraph:
    """One paragraph (inline markup allowed); ``text``: its plain-text wording where that differs."""

    md: str
    text: str | None = None


@dataclass(frozen=True)
class Item:
    """One bullet, with optional sub-bullets."""

    text: str
    sub: tuple[str, ...] = ()


@dataclass(frozen=True)
class Bullets:
    items: tuple[Item | str, ...]

    def entries(self) -> tuple[Item, ...]:
        return tuple(i if isinstance(i, Item) else Item(i) for i in self.items)


@dataclass(frozen=True)
class Heading:
    text: str
    level: int = 3


@dataclass(frozen=True)
class Row:
    """A table row; ``filter``: the trace-browser filter of the row's samples (None: no link); ``cell_filters``:
    (column, filter) pairs for cells that link on their own (a label count links to that label's samples)."""

    cells: tuple[str, ...]
    filter: Filter | None = None
    cell_filters: tuple[tuple[int, Filter], ...] = ()


@dataclass(frozen=True)
class Table:
    """A table. ``caption``: the short line shown above it; ``footnote``: the line below it (a ``* note`` that
    explains a ``*`` marker in the rows); ``fold``: where the full table lives (then it is shown folded)."""

    header: tuple[str, ...]
    rows: tuple[Row, ...]
    caption: str | None = None
    footnote: str | None = None
    fold: str | None = None

    def without_empty_columns(self) -> Table:
        """The table without the columns whose body cells are all empty."""
        if not self.rows:
            return self
        keep = [k for k in range(len(self.header)) if any(k < len(r.cells) and r.cells[k] for r in self.rows)]
        if not keep or len(keep) == len(self.header):
            return self
        at = {k: j for j, k in enumerate(keep)}

        def cut(r: Row) -> Row:
            cells = tuple(r.cells[k] if k < len(r.cells) else "" for k in keep)
            return replace(r, cells=cells, cell_filters=tuple((at[k], f) for k, f in r.cell_filters if k in at))

        return replace(self, header=tuple(self.header[k] for k in keep), rows=tuple(cut(r) for r in self.rows))

    def folded_title(self) -> str:
        return f"{self.caption or 'table'} ({len(self.rows)} rows)"


def table(header: Sequence[object], rows: Iterable[Sequence[object]], **kw: str | None) -> Table:
    """A :class:`Table` of plain rows (cells through ``str``, None as empty)."""
    cell = lambda v: "" if v is None else str(v)  # noqa: E731
    return Table(tuple(cell(h) for h in header), tuple(Row(tuple(cell(c) for c in r)) for r in rows), **kw)


@dataclass(frozen=True)
class Code:
    text: str


@dataclass(frozen=True)
class Figure:
    """An image file, ``path`` relative to the report's directory."""

    path: str
    alt: str


@dataclass(frozen=True)
class VerdictLine:
    """One line of the verdict box: the question, the answer, the numbers, n questions, the file and command."""

    question: str
    answer: str
    detail: str
    source: str
    command: str
    n_questions: int | None = None

    def line(self, style: str = "md") -> str:
        nq = "" if self.n_questions is None else f"; {self.n_questions} questions"
        if style == "md":
            return (f"**{self.question}** **{self.answer}**: {self.detail}{nq}. "
                    f"Source `{self.source}`, command `{self.command}`")
        return f"{self.question} {self.answer.upper()}: {self.detail}{nq}. Source {self.source}, command: {self.command}"


@dataclass(frozen=True)
class Preformatted:
    """Text shown as it is (``md``: its markdown, ``text``: its plain text; HTML shows ``text`` preformatted)."""

    md: str
    text: str


@dataclass(frozen=True)
class Tight:
    """A block joined to the one before it by a line break, not a blank line (markdown and text)."""

    block: Paragraph | Bullets | Table | Code | Figure | Preformatted


Block = Paragraph | Bullets | Heading | Table | Code | Figure | VerdictLine | Preformatted | Tight


@dataclass(frozen=True)
class Section:
    """A titled section; ``box``: shown first and framed (the verdicts)."""

    title: str
    blocks: tuple[Block, ...] = field(default_factory=tuple)
    box: bool = False


# ------------------------------------------------------------------------------------------ inline markup
_ESCAPED = {"\\*": "\x01", "\\_": "\x02", "\\`": "\x03", "\\|": "\x06"}


def plain(text: str) -> str:
    """Inline markup dropped: ```x``` -> ``x``, ``**x**`` / ``_x_`` / ``*x*`` -> ``x``, ``[t](u)`` -> ``t (u)``."""
    for k, v in _ESCAPED.items():
        text = text.replace(k, v)
    t = re.sub(r"`([^`]+)`", r"\1", text)
    t = re.sub(r"\*\*(\S(?:.*?\S)?)\*\*", r"\1", t)
    t = re.sub(r"(?<![\w*])\*(\S(?:[^*]*?\S)?)\*(?![\w*])", r"\1", t)
    t = re.sub(r"(?<![\w])_(\S(?:[^_]*?\S)?)_(?![\w])", r"\1", t)
    t = re.sub(r"\[([^\]]+)\]\(([^)\s]+)\)", r"\1 (\2)", t)
    for k, v in _ESCAPED.items():
        t = t.replace(v, k[1])
    return t


# ------------------------------------------------------------------------------------------ markdown and text
def _md_table(t: Table) -> str:
    return markdown_table(t.header, [r.cells for r in t.rows])


def block_markdown(b: Block, *, level: int = 0, escape_footnotes: bool = False) -> str:
    """One block as markdown; ``level``: added to every heading's level; ``escape_footnotes``: a table's
    ``* note`` footnote written ``\\* note`` (a footnote, not a list)."""
    if isinstance(b, Paragraph):
        return b.md
    if isinstance(b, Bullets):
        return "\n".join(f"- {i.text}" + "".join(f"\n  - {s}" for s in i.sub) for i in b.entries())
    if isinstance(b, Heading):
        return "#" * min(6, b.level + level) + " " + b.text
    if isinstance(b, Table):
        if b.fold is not None:
            return f"_{b.folded_title()}: folded; {b.fold}_"
        foot = b.footnote or ""
        if foot and escape_footnotes and re.match(r"^\*\s+\S", foot):
            foot = "\\" + foot
        parts = ([b.caption] if b.caption else []) + [_md_table(b)] + ([foot] if foot else [])
        return "\n\n".join(parts)
    if isinstance(b, Code):
        return f"```\n{b.text}\n```"
    if isinstance(b, Figure):
        return f"![{b.alt}]({b.path})"
    if isinstance(b, VerdictLine):
        return f"- {b.line('md')}"
    if isinstance(b, Preformatted):
        return b.md
    if isinstance(b, Tight):
        return block_markdown(b.block, level=level, escape_footnotes=escape_footnotes)
    raise TypeError(f"not a report block: {b!r}")


def block_text(b: Block) -> str:
    """One block as plain text."""
    if isinstance(b, Paragraph):
        return b.text if b.text is not None else plain(b.md)
    if isinstance(b, Bullets):
        return "\n".join(f"* {plain(i.text)}" + "".join(f"\n  * {plain(s)}" for s in i.sub) for i in b.entries())
    if isinstance(b, Heading):
        return plain(b.text)
    if isinstance(b, Table):
        if b.fold is not None:
            return f"{plain(b.folded_title())}: folded; {plain(b.fold)}"
        body = text_table([plain(h) for h in b.header], [[plain(c) for c in r.cells] for r in b.rows])
        return "\n\n".join(([plain(b.caption)] if b.caption else []) + [body] + ([plain(b.footnote)] if b.footnote else []))
    if isinstance(b, Code):
        return b.text
    if isinstance(b, Figure):
        return f"figure: {b.path}"
    if isinstance(b, VerdictLine):
        return f"* {b.line('text')}"
    if isinstance(b, Preformatted):
        return b.text
    if isinstance(b, Tight):
        return block_text(b.block)
    raise TypeError(f"not a report block: {b!r}")


def _join(parts: Iterable[str], blocks: Sequence[Block]) -> str:
    """Blocks separated by a blank line (a :class:`Tight` one by a line break); consecutive verdict lines are one
    list."""
    out: list[str] = []
    for k, (p, b) in enumerate(zip(parts, blocks)):
        if k and not isinstance(b, Tight) and not (isinstance(b, VerdictLine) and isinstance(blocks[k - 1], VerdictLine)):
            out.append("")
        out.append(p)
    return "\n".join(out)


def blocks_markdown(blocks: Sequence[Block], *, level: int = 0, escape_footnotes: bool = False) -> str:
    """The blocks as markdown (separated by a blank line)."""
    return _join((block_markdown(b, level=level, escape_footnotes=escape_footnotes) for b in blocks), blocks)


def blocks_text(blocks: Sequence[Block]) -> str:
    """The blocks as plain text (separated by a blank line)."""
    return _join((block_text(b) for b in blocks), blocks)


def render_markdown(sections: Iterable[Section], *, title: str, level: int = 2) -> str:
    """The report as markdown: ``# title``, then each section as ``## title`` and its blocks (their headings
    ``level`` deeper, table footnotes escaped)."""
    parts = [f"# {title}"]
    for s in sections:
        parts += ["", f"## {s.title}", "", blocks_markdown(s.blocks, level=level, escape_footnotes=True)]
    return "\n".join(parts) + "\n"


def render_text(sections: Iterable[Section], *, title: str) -> str:
    """The report as plain text: the title and each section's title underlined, then its blocks."""
    parts = [title, "=" * len(title)]
    for s in sections:
        parts += ["", s.title, "-" * len(s.title), blocks_text(s.blocks)]
    return "\n".join(parts) + "\n"


def fold_long_tables(blocks: Sequence[Block], pointer: str, *, min_rows: int = 12) -> tuple[Block, ...]:
    """Each table longer than ``min_rows`` rows folded with ``pointer`` (where its full version is); a short
    paragraph right above it (at most 80 characters, not a list or heading) becomes its caption."""
    out: list[Block] = []
    for b in blocks:
        t = b.block if isinstance(b, Tight) else b
        if isinstance(t, Table) and t.fold is None and len(t.rows) > min_rows:
            cap, tight = t.caption, isinstance(b, Tight)
            prev = out[-1] if out else None
            p = prev.block if isinstance(prev, Tight) else prev
            if cap is None and isinstance(p, Paragraph) and len(p.md) <= 80 and "|" not in p.md \
                    and "\n" not in p.md and not p.md.startswith(("-", "#", "!")):
                cap, tight = p.md, isinstance(prev, Tight)  # the caption moves into the fold's title
                out.pop()
            t = replace(t, caption=cap, fold=pointer)
            b = Tight(t) if tight else t
        out.append(b)
    return tuple(out)


__all__ = ["Block", "Bullets", "Code", "FACETS", "Figure", "Filter", "Heading", "Item", "LABEL_COLUMNS", "Paragraph",
           "Preformatted", "Row", "Section", "Table", "Tight", "VerdictLine", "block_markdown", "block_text",
           "blocks_markdown", "blocks_text", "facet_filter", "fold_long_tables", "label_cell_filters", "plain",
           "render_markdown", "render_text", "table"]
