"""Files: append-only JSONL records, atomic publication of a file or a directory, content hashes.

The one home for writing files safely. Every writer in the toolkit goes through :func:`atomic_write_bytes`,
:func:`atomic_write_text`, :func:`write_json` or :func:`publish_dir`, so a reader never sees half a file and
a crash leaves either the old file or the new one. Records are appended one line at a time and flushed, so a
run killed at any point (SIGKILL included) loses at most the line being written; :func:`read_jsonl` drops
(and with ``repair=True`` truncates) a half-written last line instead of failing.
"""
from __future__ import annotations

import hashlib
import json
import os
import shutil
import uuid
from collections.abc import Callable
from pathlib import Path
from typing import IO, Any

from loadbearing.errors import LoadBearingError


class RunDirError(LoadBearingError, RuntimeError):
    """A run directory or file problem; the message names the path and the fix."""


def fsync_dir(d: str | os.PathLike) -> None:
    """Flush a directory entry (a rename) to disk where the platform allows it."""
    try:
        fd = os.open(d, os.O_RDONLY)
    except OSError:
        return
    try:
        os.fsync(fd)
    except OSError:
        pass
    finally:
        os.close(fd)


def atomic_write_bytes(path: str | os.PathLike, data: bytes | Callable[[IO[bytes]], object], *,
                       fsync: bool = True) -> Path:
    """Write ``data`` (bytes, or a callable that writes into the open file) to ``path`` atomically.

    The bytes go to a hidden temp file beside ``path``, are flushed (and fsynced), then renamed over ``path``:
    a reader sees the old file or the new one, never half of one. Returns ``path``.
    """
    p = Path(path)
    # a temp name of this process's own, so two writers of the same file never share a temp file
    tmp = p.with_name(f".{p.name}.{os.getpid()}.{uuid.uuid4().hex[:8]}.tmp")
    try:
        with open(tmp, "wb") as f:
            if callable(data):
                data(f)
            else:
                f.write(data)
            f.flush()
            if fsync:
                os.fsync(f.fileno())
        os.replace(tmp, p)
    except BaseException:
        tmp.unlink(missing_ok=True)
        raise
    if fsync:
        fsync_dir(p.parent)
    return p


def atomic_write_text(path: str | os.PathLike, text: str, *, fsync: bool = True) -> Path:
    """:func:`atomic_write_bytes` for UTF-8 text."""
    return atomic_write_bytes(path, text.encode("utf-8"), fsync=fsync)


def publish_dir(tmp: str | os.PathLike, final: str | os.PathLike, *, replace: bool = False) -> Path:
    """Publish a directory built at ``tmp`` under the name ``final`` in one rename.

    ``final`` must not exist unless ``replace`` is set, in which case the old directory is moved aside first
    and removed only after the new one is in place. Returns ``final``.
    """
    t, f = Path(tmp), Path(final)
    old = None
    if f.exists():
        if not replace:
            raise RunDirError(f"{str(f)!r} already exists; choose another output, or remove it first")
        old = f.with_name("." + f.name + ".old")
        if old.exists():
            shutil.rmtree(old)
        os.replace(f, old)
    os.replace(t, f)
    fsync_dir(f.parent)
    if old is not None:
        shutil.rmtree(old, ignore_errors=True)
    return f


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


def read_jsonl(path: str | os.PathLike, *, repair: bool = False) -> list[dict[str, Any]]:
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


def check_jsonl_tail(path: str | os.PathLike, run_dir: str | os.PathLike | None = None) -> None:
    """Refuse a JSONL file whose last line is half-written (the mark of a crash), naming the line and the fix.

    Only a resume repairs such a file (:func:`read_jsonl` with ``repair=True``); every other reader refuses.
    """
    p = Path(path)
    if not p.is_file() or p.stat().st_size == 0:
        return
    with open(p, "rb") as f:
        f.seek(-1, 2)
        last = f.read(1)
    if last != b"\n":
        n = p.read_bytes().count(b"\n") + 1
        where = run_dir if run_dir is not None else p.parent
        raise RunDirError(f"{p}:{n}: the last line is half-written (the run was interrupted); repair it with "
                          f"python -m behavioural.run --resume {where}")


def write_json(path: str | os.PathLike, obj) -> None:
    """Write JSON atomically (temp file + rename), so readers never see half a file."""
    atomic_write_text(path, json.dumps(obj, indent=2, ensure_ascii=False, default=str) + "\n", fsync=False)


def read_json(path: str | os.PathLike) -> dict[str, Any]:
    p = Path(path)
    if not p.is_file():
        raise RunDirError(f"{str(p)!r} not found; is this a run directory written by python -m behavioural.run?")
    try:
        obj = json.loads(p.read_text(encoding="utf-8"))
    except (ValueError, UnicodeDecodeError) as e:
        raise RunDirError(f"{str(p)!r} is not valid JSON ({e}); it was cut off or edited by hand: restore it, or re-run "
                          "the command that wrote it") from None
    if not isinstance(obj, dict):
        raise RunDirError(f"{str(p)!r} holds a {type(obj).__name__}, not a JSON object; restore it")
    return obj


def file_sha256(path: str | os.PathLike) -> str:
    """The sha256 of a file's bytes, read in 1 MiB blocks."""
    h = hashlib.sha256()
    with open(path, "rb") as f:
        for block in iter(lambda: f.read(1 << 20), b""):
            h.update(block)
    return h.hexdigest()


def check_sha256(path: str | os.PathLike, expected: str | None, *, what: str, fix: str) -> None:
    """Refuse a file whose sha256 differs from the one a stage recorded: one line naming the file and the fix."""
    if not expected:
        return
    got = file_sha256(path)
    if got != expected:
        raise RunDirError(f"{str(path)!r} is corrupt or was changed after {what} recorded it (sha256 {got[:12]} != "
                          f"recorded {expected[:12]}); {fix}")


