"""The one reader (and writer) of ``directions.h5``: steering directions per layer, in raw residual-stream
coordinates.

    from probes.directions import read_directions
    ds = read_directions("runs/demo/probes")          # a probes output directory or its directions.h5
    ds.bases[ds.selected_layer]                       # float32 [k, d_model], orthonormal rows
    ds.question_split                                 # {"fit": [...], "held_out": [...], ...} or None

:class:`Directions` is the one type of the directions (``DirectionSet`` is its deprecated old name).

``directions.h5`` (``kind="probe_directions"``, ``schema_version=1``)::

    attrs   layers (int array), target, position, d_model, store (JSON: the activation store's path and
            provenance attributes), fitted_on (text), conventions (text), n_directions, selected_layer (the
            layer nested CV chose most often for the logistic probe, ties -> earlier) + selected_layer_method,
            layer_module (decoder-layer module path, e.g. "model.layers", when the store recorded it),
            question_split (JSON, only with ``--steer-holdout``: ``{"held_out": [question keys], "fit": [...],
            "key": "question_key", "fraction": f}``; the steering stage steers only the held-out questions)
    /layer_{L}/logistic   float32 [d]  C-vs-non-C logistic normal, raw coordinates (StandardScaler and PCA
                                       undone: w_raw = PCA^T w / scale), unit norm, pointing toward non-C
    /layer_{L}/mass_mean  float32 [d]  mean(non-C) - mean(C), unit norm
    /layer_{L}/basis      float32 [k, d] orthonormal rows: logistic; mass_mean orthogonalised against it;
                                       then top principal components of within-class variation, each
                                       orthogonalised against the rows before (k <= n_directions)
    /layer_{L}/basis_m2   float32 [k, d] the paper's M2 basis: mean difference (toward non-C), then within-C
                                       principal axes with it projected out (probes.fit.direction_fit.m2_basis)
    /layer_{L}/basis_probe_pc float32 [k, d] the paper's probe basis: the logistic direction, then principal
                                       components with it projected out (probes.fit.direction_fit.probe_pc_basis)
    /layer_{L} attrs      resid_norm (mean L2 norm of the layer's activations over the fitted rows), names
                          (basis row names), names_m2, names_probe_pc, logistic_C, n_rows, n_C, n_nonC,
                          cos_logistic_mass_mean

The two paper bases are optional (files written before them hold only ``basis``):
:meth:`Directions.named_basis` reads any of :data:`BASES` and says how to get a missing one.

The directions are fitted on the labelled rows passed to the probes stage (for steering, not scored); the
cross-validated scores in ``results.json`` say how well such directions decode the label. Reading needs
only numpy and h5py. Every problem with the file (missing, truncated, corrupt, not a directions file, a
listed layer missing, non-finite bases) is a :class:`ProbeError` with a one-line message naming the file
and the fix.
"""
from __future__ import annotations

import json
import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from loadbearing.files import atomic_write_bytes, file_sha256
from loadbearing.runs import DIRECTIONS
from probes.data import ProbeError
from probes.provenance import StoreProvenance

SCHEMA_VERSION = 1
KIND = "probe_directions"
FILENAME = DIRECTIONS
FITTED_ON = ("all labelled rows used by the probes (no held-out split): for steering, not for scoring; "
             "see results.json for cross-validated accuracy")
CONVENTIONS = ("raw residual-stream coordinates (scaler/PCA undone), unit norm; logistic and mass_mean point "
               "from C toward non-C (toward the correct answer); basis rows orthonormal")
# store attribute names under which the activations stage may record the decoder-layer module path
LAYER_MODULE_KEYS = ("layer_module", "layer_module_path", "layers_path", "decoder_layers_path", "decoder_layers")
REMAKE = "re-create it with: python -m probes.train STORE --output-dir NEW_DIR"
#: the bases a directions file may hold: the toolkit's ``basis`` and the paper's two (``m2``, ``probe_pc``)
BASES = ("basis", "m2", "probe_pc")


