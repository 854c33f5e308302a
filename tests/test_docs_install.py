"""docs/install.md: linked from the README's first screen, and what it says matches the Makefile, the loaders
and the test files (issue #32, finding 3: no install path for a GPU machine, `make install` undocumented).

    .venv/bin/pytest -q tests/test_docs_install.py
"""
from __future__ import annotations

import re
import subprocess
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
DOC = (REPO / "docs" / "install.md").read_text(encoding="utf-8")


def test_readme_first_screen_links_the_install_page():
    first_screen = "\n".join((REPO / "README.md").read_text(encoding="utf-8").splitlines()[:30])
    assert "(docs/install.md)" in first_screen


def test_the_page_covers_a_gpu_install_the_data_and_the_tests():
    for needle in ("download.pytorch.org/whl/cu", "pip install vllm", "bitsandbytes", "--quantize", "--data-dir",
                   "LOADBEARING_DATA", "chromium", "make test-fast", "make install", "torch.cuda.device_count()"):
        assert needle in DOC, needle


def test_make_install_exists_and_the_version_ranges_are_the_projects():
    targets = re.findall(r"^([a-z-]+):", (REPO / "Makefile").read_text(), flags=re.M)
    for t in ("install", "demo", "test", "test-fast", "vllm", "clean-venv"):
        assert t in targets, t
    pyproject = (REPO / "pyproject.toml").read_text()
    for spec in re.findall(r"`((?:torch|transformers)>=[^`]+)`", DOC):
        assert f'"{spec}"' in pyproject, spec


def test_the_data_layout_is_the_loaders():
    src = (REPO / "loadbearing" / "questions" / "loaders.py").read_text()
    for path in ("test.jsonl", "_test.csv"):
        assert path in DOC and path in src, path
    for hub in re.findall(r'"(\w+/\w+)"', src[src.index("_HUB_IDS"):].splitlines()[0]):
        assert hub in DOC, hub


def test_the_unit_tier_command_without_data_selects_test_files():
    cmd = re.search(r"\$\((grep -L [^)]+)\)", DOC).group(1)
    files = subprocess.run(cmd, shell=True, cwd=REPO, capture_output=True, text=True).stdout.split()
    assert len(files) > 20 and "tests/test_report.py" in files
    for needs_data in ("tests/test_data.py", "tests/test_answers.py", "tests/test_bad_inputs.py", "tests/test_protocol.py"):
        assert needs_data not in files, needs_data


def test_the_results_page_counts_the_demos_inspect_samples_as_its_generations():
    """One sample per continuation record (tests/test_export_inspect.py): docs/results.md's count of the demo's
    exported continuations is the demo table's distinct generations (the README once said 521 where the run had
    459; the page is now rendered from the run's numbers by `make docs`, tests/test_docs_results.py)."""
    page = (REPO / "docs" / "results.md").read_text(encoding="utf-8")
    generations = re.search(r"\| units \| [^|]*?([\d,]+) distinct generations", page).group(1)
    exported = re.search(r"the demo's ([\d,]+) continuation records", page).group(1)
    assert exported == generations
