"""python -m loadbearing.organisms [--kinds load-bearing,decorative,graded] [--quiet]   (make organisms)

Trains each organism that is not cached yet (seeded; one CPU thread), checks its unedited greedy chain on
held-out questions at every level, and prints one line per organism: its directory (pass it to ``--model``),
the weights' sha256, the training seconds and the self-check. A cached organism is reused, not retrained.
"""
from __future__ import annotations

import argparse
import sys
from pathlib import Path

from loadbearing.cli import OneLineParser, add_quiet, run_cli
from loadbearing.organisms.build import OrganismError, default_spec, ensure_checked, organism_dir


def build_parser() -> argparse.ArgumentParser:
    p = OneLineParser(prog="python -m loadbearing.organisms", description=__doc__.splitlines()[0])
    p.add_argument("--kinds", default="load-bearing,decorative,graded", help="comma list of organisms to build")
    p.add_argument("--root", default=None, help="cache directory (default: the model cache, LOADBEARING_CACHE)")
    p.add_argument("--print-dir", action="store_true",
                   help="print only each organism's directory, one a line (for scripts: make organisms passes it "
                        "to python -m loadbearing.selfcheck --model)")
    add_quiet(p, "no training progress")
    return p


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)

    def body() -> None:
        kinds = [k.strip() for k in args.kinds.split(",") if k.strip()]
        specs = [default_spec(k) for k in kinds]  # an unknown kind is refused before anything trains
        if not specs:
            raise OrganismError("--kinds is empty; give a comma list of load-bearing, decorative, graded")
        for spec in specs:
            path = organism_dir(spec=spec, root=Path(args.root) if args.root else None,
                                check_levels=spec.data.levels, progress=not (args.quiet or args.print_dir))
            if args.print_dir:
                print(path)
                continue
            rec = ensure_checked(path, spec.data.levels)
            check = rec.get("self_check") or {}
            cells = ", ".join(f"{lv} {c['correct_eligible']}/{c['of']}" for lv, c in check.items())
            ok = all(c["passes"] for c in check.values())
            print(f"{spec.data.kind}: {path}  weights {rec['weights_sha256'][:16]}  trained {rec['seconds']:.0f}s  "
                  f"held-out correct with >= 3 lines: {cells} ({'pass' if ok else 'BELOW 90% somewhere'})")

    return run_cli(body)


if __name__ == "__main__":
    sys.exit(main())
