"""docs/results.md is what a demo measured, and the README is a front page (issue #33, item 6).

    .venv/bin/pytest -q tests/test_docs_results.py

- The page and the README's headline block are exactly what ``docs/results/demo.json`` (a demo's numbers,
  written by ``make docs``) renders, so a hand edit or a stale number fails here without running a demo;
  ``make docs-check`` compares that file with a fresh demo's (``python -m study.docs --check RUN_DIR``).
- A changed number, a hand-edited page and a bad run directory each fail with one line naming the fix.
- The README stays short, links only to files and headings that exist, and lists every command.
- The integration test writes the docs (numbers, page, README block, both screenshots) from a small study run
  made by the study itself, so the renderer keeps up with the stages' real summary files.
"""
from __future__ import annotations

import functools
import json
import re
import shutil
from pathlib import Path

import pytest

from loadbearing.commands import COMMANDS
from study.docs.cli import check, main, numbers_text, paths, with_block
from study.docs.extract import compare, extract
from study.docs.render import render_readme_block, render_results

REPO = Path(__file__).resolve().parents[1]
README = (REPO / "README.md").read_text(encoding="utf-8")
STORED = json.loads((REPO / "docs" / "results" / "demo.json").read_text(encoding="utf-8"))


def _copy_docs(tmp_path: Path) -> Path:
    """A scratch checkout holding the README and the docs, for tests that change them."""
    repo = tmp_path / "repo"
    shutil.copytree(REPO / "docs", repo / "docs")
    shutil.copy(REPO / "README.md", repo / "README.md")
    return repo


# ------------------------------------------------------------------------------------------ the page is its numbers
def test_the_page_and_the_readme_block_are_what_the_stored_numbers_render():
    assert check(REPO) == []
    assert (REPO / "docs" / "results.md").read_text(encoding="utf-8") == render_results(STORED)
    assert render_readme_block(STORED) in README


def test_the_stored_numbers_are_a_demo_run():
    """The file holds every default stage of a demo, written as ``make docs`` writes it."""
    for source in ("behaviour", "labels", "gradient", "probes", "steering"):
        assert STORED.get(source), source
    assert STORED["study"]["settings"]["model"] == "smollm2-135m-instruct"
    assert (REPO / "docs" / "results" / "demo.json").read_text(encoding="utf-8") == numbers_text(STORED)
    b = STORED["behaviour"]
    page = render_results(STORED)
    # the counts a reader checks first appear as the run has them
    assert f"{b['continuations']} distinct generations" in page
    assert f"the demo's {b['continuations']} continuation records" in page
    assert f"{b['overall']['propagation']['k']}/{b['overall']['propagation']['n']}" in page


def test_a_changed_number_fails_the_check_naming_the_fix(tmp_path):
    repo = _copy_docs(tmp_path)
    p = paths(repo)
    numbers = json.loads(p["numbers"].read_text(encoding="utf-8"))
    numbers["behaviour"]["overall"]["propagation"]["k"] -= 1  # the page's table
    numbers["verdicts"][0]["answer"] = "no"  # the page's and the README's verdict line
    p["numbers"].write_text(numbers_text(numbers), encoding="utf-8")
    problems = check(repo)
    assert len(problems) == 2 and all("make docs RUN=DIR" in x for x in problems), problems
    assert "docs/results.md differs" in problems[0] and "README.md" in problems[1]


def test_a_hand_edit_of_the_page_fails_the_check(tmp_path, capsys):
    repo = _copy_docs(tmp_path)
    page = paths(repo)["page"]
    page.write_text(page.read_text(encoding="utf-8").replace("74.8%", "75.0%"), encoding="utf-8")
    assert main(["--check", "--repo", str(repo)]) == 1
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and err[0].startswith("docs-check: docs/results.md differs"), err


def test_compare_names_each_differing_key():
    fresh = json.loads(json.dumps(STORED))
    assert compare(fresh, STORED) == []
    fresh["behaviour"]["eligible"] += 1
    del fresh["labels"]["final_labeller"]
    diffs = compare(fresh, STORED)
    assert diffs == [f"behaviour.eligible: fresh {STORED['behaviour']['eligible'] + 1}, stored {STORED['behaviour']['eligible']}",
                     "labels.final_labeller: only in the stored docs"], diffs


def _run_from(numbers: dict, run: Path) -> Path:
    """A run directory whose summary files hold exactly ``numbers``' parts of them."""
    from study.docs.extract import SOURCES

    for source, (rel, _) in SOURCES.items():
        if source in numbers:
            (run / rel).parent.mkdir(parents=True, exist_ok=True)
            (run / rel).write_text(json.dumps(numbers[source]), encoding="utf-8")
    return run


def test_a_fresh_run_that_differs_is_named_by_the_check(tmp_path):
    """``--check RUN_DIR`` (``make docs-check``) names the key where a fresh run's summary differs. The verdict
    lines and the side-by-side table are recomputed from files this synthetic run lacks, so only they differ
    when its summaries are the stored ones."""
    derived = ("verdicts", "side_by_side")
    same = _run_from(STORED, tmp_path / "same")
    assert [d for d in compare(extract(same), STORED) if not d.startswith(derived)] == []
    changed = json.loads(json.dumps(STORED))
    changed["behaviour"]["questions"] += 1
    run = _run_from(changed, tmp_path / "changed")
    problems = [x for x in check(REPO, run) if not x.split(": ", 1)[1].startswith(derived)]
    assert problems == [f"fresh demo {run} vs docs/results/demo.json: behaviour.questions: fresh "
                        f"{STORED['behaviour']['questions'] + 1}, stored {STORED['behaviour']['questions']}"], problems


