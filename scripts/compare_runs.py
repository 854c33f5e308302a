"""Compare two output trees (two demo runs, two stage outputs) byte for byte; say what differs and why.

    python scripts/compare_runs.py runs/before runs/after            # exit 0: every file identical (see below)

Every file present in either tree is compared as bytes first. A file whose bytes differ is compared again with
only the run-specific fields taken out, and the output says which it was:

* ``identical``: the same bytes;
* ``same after run-specific fields``: identical once timestamps, wall times, the git commit and the two trees'
  own paths are removed (JSON keys in :data:`RUN_SPECIFIC_KEYS` dropped at any depth; in any text the two root
  paths replaced by ``<ROOT>``, the two folder names (where they differ: a report's title names its folder) by
  ``<NAME>``, ``git <hex>`` by ``git <COMMIT>``, a report's ``Wall time N min`` by ``<WALL>`` and ISO timestamps
  by ``<TIME>``; in HDF5 files, datasets
  compared by value and attributes with the same rules);
* ``DIFFERS`` / ``only in A`` / ``only in B``: a real difference (exit status 1).

The keys excluded are printed with the result, so a reader sees exactly what was not compared.
"""
from __future__ import annotations

import argparse
import json
import re
import sys
from pathlib import Path
from typing import Any

#: JSON keys (and HDF5 attributes) whose values are run-specific: when and how long (timestamps, a file's mtime,
#: wall times), which commit and machine produced it, the command line (it names the output path), and the
#: sha256 of a file that itself holds timestamps (the run's manifest, the activation store, directions.h5: those
#: files are compared here themselves, field by field and dataset by dataset)
RUN_SPECIFIC_KEYS = frozenset({
    "created", "updated", "finished", "started", "timestamp", "time", "date", "mtime",
    "wall_s", "seconds", "elapsed", "elapsed_s", "duration_s", "wall_seconds", "stage_seconds", "timings", "timing",
    "cache_seconds_last_session",
    "git", "commit", "dirty", "command", "hostname",
    "sha256", "source_manifest_sha256", "directions_sha256",
})
_TIME = re.compile(r"\d{4}-\d{2}-\d{2}[T ]\d{2}:\d{2}:\d{2}(\.\d+)?([+-]\d{2}:\d{2}|Z)?")
TEXT_SUFFIXES = {".json", ".jsonl", ".md", ".txt", ".html", ".toml", ".csv"}


_COMMIT = re.compile(r"\bgit [0-9a-f]{7,40}\b")
_WALL = re.compile(r"\bWall time [0-9.]+ (min|s)\b")
#: the two trees' own folder names, where they differ (a report's title names its study folder); set by compare()
_NAMES: list[str] = []


def _text(s: str, roots: tuple[str, ...]) -> str:
    for r in roots:
        s = s.replace(r, "<ROOT>")
    for name in _NAMES:
        s = re.sub(rf"\b{re.escape(name)}\b", "<NAME>", s)
    s = _WALL.sub("Wall time <WALL>", s)
    return _COMMIT.sub("git <COMMIT>", _TIME.sub("<TIME>", s))


def _strip(obj: Any, roots: tuple[str, ...]) -> Any:
    if isinstance(obj, dict):
        return {k: _strip(v, roots) for k, v in obj.items() if k not in RUN_SPECIFIC_KEYS}
    if isinstance(obj, list):
        return [_strip(v, roots) for v in obj]
    if isinstance(obj, str):
        return _text(obj, roots)
    return obj


def _json_lines(text: str, roots: tuple[str, ...]) -> list[Any] | None:
    try:
        return [_strip(json.loads(line), roots) for line in text.splitlines() if line.strip()]
    except json.JSONDecodeError:
        return None


