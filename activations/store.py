"""The activation store: one HDF5 file of hidden states, a row table and provenance (the public face).

    from activations.store import open_store, StoreWriter, StoreError
    with open_store("runs/demo/activations.h5") as st:
        X = st.read(12, "prefix_last")      # [rows, d_model] float32, reads only layer 12
        y = st.rows["label"]                # pandas Series, None where unscored
        g = st.rows["question_key"]         # group rows by question (falls back to question_id)

One idea per module: :mod:`activations.schema` (layout, names, versions, the error type),
:mod:`activations.parts` (the atomic part files of an unfinished store), :mod:`activations.assemble` (one-pass
HDF5 writing and atomic publication), :mod:`activations.writer` (:class:`StoreWriter`),
:mod:`activations.integrity` (the whole-file sha256 sidecar, the source run's checksum) and
:mod:`activations.reader` (:func:`open_store`, :class:`ActivationStore`).

A SIGKILL at any moment while caching loses at most the batch being written; a damaged, truncated or
altered file is a one-line :class:`StoreError` naming the file and the fix, raised before any work.
"""
from __future__ import annotations

from activations.assemble import Block, publish_h5, write_h5
from activations.reader import ActivationStore, is_complete, open_store
from activations.schema import (
    CHUNK_ROWS,
    COLUMNS,
    SCHEMA_VERSION,
    STORE_PATH_KEY,
    StoreError,
    parts_dir,
    sidecar_path,
)
from activations.writer import StoreWriter

__all__ = ["CHUNK_ROWS", "COLUMNS", "SCHEMA_VERSION", "STORE_PATH_KEY", "ActivationStore", "Block", "StoreError",
           "StoreWriter", "is_complete", "open_store", "parts_dir", "publish_h5", "sidecar_path", "write_h5"]
