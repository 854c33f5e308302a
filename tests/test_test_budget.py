"""bench/test_budget.py: the suite's time budget read from a JUnit XML file as pytest writes it (a real pytest run
in a subprocess, with this suite's conftest marking integration tests), then the exit status and the lines a
reader of the CI log sees."""
from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
BUDGET = REPO / "bench" / "test_budget.py"


def _budget(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, str(BUDGET), *args], capture_output=True, text=True, cwd=REPO)


def test_a_real_junit_file_marks_integration_tests_and_is_checked(tmp_path):
    tests = tmp_path / "tests"
    tests.mkdir()
    (tests / "conftest.py").write_text((REPO / "tests" / "conftest.py").read_text())
    shutil.copytree(REPO / "tests" / "helpers", tests / "helpers")  # the conftest's shared test helpers
    (tests / "test_tiny.py").write_text(
        "import time, pytest\n"
        "def test_quick():\n    pass\n"
        "@pytest.mark.integration\n"
        "def test_slowish():\n    time.sleep(0.3)\n")
    (tmp_path / "pytest.ini").write_text("[pytest]\nmarkers =\n    integration: slow\n")
    junit = tmp_path / "junit.xml"
    r = subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", f"--junitxml={junit}", "tests"],
                       capture_output=True, text=True, cwd=tmp_path)
    assert r.returncode == 0, r.stdout[-2000:]
    ok = _budget(str(junit))
    assert ok.returncode == 0, ok.stderr
    assert "test budget: 2 tests in" in ok.stdout
    slow_line = next(ln for ln in ok.stdout.splitlines() if "test_slowish" in ln)
    assert "integration" in slow_line and "[passed]" in slow_line
    assert "unit" in next(ln for ln in ok.stdout.splitlines() if "test_quick" in ln)
    # the same file against budgets it breaks: exit 1, one error line per broken bound, naming the test
    bad = _budget(str(junit), "--max-integration", "0.1", "--max-total", "0.01")
    assert bad.returncode == 1
    errs = bad.stderr.splitlines()
    assert len(errs) == 2 and all(e.startswith("error: ") for e in errs)
    assert "test_slowish took" in errs[0] and "integration test budget of 0 s" in errs[0]
    assert "the suite took" in errs[1]


def test_missing_or_empty_junit_files_are_errors(tmp_path):
    r = _budget(str(tmp_path / "nope.xml"))
    assert r.returncode == 2 and r.stderr.startswith("error: JUnit file") and r.stderr.count("\n") == 1
    empty = tmp_path / "empty.xml"
    empty.write_text('<?xml version="1.0"?><testsuites><testsuite name="pytest" tests="0" time="0.1"/></testsuites>')
    r = _budget(str(empty))
    assert r.returncode == 1 and "no test case in the JUnit file" in r.stderr
