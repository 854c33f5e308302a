"""The architecture as tests that can fail: the layering of packages, one home per concept, module size (of the
packages' modules and of the test modules under tests/).

Layers, bottom up: ``loadbearing`` (the shared base; imports no stage), then the stages in the order data
flows: ``behavioural``, ``activations``, ``probes``, ``steering``, and finally ``study``. A package may import
only the base and earlier stages. Every import counts, including lazy ones inside functions. Thin command
shims forward through ``runpy`` with a module *name*, which is not an import, so they need no exemption.
"""
from __future__ import annotations

import ast
import importlib.util
import re
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
ORDER = ["loadbearing", "behavioural", "activations", "probes", "steering", "study"]
MAX_LINES = 400


def _modules() -> list[Path]:
    return sorted(p for pkg in ORDER for p in (REPO / pkg).rglob("*.py"))


def _imports(path: Path) -> list[tuple[int, str]]:
    tree = ast.parse(path.read_text(encoding="utf-8"), filename=str(path))
    out: list[tuple[int, str]] = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            out += [(node.lineno, a.name) for a in node.names]
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            out.append((node.lineno, node.module))
        elif isinstance(node, ast.ImportFrom) and node.level > 0:
            out.append((node.lineno, "." * node.level + (node.module or "")))
        elif (isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute)
              and node.func.attr == "import_module" and node.args and isinstance(node.args[0], ast.Constant)):
            out.append((node.lineno, str(node.args[0].value)))
    return out


def _pkg(path: Path) -> str:
    return path.relative_to(REPO).parts[0]


def test_every_package_imports_only_the_base_and_earlier_stages():
    bad = []
    for path in _modules():
        mine = ORDER.index(_pkg(path))
        for line, mod in _imports(path):
            top = mod.split(".")[0]
            if top in ORDER and ORDER.index(top) > mine:
                bad.append(f"{path.relative_to(REPO)}:{line} imports {mod} (a later layer)")
    assert not bad, "\n".join(bad)


def test_the_base_imports_no_stage():
    bad = [f"{p.relative_to(REPO)}:{line} imports {m}" for p in (REPO / "loadbearing").rglob("*.py")
           for line, m in _imports(p) if m.split(".")[0] in ORDER[1:]]
    assert not bad, "\n".join(bad)


def test_no_relative_imports_and_no_private_names_across_packages():
    bad = []
    for path in _modules():
        tree = ast.parse(path.read_text(encoding="utf-8"))
        for node in ast.walk(tree):
            if isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
                top = node.module.split(".")[0]
                if top in ORDER and top != _pkg(path):
                    bad += [f"{path.relative_to(REPO)}:{node.lineno} imports private {node.module}.{a.name}"
                            for a in node.names if a.name.startswith("_") and not a.name.startswith("__")]
    assert not bad, "\n".join(bad)


def test_no_import_error_fallbacks_around_in_tree_modules():
    bad = []
    for path in _modules():
        tree = ast.parse(path.read_text(encoding="utf-8"))
        for node in ast.walk(tree):
            if not isinstance(node, ast.Try):
                continue
            catches = [h for h in node.handlers if h.type is not None and "ImportError" in ast.unparse(h.type)]
            if not catches:
                continue
            for sub in node.body:
                for line, mod in _imports_of(sub):
                    if mod.split(".")[0] in ORDER or mod.startswith("."):
                        bad.append(f"{path.relative_to(REPO)}:{line} guards in-tree import {mod} with except ImportError")
    assert not bad, "\n".join(bad)


def _imports_of(node: ast.AST) -> list[tuple[int, str]]:
    out = []
    for n in ast.walk(node):
        if isinstance(n, ast.Import):
            out += [(n.lineno, a.name) for a in n.names]
        elif isinstance(n, ast.ImportFrom):
            out.append((n.lineno, "." * n.level + (n.module or "")))
    return out


def _test_modules() -> list[Path]:
    """Every Python file under tests/: the test modules, conftest.py, fakes.py and tests/helpers/."""
    return sorted((REPO / "tests").rglob("*.py"))


