"""Markdown edits the report applies to each stage's own rendered section (the stages' text is not changed).

* :func:`demote_headings` - a stage's ``#``/``##`` headings become ``###``/``####``, so they stay inside
  their report section (``study.html`` splits the report at ``## ``);
* :func:`drop_empty_columns` - a table column with no value in any row is dropped;
* :func:`escape_footnotes` - a lone ``* note`` line after a table is a footnote, not a list item: ``\\* note``;
* :func:`fold_long_tables` - a table of more than ``min_rows`` rows is wrapped in a fold block::

      ::: details logistic per layer (31 rows)
      | layer | ... |
      :::

  which ``study.html`` renders as ``<details>``; :func:`unfold` turns each fold block into one pointer line
  (``full per-layer table: probes/results.json``) for ``report.md`` / ``report.txt``;
* :func:`relink_images` - ``![alt](x.png)`` of a stage's own markdown file, relative to the study directory.
"""
from __future__ import annotations

import re

FOLD_OPEN = "::: details "
FOLD_CLOSE = ":::"
_SEP = re.compile(r"\s*\|?\s*:?-{2,}:?\s*(\|\s*:?-{2,}:?\s*)*\|?\s*")


def _split_row(line: str) -> list[str]:
    s = line.strip()
    s = s[1:] if s.startswith("|") else s
    s = s[:-1] if s.endswith("|") and not s.endswith("\\|") else s
    return [c.strip() for c in re.split(r"(?<!\\)\|", s)]


def _tables(lines: list[str]) -> list[tuple[int, int]]:
    """(start, end) line spans of the markdown tables (header, separator, rows; end exclusive)."""
    spans, i = [], 0
    while i < len(lines):
        if "|" in lines[i] and i + 1 < len(lines) and _SEP.fullmatch(lines[i + 1]):
            j = i + 2
            while j < len(lines) and "|" in lines[j] and lines[j].strip():
                j += 1
            spans.append((i, j))
            i = j
        else:
            i += 1
    return spans


def demote_headings(md: str, by: int = 2) -> str:
    """Every ATX heading ``by`` levels deeper (at most ``######``); fenced code is left alone."""
    out, fenced = [], False
    for line in md.splitlines():
        if line.strip().startswith("```"):
            fenced = not fenced
        m = None if fenced else re.match(r"^(#{1,6})(\s+.*)$", line)
        out.append("#" * min(6, len(m.group(1)) + by) + m.group(2) if m else line)
    return "\n".join(out)


def _row(cells: list[str], keep: list[int]) -> str:
    return "| " + " | ".join(cells[k] if k < len(cells) else "" for k in keep) + " |"


def drop_empty_columns(md: str) -> str:
    """Drop each table column whose body cells are all empty (its header may be empty or a bare label)."""
    lines = md.splitlines()
    for start, end in reversed(_tables(lines)):
        rows = [_split_row(r) for r in lines[start + 2:end]]
        header = _split_row(lines[start])
        if not rows:
            continue
        keep = [k for k in range(len(header)) if any(k < len(r) and r[k] for r in rows)]
        if len(keep) == len(header) or not keep:
            continue

        lines[start:end] = [_row(header, keep), "|" + "---|" * len(keep)] + [_row(r, keep) for r in rows]
    return "\n".join(lines)


def escape_footnotes(md: str) -> str:
    """A single ``* text`` line whose previous non-blank line is a table row, and that starts no list (the
    next line is blank or the end), is a footnote to the table's ``*`` marker: escape its star."""
    lines = md.splitlines()
    for i, line in enumerate(lines):
        if not re.match(r"^\*\s+\S", line):
            continue
        prev = next((x for x in reversed(lines[:i]) if x.strip()), "")
        nxt = lines[i + 1] if i + 1 < len(lines) else ""
        if prev.strip().startswith("|") and not re.match(r"^\s*[-*]\s+", nxt):
            lines[i] = "\\" + line
    return "\n".join(lines)


def fold_long_tables(md: str, pointer: str, *, min_rows: int = 12) -> str:
    """Wrap each table longer than ``min_rows`` rows in a fold block titled by its caption (a short line just
    above it, which moves into the title) and carrying ``pointer`` (where the full table is)."""
    lines = md.splitlines()
    for start, end in reversed(_tables(lines)):
        n = end - start - 2
        if n <= min_rows:
            continue
        cap_at = start - 1
        while cap_at >= 0 and not lines[cap_at].strip():
            cap_at -= 1
        caption = lines[cap_at].strip() if cap_at >= 0 else ""
        take = bool(caption) and len(caption) <= 80 and "|" not in caption and not caption.startswith(("-", "#", "!"))
        title = f"{caption if take else 'table'} ({n} rows) | {pointer}"
        block = [FOLD_OPEN + title, *lines[start:end], FOLD_CLOSE]
        if take:
            lines[cap_at:end] = block
        else:
            lines[start:end] = block
    return "\n".join(lines)


def unfold(md: str, style: str = "md") -> str:
    """Each fold block as one pointer line (``md``: italic; ``text``: plain)."""
    out: list[str] = []
    lines = md.splitlines()
    i = 0
    while i < len(lines):
        line = lines[i]
        if line.startswith(FOLD_OPEN):
            title, _, pointer = line[len(FOLD_OPEN):].rpartition(" | ")
            j = i + 1
            while j < len(lines) and lines[j].strip() != FOLD_CLOSE:
                j += 1
            text = f"{title.strip()}: folded; {pointer.strip()}"
            out.append(f"_{text}_" if style == "md" else text)
            i = j + 1
            continue
        out.append(line)
        i += 1
    return "\n".join(out)


def fold_text_layer_lines(text: str, pointer: str) -> str:
    """The text form of the probes' per-layer tables (``logistic: layer | ...`` then ``  0 | ...`` lines):
    each as one pointer line."""
    out: list[str] = []
    lines = text.splitlines()
    i = 0
    while i < len(lines):
        m = re.match(r"^(\w+): layer \|", lines[i])
        if m:
            j = i + 1
            while j < len(lines) and re.match(r"^\s+\d+ \|", lines[j]):
                j += 1
            out.append(f"{m.group(1)} per layer ({j - i - 1} rows): folded; {pointer}")
            i = j
            continue
        out.append(lines[i])
        i += 1
    return "\n".join(out)


def relink_images(md: str, prefix: str) -> str:
    """Relative image links ``![alt](x)`` rewritten as ``![alt](prefix/x)``."""
    def sub(m: re.Match) -> str:
        href = m.group(2)
        if re.match(r"^[a-z][a-z0-9+.-]*:", href, re.I) or href.startswith("/"):
            return m.group(0)
        return f"![{m.group(1)}]({prefix.rstrip('/')}/{href})"

    return re.sub(r"!\[([^\]]*)\]\(([^)\s]+)\)", sub, md)


def relabel_header(md: str, old: str, new: str) -> str:
    """Rename a table's first header cell ``old`` to ``new`` (a label, such as the counting convention)."""
    return re.sub(rf"^\|\s*{re.escape(old)}\s*\|", f"| {new} |", md, flags=re.M)


__all__ = ["FOLD_CLOSE", "FOLD_OPEN", "demote_headings", "drop_empty_columns", "escape_footnotes", "fold_long_tables",
           "fold_text_layer_lines", "relabel_header", "relink_images", "unfold"]
