"""The test suite's time budget, read from pytest's JUnit XML: exit 1 when it is broken.

    .venv/bin/python -m pytest -q -m "not vllm" --junitxml=.bench_out/junit.xml   # what `make test` writes
    .venv/bin/python bench/test_budget.py .bench_out/junit.xml                    # .ci/run runs this after it

The budgets (DEVELOPERS.md and the CI-budget issue) are 15 minutes for `make test` and 120 s for one integration
test, each alone on this 2-core machine. This check allows a stated margin for the noise of a shared machine:
it fails when an integration test takes more than ``--max-integration`` (150 s) or the whole suite more than
``--max-total`` (1,200 s = 20 min), and prints the slowest tests with the margin left on each bound. A test is
an integration test when tests/conftest.py recorded the ``integration`` property for it (its marker); a unit
test is held to ``--max-unit`` (also 150 s by default: the unit tier's own budget is its total, 5 min, and a unit
test near this bound belongs in the integration tier). A file with no test case is an error (a budget check of
nothing).
"""
from __future__ import annotations

import argparse
import sys
import xml.etree.ElementTree as ET
from dataclasses import dataclass
from pathlib import Path


@dataclass(frozen=True)
class Case:
    name: str  # file::test as pytest names it
    seconds: float
    integration: bool
    outcome: str  # passed | failed | error | skipped


def read_junit(path: str | Path) -> tuple[list[Case], float]:
    """The test cases of a JUnit XML file and the suite's total seconds (the testsuite elements' ``time``)."""
    root = ET.parse(path).getroot()
    suites = [root] if root.tag == "testsuite" else list(root.iter("testsuite"))
    total = sum(float(s.get("time", 0) or 0) for s in suites)
    cases = []
    for tc in root.iter("testcase"):
        cls = tc.get("classname", "")
        mod = cls.replace(".", "/") + ".py" if cls else "?"
        props = {p.get("name"): p.get("value") for p in tc.iter("property")}
        outcome = "passed"
        for tag in ("failure", "error", "skipped"):
            if tc.find(tag) is not None:
                outcome = {"failure": "failed"}.get(tag, tag)
        cases.append(Case(f"{mod}::{tc.get('name', '?')}", float(tc.get("time", 0) or 0),
                          props.get("integration") == "1", outcome))
    return cases, total


def check(cases: list[Case], total: float, *, max_integration: float, max_unit: float, max_total: float
          ) -> list[str]:
    """One line per broken budget (empty: all kept)."""
    bad = []
    if not cases:
        return ["no test case in the JUnit file: nothing was timed (did pytest run with --junitxml?)"]
    for c in cases:
        limit = max_integration if c.integration else max_unit
        if c.seconds > limit:
            bad.append(f"{c.name} took {c.seconds:.0f} s, over the {'integration' if c.integration else 'unit'} "
                       f"test budget of {limit:.0f} s: make it smaller or split it")
    if total > max_total:
        bad.append(f"the suite took {total:.0f} s, over its budget of {max_total:.0f} s: see the slowest tests above")
    return bad


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python bench/test_budget.py", description=__doc__.split("\n\n")[0])
    p.add_argument("junit", nargs="+", help="pytest --junitxml file(s)")
    p.add_argument("--max-integration", type=float, default=150.0, help="seconds for one integration test (150)")
    p.add_argument("--max-unit", type=float, default=150.0, help="seconds for one unit test (150)")
    p.add_argument("--max-total", type=float, default=1200.0, help="seconds for the whole suite (1200)")
    p.add_argument("--top", type=int, default=10, help="slowest tests to print (10)")
    a = p.parse_args(argv)
    cases: list[Case] = []
    total = 0.0
    for f in a.junit:
        if not Path(f).is_file():
            print(f"error: JUnit file {f} not found; run pytest with --junitxml={f} first", file=sys.stderr)
            return 2
        c, t = read_junit(f)
        cases += c
        total += t
    slow = sorted(cases, key=lambda c: -c.seconds)[: a.top]
    print(f"test budget: {len(cases)} tests in {total:.0f} s (budget {a.max_total:.0f} s, margin "
          f"{a.max_total - total:+.0f} s); slowest {len(slow)}:")
    for c in slow:
        kind = "integration" if c.integration else "unit"
        limit = a.max_integration if c.integration else a.max_unit
        print(f"  {c.seconds:7.1f} s  {kind:<11} (budget {limit:.0f} s)  {c.name}  [{c.outcome}]")
    bad = check(cases, total, max_integration=a.max_integration, max_unit=a.max_unit, max_total=a.max_total)
    for line in bad:
        print(f"error: {line}", file=sys.stderr)
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
