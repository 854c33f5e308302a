"""python -m study.docs RUN_DIR            (``make docs RUN=DIR``: the demo's numbers and screenshots into docs/)

    python -m study.docs runs/study-20261202-010203      # docs/results/demo.json, docs/results.md, README block, PNGs
    python -m study.docs --render                        # re-render the page and the README block from the stored numbers
    python -m study.docs --check                         # the page and the README block equal what the stored numbers render
    python -m study.docs --check runs/docs-check-...     # ... and a fresh demo's numbers equal the stored ones

Writing: the numbers (:func:`study.docs.extract.extract`) go to ``docs/results/demo.json``, the page rendered from
them to ``docs/results.md``, the headline lines into the README between its ``make docs`` markers, and the
screenshots of the run's ``report.html`` and ``browse.html`` to ``docs/report.png`` and ``docs/browser.png``.
Everything is rendered and checked before the first file is written, so a bad run directory writes nothing.
Checking: exit 1 with one line per difference.
"""
from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import Any

from loadbearing.cli import OneLineParser, run_cli
from loadbearing.files import atomic_write_text
from study.docs.extract import DocsError, compare, extract
from study.docs.render import render_readme_block, render_results
from study.docs.shots import BROWSER_FRAGMENT, screenshot

REPO = Path(__file__).resolve().parents[2]
BEGIN, END = "<!-- make docs: begin", "<!-- make docs: end -->"


def paths(repo: Path) -> dict[str, Path]:
    """Where the docs live in a checkout ``repo``."""
    docs = repo / "docs"
    return {"numbers": docs / "results" / "demo.json", "page": docs / "results.md", "readme": repo / "README.md",
            "report_png": docs / "report.png", "browser_png": docs / "browser.png"}


def numbers_text(numbers: dict) -> str:
    return json.dumps(numbers, indent=1, ensure_ascii=False) + "\n"  # the run's key order: the page follows it


def with_block(readme: str, block: str) -> str:
    """``readme`` with the lines between its ``make docs`` markers replaced by ``block``."""
    lines = readme.splitlines(keepends=True)
    starts = [i for i, ln in enumerate(lines) if ln.startswith(BEGIN)]
    ends = [i for i, ln in enumerate(lines) if ln.startswith(END)]
    if len(starts) != 1 or len(ends) != 1 or ends[0] < starts[0]:
        raise DocsError(f"README.md needs one '{BEGIN} ...' line and one '{END}' line after it (found {len(starts)} "
                        f"and {len(ends)}): put them back where the headline goes")
    return "".join(lines[:starts[0] + 1]) + block + "".join(lines[ends[0]:])


def load_numbers(p: Path) -> dict[str, Any]:
    if not p.is_file():
        raise DocsError(f"{p} is missing: write it with make docs RUN=DIR (python -m study.docs DIR)")
    try:
        return json.loads(p.read_text(encoding="utf-8"))
    except json.JSONDecodeError as e:
        raise DocsError(f"{p} is not valid JSON ({e.msg} at line {e.lineno}): rewrite it with make docs RUN=DIR") from None


def check(repo: Path, run_dir: Path | None = None, out=sys.stdout) -> list[str]:
    """Every disagreement between the docs of checkout ``repo`` and their numbers (and a fresh run's)."""
    p = paths(repo)
    stored = load_numbers(p["numbers"])
    problems = []
    page = p["page"].read_text(encoding="utf-8") if p["page"].is_file() else ""
    if page != render_results(stored):
        problems.append(f"{p['page'].relative_to(repo)} differs from what {p['numbers'].relative_to(repo)} renders "
                        "(edited by hand, or the numbers changed): run make docs RUN=DIR")
    readme = p["readme"].read_text(encoding="utf-8")
    if readme != with_block(readme, render_readme_block(stored)):
        problems.append("README.md's make-docs block differs from what the stored numbers render: run make docs RUN=DIR")
    if run_dir is not None:
        problems += [f"fresh demo {run_dir} vs {p['numbers'].relative_to(repo)}: {d}"
                     for d in compare(json.loads(numbers_text(extract(run_dir))), stored)]
    return problems


def write(repo: Path, run_dir: Path, *, screenshots: bool = True) -> list[Path]:
    """Write the numbers, the page, the README block and (unless not asked) the screenshots; return the paths."""
    p = paths(repo)
    numbers = json.loads(numbers_text(extract(run_dir)))  # rendered as the check will read it back
    page, block = render_results(numbers), render_readme_block(numbers)
    readme = with_block(p["readme"].read_text(encoding="utf-8"), block)
    p["numbers"].parent.mkdir(parents=True, exist_ok=True)
    shots = [(run_dir / "report.html", p["report_png"], "", ""),
             (run_dir / "browse.html", p["browser_png"], BROWSER_FRAGMENT, "j")]  # j: open the first sample
    if screenshots:
        missing = [str(h) for h, *_ in shots if not h.is_file()]
        if missing:
            raise DocsError(f"{', '.join(missing)} missing: finish the demo (python -m study --resume {run_dir})")
    atomic_write_text(p["numbers"], numbers_text(numbers))
    atomic_write_text(p["page"], page)
    atomic_write_text(p["readme"], readme)
    written = [p["numbers"], p["page"], p["readme"]]
    if screenshots:
        for html, png, frag, keys in shots:
            screenshot(html, png, fragment=frag, keys=keys)
            written.append(png)
    return written


def rerender(repo: Path) -> list[Path]:
    """Rewrite the page and the README block from the stored numbers (after a change to the layout, not the run)."""
    p = paths(repo)
    numbers = load_numbers(p["numbers"])
    page, readme = render_results(numbers), with_block(p["readme"].read_text(encoding="utf-8"), render_readme_block(numbers))
    atomic_write_text(p["page"], page)
    atomic_write_text(p["readme"], readme)
    return [p["page"], p["readme"]]


def build_parser() -> argparse.ArgumentParser:
    ap = OneLineParser(prog="python -m study.docs", description=__doc__.split("\n\n")[0])
    ap.add_argument("run_dir", nargs="?", help="a finished demo run directory (what make demo wrote)")
    ap.add_argument("--check", action="store_true",
                    help="write nothing; exit 1 when the docs disagree with their stored numbers (and, with RUN_DIR, "
                         "when the stored numbers disagree with that run's)")
    ap.add_argument("--render", action="store_true",
                    help="no run: re-render docs/results.md and the README block from docs/results/demo.json")
    ap.add_argument("--no-screenshots", action="store_true", help="leave docs/report.png and docs/browser.png alone")
    ap.add_argument("--repo", default=str(REPO), help="the checkout whose docs are written (default: this one)")
    return ap


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)

    def body() -> int:
        repo = Path(args.repo)
        run = Path(args.run_dir) if args.run_dir else None
        if args.check:
            problems = check(repo, run)
            for line in problems:
                print(f"docs-check: {line}", file=sys.stderr)
            if not problems:
                print("docs-check: docs/results.md and the README block agree with docs/results/demo.json"
                      + (f", and so does {run}" if run else ""))
            return 1 if problems else 0
        if args.render:
            if run is not None:
                raise DocsError("--render reads the stored numbers, not a run: drop RUN_DIR, or drop --render")
            for path in rerender(repo):
                print(f"wrote {path}")
            return 0
        if run is None:
            raise DocsError("give the demo's run directory (python -m study.docs RUN_DIR), or --check")
        for path in write(repo, run, screenshots=not args.no_screenshots):
            print(f"wrote {path}")
        return 0

    return run_cli(body)


__all__ = ["check", "main", "rerender", "with_block", "write"]
