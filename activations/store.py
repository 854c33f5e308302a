"""The activation store: one HDF5 file of hidden states, a row table and provenance.

    from activations import open_store
    with open_store("runs/demo/activations.h5") as st:
        X = st.read(12, "prefix_last")      # [rows, d_model] float32, reads only layer 12
        y = st.rows["label"]                # pandas Series, None where unscored
        g = st.rows["question_key"]         # group rows by question (falls back to question_id)

Layout (``schema_version`` 1)::

    attrs   schema_version=1, kind="activations", complete (bool), n_rows (int), model_name, model_id,
            revision, weights_hash, engine, dtype, layers (int array: HF hidden_states indices, 0 =
            embeddings, L = output of block L-1, see behavioural/layers.py), decoder_layers_path (e.g.
            "model.layers"), positions (str array), d_model (int), leaky (bool), source_run,
            source_manifest_sha256, source_continuations_sha256, settings (JSON string), label_source,
            shard ("I/N", only on a shard), merged_from (JSON list, only on a merged store)
    /rows/<column>   1-D, length n_rows: continuation_id, question_id, question_key, dataset, task,
                     difficulty, strategy, edit_position, condition, label ("C"/"non-C"/""), label3
                     ("A"/"B"/"C"/""), memberships (JSON list of [strategy, position], "" = none) as utf-8
                     variable-length strings ("" = null); correct int8 (1/0/-1 = null); input_tokens int32;
                     source_index int32 (the record's line in the run's continuations.jsonl, 0-based)
    /acts/<position> [n_rows, n_layers, d_model] float16|float32, chunks (min(n,64), 1, d_model), lzf:
                     one layer of a row block is one chunk, so reading a layer never decompresses the others
    /spans/<position> int32 [n_rows, 2]: token offsets [start, end) that produced that row's vector

Crash safety (a SIGKILL at any moment loses at most the batch being written, and never corrupts a row):
while caching, the store is *not* an HDF5 file. Each appended batch is one ``part-NNNNNN.npz`` file under
``<store>.parts/`` (with ``meta.json``: layers, positions, d_model, dtype, attributes), written to a temporary
name, fsynced and renamed, so a part either exists whole or not at all. :meth:`StoreWriter.finish` assembles
the parts into ``<store>.tmp`` in one sequential pass (chunk-aligned, so no chunk is ever rewritten) and renames
it to ``<store>``; only then are the parts removed. HDF5 files are thus only ever written start to finish
and published by an atomic rename; the failure mode of appending to a compressed HDF5 file in place (a kill
while a chunk holding committed rows is rewritten, leaving a file that segfaults h5py) cannot happen.
:func:`open_store` refuses an unfinished store (parts only) unless ``allow_incomplete=True``, which assembles
the committed parts in memory. A damaged or truncated HDF5 file is a one-line :class:`StoreError`.
"""
from __future__ import annotations

import json
import os
import re
import shutil
from collections.abc import Iterable, Iterator
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
IDENTITY_KEYS = ("model_id", "weights_hash", "engine", "source_run", "label_source", "decoder_layers_path", "shard")
PARTS_SUFFIX = ".parts"
META = "meta.json"
_PART = re.compile(r"^part-(\d{6})\.npz$")


class StoreError(LoadBearingError, ValueError):
    """The store is missing, incomplete, damaged, of the wrong kind, or was asked for something it lacks."""


def _h5py():
    import h5py

    return h5py


def _str_dtype():
    return _h5py().string_dtype(encoding="utf-8")


def _as_str(v: Any) -> str:
    if v is None:
        return ""
    if isinstance(v, bytes):
        return v.decode("utf-8")
    if isinstance(v, (list, tuple)):
        return json.dumps(list(v))
    return str(v)


def _as_correct(v: Any) -> int:
    if v is None:
        return -1
    if isinstance(v, (bool, np.bool_)):
        return int(v)
    if isinstance(v, (int, np.integer)) and int(v) in (-1, 0, 1):
        return int(v)
    raise StoreError(f"column 'correct' must be True/False/None (or 1/0/-1), got {v!r}")


def _as_int(v: Any) -> int:
    return -1 if v is None else int(v)


def parts_dir(path: str | os.PathLike) -> Path:
    """``<store>.parts``: where an unfinished store keeps its committed batches."""
    p = Path(path)
    return p.with_name(p.name + PARTS_SUFFIX)


def _fsync_dir(d: Path) -> None:
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


def _atomic_write_bytes(path: Path, write) -> None:
    tmp = path.with_name("." + path.name + ".tmp")
    with open(tmp, "wb") as f:
        write(f)
        f.flush()
        os.fsync(f.fileno())
    os.replace(tmp, path)
    _fsync_dir(path.parent)


def _clean_attrs(attrs: dict) -> dict:
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


