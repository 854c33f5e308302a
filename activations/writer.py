"""The activation store's writer: committed batches as atomic part files, assembled into HDF5 on finish.

    from activations.writer import StoreWriter
    with StoreWriter("runs/demo/activations.h5", layers=[0, 12], positions=["prefix_last"], d_model=576,
                     attrs={"model_name": "...", "settings": {...}}) as w:
        w.append(rows, {"prefix_last": acts}, {"prefix_last": spans})   # durable when it returns
        w.finish()                                                      # the HDF5 file appears, whole

Crash safety (a SIGKILL at any moment loses at most the batch being written, and never corrupts a row):
while caching, the store is *not* an HDF5 file. Each appended batch is one part file under ``<store>.parts/``
(:mod:`activations.parts`); :meth:`StoreWriter.finish` assembles the parts into a temp file in one sequential
pass (chunk-aligned, so no chunk is ever rewritten), records its sha256 in the sidecar and renames it to
``<store>`` (:func:`activations.assemble.publish_h5`); only then are the parts removed. HDF5 files are thus
only ever written start to finish and published by an atomic rename; the failure mode of appending to a
compressed HDF5 file in place (a kill while a chunk holding committed rows is rewritten, leaving a file that
segfaults h5py) cannot happen.
"""
from __future__ import annotations

import json
import os
import shutil
from collections.abc import Iterable
from glob import escape as glob_escape
from pathlib import Path
from typing import Any

import numpy as np

from activations.assemble import publish_h5
from activations.parts import iter_parts, list_parts, read_meta, read_part_rows, write_meta, write_part
from activations.reader import open_store
from activations.schema import (
    COLUMNS,
    DTYPES,
    IDENTITY_KEYS,
    KIND,
    SCHEMA_VERSION,
    StoreError,
    as_correct,
    as_str,
    clean_attrs,
    parts_dir,
)


