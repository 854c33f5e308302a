"""python -m study.browse RUN_DIR [RUN_DIR ...] [--output-file FILE.html] [--labelling NAME] [--steering FILE]

The trace browser: one self-contained HTML file (data and script inline; no server, CDN or network) to read
what the model wrote. Open it from disk in any browser (default ``RUN_DIR/browse.html``).

* **Questions** tab: each question's baseline answer against gold, eligibility and, when not eligible, why.
* **Continuations** tab: a virtualised list (only the visible rows exist in the page, so 20,000 continuations
  stay responsive) with facet filters - condition, strategy, position, label, correctness, task, level,
  model, dataset, steered - and a free-text search, with counts that update as filters change. The selected
  sample shows, side by side: the original trace with the edited line as a diff (original -> edited, the
  lines after the cut dimmed), the control continuation (same question, same cut), the perturbed one, the
  parsed answers against gold, the label with the rule labeller's evidence spans highlighted in the text, the
  judge's per-variant verdicts, and - when ``RUN_DIR/steering/generations.jsonl`` exists - every steered
  generation of the case beside its unsteered one, each marked as the probe's or a random control's, with
  "moved" (a C case now correct) and "changed, still wrong" (another wrong answer) as distinct marks; under the
  ``steered`` facet, each probe setting's moved C cases of all its C cases and the random controls' (the
  sweep's ``moved_of_all``, the report's numbers).
* **Causal tests** panel (when the run has them; :mod:`study.browse.causal`): the question's early-answering
  curve (a small plot and the table of cut -> forced answer, same as the full chain's), its resamples per step
  (rollouts, how many differ, importance, a few rollouts folded), its paraphrase (original prefix, paraphrase,
  the continuation's answer against the reference, and its retained answer per fraction paraphrased), and for
  a patched C case its restored fraction per layer and position group; its decision point / NLDD share, filler
  conditions, and per step the four step-level measures (propagation, |cf|, receiver score, suppression); and,
  folded, the run's stage summaries (:mod:`study.browse.stages`).
* Keys: ``j``/``k`` or the arrow keys step through the visible samples, ``/`` focuses the search.

**URL fragment** (permalinks and links from ``report.html``): ``#ID`` selects one sample (clearing filters),
or ``#f=FACET:VALUE,FACET:VALUE&q=TEXT&id=ID`` with each part optional and each VALUE/TEXT/ID URL-encoded
(``encodeURIComponent``). Values of one facet are OR-ed, facets are AND-ed. Facets: ``condition``
(perturbed|control), ``strategy``, ``position``, ``label`` (A|B|C|non-C|none), ``correct``
(correct|wrong|unparsed), ``task``, ``level``, ``model``, ``dataset``, ``steered`` ("moved by the probe" |
"changed by the probe, still wrong" | "moved by a random control only" | "not moved" | "not steered"),
``question`` (a question id). Example: ``browse.html#f=condition:perturbed,strategy:contradiction,label:C``.
:func:`fragment` builds one. Without a fragment the page opens on the perturbed continuations.

Every piece of text is put in the page with ``textContent`` (never parsed as HTML) and the embedded JSON
escapes ``<``, ``>`` and ``&``, so a continuation that contains ``<script>`` shows as text and never runs.
The data is columnar with one string table (repeated strings - labels, strategies, lines, answers - stored
once), so the file stays compact.

Where things live: the page's HTML, CSS and script are package data in ``study/browser/`` (``page.html``,
``browse.css``, ``browse.js``; read with :mod:`importlib.resources` and inlined by :func:`render`), the data it
embeds is built by :mod:`study.browse.data`, and this module is the CLI, the fragment syntax and the writer.
"""
from __future__ import annotations

import argparse
import functools
import json
import os
import re
import sys
from collections.abc import Sequence
from dataclasses import dataclass
from html import escape
from importlib import resources
from pathlib import Path
from typing import Any
from urllib.parse import quote

from loadbearing.cli import run_cli
from loadbearing.files import atomic_write_text
from loadbearing.report.blocks import FACETS
from loadbearing.stage.parser import config_from_parsed, option, parser_from_config
from study.browse.data import SCHEMA_VERSION, BrowseError, collect

DEFAULT_NAME = "browse.html"
#: the page's files (package data under ``study/browser/``), inlined into the one self-contained HTML file
PAGE_FILES = ("page.html", "browse.css", "browse.js")


def fragment(filters: dict[str, str | Sequence[str]] | None = None, *, q: str | None = None, id: str | None = None) -> str:
    """The URL fragment (with ``#``) that opens the browser filtered: ``fragment({"strategy": "x", "label": "C"})``."""
    parts = []
    if filters:
        items = []
        for k, v in filters.items():
            if k not in FACETS:
                raise BrowseError(f"unknown browser facet {k!r}; use one of {', '.join(FACETS)}")
            for one in ([v] if isinstance(v, str) else list(v)):
                items.append(f"{k}:{quote(str(one), safe='')}")
        parts.append("f=" + ",".join(items))
    if q:
        parts.append("q=" + quote(q, safe=""))
    if id:
        parts.append("id=" + quote(id, safe=""))
    return "#" + "&".join(parts)