# ---------------------------------------------------------------------------------------------------------
# writing a finished HDF5 file in one pass (used by finish, by merge, and in memory by allow_incomplete)
# ---------------------------------------------------------------------------------------------------------
Block = tuple[list[dict], dict[str, np.ndarray], dict[str, np.ndarray]]


def _write_attrs(f, header: dict, n: int, complete: bool) -> None:
    attrs = dict(header["attrs"])
    f.attrs["schema_version"] = SCHEMA_VERSION
    f.attrs["kind"] = KIND
    f.attrs["complete"] = bool(complete)
    f.attrs["n_rows"] = int(n)
    for k in ATTR_KEYS:
        f.attrs[k] = _as_str(attrs.get(k))
    f.attrs["dtype"] = header["dtype"]
    f.attrs["layers"] = np.asarray(header["layers"], dtype=np.int64)
    f.attrs["positions"] = np.array(header["positions"], dtype=_str_dtype())
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


def write_h5(f, header: dict, n: int, blocks: Iterable[Block], *, complete: bool = True) -> list[dict]:
    """Write a whole store into the open, empty h5py file ``f``: ``n`` rows arriving as ``blocks`` of
    ``(rows, acts, spans)``. Rows are re-blocked to the chunk size, so every chunk is written exactly once.
    Memory: one chunk-row block of every position (``64 x n_layers x d_model``), never the whole store."""
    layers, positions, d = list(header["layers"]), list(header["positions"]), int(header["d_model"])
    dtype = header["dtype"]
    _write_attrs(f, header, n, complete)
    crows = max(1, min(n, CHUNK_ROWS))
    acts_g, spans_g = f.create_group("acts"), f.create_group("spans")
    for p in positions:
        acts_g.create_dataset(p, shape=(n, len(layers), d), maxshape=(None, len(layers), d), dtype=dtype,
                              chunks=(crows, 1, d), compression="lzf")
        spans_g.create_dataset(p, shape=(n, 2), maxshape=(None, 2), dtype=np.int32, chunks=(max(1, min(n, 4096)), 2))
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
    for c in STR_COLUMNS:
        g.create_dataset(c, data=np.array([_as_str(r.get(c)) for r in rows_all], dtype=object),
                         dtype=_str_dtype(), maxshape=(None,), chunks=(max(1, min(n, 4096)),))
    for c, dt in INT_COLUMNS.items():
        conv = _as_correct if c == "correct" else _as_int
        g.create_dataset(c, data=np.asarray([conv(r.get(c)) for r in rows_all], dtype=dt), maxshape=(None,),
                         chunks=(max(1, min(n, 4096)),))
    return rows_all


def publish_h5(path: Path, header: dict, n: int, blocks: Iterable[Block]) -> None:
    """Write a complete store to ``<path>.tmp`` and rename it to ``path`` (atomic: all or nothing)."""
    h5py = _h5py()
    tmp = path.with_name(path.name + ".tmp")
    tmp.unlink(missing_ok=True)
    try:
        with h5py.File(tmp, "w") as f:
            write_h5(f, header, n, blocks, complete=True)
        with open(tmp, "rb+") as fh:
            os.fsync(fh.fileno())
        os.replace(tmp, path)
        _fsync_dir(path.parent)
    except BaseException:
        tmp.unlink(missing_ok=True)
        raise


