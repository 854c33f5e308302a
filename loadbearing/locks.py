"""Locks: one writer per output (an advisory ``fcntl`` lock that names its holder)."""
from __future__ import annotations

import contextlib
import errno
import fcntl
import json
import os
import socket
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from loadbearing.files import RunDirError
from loadbearing.provenance import now


class LockError(RunDirError):
    """Another live process holds the output's lock (one writer per output)."""


def lock_path(path: str | os.PathLike) -> Path:
    """``<dir>/.lock`` for an existing directory output, ``<file>.lock`` for anything else (a file output)."""
    p = Path(path)
    return p / ".lock" if p.is_dir() else p.with_name(p.name + ".lock")


def _read_holder(f) -> dict[str, Any]:
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
