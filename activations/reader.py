"""The read side of an activation store: :func:`open_store` and :class:`ActivationStore`.

    from activations import open_store
    with open_store("runs/demo/activations.h5") as st:
        X = st.read(12, "prefix_last")      # [rows, d_model] float32, reads only layer 12
        y = st.rows["label"]                # pandas Series, None where unscored
        g = st.rows["question_key"]         # group rows by question (falls back to question_id)

Before any work, :func:`open_store` checks the file against the sha256 its sidecar recorded when it was
published (:mod:`activations.integrity`: one pass over the file) and, given ``run_dir``, the run's
continuations.jsonl against the sha256 the store recorded; a damaged chunk found later (fletcher32) is the
same one-line :class:`StoreError`. It refuses an unfinished store (parts only) unless
``allow_incomplete=True``, which assembles the committed parts in memory (nothing written).
"""
from __future__ import annotations

import json
import os
from pathlib import Path

import numpy as np

from activations.assemble import write_h5
from activations.integrity import check_continuations, check_store_file
from activations.parts import count_rows, iter_parts, read_meta
from activations.schema import (
    COLUMNS,
    KIND,
    RESUME_HINT,
    SCHEMA_VERSION,
    STR_COLUMNS,
    StoreError,
    as_str,
    h5py_module,
    parts_dir,
    recache_hint,
)
from loadbearing.runs import question_key_of


def _check_kind(f, path) -> None:
    kind = as_str(f.attrs.get("kind", ""))
    if kind != KIND:
        raise StoreError(f"{path} is not an activation store (kind={kind!r}, expected {KIND!r})")
    ver = f.attrs.get("schema_version")
    if ver is None or int(ver) != SCHEMA_VERSION:
        raise StoreError(
            f"{path} has schema_version {ver!r}; this reader understands {SCHEMA_VERSION} "
            f"(re-cache it with python -m activations.cache RUN_DIR)"
        )


def _damaged(path: Path, e: BaseException, source_run=None) -> StoreError:
    return StoreError(f"{path} is damaged or truncated ({type(e).__name__}: {str(e).splitlines()[0] if str(e) else ''}); "
                      f"{recache_hint(source_run)}")


class ActivationStore:
    """Read side of an activation store (see :func:`open_store`)."""

    def __init__(self, f, path: Path):
        self._f = f
        self.path = path
        self.n_rows = int(f.attrs["n_rows"])
        self.layers = [int(x) for x in f.attrs["layers"]]
        self.positions = [as_str(x) for x in f.attrs["positions"]]
        self.d_model = int(f.attrs["d_model"])
        attrs = {}
        for k, v in f.attrs.items():
            if isinstance(v, bytes):
                v = v.decode("utf-8")
            elif isinstance(v, np.ndarray):
                v = [(as_str(x) if isinstance(x, (bytes, str)) else x.item()) for x in v]
            elif isinstance(v, np.generic):
                v = v.item()
            attrs[k] = v
        attrs["layers"] = list(self.layers)
        attrs["positions"] = list(self.positions)
        try:
            attrs["settings"] = json.loads(attrs.get("settings") or "{}")
        except json.JSONDecodeError as e:
            raise StoreError(f"{path}: settings attribute is not valid JSON ({e})") from None
        attrs["complete"] = bool(attrs.get("complete", False))
        attrs["leaky"] = bool(attrs.get("leaky", False))
        self.attrs = attrs
        self._rows = None

    @property
    def complete(self) -> bool:
        return self.attrs["complete"]

    @property
    def leaky(self) -> bool:
        return self.attrs["leaky"]

    @property
    def rows(self):
        """The row table as a pandas DataFrame ("" -> None, correct -1 -> None; ``question_key`` falls back to
        ``question_id`` for rows cached before question keys existed; ``memberships`` parsed from JSON)."""
        if self._rows is None:
            import pandas as pd  # deferred: pandas is heavy to import

            n = self.n_rows
            try:
                g = self._f["rows"]
                data = {}
                for c in STR_COLUMNS:
                    vals = [(as_str(x) or None) for x in g[c][:n]] if c in g else [None] * n
                    data[c] = pd.Series(vals, dtype=object)  # object: missing stays None (pandas 3 would make NaN)
                data["question_key"] = pd.Series(
                    [question_key_of({"question_key": k, "question_id": q}) or None
                     for k, q in zip(data["question_key"], data["question_id"])], dtype=object)
                data["memberships"] = pd.Series([json.loads(m) if m else None for m in data["memberships"]],
                                                dtype=object)
                corr = g["correct"][:n] if "correct" in g else np.full(n, -1, np.int8)
                data["correct"] = pd.Series([None if x < 0 else bool(x) for x in corr], dtype=object)
                for c in ("input_tokens", "source_index", "line_index", "n_lines"):  # -1: absent (older stores)
                    data[c] = g[c][:n].astype(np.int64) if c in g else np.full(n, -1, np.int64)
            except (OSError, KeyError, ValueError) as e:
                raise _damaged(self.path, e, self.attrs.get("source_run")) from None
            self._rows = pd.DataFrame(data, columns=list(COLUMNS))
        return self._rows

    def _check(self, layer, position) -> int:
        if position not in self.positions:
            raise StoreError(f"unknown position {position!r}; this store has positions {self.positions}")
        try:
            li = self.layers.index(int(layer))
        except (ValueError, TypeError):
            raise StoreError(f"unknown layer {layer!r}; this store has layers {self.layers}") from None
        return li

    def _get(self, name: str, sel) -> np.ndarray:
        try:
            return np.asarray(self._f[name][sel])
        except (OSError, KeyError, ValueError) as e:  # a fletcher32 mismatch is an OSError naming the chunk
            raise _damaged(self.path, e, self.attrs.get("source_run")) from None

    def get(self, name: str, sel) -> np.ndarray:
        """Raw rows ``sel`` of dataset ``name`` (``acts/<position>`` or ``spans/<position>``), in the stored
        dtype (the merge copies shards with it)."""
        return self._get(name, sel)

    def read(self, layer: int, position: str = "prefix_last") -> np.ndarray:
        """Hidden states of one layer at one position: float32 ``[rows, d_model]``; only that layer's
        chunks are read."""
        li = self._check(layer, position)
        return self._get(f"acts/{position}", np.s_[: self.n_rows, li, :]).astype(np.float32, copy=False)

    def read_all(self, position: str = "prefix_last") -> np.ndarray:
        """Every stored layer at one position: float32 ``[rows, n_layers, d_model]``."""
        self._check(self.layers[0], position)
        return self._get(f"acts/{position}", np.s_[: self.n_rows]).astype(np.float32, copy=False)

    def spans(self, position: str = "prefix_last") -> np.ndarray:
        """Token offsets [start, end) used for each row at ``position``: int32 ``[rows, 2]``."""
        self._check(self.layers[0], position)
        return self._get(f"spans/{position}", np.s_[: self.n_rows])

    def close(self) -> None:
        self._f.close()

    def __enter__(self) -> ActivationStore:
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    def __repr__(self) -> str:
        return (f"ActivationStore({str(self.path)!r}, rows={self.n_rows}, layers={self.layers}, "
                f"positions={self.positions}, d_model={self.d_model}, complete={self.complete})")