# ---------------------------------------------------------------------------------------------------------
# the writer: committed batches as atomic part files, assembled on finish
# ---------------------------------------------------------------------------------------------------------
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
        attrs = _clean_attrs(dict(attrs or {}))
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
            raise StoreError(f"{self.path} already exists; pass --resume to continue it (or --output another file, "
                             f"or delete it to start over)")
        if self.path.exists():
            self._open_finished(attrs)
        elif self.parts.exists():
            self._open_parts(attrs)
        else:
            self.path.parent.mkdir(parents=True, exist_ok=True)
            self.parts.mkdir()
            try:
                _atomic_write_bytes(self.parts / META, lambda f: f.write(json.dumps(self.header).encode()))
            except BaseException:
                shutil.rmtree(self.parts, ignore_errors=True)
                raise
        self._done = {_as_str(r.get("continuation_id")) for r in self._rows}

    # -- resume ------------------------------------------------------------------------------------------
    def _diff(self, have: dict, attrs: dict) -> None:
        want = {"layers": self.layers, "positions": self.positions, "d_model": self.d_model, "dtype": self.dtype}
        have_cmp = {k: have.get(k) for k in want}
        for k in IDENTITY_KEYS:
            if k in attrs:
                have_cmp[k] = _as_str(have["attrs"].get(k))
                want[k] = _as_str(attrs[k])
        if "leaky" in attrs:
            have_cmp["leaky"] = bool(have["attrs"].get("leaky", False))
            want["leaky"] = bool(attrs["leaky"])
        diff = [f"{k}: store has {have_cmp[k]!r}, now {want[k]!r}" for k in want if have_cmp.get(k) != want[k]]
        if diff:
            raise StoreError(f"cannot resume {self.path}: it was written with different settings ({'; '.join(diff)}); "
                             f"rerun with the original settings, or --output a new file")

    def _open_parts(self, attrs: dict) -> None:
        meta = read_meta(self.parts)
        self._diff(meta, attrs)
        self.header["attrs"] = {**meta["attrs"], **{k: v for k, v in attrs.items() if k not in IDENTITY_KEYS}}
        for stray in self.parts.glob(".*.tmp"):  # a part whose write was cut off: never committed
            stray.unlink(missing_ok=True)
        files = list_parts(self.parts)
        for f in files:
            self._rows.extend(_read_part_rows(f))
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

    def append(self, rows: list[dict], acts: dict[str, np.ndarray], spans: dict[str, np.ndarray]) -> None:
        """Commit one batch: ``rows`` (dicts with the row-table columns), ``acts[position]`` of shape
        ``[b, n_layers, d_model]`` and ``spans[position]`` of shape ``[b, 2]``; durable when this returns."""
        if self._closed:
            raise StoreError("the store writer is closed")
        if self._finished_before:
            raise StoreError(f"{self.path} is already complete; cache into a new --output to add rows")
        b = len(rows)
        if b == 0:
            return
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
            cid = _as_str(r.get("continuation_id"))
            if not cid:
                raise StoreError(f"row without a continuation_id: {r!r}")
            if cid in self._done or cid in ids:
                raise StoreError(f"continuation {cid!r} is already in the store")
            ids.append(cid)
        unknown = set().union(*(set(r) for r in rows)) - set(COLUMNS)
        if unknown:
            raise StoreError(f"unknown row columns {sorted(unknown)}; the store's columns are {list(COLUMNS)}")
        for r in rows:
            _as_correct(r.get("correct"))
        clean = [{c: (r.get(c) if not isinstance(r.get(c), tuple) else list(r.get(c))) for c in COLUMNS if c in r}  # type: ignore[arg-type]
                 for r in rows]
        arrays["rows"] = np.frombuffer(json.dumps(clean, default=str).encode("utf-8"), dtype=np.uint8)
        name = self.parts / f"part-{self._n_parts:06d}.npz"
        _atomic_write_bytes(name, lambda f: np.savez(f, **arrays))  # type: ignore[arg-type]
        self._n_parts += 1
        self._rows.extend(clean)
        self._done.update(ids)

    def set_attr(self, key: str, value: Any) -> None:
        """Record an extra attribute (e.g. timing); written into the store at :meth:`finish`."""
        self.header["attrs"][key] = _clean_attrs({key: value})[key]  # type: ignore[index]

    def finish(self) -> None:
        """Assemble the parts into the final HDF5 file (atomic rename), mark it complete, close."""
        if self._closed:
            return
        if not self._finished_before:
            _atomic_write_bytes(self.parts / META, lambda f: f.write(json.dumps(self.header).encode()))
            publish_h5(self.path, self.header, self.n_rows, iter_parts(self.parts, self.positions))
            shutil.rmtree(self.parts, ignore_errors=True)
        self.close()

    def close(self) -> None:
        if not self._closed:
            self._closed = True
            if not self._finished_before and self.parts.exists():  # keep attrs set so far for a resume
                _atomic_write_bytes(self.parts / META, lambda f: f.write(json.dumps(self.header).encode()))

    def __enter__(self) -> StoreWriter:
        return self

    def __exit__(self, exc_type, exc, tb) -> None:
        # leaving the block normally does NOT mark the store complete: call finish() for that
        self.close()


def read_meta(parts: Path) -> dict:
    try:
        meta = json.loads((parts / META).read_text(encoding="utf-8"))
    except FileNotFoundError:
        raise StoreError(f"{parts} holds no {META} (not an unfinished activation store); delete it to start over") from None
    except (ValueError, UnicodeDecodeError) as e:
        raise StoreError(f"{parts / META} is damaged ({e}); delete {parts} to start over") from None
    if not isinstance(meta, dict) or meta.get("kind") != KIND or "layers" not in meta:
        raise StoreError(f"{parts / META} is not an activation store header; delete {parts} to start over")
    return meta


def list_parts(parts: Path) -> list[Path]:
    found = sorted((int(m.group(1)), p) for p in parts.iterdir() if (m := _PART.match(p.name)))
    for want, (have, p) in enumerate(found):
        if want != have:
            raise StoreError(f"{parts}: part {want:06d} is missing (found {p.name}); the store was edited by hand; "
                             f"delete {parts} to start over")
    return [p for _, p in found]