def test_a_run_directory_without_the_demos_files_is_one_error_line_and_writes_nothing(tmp_path, capsys):
    repo = _copy_docs(tmp_path)
    before = {p: p.read_bytes() for p in paths(repo).values()}
    run = tmp_path / "half"
    run.mkdir()
    (run / "summary.json").write_text(json.dumps(STORED["behaviour"]), encoding="utf-8")
    assert main([str(run), "--repo", str(repo)]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and err[0].startswith("error: ") and "probes/results.json" in err[0], err
    assert main([str(tmp_path / "absent"), "--repo", str(repo)]) == 2
    assert "is not a directory" in capsys.readouterr().err
    assert {p: p.read_bytes() for p in paths(repo).values()} == before


def test_the_readme_block_markers_are_required():
    with pytest.raises(Exception, match="make docs: begin"):
        with_block("# a README without markers\n", "x\n")


# ------------------------------------------------------------------------------------------ the README
def _slug(heading: str) -> str:
    """GitHub's anchor for a heading: lower case, punctuation but '-' and '_' dropped, spaces to '-'."""
    return re.sub(r"[^\w\- ]", "", heading.strip().lower()).replace(" ", "-")


def test_the_readme_is_a_front_page():
    lines = README.splitlines()
    assert len(lines) <= 200, len(lines)
    for needed in ("make demo", "make test", "(docs/install.md)", "(docs/gpu-quickstart.md)", "(docs/results.md)",
                   "(docs/architecture.md)", "(CHANGELOG.md)", "make docs"):
        assert needed in README, needed
    # history lives in the CHANGELOG, the concept table in docs/architecture.md
    assert "What changed in this table" not in README and "Earlier still" not in README
    assert "| concept |" not in README
    assert "| concept | its one home |" in (REPO / "docs" / "architecture.md").read_text(encoding="utf-8")


def test_the_readme_lists_every_command():
    for script in COMMANDS:
        assert f"`{script}" in README, script
    for target in re.findall(r"^([a-z][a-z-]*):", (REPO / "Makefile").read_text(), flags=re.M):
        if target in ("demo", "test", "docs", "docs-check", "reproduce", "demo-paper-datasets", "organisms", "validate",
                      "support-matrix", "lint", "test-fast", "test-budget", "test-vllm"):
            assert f"make {target}" in README, target


@pytest.mark.parametrize("doc", ["README.md", *sorted(str(p.relative_to(REPO)) for p in (REPO / "docs").glob("*.md")),
                                 "CHANGELOG.md"])
def test_every_local_link_points_at_a_file_and_heading_that_exist(doc):
    src = REPO / doc
    text = src.read_text(encoding="utf-8")
    bad = []
    for target in re.findall(r"\]\(([^)\s]+)\)", text):
        if re.match(r"[a-z]+://", target):
            continue
        file, _, anchor = target.partition("#")
        dest = (src.parent / file).resolve() if file else src
        if not dest.exists():
            bad.append(f"{target}: no file {dest.relative_to(REPO) if dest.is_relative_to(REPO) else dest}")
        elif anchor and dest.suffix == ".md":
            heads = {_slug(h) for h in re.findall(r"^#+ (.+)$", dest.read_text(encoding="utf-8"), flags=re.M)}
            if anchor not in heads:
                bad.append(f"{target}: no heading #{anchor} in {dest.name}")
    assert not bad, "\n".join(bad)


# ------------------------------------------------------------------------------------------ on a real study run
@pytest.mark.integration
def test_make_docs_writes_the_page_the_block_and_the_screenshots_from_a_study_run(tmp_path, monkeypatch, tiny_lm):
    """The study (tiny Llama, scripted behaviour, as tests/test_report.py) writes a run; ``python -m study.docs``
    renders it into a scratch checkout; the check then passes there, and the PNGs are the 1400x900 first screen."""
    from fakes import scripted_generate

    import behavioural.protocol as protocol
    import loadbearing.engine.models as models
    from study.driver import main as study_main

    monkeypatch.setattr(models, "load_model", lambda *a, **k: tiny_lm)
    monkeypatch.setattr(protocol, "generate", functools.partial(scripted_generate))
    run = tmp_path / "study"
    assert study_main(["--output-dir", str(run), "--task", "s2_o5", "--max-examples", "16", "--folds", "2", "--k", "1",
                       "--alphas", "0.5", "--max-cases", "2", "--random-seeds", "1", "--max-new-tokens", "16",
                       "--quiet"]) == 0
    repo = _copy_docs(tmp_path)
    assert main([str(run), "--repo", str(repo)]) == 0
    p = paths(repo)
    numbers = json.loads(p["numbers"].read_text(encoding="utf-8"))
    assert numbers["behaviour"]["questions"] == extract(run)["behaviour"]["questions"] == 16
    assert check(repo, run) == []
    assert p["page"].read_text(encoding="utf-8") == render_results(numbers)
    for png in (p["report_png"], p["browser_png"]):
        head = png.read_bytes()[:24]
        assert head[:8] == b"\x89PNG\r\n\x1a\n"
        assert (int.from_bytes(head[16:20], "big"), int.from_bytes(head[20:24], "big")) == (1400, 900)
