"""Every public command answers ``--help`` under its ``python -m`` name and its console-script name, and its
usage line names what the user typed; the help puts every option in a named group and says each default once."""
from __future__ import annotations

import re
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


def help_entries(text: str) -> dict[str, list[str]]:
    """``--help`` output -> {section title: [one entry per option or positional, its wrapped help joined]}."""
    sections: dict[str, list[str]] = {}
    current = None
    for line in text.splitlines():
        if re.match(r"^\S.*:$", line):
            current = line[:-1]
            sections[current] = []
        elif current is not None and re.match(r"^  \S", line):
            sections[current].append(line.strip())
        elif current is not None and line.strip() and sections[current]:
            sections[current][-1] += " " + line.strip()
    return sections


#: a help entry stating a default (the forms loadbearing.cli.SAYS_DEFAULT recognises, and argparse's own)
DEFAULT_SAID = re.compile(r"\(default\b|\bdefault:|[;,]\s*default\b", re.IGNORECASE)


@pytest.mark.parametrize("script", sorted(COMMANDS))
def test_console_script_help(script):
    exe = _script(script)
    assert exe, f"console script {script} is not installed; reinstall with pip install -e ."
    r = subprocess.run([exe, "--help"], cwd=REPO, capture_output=True, text=True, timeout=120)
    assert r.returncode == 0, r.stderr
    assert r.stdout.startswith(f"usage: {script}"), r.stdout[:200]
    sections = help_entries(r.stdout)
    # every option and positional sits in a named argparse group; argparse's own sections hold only --help
    assert [e.split()[0] for e in sections.get("options", [])] == ["-h,"], sections.get("options")
    assert "positional arguments" not in sections, sections["positional arguments"]
    assert len(sections) >= 2, f"{script} --help has no argument groups"
    # each default said once: never "(default 50) (default: None)"
    for title, entries in sections.items():
        for entry in entries:
            assert len(DEFAULT_SAID.findall(entry)) <= 1, f"{script} [{title}] says its default twice: {entry}"
            assert "(default: None)" not in entry, f"{script} [{title}] shows a None default: {entry}"
    # deprecated aliases still parse but are not offered
    for old in ("--no-progress", "--labels ", "--name ", "--positions ", "--position ", "--output "):
        assert old not in r.stdout, f"{script} --help lists the deprecated {old.strip()}"


def test_pyproject_declares_every_command():
    text = (REPO / "pyproject.toml").read_text(encoding="utf-8")
    for script in COMMANDS:
        assert f"\n{script} = " in text, f"{script} missing from [project.scripts]"