@functools.cache
def page_file(name: str) -> str:
    """One of :data:`PAGE_FILES` as text (read from the installed package, byte for byte: no newline translation)."""
    if name not in PAGE_FILES:
        raise BrowseError(f"unknown page file {name!r}; use one of {', '.join(PAGE_FILES)}")
    return (resources.files("study") / "browser" / name).read_bytes().decode("utf-8")


def embed_json(obj: Any) -> str:
    """JSON that is safe inside ``<script type="application/json">``: ``<``, ``>``, ``&`` and the JS line
    separators are written as ``\\uXXXX`` escapes, so no text can close the script element."""
    s = json.dumps(obj, ensure_ascii=False, separators=(",", ":"), allow_nan=False)
    return (s.replace("&", "\\u0026").replace("<", "\\u003c").replace(">", "\\u003e")
            .replace("\u2028", "\\u2028").replace("\u2029", "\\u2029"))


def render(data: dict[str, Any], *, title: str = "trace browser") -> str:
    """The whole HTML page for :func:`collect`'s data: ``page.html`` with the CSS, the script and the data inlined.

    The causal tests' block (``data["causal"]``) goes into a data element of its own, which the page parses only
    when a question's causal panel is first shown. Every placeholder is filled in one pass, so text inside the
    data that looks like a placeholder stays as it is."""
    rest = {k: v for k, v in data.items() if k != "causal"}
    parts = {"TITLE": escape(title), "CSS": page_file("browse.css"), "JS": page_file("browse.js"),
             "DATA": embed_json(rest), "CAUSAL": embed_json(data.get("causal"))}
    return re.sub(r"__(TITLE|CSS|JS|DATA|CAUSAL)__", lambda m: parts[m.group(1)], page_file("page.html"))


def write_browser(run_dirs: str | os.PathLike[str] | Sequence[str | os.PathLike[str]],
                  output: str | os.PathLike[str] | None = None, *, labelling: str | None = None,
                  steering: str | os.PathLike[str] | None = None) -> Path:
    """Write the browser for ``run_dirs`` (default ``RUN_DIR/browse.html``) atomically; returns its path."""
    dirs = [run_dirs] if isinstance(run_dirs, (str, os.PathLike)) else list(run_dirs)
    if not dirs:
        raise BrowseError("no run directory given; pass RUN_DIR (a directory written by python -m behavioural.run)")
    out = Path(output) if output is not None else Path(dirs[0]) / DEFAULT_NAME
    if out.suffix.lower() not in (".html", ".htm"):
        raise BrowseError(f"--output-file {str(out)!r} does not end in .html; name an .html file")
    if out.exists() and out.is_dir():
        raise BrowseError(f"--output-file {str(out)!r} is a directory; name an .html file")
    if not out.parent.is_dir():
        raise BrowseError(f"--output-file directory {str(out.parent)!r} does not exist; create it first")
    data = collect(dirs, labelling=labelling, steering=steering)
    title = "trace browser: " + ", ".join(Path(d).name or str(d) for d in dirs)
    return atomic_write_text(out, render(data, title=title))


@dataclass(frozen=True)
class BrowseConfig:
    """What ``python -m study.browse`` accepts (its parser is built from these fields)."""

    run_dirs: tuple[str, ...] = option(positional=True, nargs="+", metavar="RUN_DIR", parse=tuple, group="inputs",
                                       help="run directory written by python -m behavioural.run (several: one "
                                            "browser over all, with a model filter)")
    labelling: str | None = option(None, metavar="NAME", group="inputs",
                                   help="labels/<NAME> to show (default: the newest complete labelling)")
    steering: str | None = option(None, metavar="GENERATIONS_JSONL", group="inputs",
                                  help="a steering sweep's generations.jsonl (default RUN_DIR/steering/generations.jsonl "
                                       "when present)")
    output: str | None = option(None, flag="--output-file", aliases=("-o",), deprecated=("--output",), metavar="FILE",
                                group="output", help=f"the HTML file to write (default RUN_DIR/{DEFAULT_NAME})")


def build_parser() -> argparse.ArgumentParser:
    """The command's parser, built from :class:`BrowseConfig`."""
    return parser_from_config(BrowseConfig, prog="python -m study.browse", description=(__doc__ or "").split("\n\n")[1],
                              raw_description=True, groups=("inputs", "output"))


def main(argv: Sequence[str] | None = None) -> int:
    args: BrowseConfig = config_from_parsed(BrowseConfig, build_parser().parse_args(argv))

    def body() -> int:
        out = write_browser(args.run_dirs, args.output, labelling=args.labelling, steering=args.steering)
        print(f"wrote {out} ({out.stat().st_size / 1e6:.2f} MB); open it in a browser")
        return 0

    return run_cli(body)


__all__ = ["DEFAULT_NAME", "FACETS", "PAGE_FILES", "SCHEMA_VERSION", "BrowseError", "build_parser", "collect", "embed_json",
           "fragment", "main", "page_file", "render", "write_browser"]

if __name__ == "__main__":
    sys.exit(main())