def _open_parts_in_memory(path: Path) -> ActivationStore:
    """An unfinished store's committed parts, assembled into an in-memory HDF5 file (nothing written)."""
    h5py = h5py_module()
    parts = parts_dir(path)
    meta = read_meta(parts)
    n = count_rows(parts)
    f = h5py.File(f"{path}.in-memory-{id(meta)}", "w", driver="core", backing_store=False)
    try:
        write_h5(f, meta, n, iter_parts(parts, list(meta["positions"])), complete=False)
        return ActivationStore(f, path)
    except BaseException:
        f.close()
        raise


def _open_unfinished(path: Path, allow_incomplete: bool) -> ActivationStore:
    parts = parts_dir(path)
    if parts.is_dir():
        if not allow_incomplete:
            try:
                n: int | str = count_rows(parts)
            except StoreError:
                n = "some"
            raise StoreError(f"{path} is incomplete ({n} rows written before it stopped); {RESUME_HINT} "
                             f"(or open_store(..., allow_incomplete=True) to read the rows so far)")
        return _open_parts_in_memory(path)
    if path.is_dir():
        raise StoreError(f"{path} is a directory, not an activation store (.h5 file)")
    raise StoreError(f"no activation store at {path}; create one with: python -m activations.cache RUN_DIR")


def open_store(path: str | os.PathLike, *, allow_incomplete: bool = False,
               run_dir: str | os.PathLike | None = None) -> ActivationStore:
    """Open an activation store for reading; refuses incomplete stores unless ``allow_incomplete``.

    A finished store is checked against its sidecar's sha256 first; with ``run_dir`` (the run it was cached
    from), the run's continuations.jsonl is checked against the sha256 the store recorded."""
    h5py = h5py_module()
    path = Path(path)
    if not path.is_file():
        st = _open_unfinished(path, allow_incomplete)
    else:
        check_store_file(path)  # before h5py reads a byte: a damaged file never reaches the HDF5 library
        try:
            f = h5py.File(path, "r")
        except OSError as e:
            raise StoreError(f"{path} is not a readable HDF5 file, or is damaged or truncated "
                             f"({str(e).splitlines()[0] if str(e) else type(e).__name__}); re-cache it") from None
        try:
            _check_kind(f, path)
            if not allow_incomplete and not bool(f.attrs.get("complete", False)):
                raise StoreError(
                    f"{path} is incomplete ({int(f.attrs.get('n_rows', 0))} rows; written by an older version of "
                    f"this toolkit that appended in place); delete it and re-cache with python -m activations.cache"
                )
            for name in ("layers", "positions", "d_model", "n_rows"):
                if name not in f.attrs:
                    raise StoreError(f"{path} lacks the {name!r} attribute; it is damaged, re-cache it")
            st = ActivationStore(f, path)
        except StoreError:
            f.close()
            raise
        except (OSError, KeyError, ValueError) as e:
            f.close()
            raise _damaged(path, e) from None
    if run_dir is not None:
        try:
            check_continuations(st.attrs, run_dir)
        except BaseException:
            st.close()
            raise
    return st


def is_complete(path: str | os.PathLike) -> bool:
    """True when ``path`` is a finished, readable activation store."""
    try:
        with open_store(path):
            return True
    except StoreError:
        return False


__all__ = ["ActivationStore", "is_complete", "open_store"]