class StoreWriter:
    """Append-only writer of an activation store; see the module docstring for the layout.

    ``StoreWriter(path, layers=..., positions=..., d_model=..., attrs={...})`` starts a new store (refusing
    one that exists, finished or not, unless ``resume=True``). Every :meth:`append` commits one batch as an
    atomic part file; :meth:`finish` assembles the final HDF5 file and marks it complete; :meth:`close`
    without :meth:`finish` leaves an unfinished store that ``resume=True`` continues. On resume, the layers,
    positions, d_model, dtype and the identity attributes in ``attrs`` (model, weights hash, engine, source
    run, layer path, shard) must match; :meth:`done_ids` then says which continuations are already stored.
    ``expected_rows`` is accepted for compatibility (the chunking is chosen at :meth:`finish`).
    """

    def __init__(
        self,
        path: str | os.PathLike,
        *,
        layers: Iterable[int],
        positions: Iterable[str],
        d_model: int,
        dtype: str = "float32",
        attrs: dict | None = None,
        resume: bool = False,
        expected_rows: int | None = None,
    ):
        self.path = Path(path)
        self.parts = parts_dir(self.path)
        self.layers = [int(x) for x in layers]
        self.positions = [str(p) for p in positions]
        self.d_model = int(d_model)
        self.dtype = str(dtype)
        attrs = clean_attrs(dict(attrs or {}))
        if self.dtype not in DTYPES:
            raise StoreError(f"dtype must be one of {', '.join(DTYPES)}, got {dtype!r}")
        if not self.layers:
            raise StoreError("at least one layer is required")
        if len(set(self.layers)) != len(self.layers):
            raise StoreError(f"duplicate layers in {self.layers}")
        if not self.positions or len(set(self.positions)) != len(self.positions):
            raise StoreError(f"positions must be a non-empty list without duplicates, got {self.positions}")
        if self.d_model <= 0:
            raise StoreError(f"d_model must be positive, got {d_model}")
        self.header = {"layers": self.layers, "positions": self.positions, "d_model": self.d_model,
                       "dtype": self.dtype, "attrs": attrs, "schema_version": SCHEMA_VERSION, "kind": KIND}
        self._closed = False
        self._finished_before = False
        self._rows: list[dict] = []
        self._n_parts = 0
        exists = self.path.exists() or self.parts.exists()
        if exists and not resume:
            raise StoreError(f"{self.path} already exists; pass --resume to continue it (or --output-file another file, "
                             f"or delete it to start over)")
        if self.path.exists():
            self._open_finished(attrs)
        elif self.parts.exists():
            self._open_parts(attrs)
        else:
            self.path.parent.mkdir(parents=True, exist_ok=True)
            self.parts.mkdir()
            try:
                write_meta(self.parts, self.header)
            except BaseException:
                shutil.rmtree(self.parts, ignore_errors=True)
                raise
        self._done = {as_str(r.get("continuation_id")) for r in self._rows}

    # -- resume ------------------------------------------------------------------------------------------
    def _diff(self, have: dict, attrs: dict) -> None:
        want = {"layers": self.layers, "positions": self.positions, "d_model": self.d_model, "dtype": self.dtype}
        have_cmp = {k: have.get(k) for k in want}
        for k in IDENTITY_KEYS:
            if k in attrs:
                have_cmp[k] = as_str(have["attrs"].get(k))
                want[k] = as_str(attrs[k])
        if "leaky" in attrs:
            have_cmp["leaky"] = bool(have["attrs"].get("leaky", False))
            want["leaky"] = bool(attrs["leaky"])
        diff = [f"{k}: store has {have_cmp[k]!r}, now {want[k]!r}" for k in want if have_cmp.get(k) != want[k]]
        if diff:
            raise StoreError(f"cannot resume {self.path}: it was written with different settings ({'; '.join(diff)}); "
                             f"rerun with the original settings, or --output-file a new file")

    def _open_parts(self, attrs: dict) -> None:
        meta = read_meta(self.parts)
        self._diff(meta, attrs)
        self.header["attrs"] = {**meta["attrs"], **{k: v for k, v in attrs.items() if k not in IDENTITY_KEYS}}
        for stray in self.parts.glob(".*.tmp"):  # a part whose write was cut off: never committed
            stray.unlink(missing_ok=True)
        # a store (or its sidecar) whose assembly was cut off: the temp files of a dead writer (one writer per store)
        for stray in self.path.parent.glob(f".{glob_escape(self.path.name)}.*tmp"):
            stray.unlink(missing_ok=True)
        files = list_parts(self.parts)
        for f in files:
            self._rows.extend(read_part_rows(f))
        self._n_parts = len(files)

    def _open_finished(self, attrs: dict) -> None:
        with open_store(self.path) as st:  # refuses damaged / foreign files in one line
            have = {"layers": st.layers, "positions": st.positions, "d_model": st.d_model,
                    "dtype": st.attrs.get("dtype"), "attrs": st.attrs}
            self._diff(have, attrs)
            self._rows = [{"continuation_id": c} for c in st.rows["continuation_id"]]
        self._finished_before = True
        if self.parts.exists():  # killed after the final rename, before the parts were removed
            shutil.rmtree(self.parts, ignore_errors=True)

    # -- public API --------------------------------------------------------------------------------------
    @property
    def n_rows(self) -> int:
        return len(self._rows)

    @property
    def finished(self) -> bool:
        """True when the store was already complete when this writer opened it (nothing left to append)."""
        return self._finished_before

    def done_ids(self) -> set:
        """Continuation ids already stored (a resumed run skips these)."""
        return set(self._done)

    def _check_batch(self, rows: list[dict], acts: dict[str, np.ndarray],
                     spans: dict[str, np.ndarray]) -> tuple[dict[str, np.ndarray], list[str]]:
        b = len(rows)
        if set(acts) != set(self.positions) or set(spans) != set(self.positions):
            raise StoreError(f"append needs acts and spans for exactly the store's positions {self.positions}; "
                             f"got acts {sorted(acts)}, spans {sorted(spans)}")
        shape = (b, len(self.layers), self.d_model)
        arrays: dict[str, np.ndarray] = {}
        for p in self.positions:
            a = np.asarray(acts[p])
            if a.shape != shape:
                raise StoreError(f"acts[{p!r}] has shape {a.shape}, expected {shape} (rows, layers, d_model)")
            if not np.all(np.isfinite(a)):
                raise StoreError(f"acts[{p!r}] contains non-finite values")
            s = np.asarray(spans[p])
            if s.shape != (b, 2):
                raise StoreError(f"spans[{p!r}] has shape {s.shape}, expected {(b, 2)}")
            arrays[f"acts/{p}"] = a.astype(self.dtype, copy=False)
            arrays[f"spans/{p}"] = s.astype(np.int32, copy=False)
        ids: list[str] = []
        for r in rows:
            cid = as_str(r.get("continuation_id"))
            if not cid:
                raise StoreError(f"row without a continuation_id: {r!r}")
            if cid in self._done or cid in ids:
                raise StoreError(f"continuation {cid!r} is already in the store")
            ids.append(cid)
        unknown = set().union(*(set(r) for r in rows)) - set(COLUMNS)
        if unknown:
            raise StoreError(f"unknown row columns {sorted(unknown)}; the store's columns are {list(COLUMNS)}")
        for r in rows:
            as_correct(r.get("correct"))
        return arrays, ids

    def append(self, rows: list[dict], acts: dict[str, np.ndarray], spans: dict[str, np.ndarray]) -> None:
        """Commit one batch: ``rows`` (dicts with the row-table columns), ``acts[position]`` of shape
        ``[b, n_layers, d_model]`` and ``spans[position]`` of shape ``[b, 2]``; durable when this returns."""
        if self._closed:
            raise StoreError("the store writer is closed")
        if self._finished_before:
            raise StoreError(f"{self.path} is already complete; cache into a new --output-file to add rows")
        if len(rows) == 0:
            return
        arrays, ids = self._check_batch(rows, acts, spans)
        clean = [{c: (r.get(c) if not isinstance(r.get(c), tuple) else list(r.get(c))) for c in COLUMNS if c in r}  # type: ignore[arg-type]
                 for r in rows]
        arrays["rows"] = np.frombuffer(json.dumps(clean, default=str).encode("utf-8"), dtype=np.uint8)
        write_part(self.parts, self._n_parts, arrays)
        self._n_parts += 1
        self._rows.extend(clean)
        self._done.update(ids)

    def set_attr(self, key: str, value: Any) -> None:
        """Record an extra attribute (e.g. timing); written into the store at :meth:`finish`."""
        self.header["attrs"][key] = clean_attrs({key: value})[key]  # type: ignore[index]

    def finish(self) -> None:
        """Assemble the parts into the final HDF5 file (atomic rename, sidecar sha256), mark it complete, close."""
        if self._closed:
            return
        if not self._finished_before:
            write_meta(self.parts, self.header)
            publish_h5(self.path, self.header, self.n_rows, iter_parts(self.parts, self.positions))
            shutil.rmtree(self.parts, ignore_errors=True)
        self.close()

    def close(self) -> None:
        if not self._closed:
            self._closed = True
            if not self._finished_before and self.parts.exists():  # keep attrs set so far for a resume
                write_meta(self.parts, self.header)

    def __enter__(self) -> StoreWriter:
        return self

    def __exit__(self, exc_type, exc, tb) -> None:
        # leaving the block normally does NOT mark the store complete: call finish() for that
        self.close()


__all__ = ["StoreWriter"]
