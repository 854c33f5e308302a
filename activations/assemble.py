"""Writing a finished activation store in one sequential pass, and publishing it atomically.

    from activations.assemble import publish_h5
    publish_h5(Path("runs/demo/activations.h5"), header, n_rows, blocks)   # blocks: (rows, acts, spans)

Used by :meth:`activations.writer.StoreWriter.finish` (the committed part files), by :mod:`activations.merge`
(the shards, in the run's order) and, in memory, by ``open_store(..., allow_incomplete=True)``. Rows are
re-blocked to the chunk size, so every chunk is written exactly once; memory is one chunk-row block of every
position, never the whole store. Layout: :mod:`activations.schema`.
"""
from __future__ import annotations

import json
from collections.abc import Iterable
from pathlib import Path
from typing import IO, Any

import numpy as np

from activations.integrity import write_sidecar
from activations.schema import (
    ATTR_KEYS,
    CHUNK_ROWS,
    FLETCHER32,
    INT_COLUMNS,
    KIND,
    SCHEMA_VERSION,
    STR_COLUMNS,
    StoreError,
    as_correct,
    as_int,
    as_str,
    h5py_module,
    str_dtype,
)
from loadbearing.files import atomic_write_bytes

#: one block of rows as they arrive: (row dicts, {position: acts [b, n_layers, d_model]}, {position: spans [b, 2]})
Block = tuple[list[dict], dict[str, np.ndarray], dict[str, np.ndarray]]


def write_attrs(f, header: dict, n: int, complete: bool) -> None:
    attrs = dict(header["attrs"])
    f.attrs["schema_version"] = SCHEMA_VERSION
    f.attrs["kind"] = KIND
    f.attrs["complete"] = bool(complete)
    f.attrs["n_rows"] = int(n)
    for k in ATTR_KEYS:
        f.attrs[k] = as_str(attrs.get(k))
    f.attrs["dtype"] = header["dtype"]
    f.attrs["layers"] = np.asarray(header["layers"], dtype=np.int64)
    f.attrs["positions"] = np.array(header["positions"], dtype=str_dtype())
    f.attrs["d_model"] = int(header["d_model"])
    f.attrs["leaky"] = bool(attrs.get("leaky", False))
    f.attrs["settings"] = attrs.get("settings") if isinstance(attrs.get("settings"), str) else json.dumps(
        attrs.get("settings", {}), sort_keys=True, default=str)
    for k, v in attrs.items():  # anything else the caller wants recorded
        if k in ATTR_KEYS or k in ("leaky", "settings") or k in f.attrs:
            continue
        if v is None:
            f.attrs[k] = ""
        elif isinstance(v, (bool, int, float, str)):
            f.attrs[k] = v
        else:
            f.attrs[k] = json.dumps(v, sort_keys=True, default=str)


def write_h5(f, header: dict, n: int, blocks: Iterable[Block], *, complete: bool = True) -> list[dict[str, Any]]:
    """Write a whole store into the open, empty h5py file ``f``: ``n`` rows arriving as ``blocks`` of
    ``(rows, acts, spans)``. Rows are re-blocked to the chunk size, so every chunk is written exactly once.
    Memory: one chunk-row block of every position (``64 x n_layers x d_model``), never the whole store."""
    layers, positions, d = list(header["layers"]), list(header["positions"]), int(header["d_model"])
    dtype = header["dtype"]
    write_attrs(f, header, n, complete)
    crows = max(1, min(n, CHUNK_ROWS))
    acts_g, spans_g = f.create_group("acts"), f.create_group("spans")
    for p in positions:
        acts_g.create_dataset(p, shape=(n, len(layers), d), maxshape=(None, len(layers), d), dtype=dtype,
                              chunks=(crows, 1, d), compression="lzf", fletcher32=FLETCHER32)
        spans_g.create_dataset(p, shape=(n, 2), maxshape=(None, 2), dtype=np.int32, chunks=(max(1, min(n, 4096)), 2),
                               fletcher32=FLETCHER32)
    rows_all: list[dict] = []
    buf_a: dict[str, list[np.ndarray]] = {p: [] for p in positions}
    buf_s: dict[str, list[np.ndarray]] = {p: [] for p in positions}
    buffered = 0
    written = 0

    def flush(upto_all: bool) -> None:
        nonlocal buffered, written
        while buffered and (buffered >= crows or upto_all):
            take = min(crows, buffered)
            for p in positions:
                a = np.concatenate(buf_a[p]) if len(buf_a[p]) > 1 else buf_a[p][0]
                s = np.concatenate(buf_s[p]) if len(buf_s[p]) > 1 else buf_s[p][0]
                acts_g[p][written : written + take] = a[:take]
                spans_g[p][written : written + take] = s[:take]
                buf_a[p] = [a[take:]] if take < len(a) else []
                buf_s[p] = [s[take:]] if take < len(s) else []
            written += take
            buffered -= take

    for rows, acts, spans in blocks:
        rows_all.extend(rows)
        for p in positions:
            buf_a[p].append(np.asarray(acts[p], dtype=dtype))
            buf_s[p].append(np.asarray(spans[p], dtype=np.int32))
        buffered += len(rows)
        flush(False)
    flush(True)
    if written != n or len(rows_all) != n:
        raise StoreError(f"internal: expected {n} rows, assembled {written}")
    g = f.create_group("rows")
    for c in STR_COLUMNS:  # variable-length strings: h5py refuses filters (no checksum) on these
        g.create_dataset(c, data=np.array([as_str(r.get(c)) for r in rows_all], dtype=object),
                         dtype=str_dtype(), maxshape=(None,), chunks=(max(1, min(n, 4096)),))
    for c, dt in INT_COLUMNS.items():
        conv = as_correct if c == "correct" else as_int
        g.create_dataset(c, data=np.asarray([conv(r.get(c)) for r in rows_all], dtype=dt), maxshape=(None,),
                         chunks=(max(1, min(n, 4096)),), fletcher32=FLETCHER32)
    return rows_all


def publish_h5(path: Path, header: dict, n: int, blocks: Iterable[Block]) -> None:
    """Write a complete store beside ``path``, record its sha256 in the sidecar, and rename it to ``path``
    (atomic: all or nothing; the sidecar is in place before the store appears)."""
    h5py = h5py_module()
    path = Path(path)

    def write(fh: IO[bytes]) -> None:
        # h5py writes the temp file by name (HDF5 seeks and reads back what it wrote); atomic_write_bytes owns
        # the temp file, fsyncs it (an fsync covers every handle of the file) and renames it into place
        with h5py.File(fh.name, "w") as f:
            write_h5(f, header, n, blocks, complete=True)
        write_sidecar(fh.name, path, n_rows=n, source_run=header.get("attrs", {}).get("source_run"))

    atomic_write_bytes(path, write)


__all__ = ["Block", "publish_h5", "write_attrs", "write_h5"]
