"""Count the loose annotations in the packages: bare ``dict`` returns and ``Any`` in annotations.

    python scripts/count_loose_types.py            # totals
    python scripts/count_loose_types.py --by-file  # and per file, most first

A bare-dict return is a function whose return annotation holds ``dict`` or ``Dict`` with no type parameters
(``-> dict``, ``-> dict | None``, ``-> list[dict]``); an ``Any`` is each
occurrence of the name ``Any`` (or ``typing.Any``) inside an annotation (arguments, returns, variables; string
annotations are parsed). Pure ``ast``: imports nothing from the packages.
"""
from __future__ import annotations

import argparse
import ast
import sys
from collections import Counter
from pathlib import Path

PACKAGES = ("loadbearing", "behavioural", "activations", "probes", "steering", "study")


def _anys(node: ast.AST | None) -> int:
    if node is None:
        return 0
    if isinstance(node, ast.Constant) and isinstance(node.value, str):
        try:
            node = ast.parse(node.value, mode="eval")
        except SyntaxError:
            return 0
    n = 0
    for sub in ast.walk(node):
        if isinstance(sub, ast.Name) and sub.id == "Any":
            n += 1
        elif isinstance(sub, ast.Attribute) and sub.attr == "Any":
            n += 1
        elif isinstance(sub, ast.Constant) and isinstance(sub.value, str) and sub is not node:
            n += _anys(sub)
    return n


def _bare_dict(node: ast.AST | None) -> bool:
    """Whether a return annotation holds ``dict``/``Dict`` without type parameters (``-> dict``,
    ``-> dict | None``, ``-> Optional[dict]``, ``-> list[dict]``)."""
    if node is None:
        return False
    if isinstance(node, ast.Constant) and isinstance(node.value, str):
        try:
            node = ast.parse(node.value, mode="eval")
        except SyntaxError:
            return False
    subscripted = {id(n.value) for n in ast.walk(node) if isinstance(n, ast.Subscript)}
    return any(isinstance(n, ast.Name) and n.id in ("dict", "Dict") and id(n) not in subscripted
               for n in ast.walk(node))


def count(path: Path) -> tuple[int, int]:
    """(bare-dict returns, Any occurrences in annotations) of one file."""
    tree = ast.parse(path.read_text(encoding="utf-8"))
    dicts = anys = 0
    for node in ast.walk(tree):
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
            dicts += _bare_dict(node.returns)
            anys += _anys(node.returns)
            a = node.args
            for arg in [*a.posonlyargs, *a.args, *a.kwonlyargs, a.vararg, a.kwarg]:
                anys += _anys(arg.annotation) if arg is not None else 0
        elif isinstance(node, ast.AnnAssign):
            anys += _anys(node.annotation)
    return dicts, anys


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=(__doc__ or "").split("\n\n")[0])
    ap.add_argument("--root", default=".", help="the repository root (default: .)")
    ap.add_argument("--by-file", action="store_true", help="also print the counts of each file, most first")
    args = ap.parse_args(argv)
    root = Path(args.root)
    per: dict[str, tuple[int, int]] = {}
    for pkg in PACKAGES:
        for p in sorted((root / pkg).rglob("*.py")):
            per[p.relative_to(root).as_posix()] = count(p)
    dicts = sum(d for d, _ in per.values())
    anys = sum(a for _, a in per.values())
    if args.by_file:
        for name, (d, a) in sorted(per.items(), key=lambda kv: -(kv[1][0] + kv[1][1])):
            if d or a:
                print(f"{d:4d} {a:4d}  {name}")
    by_pkg: Counter[str] = Counter()
    for name, (d, a) in per.items():
        by_pkg[name.split("/")[0]] += d + a
    print(f"bare dict returns: {dicts}")
    print(f"Any in annotations: {anys}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