def _span(layers: list[int]) -> str:
    """``[0, 1, 2, 3]`` -> ``"0..3 (4)"``; a short list as it is."""
    if len(layers) > 4 and list(layers) == list(range(layers[0], layers[-1] + 1)):
        return f"{layers[0]}..{layers[-1]} ({len(layers)})"
    return str(list(layers))


@dataclass(frozen=True)
class Directions:
    """Everything ``directions.h5`` holds, read once (see the module docstring for the meaning of each part)."""

    path: str
    sha256: str
    layers: list[int]
    bases: dict[int, np.ndarray]  # layer -> float32 [k, d_model], orthonormal rows
    names: dict[int, list[str]]  # layer -> basis row names
    resid_norm: dict[int, float | None]  # layer -> mean L2 norm of the layer's activations
    selected_layer: int | None
    selected_layer_method: str = ""
    logistic: dict[int, np.ndarray] = field(default_factory=dict)  # layer -> float32 [d_model]
    mass_mean: dict[int, np.ndarray] = field(default_factory=dict)  # layer -> float32 [d_model]
    layer_attrs: dict[int, dict[str, Any]] = field(default_factory=dict)  # layer -> group attrs
    attrs: dict[str, Any] = field(default_factory=dict)  # file attrs (store and question_split parsed from JSON)
    question_split: dict[str, Any] | None = None  # the ``question_split`` attr (None when the file records none)
    #: the paper's bases: name ("m2", "probe_pc") -> layer -> float32 [k, d_model]; their row names likewise
    extra_bases: dict[str, dict[int, np.ndarray]] = field(default_factory=dict)
    extra_names: dict[str, dict[int, list[str]]] = field(default_factory=dict)

    def __repr__(self) -> str:
        """One short line (the arrays stay out of it: a 31-layer file's default repr ran to 720,642 characters)."""
        ks = sorted({int(b.shape[0]) for b in self.bases.values()})
        split = self.fit_split() or {}
        return (f"Directions({self.path!r}, layers={_span(self.layers)}, d_model={self.d_model}, "
                f"k={'/'.join(map(str, ks)) or 0}, selected_layer={self.selected_layer}, "
                f"probes={[n for n in ('logistic', 'mass_mean') if getattr(self, n)]}, "
                f"extra_bases={sorted(self.extra_bases)}, fit_questions={len(split.get('fit', []))}, "
                f"held_out_questions={len(split.get('held_out', []))}, sha256={self.sha256[:12]}...)")

    def fit_split(self) -> dict[str, list[str]] | None:
        """The ``fit`` and ``held_out`` question lists of :attr:`question_split` (those present), or None when
        the file records neither."""
        qs = self.question_split or {}
        out: dict[str, list[str]] = {k: [str(x) for x in qs[k]] for k in ("fit", "held_out") if k in qs}
        return out or None

    @property
    def provenance(self) -> StoreProvenance:
        """The activation store these directions were fitted from (:class:`StoreProvenance`)."""
        store = self.attrs.get("store")
        if isinstance(store, (bytes, str)):
            try:
                store = json.loads(store)
            except ValueError:
                store = None
        return StoreProvenance(store if isinstance(store, dict) else None)

    @property
    def d_model(self) -> int:
        return int(next(iter(self.bases.values())).shape[1]) if self.bases else int(self.attrs.get("d_model", 0))

    @property
    def layer_module(self) -> str | None:
        """Decoder-layer module path the hidden-states indices refer to (None when not recorded)."""
        v = self.attrs.get("layer_module")
        return str(v) if v else None

    def basis(self, layer: int, k: int | None = None) -> np.ndarray:
        """The first ``k`` (default all) basis rows of ``layer``; unknown layer or k too large -> ProbeError."""
        L = _as_layer(layer)
        if L not in self.bases:
            raise ProbeError(f"no directions for layer {layer!r} in {self.path}; available layers: {self.layers}")
        b = self.bases[L]
        if k is not None and not 1 <= int(k) <= len(b):
            raise ProbeError(f"k={k} directions asked for layer {L} but {self.path} has {len(b)} there; "
                             f"use k between 1 and {len(b)}")
        return b if k is None else b[: int(k)]

    def named_basis(self, name: str, layer: int, k: int | None = None) -> np.ndarray:
        """The first ``k`` (default all) rows of basis ``name`` (one of :data:`BASES`) at ``layer``; a basis the
        file does not hold, or too few rows -> ProbeError naming the fix."""
        if name == "basis":
            return self.basis(layer, k)
        if name not in BASES:
            raise ProbeError(f"unknown basis {name!r}; choose one of {', '.join(BASES)}")
        L = _as_layer(layer)
        got = self.extra_bases.get(name, {})
        if L not in got:
            raise ProbeError(f"{self.path} holds no {name} basis for layer {layer!r} (written before the paper's bases "
                             f"were stored); {REMAKE}")
        b = got[L]
        if k is not None and not 1 <= int(k) <= len(b):
            raise ProbeError(f"k={k} directions asked of the {name} basis at layer {L} but {self.path} has {len(b)} "
                             f"there; use k between 1 and {len(b)}")
        return b if k is None else b[: int(k)]

    def info(self, layer: int) -> dict[str, Any]:
        """``{"resid_norm", "names", "logistic", "mass_mean", "basis", "layer", "target", "position", ...}``."""
        b = self.basis(layer)
        L = int(layer)
        return {**self.layer_attrs.get(L, {}), "names": list(self.names[L]), "resid_norm": self.resid_norm[L],
                "logistic": self.logistic.get(L), "mass_mean": self.mass_mean.get(L), "basis": b, "layer": L,
                "target": str(self.attrs.get("target", "")), "position": str(self.attrs.get("position", ""))}