def _load_npz(path: Path):
    try:
        return np.load(path, allow_pickle=False)
    except Exception as e:  # noqa: BLE001 - a damaged part file, whatever numpy raises
        raise StoreError(f"{path} is damaged ({type(e).__name__}: {e}); delete it to recompute its rows with "
                         f"--resume") from None


def _read_part_rows(path: Path) -> list[dict]:
    with _load_npz(path) as z:
        try:
            return json.loads(z["rows"].tobytes().decode("utf-8"))
        except Exception as e:  # noqa: BLE001
            raise StoreError(f"{path} is damaged ({e}); delete it to recompute its rows with --resume") from None


def iter_parts(parts: Path, positions: list[str]) -> Iterator[Block]:
    """Yield ``(rows, acts, spans)`` per committed part, in commit order, one part in memory at a time."""
    for path in list_parts(parts):
        with _load_npz(path) as z:
            rows = json.loads(z["rows"].tobytes().decode("utf-8"))
            yield rows, {p: z[f"acts/{p}"] for p in positions}, {p: z[f"spans/{p}"] for p in positions}


# ---------------------------------------------------------------------------------------------------------
# reading
# ---------------------------------------------------------------------------------------------------------
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


def _damaged(path: Path, e: BaseException) -> StoreError:
    return StoreError(f"{path} is damaged or truncated ({type(e).__name__}: {str(e).splitlines()[0] if str(e) else ''}); "
                      f"re-cache it with python -m activations.cache RUN_DIR")


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
        """The row table as a pandas DataFrame ("" -> None, correct -1 -> None; ``question_key`` falls back to
        ``question_id`` for rows cached before question keys existed; ``memberships`` parsed from JSON)."""
        if self._rows is None:
            import pandas as pd

            n = self.n_rows
            try:
                g = self._f["rows"]
                data = {}
                for c in STR_COLUMNS:
                    vals = [(_as_str(x) or None) for x in g[c][:n]] if c in g else [None] * n
                    data[c] = pd.Series(vals, dtype=object)  # object: missing stays None (pandas 3 would make NaN)
                data["question_key"] = pd.Series([k if k is not None else q for k, q in
                                                  zip(data["question_key"], data["question_id"])], dtype=object)
                data["memberships"] = pd.Series([json.loads(m) if m else None for m in data["memberships"]],
                                                dtype=object)
                corr = g["correct"][:n] if "correct" in g else np.full(n, -1, np.int8)
                data["correct"] = pd.Series([None if x < 0 else bool(x) for x in corr], dtype=object)
                for c in ("input_tokens", "source_index", "line_index", "n_lines"):  # -1: absent (older stores)
                    data[c] = g[c][:n].astype(np.int64) if c in g else np.full(n, -1, np.int64)
            except (OSError, KeyError, ValueError) as e:
                raise _damaged(self.path, e) from None
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
        except (OSError, KeyError, ValueError) as e:
            raise _damaged(self.path, e) from None

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
    h5py = _h5py()
    parts = parts_dir(path)
    meta = read_meta(parts)
    n = sum(len(_read_part_rows(p)) for p in list_parts(parts))
    f = h5py.File(f"{path}.in-memory-{id(meta)}", "w", driver="core", backing_store=False)
    try:
        write_h5(f, meta, n, iter_parts(parts, list(meta["positions"])), complete=False)
        return ActivationStore(f, path)
    except BaseException:
        f.close()
        raise


def open_store(path: str | os.PathLike, *, allow_incomplete: bool = False) -> ActivationStore:
    """Open an activation store for reading; refuses incomplete stores unless ``allow_incomplete``."""
    h5py = _h5py()
    path = Path(path)
    if not path.is_file():
        parts = parts_dir(path)
        if parts.is_dir():
            if not allow_incomplete:
                try:
                    n = sum(len(_read_part_rows(p)) for p in list_parts(parts))
                except StoreError:
                    n = "some"  # type: ignore[assignment]
                raise StoreError(f"{path} is incomplete ({n} rows written before it stopped); {RESUME_HINT} "
                                 f"(or open_store(..., allow_incomplete=True) to read the rows so far)")
            return _open_parts_in_memory(path)
        if path.is_dir():
            raise StoreError(f"{path} is a directory, not an activation store (.h5 file)")
        raise StoreError(f"no activation store at {path}; create one with: python -m activations.cache RUN_DIR")
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
        return ActivationStore(f, path)
    except StoreError:
        f.close()
        raise
    except (OSError, KeyError, ValueError) as e:
        f.close()
        raise _damaged(path, e) from None


def is_complete(path: str | os.PathLike) -> bool:
    """True when ``path`` is a finished, readable activation store."""
    try:
        with open_store(path):
            return True
    except StoreError:
        return False


__all__ = ["SCHEMA_VERSION", "StoreError", "StoreWriter", "ActivationStore", "open_store", "is_complete",
           "COLUMNS", "parts_dir", "publish_h5", "write_h5"]
