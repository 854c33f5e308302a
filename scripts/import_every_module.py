"""Import every module of the packages, each in a fresh interpreter; print the third-party packages each loads.

    python scripts/import_every_module.py [OUT.json]

A module that fails to import (an import cycle, a missing name) prints ``ERROR`` and its last error line, and the
exit status is 1. Comparing two runs' JSON shows whether a change added a third-party package to a module.
``__main__`` modules are skipped (they run their command when imported).
"""
from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

ORDER = ("loadbearing", "behavioural", "activations", "probes", "steering", "study")
CODE = ("import sys, importlib; base = set(sys.modules); importlib.import_module(sys.argv[1]); "
        "print(sorted({m.split('.')[0] for m in set(sys.modules) - base} - set(sys.stdlib_module_names) "
        f"- set({ORDER!r}) - {{'_distutils_hack'}}))")


def modules(root: Path) -> list[str]:
    out = []
    for pkg in ORDER:
        for p in sorted((root / pkg).rglob("*.py")):
            parts = list(p.relative_to(root).with_suffix("").parts)
            if parts[-1] == "__init__":
                parts = parts[:-1]
            if parts[-1] != "__main__":
                out.append(".".join(parts))
    return out


def main(argv: list[str]) -> int:
    result: dict[str, str] = {}
    for m in modules(Path.cwd()):
        r = subprocess.run([sys.executable, "-W", "ignore", "-c", CODE, m], capture_output=True, text=True)
        lines = (r.stdout if r.returncode == 0 else r.stderr).strip().splitlines()
        result[m] = lines[-1] if r.returncode == 0 and lines else "ERROR " + (lines[-1] if lines else "")
        print(m, result[m], flush=True)
    if argv:
        Path(argv[0]).write_text(json.dumps(result, indent=1), encoding="utf-8")
    return 1 if any(v.startswith("ERROR") for v in result.values()) else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