@pytest.mark.parametrize("path", _modules() + _test_modules(), ids=lambda p: str(p.relative_to(REPO)))
def test_module_size(path):
    n = len(path.read_text(encoding="utf-8").splitlines())
    assert n <= MAX_LINES, f"{path.relative_to(REPO)} has {n} lines (at most {MAX_LINES}): split it into modules of one idea"


# -- one home per concept: only the named module may contain these ------------------------------------------------

CONCEPTS = {
    # an atomic replace of a file or a directory
    "atomic writes": (re.compile(r"\bos\.(replace|rename)\(|\.rename\(|\.replace\(tmp"), {"loadbearing/files.py"}),
    # drawing bootstrap resamples (and the gradient's parametric bootstrap of its Knapp-Hartung t under no slope,
    # which resamples nothing: it draws normal outcomes from the fitted null and refits the gradient's own t)
    "bootstrap": (re.compile(r"def \w*bootstrap\w*\("), {"loadbearing/stats/bootstrap.py",
                                                           "behavioural/gradient/cells.py"}),
    # the rank check of a design matrix before a fit (duplicate / dependent columns merged with a note)
    "design rank check": (re.compile(r"matrix_rank\("), {"loadbearing/stats/design.py"}),
    # reading directions.h5
    "directions.h5 reader": (re.compile(r"h5py\.File\([^)]*direction"), {"probes/directions.py"}),
    # "question_key, else question_id"
    "question-key rule": (re.compile(r"question_key[\"']?\)?\s*or\s*\w+"
                                     r"(?:\.get\([\"']question_id|\[[\"']question_id|\.question_id)"),
                          {"loadbearing/runs.py"}),
    # writing a figure, and choosing matplotlib's backend
    "figure writer": (re.compile(r"\.savefig\(|matplotlib\.use\("), {"loadbearing/figures.py"}),
    # a markdown table's separator row read back (the report is built from objects: nothing parses markdown)
    "markdown table parsing": (re.compile(r"re\.\w+\([^\n]*:\?-\{2,\}"), set()),
    # report HTML: a report table's browse links and folded tables (one renderer of the report objects)
    "report html renderer": (re.compile(r"<details><summary>|class=\"browse"), {"loadbearing/report/html.py"}),
    # partitioning shards
    "shard partition": (re.compile(r"def shard_of\(|% *count\b|sha\w*\([^)]*\)\.\w+\(\)[^\n]*% "), {"loadbearing/shards.py"}),
}


def _outside_home(concept: str, pattern: re.Pattern, homes: set[str]) -> None:
    found = set()
    for path in _modules():
        rel = path.relative_to(REPO).as_posix()
        text = path.read_text(encoding="utf-8")
        if pattern.search(text) and rel not in homes:
            line = text[:pattern.search(text).start()].count("\n") + 1
            found.add(f"{rel}:{line}")
    assert not found, f"{concept} outside its one home {sorted(homes)}: {sorted(found)}"


@pytest.mark.parametrize("concept", sorted(CONCEPTS))
def test_one_home_per_concept(concept):
    _outside_home(concept, *CONCEPTS[concept])


def test_final_answer_line_pattern_has_one_home():
    """Only loadbearing.answers knows what a final-answer line is (its regexes name 'answer' at a line start)."""
    pat = re.compile(r"re\.compile\([^\n]*(?:[Aa]nswer|####|\\\\boxed)")
    found = []
    for path in _modules():
        rel = path.relative_to(REPO).as_posix()
        if rel.startswith("loadbearing/answers"):
            continue
        for i, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1):
            if pat.search(line) and "verdict" not in line:  # a judge's reply lead is not a final-answer line
                found.append(f"{rel}:{i}: {line.strip()[:90]}")
    assert not found, "final-answer line patterns outside loadbearing.answers:\n" + "\n".join(found)


