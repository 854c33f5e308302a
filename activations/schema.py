"""The activation store's schema: dataset and attribute names, versions, value conventions, the error type.

Layout (``schema_version`` 1)::

    attrs   schema_version=1, kind="activations", complete (bool), n_rows (int), model_name, model_id,
            revision, weights_hash, engine, dtype, layers (int array: HF hidden_states indices, 0 =
            embeddings, L = output of block L-1, see loadbearing/engine/layers.py), decoder_layers_path (e.g.
            "model.layers"), positions (str array), d_model (int), leaky (bool), source_run,
            source_manifest_sha256, source_continuations_sha256, settings (JSON string), label_source,
            shard ("I/N", only on a shard), merged_from (JSON list, only on a merged store)
    /rows/<column>   1-D, length n_rows: continuation_id, question_id, question_key, dataset, task,
                     difficulty, strategy, edit_position, condition, label ("C"/"non-C"/""), label3
                     ("A"/"B"/"C"/""), memberships (JSON list of [strategy, position], "" = none) as utf-8
                     variable-length strings ("" = null); correct int8 (1/0/-1 = null); input_tokens int32;
                     source_index int32 (the record's line in the run's continuations.jsonl, 0-based);
                     line_index, n_lines int32 (-1 = null)
    /acts/<position> [n_rows, n_layers, d_model] float16|float32, chunks (min(n,64), 1, d_model), lzf:
                     one layer of a row block is one chunk, so reading a layer never decompresses the others
    /spans/<position> int32 [n_rows, 2]: token offsets [start, end) that produced that row's vector

Every numeric dataset carries a fletcher32 checksum per chunk (a damaged chunk is an error when it is read);
h5py cannot filter variable-length strings, so the string columns have none. Checksums never cover the
attributes, so a finished store also has a sidecar ``<store>.json`` (:data:`SIDECAR_SUFFIX`) holding the
whole file's sha256 (``sha256``) and the store's path under :data:`STORE_PATH_KEY`, the one name under which
the store's path is recorded; :func:`activations.reader.open_store` checks the sha256 before any work.
"""
from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

import numpy as np

from loadbearing.errors import LoadBearingError

SCHEMA_VERSION = 1
KIND = "activations"
STR_COLUMNS = (
    "continuation_id",
    "question_id",
    "question_key",
    "dataset",
    "task",
    "difficulty",
    "strategy",
    "edit_position",
    "condition",
    "label",
    "label3",
    "memberships",
)
INT_COLUMNS = {"correct": np.int8, "input_tokens": np.int32, "source_index": np.int32, "line_index": np.int32,
               "n_lines": np.int32}
COLUMNS = STR_COLUMNS + tuple(INT_COLUMNS)
DTYPES = ("float16", "float32")
CHUNK_ROWS = 64
#: numeric datasets carry a per-chunk checksum (variable-length strings cannot be filtered)
FLETCHER32 = True
RESUME_HINT = "resume with: python -m activations.cache RUN_DIR --resume"
RECACHE_HINT = "re-cache it with python -m activations.cache RUN_DIR"
ATTR_KEYS = (
    "model_name",
    "model_id",
    "revision",
    "weights_hash",
    "engine",
    "source_run",
    "source_manifest_sha256",
    "label_source",
)
IDENTITY_KEYS = ("model_id", "weights_hash", "engine", "source_run", "label_source", "decoder_layers_path", "shard")
PARTS_SUFFIX = ".parts"
META = "meta.json"
#: the sidecar beside a finished store: ``activations.h5`` -> ``activations.h5.json``
SIDECAR_SUFFIX = ".json"
SIDECAR_KIND = "activations.sidecar"
#: THE name under which a store's path is recorded (the sidecar; downstream provenance should reuse it)
STORE_PATH_KEY = "store_path"


class StoreError(LoadBearingError, ValueError):
    """The store is missing, incomplete, damaged, of the wrong kind, or was asked for something it lacks."""


def h5py_module():
    """h5py, imported on first use (importing this package loads no HDF5 library)."""
    import h5py  # deferred: h5py is heavy to import

    return h5py


def str_dtype():
    return h5py_module().string_dtype(encoding="utf-8")


def as_str(v: Any) -> str:
    """A stored string value: None -> "", bytes decoded, lists as JSON."""
    if v is None:
        return ""
    if isinstance(v, bytes):
        return v.decode("utf-8")
    if isinstance(v, (list, tuple)):
        return json.dumps(list(v))
    return str(v)


def as_correct(v: Any) -> int:
    """The ``correct`` column: True/False/None -> 1/0/-1."""
    if v is None:
        return -1
    if isinstance(v, (bool, np.bool_)):
        return int(v)
    if isinstance(v, (int, np.integer)) and int(v) in (-1, 0, 1):
        return int(v)
    raise StoreError(f"column 'correct' must be True/False/None (or 1/0/-1), got {v!r}")


def as_int(v: Any) -> int:
    return -1 if v is None else int(v)


def clean_attrs(attrs: dict) -> dict[str, Any]:
    """Attributes as JSON-able values (settings as a JSON string)."""
    out: dict[str, Any] = {}
    for k, v in attrs.items():
        if k == "settings":
            out[k] = v if isinstance(v, str) else json.dumps(v, sort_keys=True, default=str)
        elif isinstance(v, np.ndarray):
            out[k] = v.tolist()
        elif isinstance(v, np.generic):
            out[k] = v.item()
        else:
            out[k] = v
    return json.loads(json.dumps(out, default=str))


def parts_dir(path: str | os.PathLike) -> Path:
    """``<store>.parts``: where an unfinished store keeps its committed batches."""
    p = Path(path)
    return p.with_name(p.name + PARTS_SUFFIX)


def sidecar_path(path: str | os.PathLike) -> Path:
    """``<store>.json``: the finished store's whole-file sha256 and recorded path."""
    p = Path(path)
    return p.with_name(p.name + SIDECAR_SUFFIX)


def recache_hint(source_run: Any = None) -> str:
    """The fix for a damaged store: re-cache from its run (named when the store records it)."""
    run = as_str(source_run) if source_run else "RUN_DIR"
    return f"re-cache it with python -m activations.cache {run}"


__all__ = ["ATTR_KEYS", "CHUNK_ROWS", "COLUMNS", "DTYPES", "FLETCHER32", "IDENTITY_KEYS", "INT_COLUMNS", "KIND",
           "META", "PARTS_SUFFIX", "RECACHE_HINT", "RESUME_HINT", "SCHEMA_VERSION", "SIDECAR_KIND", "SIDECAR_SUFFIX",
           "STORE_PATH_KEY", "STR_COLUMNS", "StoreError", "as_correct", "as_int", "as_str", "clean_attrs",
           "h5py_module", "parts_dir", "recache_hint", "sidecar_path", "str_dtype"]
