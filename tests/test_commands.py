"""Every public command answers ``--help`` under its ``python -m`` name and its console-script name, and its
usage line names what the user typed."""
from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from loadbearing.commands import COMMANDS

REPO = Path(__file__).resolve().parents[1]


def _script(name: str) -> str | None:
    here = Path(sys.executable).parent / name
    return str(here) if here.exists() else shutil.which(name)


@pytest.mark.parametrize("module", sorted(COMMANDS.values()))
def test_python_m_help(module):
    r = subprocess.run([sys.executable, "-m", module, "--help"], cwd=REPO, capture_output=True, text=True, timeout=120)
    assert r.returncode == 0, r.stderr
    assert r.stdout.startswith("usage: python -m "), r.stdout[:200]


@pytest.mark.parametrize("script", sorted(COMMANDS))
def test_console_script_help(script):
    exe = _script(script)
    assert exe, f"console script {script} is not installed; reinstall with pip install -e ."
    r = subprocess.run([exe, "--help"], cwd=REPO, capture_output=True, text=True, timeout=120)
    assert r.returncode == 0, r.stderr
    assert r.stdout.startswith(f"usage: {script}"), r.stdout[:200]


def test_pyproject_declares_every_command():
    text = (REPO / "pyproject.toml").read_text(encoding="utf-8")
    for script in COMMANDS:
        assert f"\n{script} = " in text, f"{script} missing from [project.scripts]"