def _as_layer(layer: Any) -> int | None:
    try:
        return int(layer)
    except (TypeError, ValueError):
        return None


def resolve_path(path: str | os.PathLike) -> Path:
    """``path`` itself, or ``path/directions.h5`` for a directory; missing -> ProbeError with the fix."""
    p = Path(path)
    if p.is_dir():
        p = p / FILENAME
    if not p.is_file():
        raise ProbeError(f"no probe directions at {p}; create them with: python -m probes.train STORE "
                         f"(and pass its output directory)")
    return p


def _plain(v: Any) -> Any:
    if isinstance(v, bytes):
        return v.decode("utf-8", "replace")
    if isinstance(v, np.generic):
        return v.item()
    if isinstance(v, np.ndarray):
        return [_plain(x) for x in v.tolist()]
    return v


def _read(p: Path) -> Directions:
    import h5py  # deferred: h5py is heavy to import

    with h5py.File(p, "r") as h:
        kind = h.attrs.get("kind")
        if kind is not None and str(_plain(kind)) != KIND:
            raise ProbeError(f"{p} is not a probe directions file (kind={_plain(kind)!r}); pass the probes output "
                             f"directory written by python -m probes.train")
        attrs = {k: _plain(v) for k, v in h.attrs.items()}
        for key in ("store", "question_split"):
            if isinstance(attrs.get(key), str):
                try:
                    attrs[key] = json.loads(attrs[key])
                except ValueError:
                    pass
        split = attrs.get("question_split")
        if split is not None and not isinstance(split, dict):
            raise ProbeError(f"{p}: the question_split attribute is not a JSON object ({str(split)[:40]!r}); {REMAKE}")
        layers = [int(x) for x in np.atleast_1d(h.attrs.get("layers", []))]
        if not layers:
            layers = sorted(int(k.split("_", 1)[1]) for k in h.keys() if k.startswith("layer_"))
        if not layers:
            raise ProbeError(f"{p} holds no layers; {REMAKE}")
        bases: dict[int, np.ndarray] = {}
        names: dict[int, list[str]] = {}
        norms: dict[int, float | None] = {}
        logi: dict[int, np.ndarray] = {}
        mass: dict[int, np.ndarray] = {}
        lattrs: dict[int, dict[str, Any]] = {}
        extra: dict[str, dict[int, np.ndarray]] = {}
        extra_names: dict[str, dict[int, list[str]]] = {}
        for L in layers:
            g = h.get(f"layer_{L}")
            if g is None or "basis" not in g:
                raise ProbeError(f"{p}: layer {L} is listed but /layer_{L}/basis is missing; {REMAKE}")
            b = np.asarray(g["basis"][()], dtype=np.float32)
            if b.ndim == 1:
                b = b[None, :]
            if b.ndim != 2 or b.shape[0] == 0:
                raise ProbeError(f"{p}: /layer_{L}/basis has shape {b.shape}, expected [k >= 1, d_model]; {REMAKE}")
            if not np.all(np.isfinite(b)):
                what = "all NaN" if np.all(np.isnan(b)) else "non-finite values"
                raise ProbeError(f"{p}: the layer {L} basis is {what} (a degenerate fit, e.g. constant "
                                 f"activations); {REMAKE} after checking the store")
            bases[L] = b
            la = {k: _plain(v) for k, v in g.attrs.items()}
            nm = la.pop("names", None)
            names[L] = [str(x) for x in (nm if isinstance(nm, list) else [])] or [f"dir{i}" for i in range(len(b))]
            rn = la.pop("resid_norm", None)
            norms[L] = float(rn) if rn is not None and np.isfinite(rn) else None
            lattrs[L] = la
            for ds_name, dst in (("logistic", logi), ("mass_mean", mass)):
                if ds_name in g:
                    dst[L] = np.asarray(g[ds_name][()], dtype=np.float32)
            for name in BASES[1:]:
                if f"basis_{name}" in g:
                    eb = np.asarray(g[f"basis_{name}"][()], dtype=np.float32).reshape(-1, b.shape[1])
                    if not np.all(np.isfinite(eb)):
                        raise ProbeError(f"{p}: the layer {L} {name} basis has non-finite values; {REMAKE}")
                    extra.setdefault(name, {})[L] = eb
                    en = la.pop(f"names_{name}", None)
                    extra_names.setdefault(name, {})[L] = ([str(x) for x in en] if isinstance(en, list)
                                                           else [f"{name}{i}" for i in range(len(eb))])
        sel = attrs.get("selected_layer")
    return Directions(path=str(p), sha256=file_sha256(p), layers=layers, bases=bases, names=names, resid_norm=norms,
                      selected_layer=int(sel) if sel is not None else None,
                      selected_layer_method=str(attrs.get("selected_layer_method", "")), logistic=logi,
                      mass_mean=mass, layer_attrs=lattrs, attrs=attrs, question_split=split, extra_bases=extra,
                      extra_names=extra_names)


