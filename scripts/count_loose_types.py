"""Count the loose return types in the packages: functions that return ``Any`` or a bare ``dict``.

    python scripts/count_loose_types.py                # totals
    python scripts/count_loose_types.py --by-file      # and per file, most first
    python scripts/count_loose_types.py --list         # and each function counted, with its return annotation

Per function (``def`` and ``async def``, methods included), from its return annotation:

- an **Any return** holds the name ``Any`` (or ``typing.Any``) anywhere except as the value type of a mapping
  (``-> Any``, ``-> Any | None``, ``-> tuple[Any, int]``, ``-> list[Any]``, ``-> Callable[..., Any]``);
- a **bare-dict return** holds ``dict`` or ``Dict`` without type parameters (``-> dict``, ``-> dict | None``,
  ``-> list[dict]``);
- reported separately, a **dict-of-Any return** holds a mapping whose value type is ``Any``
  (``-> dict[str, Any]``, ``-> list[dict[str, Any]]``, ``-> Mapping[str, Any]``).

The headline, ``Any or bare-dict returns``, counts each function once. ``Any in annotations`` counts every
``Any`` in every annotation (arguments, returns, variables), the wider measure. String annotations are parsed.
Pure ``ast``: imports nothing from the packages.
"""
from __future__ import annotations

import argparse
import ast
import sys
from pathlib import Path

PACKAGES = ("loadbearing", "behavioural", "activations", "probes", "steering", "study")
MAPPINGS = ("dict", "Dict", "Mapping", "MutableMapping")
KINDS = ("any", "bare_dict", "dict_any")


def _parsed(node: ast.AST | None) -> ast.AST | None:
    if isinstance(node, ast.Constant) and isinstance(node.value, str):
        try:
            return ast.parse(node.value, mode="eval").body
        except SyntaxError:
            return None
    return node


def _is_any(node: ast.AST) -> bool:
    return (isinstance(node, ast.Name) and node.id == "Any") or (isinstance(node, ast.Attribute) and node.attr == "Any")


def _name(node: ast.AST) -> str:
    return node.id if isinstance(node, ast.Name) else node.attr if isinstance(node, ast.Attribute) else ""


def classify(annotation: ast.AST | None) -> set[str]:
    """The kinds of looseness (:data:`KINDS`) of one return annotation."""
    node = _parsed(annotation)
    if node is None:
        return set()
    kinds: set[str] = set()
    mapping_values: set[int] = set()  # the ``Any`` nodes that are a mapping's value type
    subscripted: set[int] = set()
    for sub in ast.walk(node):
        if isinstance(sub, ast.Subscript):
            subscripted.add(id(sub.value))
            if _name(sub.value) in MAPPINGS and isinstance(sub.slice, ast.Tuple) and len(sub.slice.elts) == 2:
                value = _parsed(sub.slice.elts[1])
                if value is not None and _is_any(value):
                    mapping_values.add(id(sub.slice.elts[1]))
                    kinds.add("dict_any")
    for sub in ast.walk(node):
        if isinstance(sub, ast.Constant) and isinstance(sub.value, str) and sub is not node:
            kinds |= classify(sub) - ({"any"} if id(sub) in mapping_values else set())
        elif _is_any(sub) and id(sub) not in mapping_values:
            kinds.add("any")
        elif isinstance(sub, ast.Name) and sub.id in ("dict", "Dict") and id(sub) not in subscripted:
            kinds.add("bare_dict")
    return kinds


def _anys(node: ast.AST | None) -> int:
    node = _parsed(node)
    if node is None:
        return 0
    n = 0
    for sub in ast.walk(node):
        if _is_any(sub):
            n += 1
        elif isinstance(sub, ast.Constant) and isinstance(sub.value, str) and sub is not node:
            n += _anys(sub)
    return n


def count(path: Path) -> tuple[dict[str, list[str]], int]:
    """({kind: ['line name -> annotation', ...]}, Any occurrences in all annotations) of one file."""
    tree = ast.parse(path.read_text(encoding="utf-8"))
    found: dict[str, list[str]] = {k: [] for k in (*KINDS, "loose")}
    anys = 0
    for node in ast.walk(tree):
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
            kinds = classify(node.returns)
            where = f"{node.lineno} {node.name} -> {ast.unparse(node.returns) if node.returns else ''}"
            for k in kinds:
                found[k].append(where)
            if kinds & {"any", "bare_dict"}:
                found["loose"].append(where)
            anys += _anys(node.returns)
            a = node.args
            for arg in [*a.posonlyargs, *a.args, *a.kwonlyargs, a.vararg, a.kwarg]:
                anys += _anys(arg.annotation) if arg is not None else 0
        elif isinstance(node, ast.AnnAssign):
            anys += _anys(node.annotation)
    return found, anys


def totals(root: Path) -> dict[str, int]:
    """The counts of the tree at ``root``: ``loose`` (Any or bare-dict returns, each function once), ``any``,
    ``bare_dict``, ``dict_any`` and ``any_in_annotations``."""
    out = {k: 0 for k in ("loose", *KINDS, "any_in_annotations")}
    for pkg in PACKAGES:
        for p in sorted((root / pkg).rglob("*.py")):
            found, anys = count(p)
            for k in ("loose", *KINDS):
                out[k] += len(found[k])
            out["any_in_annotations"] += anys
    return out


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=(__doc__ or "").split("\n\n")[0])
    ap.add_argument("--root", default=".", help="the repository root (default: .)")
    ap.add_argument("--by-file", action="store_true", help="also print the counts of each file, most first")
    ap.add_argument("--list", action="store_true", help="also print each loose function with its annotation")
    args = ap.parse_args(argv)
    root = Path(args.root)
    per: dict[str, dict[str, list[str]]] = {}
    for pkg in PACKAGES:
        for p in sorted((root / pkg).rglob("*.py")):
            per[p.relative_to(root).as_posix()] = count(p)[0]
    if args.by_file:
        print("loose  Any bare dict-Any  file")
        for name, f in sorted(per.items(), key=lambda kv: -len(kv[1]["loose"])):
            if f["loose"] or f["dict_any"]:
                print(f"{len(f['loose']):5d} {len(f['any']):4d} {len(f['bare_dict']):4d} {len(f['dict_any']):8d}  {name}")
    if args.list:
        for name, f in per.items():
            for k in ("loose", "dict_any"):
                for where in f[k]:
                    print(f"{k:8s} {name}:{where}")
    t = totals(root)
    print(f"Any or bare-dict returns: {t['loose']}")
    print(f"  Any returns: {t['any']}")
    print(f"  bare dict returns: {t['bare_dict']}")
    print(f"dict-of-Any returns (dict[str, Any] and the like): {t['dict_any']}")
    print(f"Any in annotations (arguments, returns, variables): {t['any_in_annotations']}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
