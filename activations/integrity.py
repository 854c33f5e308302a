"""Integrity of a finished activation store: its whole-file sha256 sidecar, and the run it was cached from.

    from activations.integrity import check_store_file, check_continuations
    check_store_file("runs/demo/activations.h5")          # StoreError (one line) when the bytes changed
    check_continuations(store.attrs, "runs/demo")         # StoreError when continuations.jsonl changed

HDF5's fletcher32 checksums cover the numeric chunks only, never the attributes or the string columns, so
publishing a store (:func:`activations.assemble.publish_h5`) also writes ``<store>.json`` beside it: the file's
sha256 and size, and the store's path under :data:`activations.schema.STORE_PATH_KEY`. The sidecar is written
before the store is renamed into place, so a published store always has one; a store without one (older
versions, or copied without it) is opened unchecked.
"""
from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

from activations.schema import SCHEMA_VERSION, SIDECAR_KIND, STORE_PATH_KEY, StoreError, recache_hint, sidecar_path
from loadbearing.files import RunDirError, atomic_write_text, check_sha256, file_sha256
from loadbearing.runs import CONTINUATIONS


def write_sidecar(written: str | os.PathLike, final: str | os.PathLike, *, n_rows: int, source_run: Any = None) -> Path:
    """Record the sha256 of the finished file at ``written`` (a temp file that becomes ``final``) beside
    ``final``; returns the sidecar's path."""
    w, f = Path(written), Path(final)
    record = {"kind": SIDECAR_KIND, "schema_version": SCHEMA_VERSION, STORE_PATH_KEY: str(f.resolve()),
              "sha256": file_sha256(w), "size_bytes": w.stat().st_size, "n_rows": int(n_rows),
              "source_run": source_run or None}
    return atomic_write_text(sidecar_path(f), json.dumps(record, indent=2, sort_keys=True) + "\n")


def read_sidecar(path: str | os.PathLike) -> dict[str, Any] | None:
    """The sidecar of the store at ``path``, or None when it has none."""
    sc = sidecar_path(path)
    try:
        text = sc.read_text(encoding="utf-8")
    except FileNotFoundError:
        return None
    try:
        record = json.loads(text)
    except (ValueError, UnicodeDecodeError):
        record = None
    if not isinstance(record, dict) or record.get("kind") != SIDECAR_KIND or not record.get("sha256"):
        raise StoreError(f"{sc} is damaged (not the sidecar of an activation store); {recache_hint()}, or delete "
                         f"{sc.name} to open {Path(path).name} unchecked")
    return record


def check_store_file(path: str | os.PathLike) -> None:
    """Refuse a store whose bytes differ from those recorded when it was published (one pass over the file)."""
    p = Path(path)
    record = read_sidecar(p)
    if record is None:
        return
    fix = recache_hint(record.get("source_run"))
    size = record.get("size_bytes")
    if isinstance(size, int) and p.stat().st_size != size:
        raise StoreError(f"{p} is truncated or was changed after it was cached ({p.stat().st_size} bytes, recorded "
                         f"{size}); {fix}")
    st = p.stat()
    key = (str(p.resolve()), st.st_ino, st.st_size, st.st_mtime_ns, record["sha256"])
    if key in _VERIFIED:
        return  # this process already hashed these very bytes (same inode, size and mtime): no second pass
    try:
        check_sha256(p, record["sha256"], what="python -m activations.cache", fix=fix)
    except RunDirError as e:
        raise StoreError(str(e)) from None
    _VERIFIED.add(key)


#: stores whose sha256 this process has checked, keyed by (path, inode, size, mtime_ns, recorded sha256):
#: a stage that opens one store several times (``is_complete``, then the read) hashes it once
_VERIFIED: set[tuple] = set()


def check_continuations(attrs: dict, run_dir: str | os.PathLike) -> None:
    """Refuse a store cached from another version of ``run_dir``'s continuations.jsonl than the one there now."""
    path = Path(run_dir) / CONTINUATIONS
    expected = attrs.get("source_continuations_sha256") or None
    if expected is None:
        return
    if not path.is_file():
        raise StoreError(f"{path} not found: the activation store was cached from it; pass the run directory the "
                         f"store was cached from")
    try:
        check_sha256(path, str(expected), what="the activation store",
                     fix=f"the store is stale: {recache_hint(run_dir)} --output-file NEW_FILE")
    except RunDirError as e:
        raise StoreError(str(e)) from None


__all__ = ["check_continuations", "check_store_file", "read_sidecar", "write_sidecar"]