def test_option_parsers_have_one_home():
    """A kind of command-line value (layers, token or line positions, a list, fractions) is read by one parser, in
    loadbearing/options.py: a second ``parse_layers`` would give ``--layers`` a second grammar."""
    pat = re.compile(r"def (parse_(?:layers|[a-z_]*positions|[a-z_]*list|fractions)|check_layers\w*)\(")
    found = []
    for path in _modules():
        rel = path.relative_to(REPO).as_posix()
        if rel == "loadbearing/options.py":
            continue
        for i, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1):
            if pat.search(line):
                found.append(f"{rel}:{i}: {line.strip()[:90]}")
    assert not found, "option parsers outside loadbearing/options.py:\n" + "\n".join(found)


# -- one home per concept, the stage step's (issue 33): hook points, numbers in text, run-dir file names, commands

HOOKS = "loadbearing/engine/hookpoints.py"
STAGE_STEP_CONCEPTS = {
    # "a block's output is a tuple or a tensor"
    "block-output rule": (re.compile(r"\[0\] if isinstance\(\w+, \(?tuple"), {HOOKS}),
    # registering a forward (pre-)hook: one helper owns the handles and removes them
    "forward-hook registration": (re.compile(r"\.register_forward(?:_pre)?_hook\("), {HOOKS}),
    # a number in text: a sign, digits, thousands groups or decimals written as a regex
    "number-in-text grammar": (re.compile(r"-\?\\d\+\(\?:|-\?\\d\[\\d,\]|\\d\{1,3\}\(\?:,\\d\{3\}\)"),
                               {"loadbearing/answers/numbers.py"}),
    # a run directory's file names (a stage's summary, records, stores, manifest)
    "run-dir file names": (re.compile(r"[\"'](?:baselines|continuations|summary|manifest|records|generations|skipped)"
                                      r"\.(?:jsonl|json|md)[\"']|[\"'](?:activations|directions)\.h5[\"']"),
                           {"loadbearing/runs.py"}),
    # the command table: console script -> module
    "command table": (re.compile(r"[\"']cot-[a-z-]+[\"']\s*[:,]\s*[\"'][a-z_]+[.\"']"), {"loadbearing/commands.py"}),
}


@pytest.mark.parametrize("concept", sorted(STAGE_STEP_CONCEPTS))
def test_one_home_per_concept_of_the_stage_step(concept):
    pattern, homes = STAGE_STEP_CONCEPTS[concept]
    for home in homes:  # the pattern is not vacuous: it finds the concept in its home
        assert pattern.search((REPO / home).read_text(encoding="utf-8")), f"{concept}: pattern misses {home}"
    _outside_home(concept, pattern, homes)


def test_no_test_imports_another_test_module_or_conftest():
    """Shared test code lives in tests/helpers/ (or is a conftest fixture); a test module is never imported."""
    bad = []
    for path in sorted((REPO / "tests").rglob("*.py")):
        for line, mod in _imports(path):
            top = mod.split(".")[0]
            if top == "conftest" or top.startswith("test_") or mod.startswith("tests.test_") or mod == "tests.conftest":
                bad.append(f"{path.relative_to(REPO)}:{line} imports {mod}")
    assert not bad, "tests importing test modules or conftest (move the helper to tests/helpers/):\n" + "\n".join(bad)


# -- deferred (function-level) imports: each says why it is not at the module top ------------------------------------

#: in-tree function-level imports that do not yet say why: 495 at the stage step. Then each one moved to its
#: module top unless that would close an import cycle, add a third-party package to the module's imports, make a
#: command (a module with a ``main``) load another stage's code at start-up, or hide a name the tests monkeypatch
#: at its source; each that stays says which (probes/fit/, behavioural/gradient/, loadbearing/organisms/ and
#: study/validate/ too, once their rewrites had landed). None is left without a reason; keep it so: move one to
#: the module top, or say why it stays (``# deferred: import cycle a -> b``, ``# deferred: tests
#: monkeypatch a.f``, ``# deferred: a loads torch``, ``# deferred: keeps a out of `python -m b`'s start-up``)
UNEXPLAINED_IN_TREE_DEFERRED = 0


