"""Run directories: append-only JSONL records, atomic JSON files, manifests with provenance.

A run directory is never overwritten: :func:`create_run_dir` refuses an existing path, and records
are appended one line at a time and flushed, so a run killed at any point (SIGKILL included) loses at
most the line being written; :func:`read_jsonl` drops (and with ``repair=True`` truncates) a
half-written last line instead of failing.
"""
from __future__ import annotations

import contextlib
import errno
import fcntl
import hashlib
import json
import os
import platform
import socket
import subprocess
import sys
from collections.abc import Iterable, Iterator
from datetime import datetime, timezone
from importlib import metadata
from pathlib import Path

MANIFEST = "manifest.json"


class RunDirError(RuntimeError):
    """A run directory problem; the message names the path and the fix."""


class LockError(RunDirError):
    """Another live process holds the output's lock (one writer per output)."""


def lock_path(path: str | os.PathLike) -> Path:
    """``<dir>/.lock`` for an existing directory output, ``<file>.lock`` for anything else (a file output)."""
    p = Path(path)
    return p / ".lock" if p.is_dir() else p.with_name(p.name + ".lock")


def _read_holder(f) -> dict:
    try:
        f.seek(0)
        d = json.loads(f.read() or "{}")
        return d if isinstance(d, dict) else {}
    except (ValueError, OSError):
        return {}


@contextlib.contextmanager
def output_lock(path: str | os.PathLike, command: str | None = None) -> Iterator[Path]:
    """Hold the one-writer lock of an output (a directory, or a file) for the ``with`` block.

    An advisory ``fcntl`` lock on ``<dir>/.lock`` (``<file>.lock`` for a file) records pid, host, command and
    start time. A second process is refused with :class:`LockError` naming the holder (pid, host, since,
    command). The kernel releases an ``fcntl`` lock when its process dies, so a lock file left by a killed
    process is detected (its recorded pid no longer holds it) and taken over. The lock file is removed on a
    clean exit. Re-entering the lock in the same process is refused too (one writer per output).
    """
    lp = lock_path(path)
    f = None
    for _ in range(20):  # retry if the holder removed the file between our open and our flock
        try:
            fd = os.open(lp, os.O_RDWR | os.O_CREAT, 0o644)
        except OSError as e:
            raise RunDirError(f"cannot create lock file {str(lp)!r} ({e.strerror or e}); is the output location "
                              "writable? choose another output location") from None
        f = os.fdopen(fd, "r+", encoding="utf-8")
        try:
            fcntl.flock(f.fileno(), fcntl.LOCK_EX | fcntl.LOCK_NB)
        except OSError as e:
            h = _read_holder(f)
            f.close()
            if e.errno not in (errno.EAGAIN, errno.EACCES, errno.EWOULDBLOCK):
                raise RunDirError(f"cannot lock {str(lp)!r} ({e.strerror or e})") from None
            pid = h.get("pid")
            raise LockError(f"{str(path)!r} is in use by another writer: pid {pid if pid is not None else '?'} on "
                            f"host {h.get('host', '?')} since {h.get('since', '?')} ({h.get('command', '?')}); "
                            f"wait for it to finish or stop it (lock file {lp})") from None
        try:
            same = os.fstat(f.fileno()).st_ino == os.stat(lp).st_ino
        except FileNotFoundError:
            same = False
        if same:
            break
        f.close()
        f = None
    if f is None:
        raise RunDirError(f"cannot lock {str(lp)!r}: it keeps being replaced; is another writer starting and stopping?")
    try:
        # a holder recorded here is a process that died without cleaning up (the kernel released its lock,
        # SIGKILL included): take the lock over, and remember whose it was
        stale = _read_holder(f)
        holder = {"pid": os.getpid(), "host": socket.gethostname(), "since": now(),
                  "command": command if command is not None else " ".join([Path(sys.argv[0]).name, *sys.argv[1:]]),
                  "took_over_from": stale.get("pid")}
        f.seek(0)
        f.truncate()
        f.write(json.dumps(holder) + "\n")
        f.flush()
        try:
            yield lp
        finally:
            with contextlib.suppress(OSError):
                lp.unlink()
    finally:
        f.close()


#: what a run directory may hold before its run starts: the writer's lock, the study driver's settings
FRESH_DIR_FILES = frozenset({".lock", "study.json", "study.json.tmp"})


def is_fresh_dir(path: str | os.PathLike) -> bool:
    """True for an existing directory that holds no run yet (only :data:`FRESH_DIR_FILES`)."""
    p = Path(path)
    return p.is_dir() and {x.name for x in p.iterdir()} <= FRESH_DIR_FILES


def create_run_dir(path: str | os.PathLike) -> Path:
    p = Path(path)
    if is_fresh_dir(p):
        return p  # created (and locked) by this command's own writer, or by the study driver
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
    p = Path(path)
    tmp = p.with_name(p.name + ".tmp")
    tmp.write_text(json.dumps(obj, indent=2, ensure_ascii=False, default=str) + "\n", encoding="utf-8")
    os.replace(tmp, p)


def read_json(path: str | os.PathLike) -> dict:
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
    out: dict[str, str | None] = {"python": sys.version.split()[0], "platform": platform.platform()}
    for n in names:
        try:
            out[n] = metadata.version(n)
        except metadata.PackageNotFoundError:
            out[n] = None
    return out


def now() -> str:
    return datetime.now(timezone.utc).isoformat(timespec="seconds")
