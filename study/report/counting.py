"""The report's one counting convention, and the table that shows where the stages' counts differ.

One **generation** is one distinct model input (greedy decoding: one output), recorded once even when it
fills several (strategy, position) cells (two positions that cut at the same line, two strategies that make
the same edit). The report counts one way, and labels the one table that does not:

* **per generation** (the convention: verdicts, the behaviour section, the difficulty gradient and its
  Table 4): a group row counts a generation once in every group whose cell it fills, where the positions one
  generation fills for one strategy are one merged position (``middle=late``,
  :func:`loadbearing.stats.design.merged_position`); a pooled row counts it once, so a total is the verdict's;
* **per generation, by recorded cell** (the labels section's by-table, labelled so): a generation counted
  once, under the first cell it was recorded with, so a position that always shares another's line has no row.

Until issue #32 the gradient and Table 4 counted *per cell* ((generation, cell) pairs), so ``position=early``
was 131/164 in one section and 136/169 in another; :func:`counting_table` shows the two ways side by side.
"""
from __future__ import annotations

from collections import Counter
from pathlib import Path

from loadbearing.files import RunDirError
from loadbearing.report.blocks import Block, Paragraph, Row, Table, blocks_markdown, blocks_text, facet_filter
from loadbearing.runs import Run
from loadbearing.stats.design import merged_position, position_sort_key

CONVENTION = ("Counting: one *generation* is one distinct model input, recorded once even when it fills several "
              "(strategy, position) cells. Every count and rate is **per generation**: a group row counts a "
              "generation once in every group whose cell it fills (the positions one generation fills for a strategy "
              "being one merged position, e.g. middle=late), a pooled row once, so each total is the verdict's. The "
              "one exception is labelled: the labels section's table *by recorded cell* counts each generation once, "
              "under the cell it was recorded with (table \"Counting conventions\").")

WAYS = ("per generation", "per generation, by recorded cell")


def _fmt(c: Counter) -> str:
    return f"C {c['C']}/{c['n']}, A {c['A']}" if c["n"] else "-"


def counting_table(study_dir: str | Path, style: str = "md") -> str | None:
    """The perturbed continuations' C / parseable and A per position and strategy under the two ways, or
    None when the run has no perturbed continuation (or no records)."""
    blocks = counting_blocks(study_dir)
    if blocks is None:
        return None
    return blocks_markdown(blocks) if style == "md" else blocks_text(blocks)


def counting_blocks(study_dir: str | Path) -> tuple[Block, ...] | None:
    """:func:`counting_table` as report blocks (each group row linking to its samples in the trace browser)."""
    try:
        run = Run(study_dir)
        conts = run.continuations("perturbed")
        _, labels = run.labels()
    except (RunDirError, OSError, ValueError):
        return None
    if not conts:
        return None
    counts: dict[tuple[str, str], list[Counter]] = {}
    for c in conts:
        cells = list(c.cells())
        if c.correct is None:
            add: Counter[str] = Counter()
        else:
            add = Counter(n=1, C=int(c.correct is False), A=int(labels.get(c.id) == "A"))
        # per strategy, the positions this generation fills together are one merged cell (middle=late)
        merged = [(st, merged_position(p for s2, p in cells if s2 == st)) for st in dict.fromkeys(s for s, _ in cells)]
        first_cell = cells[0]
        for axis, idx in (("position", 1), ("strategy", 0)):
            per_gen = {cell[idx] for cell in merged}
            first = first_cell[idx]
            for g in sorted(per_gen | {first}):
                row = counts.setdefault((axis, g), [Counter(), Counter()])
                if g in per_gen:
                    row[0].update(add)
                if g == first:
                    row[1].update(add)
    keys = sorted(counts, key=lambda k: (k[0] != "position", position_sort_key(k[1]) if k[0] == "position" else (0, ""),
                                         k[1]))
    rows = [[f"{a}={g}", *(_fmt(x) for x in counts[(a, g)])] for a, g in keys]
    filters = [facet_filter(**{a: g}) for a, g in keys]
    differ = [r for r in rows if len(set(r[1:])) > 1]
    header = ["group (perturbed, parseable)", *WAYS]
    note = (f"{len(differ)} of {len(rows)} groups differ between the ways; the verdicts, the behaviour section, the "
            f"difficulty gradient and Table 4 count {WAYS[0]}, the labels by-table {WAYS[1]}.")
    return (Table(tuple(header), tuple(Row(tuple(r), filter=f) for r, f in zip(rows, filters))), Paragraph(note))


__all__ = ["CONVENTION", "WAYS", "counting_blocks", "counting_table"]