def _deferred_imports() -> list[tuple[str, int, str, bool]]:
    """(module, line, imported name, says why) of every import inside a function of the packages; the reason is a
    ``deferred`` comment on the import or on the comment line right above its block of imports."""
    out = {}
    for path in _modules():
        text = path.read_text(encoding="utf-8")
        lines = text.splitlines()
        for fn in ast.walk(ast.parse(text)):
            if not isinstance(fn, (ast.FunctionDef, ast.AsyncFunctionDef)):
                continue
            for node in ast.walk(fn):
                if not isinstance(node, (ast.Import, ast.ImportFrom)):
                    continue
                mod = node.names[0].name if isinstance(node, ast.Import) else "." * node.level + (node.module or "")
                k = node.lineno - 2
                while k >= 0 and lines[k].strip().startswith(("import ", "from ")):
                    k -= 1
                above = lines[k].strip() if k >= 0 else ""
                said = ("deferred" in " ".join(lines[node.lineno - 1:node.end_lineno])
                        or (above.startswith("#") and "deferred" in above))
                out[(path.relative_to(REPO).as_posix(), node.lineno)] = (mod, said)
    return [(p, n, m, s) for (p, n), (m, s) in sorted(out.items())]


def test_deferred_imports_say_why():
    rows = _deferred_imports()
    outside = [f"{p}:{n} imports {m}" for p, n, m, said in rows
               if m.split(".")[0] not in ORDER and not m.startswith(".") and not said]
    assert not outside, ("function-level imports of libraries must say why (`# deferred: torch is heavy to import`), "
                         "standard-library ones belong at the module top:\n" + "\n".join(outside))
    stdlib = [f"{p}:{n} imports {m}" for p, n, m, said in rows if m.split(".")[0] in sys.stdlib_module_names
              and not said]  # said: e.g. tomllib, or its backport on Python 3.10
    assert not stdlib, "standard-library imports need no deferral; import them at the module top:\n" + "\n".join(stdlib)
    unexplained = [r for r in rows if (r[2].split(".")[0] in ORDER or r[2].startswith(".")) and not r[3]]
    assert len(unexplained) <= UNEXPLAINED_IN_TREE_DEFERRED, (
        f"{len(unexplained)} in-tree function-level imports say no reason (at most {UNEXPLAINED_IN_TREE_DEFERRED}): "
        "import at the module top, or say why it stays (`# deferred: import cycle a <-> b`)")


# -- loose return types: functions that return Any or a bare dict ---------------------------------------------------

#: functions whose return annotation is ``Any`` or a bare ``dict`` (``scripts/count_loose_types.py``; each function
#: once): 183 at 31aea92 (56 Any, 128 bare dict), 240 on main before the typing pass, 82 after it. The count may
#: only go down: return a TypedDict, a dataclass, ``dict[str, float]``, the torch / inspect_ai type (under
#: ``TYPE_CHECKING``) or, for a JSON object, ``dict[str, Any]`` (counted apart, as ``dict_any``)
MAX_LOOSE_RETURNS = 82


def _loose_counter():
    spec = importlib.util.spec_from_file_location("count_loose_types", REPO / "scripts" / "count_loose_types.py")
    assert spec is not None and spec.loader is not None
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def test_loose_return_types_only_go_down():
    totals = _loose_counter().totals(REPO)
    assert totals["loose"] <= MAX_LOOSE_RETURNS, (
        f"{totals['loose']} functions return Any or a bare dict (at most {MAX_LOOSE_RETURNS}); "
        "`python scripts/count_loose_types.py --list` names them")


@pytest.mark.parametrize("annotation, kinds", [
    ("dict", {"bare_dict"}), ("dict | None", {"bare_dict"}), ("list[dict]", {"bare_dict"}),
    ("tuple[dict, int]", {"bare_dict"}), ("Any", {"any"}), ("Any | None", {"any"}), ("list[Any]", {"any"}),
    ("dict[str, Any]", {"dict_any"}), ("list[dict[str, Any]]", {"dict_any"}), ("Mapping[str, Any]", {"dict_any"}),
    ("dict[Any, int]", {"any"}), ("dict[str, float]", set()), ("'dict'", {"bare_dict"}), ("Tensor", set()),
])
def test_the_loose_type_counter_reads_annotations(annotation, kinds):
    assert _loose_counter().classify(ast.parse(annotation, mode="eval").body) == kinds