#: Deprecated: the old name of :class:`Directions` (kept so that existing imports keep working).
DirectionSet = Directions


def read_directions(path: str | os.PathLike) -> Directions:
    """Read every layer of ``directions.h5`` (``path`` is the file or a probes output directory)."""
    p = resolve_path(path)
    try:
        return _read(p)
    except ProbeError:
        raise
    except (OSError, KeyError, ValueError, TypeError) as e:  # h5py: truncated / corrupt / half-written file
        why = str(e).splitlines()[0] if str(e) else type(e).__name__
        raise ProbeError(f"cannot read {p} as probe directions (truncated or corrupt HDF5: {why}); {REMAKE}") from None


def load_directions(path: str | os.PathLike, layer: int) -> np.ndarray:
    """The orthonormal steering basis of ``layer``: float32 ``[k, d_model]`` (row 0 the logistic direction,
    row 1 mass-mean orthogonalised, then within-class PCs; all pointing from C toward non-C where signed).
    A thin wrapper over :func:`read_directions`."""
    return read_directions(path).basis(layer)


def load_direction_info(path: str | os.PathLike, layer: int) -> dict[str, Any]:
    """``{"resid_norm", "names", "logistic", "mass_mean", "basis", "layer", ...attrs}`` for ``layer``."""
    return read_directions(path).info(layer)


