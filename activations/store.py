"""The activation store: one HDF5 file of hidden states, a row table and provenance.

    from activations import open_store
    with open_store("runs/demo/activations.h5") as st:
        X = st.read(12, "prefix_last")      # [rows, d_model] float32, reads only layer 12
        y = st.rows["label"]                # pandas Series, None where unscored

Layout (``schema_version`` 1)::

    attrs   schema_version=1, kind="activations", complete (bool), n_rows (int), model_name, model_id,
            revision, weights_hash, engine, dtype, layers (int array: HF hidden_states indices, 0 =
            embeddings, L = output of block L-1), positions (str array), d_model (int), leaky (bool),
            source_run, source_manifest_sha256, settings (JSON string), label_source
    /rows/<column>   1-D, length n_rows: continuation_id, question_id, dataset, task, difficulty,
                     strategy, edit_position, condition, label ("C"/"non-C"/""), label3 ("A"/"B"/"C"/"")
                     as utf-8 variable-length strings ("" = null); correct int8 (1/0/-1 = null);
                     input_tokens int32
    /acts/<position> [n_rows, n_layers, d_model] float16|float32, chunks (min(n,64), 1, d_model), lzf,
                     resizable along rows: one layer of a row block is one chunk, so reading a layer never
                     decompresses the others
    /spans/<position> int32 [n_rows, 2]: token offsets [start, end) that produced that row's vector

Crash safety: the writer appends rows in batches, resizing every dataset and then bumping ``n_rows``
last, and flushes after each batch. A reader trusts ``n_rows`` (not the dataset lengths), so a batch torn
by a crash is invisible and is overwritten on resume. ``complete`` is set only by :meth:`StoreWriter.finish`;
:func:`open_store` refuses an incomplete store unless ``allow_incomplete=True``.
"""
from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any, Iterable

import numpy as np

SCHEMA_VERSION = 1
KIND = "activations"
STR_COLUMNS = (
    "continuation_id",
    "question_id",
    "dataset",
    "task",
    "difficulty",
    "strategy",
    "edit_position",
    "condition",
    "label",
    "label3",
)
INT_COLUMNS = {"correct": np.int8, "input_tokens": np.int32}
COLUMNS = STR_COLUMNS + tuple(INT_COLUMNS)
DTYPES = ("float16", "float32")
RESUME_HINT = "resume with: python -m activations.cache RUN_DIR --resume"
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


class StoreError(ValueError):
    """The store is missing, incomplete, of the wrong kind, or was asked for something it does not hold."""


def _h5py():
    import h5py

    return h5py


def _str_dtype():
    return _h5py().string_dtype(encoding="utf-8")


def _as_str(v) -> str:
    if v is None:
        return ""
    if isinstance(v, bytes):
        return v.decode("utf-8")
    return str(v)


def _as_correct(v) -> int:
    if v is None:
        return -1
    if isinstance(v, (bool, np.bool_)):
        return int(v)
    if isinstance(v, (int, np.integer)) and int(v) in (-1, 0, 1):
        return int(v)
    raise StoreError(f"column 'correct' must be True/False/None (or 1/0/-1), got {v!r}")


def _attr_value(v):
    if v is None:
        return ""
    return v