def _normalised(path: Path, roots: tuple[str, ...]) -> Any:
    """The file with its run-specific fields removed (None: no rule for this kind of file)."""
    if path.suffix in (".h5", ".hdf5"):
        return _h5(path, roots)
    if path.suffix not in TEXT_SUFFIXES:
        return None
    text = path.read_text(encoding="utf-8", errors="replace")
    if path.suffix == ".json":
        try:
            return _strip(json.loads(text), roots)
        except json.JSONDecodeError:
            pass
    if path.suffix == ".jsonl":
        rows = _json_lines(text, roots)
        if rows is not None:
            return rows
    return _text(text, roots)


def _h5(path: Path, roots: tuple[str, ...]) -> Any:
    import h5py  # the toolkit's own dependency
    import numpy as np

    out: dict[str, Any] = {}

    def attrs(obj: Any) -> dict[str, Any]:
        d = {}
        for k, v in obj.attrs.items():
            if k in RUN_SPECIFIC_KEYS:
                continue
            v = v.decode() if isinstance(v, bytes) else v
            if isinstance(v, str):
                try:
                    v = json.dumps(_strip(json.loads(v), roots), sort_keys=True)
                except json.JSONDecodeError:
                    v = _text(v, roots)
            d[k] = np.asarray(v).tolist() if not isinstance(v, str) else v
        return d

    with h5py.File(path, "r") as f:
        out["/"] = attrs(f)

        def visit(name: str, obj: Any) -> None:
            if isinstance(obj, h5py.Dataset):
                data = np.asarray(obj[()])
                value = data.tolist() if data.dtype.kind in "OSU" else data.tobytes()  # strings by value, not pointer
                out[name] = (str(obj.dtype), obj.shape, value, attrs(obj))
            else:
                out[name] = attrs(obj)

        f.visititems(visit)
    return out


def compare(a: Path, b: Path) -> list[tuple[str, str]]:
    """``[(relative path, verdict)]`` for every file under either tree, sorted by path."""
    roots = tuple(sorted({str(a.resolve()), str(b.resolve()), str(a), str(b)}, key=len, reverse=True))
    _NAMES[:] = [a.resolve().name, b.resolve().name] if a.resolve().name != b.resolve().name else []
    files = sorted({p.relative_to(a).as_posix() for p in a.rglob("*") if p.is_file()}
                   | {p.relative_to(b).as_posix() for p in b.rglob("*") if p.is_file()})
    out = []
    for rel in files:
        pa, pb = a / rel, b / rel
        if not pa.is_file() or not pb.is_file():
            out.append((rel, "only in A" if pa.is_file() else "only in B"))
        elif pa.read_bytes() == pb.read_bytes():
            out.append((rel, "identical"))
        else:
            na, nb = _normalised(pa, roots), _normalised(pb, roots)
            same = na is not None and na == nb
            out.append((rel, "same after run-specific fields" if same else "DIFFERS"))
    return out


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=(__doc__ or "").split("\n\n")[0])
    p.add_argument("a", type=Path, help="the first tree (e.g. the run before the change)")
    p.add_argument("b", type=Path, help="the second tree (the run after it)")
    args = p.parse_args(argv)
    for d in (args.a, args.b):
        if not d.is_dir():
            print(f"error: {d} is not a directory; pass two output directories", file=sys.stderr)
            return 2
    rows = compare(args.a, args.b)
    width = max((len(r) for r, _ in rows), default=4)
    for rel, verdict in rows:
        print(f"{rel:<{width}}  {verdict}")
    counts: dict[str, int] = {}
    for _, v in rows:
        counts[v] = counts.get(v, 0) + 1
    print("\n" + ", ".join(f"{n} {v}" for v, n in sorted(counts.items())))
    print("excluded (run-specific): JSON keys " + ", ".join(sorted(RUN_SPECIFIC_KEYS))
          + "; the two trees' root paths and folder names; 'git <commit>' and 'Wall time N min' in text; "
          "ISO timestamps")
    bad = [v for _, v in rows if v in ("DIFFERS", "only in A", "only in B")]
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