def layer_module_from(store_attrs: dict[str, Any]) -> str | None:
    """The decoder-layer module path recorded by the activations stage, if any."""
    for k in LAYER_MODULE_KEYS:
        v = store_attrs.get(k)
        if isinstance(v, str) and v:
            return v
    return None


def write_directions(path: str | os.PathLike, per_layer: dict[int, dict], *, target: str, position: str,
                     store: dict, n_directions: int, selected_layer: int | None = None,
                     selected_layer_method: str = "", layer_module: str | None = None,
                     question_split: dict | None = None) -> Path:
    """Write ``directions.h5`` (see the module docstring) from :func:`probes.fit.direction_fit.fit_directions`
    results per layer. The file is built in memory (HDF5's core driver: the same bytes as a file on disk) and
    published through :func:`loadbearing.files.atomic_write_bytes` (a temporary file, renamed), so a crash
    never leaves a partial file."""
    import h5py  # deferred: h5py is heavy to import

    layers = sorted(per_layer)
    if layer_module is None:
        layer_module = layer_module_from(store.get("attrs", {}) if isinstance(store, dict) else {})

    f = h5py.File(f"{path}.in-memory-{id(per_layer)}", "w", driver="core", backing_store=False)
    try:
        f.attrs["schema_version"] = SCHEMA_VERSION
        f.attrs["kind"] = KIND
        f.attrs["layers"] = np.asarray(layers, dtype=np.int64)
        f.attrs["target"] = target
        f.attrs["position"] = position
        f.attrs["store"] = json.dumps(store, sort_keys=True, default=str)
        f.attrs["fitted_on"] = FITTED_ON
        f.attrs["conventions"] = CONVENTIONS
        f.attrs["n_directions"] = int(n_directions)
        if layer_module:
            f.attrs["layer_module"] = str(layer_module)
        if question_split:  # the steering stage steers only the held-out questions
            f.attrs["question_split"] = json.dumps(question_split)
        if selected_layer is not None:
            f.attrs["selected_layer"] = int(selected_layer)
            f.attrs["selected_layer_method"] = selected_layer_method
        d_model = None
        for L in layers:
            r = per_layer[L]
            g = f.create_group(f"layer_{L}")
            g.create_dataset("logistic", data=np.asarray(r["logistic"], np.float32))
            g.create_dataset("mass_mean", data=np.asarray(r["mass_mean"], np.float32))
            g.create_dataset("basis", data=np.asarray(r["basis"], np.float32))
            g.attrs["names"] = np.array(r["names"], dtype=h5py.string_dtype("utf-8"))
            for name in BASES[1:]:
                if f"basis_{name}" in r:
                    g.create_dataset(f"basis_{name}", data=np.asarray(r[f"basis_{name}"], np.float32))
                    g.attrs[f"names_{name}"] = np.array(r[f"names_{name}"], dtype=h5py.string_dtype("utf-8"))
            for k in ("resid_norm", "logistic_C", "n_rows", "n_C", "n_nonC", "cos_logistic_mass_mean"):
                if k in r:
                    g.attrs[k] = r[k]
            d_model = len(r["logistic"])
        f.attrs["d_model"] = int(d_model or 0)
        f.flush()
        image = f.id.get_file_image()
    finally:
        f.close()
    return atomic_write_bytes(path, image)


__all__ = ["BASES", "Directions", "DirectionSet", "FILENAME", "KIND", "SCHEMA_VERSION", "layer_module_from",
           "load_direction_info", "load_directions", "read_directions", "resolve_path", "write_directions"]
