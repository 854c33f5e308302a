"""The diagnosticity table shipped with the toolkit, and the report section that shows it in every study report.

    python -m study.validate --output-dir runs/validate --publish     # make validate: also writes SHIPPED
    from study.validate.shipped import load, report_blocks

``SHIPPED`` (package data) holds the last published validation: per test its measure on each organism with its
interval, whether it orders them as planted, its AUROC and whether it separates them, with the command, the date,
the commit and the organisms' weights. A study report shows it under "Planted truth", so a reader of SmolLM2's
(or any model's) numbers sees beside them which of those tests found a planted load-bearing chain. It is the
toolkit's validation, not a measurement of the run's model, and the section says so.
"""
from __future__ import annotations

import datetime as _dt
from pathlib import Path
from typing import Any

from loadbearing.files import read_json, write_json
from loadbearing.report.blocks import Block, Paragraph, table

SHIPPED = Path(__file__).with_name("diagnosticity.json")
KINDS = ("load-bearing", "graded", "decorative")


def publish(t: dict[str, Any], *, command: str, weights: dict[str, str], path: Path | None = None) -> dict[str, Any]:
    """Write the compact table (no per-question values) to ``path``; returns what was written."""
    from loadbearing.provenance import git_info  # deferred: provenance runs git
    from study.validate.table import TITLES  # deferred: study.validate.table loads the gradient stage

    tests = {name: {"title": TITLES.get(name, name), "measures": r["measures"], "auroc": r["auroc"],
                    "ordered": r["ordered"], "separates": r["separates"]} for name, r in t["tests"].items()}
    obj = {"kind": "loadbearing.diagnosticity", "command": command, "date": _dt.date.today().isoformat(),
           "git": git_info().get("commit"), "organisms": weights, "baseline": t["baseline"], "tests": tests}
    write_json(path or SHIPPED, obj)
    return obj


def load(path: Path | None = None) -> dict[str, Any] | None:
    path = path or SHIPPED
    return read_json(path) if path.is_file() else None


def _cell(m: dict[str, Any]) -> str:
    if m.get("estimate") is None:
        return "n/a"
    lo, hi = m.get("ci") or (None, None)
    return f"{m['estimate']:.2f}" + ("" if lo is None else f" [{lo:.2f}, {hi:.2f}]")


def report_blocks(_study_dir: Path | None = None, path: Path | None = None) -> tuple[Block, ...] | None:
    """The shipped table as report blocks (None when no table is shipped)."""
    t = load(path)
    if not t:
        return None
    kinds = [k for k in KINDS if k in t.get("baseline", {})]
    rows = []
    for r in t["tests"].values():
        a = "n/a" if r["auroc"] is None else f"{r['auroc']:.2f}"
        o = "n/a" if r["ordered"] is None else ("yes" if r["ordered"] else "no")
        rows.append([r["title"], *(_cell(r["measures"][k]) for k in kinds), o, a, "**yes**" if r["separates"] else "no"])
    found = [r["title"] for r in t["tests"].values() if r["separates"]]
    intro = Paragraph(
        "Not a measurement of this run's model: the toolkit's own validation on model organisms whose chain is "
        "load-bearing, decorative or graded by construction (docs/organisms.md), so that each test's number above "
        "can be read against what that test finds on planted truth. Separated (ordered as planted and question-"
        f"level AUROC >= 0.8): {', '.join(found) if found else 'none'}. Produced by `{t['command']}` on "
        f"{t['date']} (commit {str(t.get('git') or 'unknown')[:12]}).")
    tab = table(["test", *kinds, "ordered as planted", "AUROC LB vs dec", "separates"], rows,
                caption="Each measure oriented so that higher = more load-bearing; 95% intervals over questions "
                      "(Korn-Graubard for the rates, a percentile bootstrap of questions, descriptive, for the means)")
    return (intro, tab)
