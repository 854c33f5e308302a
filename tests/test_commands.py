"""Every public command answers ``--help`` under its ``python -m`` name and its console-script name, and its
usage line names what the user typed; the help puts every option in a named group and says each default once."""
from __future__ import annotations

import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from loadbearing.commands import COMMAND_TABLE, COMMANDS, pyproject_scripts

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


def test_pyproject_scripts_are_the_command_table():
    """pyproject.toml's [project.scripts] is exactly loadbearing.commands.COMMAND_TABLE (the one list)."""
    try:
        import tomllib
    except ModuleNotFoundError:  # Python 3.10
        import tomli as tomllib  # type: ignore[no-redef]
    declared = tomllib.loads((REPO / "pyproject.toml").read_text(encoding="utf-8"))["project"]["scripts"]
    assert declared == pyproject_scripts(), "pyproject.toml [project.scripts] differs from loadbearing.commands.COMMAND_TABLE"
    assert list(declared) == [c.script for c in COMMAND_TABLE], "keep [project.scripts] in the table's order"


@pytest.mark.parametrize("cmd", COMMAND_TABLE, ids=lambda c: c.script)
def test_python_m_module_is_the_entry_or_forwards_to_it(cmd):
    """``python -m MODULE`` runs the same command as the console script: MODULE is the entry's module (or its
    package's __main__ calls it), or a runpy shim forwarding to it."""
    home = cmd.entry.split(":")[0]
    path = REPO / Path(*cmd.module.split("."))
    src = (path / "__main__.py") if path.is_dir() else path.with_suffix(".py")
    text = src.read_text(encoding="utf-8")
    if cmd.module == home:
        return
    assert (f'runpy.run_module("{home}"' in text or f"from {home} import main" in text
            or (path.is_dir() and f"from {home} import" in text)), f"{src} neither is nor forwards to {home}"


def test_architecture_docs_table_is_the_command_table():
    text = (REPO / "docs" / "architecture.md").read_text(encoding="utf-8")
    rows = re.findall(r"^\| `([\w.]+)`[^|]*\| `(cot-[\w-]+)` \|$", text, re.M)
    assert rows == [(c.module, c.script) for c in COMMAND_TABLE], "docs/architecture.md's command table differs"