class StoreWriter:
    """Append-only writer of an activation store; see the module docstring for the layout.

    ``StoreWriter(path, layers=..., positions=..., d_model=..., attrs={...})`` creates a new file
    (refusing to overwrite one that exists unless ``resume=True``). With ``resume=True`` an existing store
    is reopened after checking that its layers, positions, d_model, dtype and the identity attributes in
    ``attrs`` (model, weights hash, engine, source run) match; :meth:`done_ids` then says which
    continuations are already stored. ``expected_rows`` (optional) sizes the row chunks as
    ``min(expected_rows, 64)``.
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
        h5py = _h5py()
        self.path = Path(path)
        self.layers = [int(x) for x in layers]
        self.positions = [str(p) for p in positions]
        self.d_model = int(d_model)
        self.dtype = str(dtype)
        self._chunk_rows = max(1, min(int(expected_rows), 64)) if expected_rows else 64
        attrs = dict(attrs or {})
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
        self._closed = False
        if self.path.exists():
            if not resume:
                raise StoreError(
                    f"{self.path} already exists; pass --resume to continue it (or --output another file, "
                    f"or delete it to start over)"
                )
            self._f = h5py.File(self.path, "r+")
            try:
                self._check_resume(attrs)
            except BaseException:
                self._f.close()
                raise
            # a batch torn by a crash (datasets longer than n_rows) is dropped here
            self._truncate(int(self._f.attrs["n_rows"]))
            self._f.attrs["complete"] = False
            self._f.flush()
        else:
            self.path.parent.mkdir(parents=True, exist_ok=True)
            self._f = h5py.File(self.path, "w")
            try:
                self._create(attrs)
            except BaseException:
                self._f.close()
                self.path.unlink(missing_ok=True)
                raise
        self._done = set(self._read_str("continuation_id"))

    # -- creation / resume -------------------------------------------------------------------------------
    def _create(self, attrs: dict) -> None:
        f = self._f
        f.attrs["schema_version"] = SCHEMA_VERSION
        f.attrs["kind"] = KIND
        f.attrs["complete"] = False
        f.attrs["n_rows"] = 0
        for k in ATTR_KEYS:
            f.attrs[k] = _as_str(attrs.get(k))
        f.attrs["dtype"] = self.dtype
        f.attrs["layers"] = np.asarray(self.layers, dtype=np.int64)
        f.attrs["positions"] = np.array(self.positions, dtype=_str_dtype())
        f.attrs["d_model"] = self.d_model
        f.attrs["leaky"] = bool(attrs.get("leaky", False))
        settings = attrs.get("settings", {})
        f.attrs["settings"] = settings if isinstance(settings, str) else json.dumps(settings, sort_keys=True, default=str)
        extra = {k: v for k, v in attrs.items() if k not in ATTR_KEYS and k not in ("leaky", "settings")}
        for k, v in extra.items():  # anything else the caller wants recorded (e.g. package versions)
            f.attrs[k] = v if isinstance(v, (int, float, bool, np.ndarray)) else (
                v if isinstance(v, str) else json.dumps(v, sort_keys=True, default=str))
        rows = f.create_group("rows")
        for c in STR_COLUMNS:
            rows.create_dataset(c, shape=(0,), maxshape=(None,), dtype=_str_dtype(), chunks=(256,))
        for c, dt in INT_COLUMNS.items():
            rows.create_dataset(c, shape=(0,), maxshape=(None,), dtype=dt, chunks=(256,))
        acts = f.create_group("acts")
        spans = f.create_group("spans")
        n_layers = len(self.layers)
        for p in self.positions:
            acts.create_dataset(
                p,
                shape=(0, n_layers, self.d_model),
                maxshape=(None, n_layers, self.d_model),
                dtype=self.dtype,
                chunks=(self._chunk_rows, 1, self.d_model),
                compression="lzf",
            )
            spans.create_dataset(p, shape=(0, 2), maxshape=(None, 2), dtype=np.int32, chunks=(256, 2))
        f.flush()

    def _check_resume(self, attrs: dict) -> None:
        f = self._f
        _check_kind(f, self.path)
        have = {
            "layers": [int(x) for x in f.attrs["layers"]],
            "positions": [_as_str(x) for x in f.attrs["positions"]],
            "d_model": int(f.attrs["d_model"]),
            "dtype": _as_str(f.attrs["dtype"]),
        }
        want = {"layers": self.layers, "positions": self.positions, "d_model": self.d_model, "dtype": self.dtype}
        for k in ("model_id", "weights_hash", "engine", "source_run", "label_source"):
            if k in attrs:
                have[k] = _as_str(f.attrs.get(k, ""))
                want[k] = _as_str(attrs[k])
        if "leaky" in attrs:
            have["leaky"] = bool(f.attrs.get("leaky", False))
            want["leaky"] = bool(attrs["leaky"])
        diff = [f"{k}: store has {have[k]!r}, now {want[k]!r}" for k in want if have.get(k) != want[k]]
        if diff:
            raise StoreError(
                f"cannot resume {self.path}: it was written with different settings ({'; '.join(diff)}); "
                f"rerun with the original settings, or --output a new file"
            )

    def _truncate(self, n: int) -> None:
        for c in COLUMNS:
            ds = self._f["rows"][c]
            if ds.shape[0] != n:
                ds.resize((n,))
        for p in self.positions:
            a = self._f["acts"][p]
            if a.shape[0] != n:
                a.resize((n,) + a.shape[1:])
            s = self._f["spans"][p]
            if s.shape[0] != n:
                s.resize((n, 2))

    def _read_str(self, col: str) -> list[str]:
        n = int(self._f.attrs["n_rows"])
        return [_as_str(x) for x in self._f["rows"][col][:n]]

    # -- public API --------------------------------------------------------------------------------------
    @property
    def n_rows(self) -> int:
        return int(self._f.attrs["n_rows"])

    def done_ids(self) -> set:
        """Continuation ids already stored (a resumed run skips these)."""
        return set(self._done)

    def append(self, rows: list[dict], acts: dict[str, np.ndarray], spans: dict[str, np.ndarray]) -> None:
        """Append one batch: ``rows`` (dicts with the row-table columns), ``acts[position]`` of shape
        ``[b, n_layers, d_model]`` and ``spans[position]`` of shape ``[b, 2]``; flushed before returning."""
        if self._closed:
            raise StoreError("the store writer is closed")
        b = len(rows)
        if b == 0:
            return
        if set(acts) != set(self.positions) or set(spans) != set(self.positions):
            raise StoreError(
                f"append needs acts and spans for exactly the store's positions {self.positions}; "
                f"got acts {sorted(acts)}, spans {sorted(spans)}"
            )
        shape = (b, len(self.layers), self.d_model)
        arrs, sps = {}, {}
        for p in self.positions:
            a = np.asarray(acts[p])
            if a.shape != shape:
                raise StoreError(f"acts[{p!r}] has shape {a.shape}, expected {shape} (rows, layers, d_model)")
            if not np.all(np.isfinite(a)):
                raise StoreError(f"acts[{p!r}] contains non-finite values")
            s = np.asarray(spans[p])
            if s.shape != (b, 2):
                raise StoreError(f"spans[{p!r}] has shape {s.shape}, expected {(b, 2)}")
            arrs[p] = a.astype(self.dtype, copy=False)
            sps[p] = s.astype(np.int32, copy=False)
        ids = []
        for r in rows:
            cid = _as_str(r.get("continuation_id"))
            if not cid:
                raise StoreError(f"row without a continuation_id: {r!r}")
            if cid in self._done or cid in ids:
                raise StoreError(f"continuation {cid!r} is already in the store")
            ids.append(cid)
        unknown = set().union(*(set(r) for r in rows)) - set(COLUMNS)
        if unknown:
            raise StoreError(f"unknown row columns {sorted(unknown)}; the store's columns are {list(COLUMNS)}")
        n = self.n_rows
        m = n + b
        f = self._f
        for c in STR_COLUMNS:
            ds = f["rows"][c]
            ds.resize((m,))
            ds[n:m] = np.array([_as_str(r.get(c)) for r in rows], dtype=object)
        for c, dt in INT_COLUMNS.items():
            ds = f["rows"][c]
            ds.resize((m,))
            if c == "correct":
                vals = [_as_correct(r.get(c)) for r in rows]
            else:
                vals = [int(r.get(c) if r.get(c) is not None else -1) for r in rows]
            ds[n:m] = np.asarray(vals, dtype=dt)
        for p in self.positions:
            a = f["acts"][p]
            a.resize((m,) + a.shape[1:])
            a[n:m] = arrs[p]
            s = f["spans"][p]
            s.resize((m, 2))
            s[n:m] = sps[p]
        f.flush()
        f.attrs["n_rows"] = m  # last: until this lands, the batch does not exist
        f.flush()
        self._done.update(ids)

    def set_attr(self, key: str, value: Any) -> None:
        """Record an extra attribute (e.g. timing) before :meth:`finish`."""
        self._f.attrs[key] = value if not isinstance(value, (dict, list)) else json.dumps(value, default=str)

    def finish(self) -> None:
        """Mark the store complete and close it."""
        if self._closed:
            return
        self._f.attrs["complete"] = True
        self._f.flush()
        self.close()

    def close(self) -> None:
        if not self._closed:
            self._closed = True
            self._f.close()

    def __enter__(self) -> "StoreWriter":
        return self

    def __exit__(self, exc_type, exc, tb) -> None:
        # leaving the block normally does NOT mark the store complete: call finish() for that
        self.close()


def _check_kind(f, path) -> None:
    kind = _as_str(f.attrs.get("kind", ""))
    if kind != KIND:
        raise StoreError(f"{path} is not an activation store (kind={kind!r}, expected {KIND!r})")
    ver = f.attrs.get("schema_version")
    if ver is None or int(ver) != SCHEMA_VERSION:
        raise StoreError(
            f"{path} has schema_version {ver!r}; this reader understands {SCHEMA_VERSION} "
            f"(re-cache it with python -m activations.cache RUN_DIR)"
        )


class ActivationStore:
    """Read side of an activation store (see :func:`open_store`)."""

    def __init__(self, f, path: Path):
        self._f = f
        self.path = path
        self.n_rows = int(f.attrs["n_rows"])
        self.layers = [int(x) for x in f.attrs["layers"]]
        self.positions = [_as_str(x) for x in f.attrs["positions"]]
        self.d_model = int(f.attrs["d_model"])
        attrs = {}
        for k, v in f.attrs.items():
            if isinstance(v, bytes):
                v = v.decode("utf-8")
            elif isinstance(v, np.ndarray):
                v = [(_as_str(x) if isinstance(x, (bytes, str)) else x.item()) for x in v]
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
        """The row table as a pandas DataFrame ("" -> None, correct -1 -> None)."""
        if self._rows is None:
            import pandas as pd

            n = self.n_rows
            g = self._f["rows"]
            data = {}
            for c in STR_COLUMNS:
                vals = [(_as_str(x) or None) for x in g[c][:n]] if c in g else [None] * n
                data[c] = pd.Series(vals, dtype=object)  # object, so missing stays None (pandas 3 would make NaN)
            corr = g["correct"][:n] if "correct" in g else np.full(n, -1, np.int8)
            data["correct"] = pd.Series([None if x < 0 else bool(x) for x in corr], dtype=object)
            data["input_tokens"] = g["input_tokens"][:n].astype(np.int64) if "input_tokens" in g else np.zeros(n, np.int64)
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

    def read(self, layer: int, position: str = "prefix_last") -> np.ndarray:
        """Hidden states of one layer at one position: float32 ``[rows, d_model]``; only that layer's
        chunks are read."""
        li = self._check(layer, position)
        return np.asarray(self._f["acts"][position][: self.n_rows, li, :], dtype=np.float32)

    def read_all(self, position: str = "prefix_last") -> np.ndarray:
        """Every stored layer at one position: float32 ``[rows, n_layers, d_model]``."""
        self._check(self.layers[0], position)
        return np.asarray(self._f["acts"][position][: self.n_rows], dtype=np.float32)

    def spans(self, position: str = "prefix_last") -> np.ndarray:
        """Token offsets [start, end) used for each row at ``position``: int32 ``[rows, 2]``."""
        self._check(self.layers[0], position)
        return np.asarray(self._f["spans"][position][: self.n_rows])

    def close(self) -> None:
        self._f.close()

    def __enter__(self) -> "ActivationStore":
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    def __repr__(self) -> str:
        return (f"ActivationStore({str(self.path)!r}, rows={self.n_rows}, layers={self.layers}, "
                f"positions={self.positions}, d_model={self.d_model}, complete={self.complete})")


def open_store(path: str | os.PathLike, *, allow_incomplete: bool = False) -> ActivationStore:
    """Open an activation store for reading; refuses incomplete stores unless ``allow_incomplete``."""
    h5py = _h5py()
    path = Path(path)
    if not path.is_file():
        raise StoreError(f"no activation store at {path}; create one with: python -m activations.cache RUN_DIR")
    try:
        f = h5py.File(path, "r")
    except OSError as e:
        raise StoreError(f"{path} is not a readable HDF5 file ({e})") from None
    try:
        _check_kind(f, path)
        if not allow_incomplete and not bool(f.attrs.get("complete", False)):
            raise StoreError(
                f"{path} is incomplete ({int(f.attrs.get('n_rows', 0))} rows written before it stopped); "
                f"{RESUME_HINT} (or open_store(..., allow_incomplete=True) to read the rows so far)"
            )
        return ActivationStore(f, path)
    except BaseException:
        f.close()
        raise


__all__ = ["SCHEMA_VERSION", "StoreError", "StoreWriter", "ActivationStore", "open_store", "COLUMNS"]
