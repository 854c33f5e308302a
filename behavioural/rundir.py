"""Run directories: append-only JSONL records, atomic JSON files, manifests with provenance.

A run directory is never overwritten: :func:`create_run_dir` refuses an existing path, and records
are appended one line at a time and flushed, so a run killed at any point (SIGKILL included) loses at
most the line being written; :func:`read_jsonl` drops (and with ``repair=True`` truncates) a
half-written last line instead of failing.
"""
from __future__ import annotations

import hashlib
import json
import os
import platform
import subprocess
import sys
from datetime import datetime, timezone
from importlib import metadata
from pathlib import Path
from typing import Iterable

MANIFEST = "manifest.json"


class RunDirError(RuntimeError):
    """A run directory problem; the message names the path and the fix."""


def create_run_dir(path: str | os.PathLike) -> Path:
    p = Path(path)
    if p.exists():
        raise RunDirError(
            f"output directory {str(p)!r} already exists; choose a new --output-dir, or continue it with --resume {p}"
        )
    p.mkdir(parents=True)
    return p


class JsonlWriter:
    """Append records to a JSONL file, one flushed (and fsynced) line per record."""

    def __init__(self, path: str | os.PathLike, fsync: bool = True):
        self.path = Path(path)
        self.fsync = fsync
        self._f = open(self.path, "a", encoding="utf-8")

    def write(self, record) -> None:
        d = record.to_dict() if hasattr(record, "to_dict") else record
        self._f.write(json.dumps(d, ensure_ascii=False) + "\n")
        self._f.flush()
        if self.fsync:
            os.fsync(self._f.fileno())

    def close(self) -> None:
        self._f.close()

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()


def read_jsonl(path: str | os.PathLike, *, repair: bool = False) -> list[dict]:
    """Read a JSONL file; a half-written final line (no newline, or bad JSON) is dropped.

    With ``repair=True`` the file is truncated to its last complete record so appends continue cleanly.
    A corrupt line *before* the last one is an error naming the line.
    """
    p = Path(path)
    if not p.exists():
        return []
    data = p.read_bytes()
    rows: list[dict] = []
    good_end = 0
    pos = 0
    lines = data.split(b"\n")
    for i, raw in enumerate(lines):
        is_last = i == len(lines) - 1
        end = pos + len(raw) + (0 if is_last else 1)
        if raw.strip():
            try:
                if is_last:  # no trailing newline: the write was interrupted
                    raise ValueError("unterminated line")
                rows.append(json.loads(raw))
                good_end = end
            except ValueError as e:
                if not is_last and any(x.strip() for x in lines[i + 1 :]):
                    raise RunDirError(f"{p}:{i + 1}: corrupt record ({e}); fix or delete that line") from e
                break
        else:
            good_end = end if not is_last else good_end
        pos = end
    if repair and good_end < len(data):
        with open(p, "r+b") as f:
            f.truncate(good_end)
    return rows


def write_json(path: str | os.PathLike, obj) -> None:
    """Write JSON atomically (temp file + rename), so readers never see half a file."""
    p = Path(path)
    tmp = p.with_name(p.name + ".tmp")
    tmp.write_text(json.dumps(obj, indent=2, ensure_ascii=False, default=str) + "\n", encoding="utf-8")
    os.replace(tmp, p)


def read_json(path: str | os.PathLike) -> dict:
    p = Path(path)
    if not p.is_file():
        raise RunDirError(f"{str(p)!r} not found; is this a run directory written by python -m behavioural.run?")
    return json.loads(p.read_text(encoding="utf-8"))


def file_sha256(path: str | os.PathLike) -> str:
    return hashlib.sha256(Path(path).read_bytes()).hexdigest()


def git_info(start: str | os.PathLike | None = None) -> dict:
    """The toolkit checkout's commit and dirty flag (nulls outside a git checkout)."""
    where = Path(start) if start else Path(__file__).resolve().parent
    try:
        commit = subprocess.run(["git", "rev-parse", "HEAD"], cwd=where, capture_output=True, text=True, timeout=10)
        if commit.returncode != 0:
            return {"commit": None, "dirty": None}
        status = subprocess.run(["git", "status", "--porcelain"], cwd=where, capture_output=True, text=True, timeout=10)
        return {"commit": commit.stdout.strip(), "dirty": bool(status.stdout.strip())}
    except (OSError, subprocess.SubprocessError):
        return {"commit": None, "dirty": None}


def package_versions(names: Iterable[str] = ("torch", "transformers", "numpy", "scikit-learn", "h5py", "nnsight",
                                               "transformer-lens", "bitsandbytes", "vllm", "loadbearing-cot")) -> dict:
    out = {"python": sys.version.split()[0], "platform": platform.platform()}
    for n in names:
        try:
            out[n] = metadata.version(n)
        except metadata.PackageNotFoundError:
            out[n] = None
    return out


def now() -> str:
    return datetime.now(timezone.utc).isoformat(timespec="seconds")
