"""Steering directions per layer, in raw residual-stream coordinates, and their HDF5 file.

``directions.h5`` (``kind="probe_directions"``, ``schema_version=1``)::

    attrs   layers (int array), target, position, d_model, store (JSON: the activation store's path and
            provenance attributes), fitted_on (text), conventions (text), n_directions, selected_layer (the
            layer nested CV chose most often for the logistic probe, ties -> earlier) + selected_layer_method
    /layer_{L}/logistic   float32 [d]  C-vs-non-C logistic normal, raw coordinates (StandardScaler and PCA
                                       undone: w_raw = PCA^T w / scale), unit norm, pointing toward non-C
    /layer_{L}/mass_mean  float32 [d]  mean(non-C) - mean(C), unit norm
    /layer_{L}/basis      float32 [k, d] orthonormal rows: logistic; mass_mean orthogonalised against it;
                                       then top principal components of within-class variation, each
                                       orthogonalised against the rows before (k <= n_directions)
    /layer_{L} attrs      resid_norm (mean L2 norm of the layer's activations over the fitted rows), names
                          (basis row names), logistic_C, n_rows, n_C, n_nonC, cos_logistic_mass_mean

The directions are fitted on ALL labelled rows (no held-out split): they are for steering, not scored; the
cross-validated scores in ``results.json`` say how well such directions decode the label.

Reading needs only numpy and h5py: :func:`load_directions` and :func:`load_direction_info` are the
steering stage's API.
"""
from __future__ import annotations

import json
import os
from pathlib import Path

import numpy as np

from probes.data import ProbeError

SCHEMA_VERSION = 1
KIND = "probe_directions"
FILENAME = "directions.h5"
FITTED_ON = ("all labelled rows used by the probes (no held-out split): for steering, not for scoring; "
             "see results.json for cross-validated accuracy")
CONVENTIONS = ("raw residual-stream coordinates (scaler/PCA undone), unit norm; logistic and mass_mean point "
               "from C toward non-C (toward the correct answer); basis rows orthonormal")


def _orthonormalise(rows: list[np.ndarray], names: list[str], tol: float = 1e-6):
    """Gram-Schmidt (twice, for stability) keeping rows that are not (near) dependent on the ones before."""
    basis, kept = [], []
    for v, n in zip(rows, names):
        v = np.asarray(v, dtype=np.float64).copy()
        n0 = np.linalg.norm(v)
        if n0 == 0 or not np.isfinite(n0):
            continue
        for _ in range(2):
            for b in basis:
                v -= (b @ v) * b
        nv = np.linalg.norm(v)
        if nv <= tol * n0:
            continue
        basis.append(v / nv)
        kept.append(n)
    return np.array(basis), kept


def _unit(v):
    v = np.asarray(v, dtype=np.float64)
    n = np.linalg.norm(v)
    return v / n if n > 0 else v


def _sign_fix(v):
    """Deterministic sign: the largest-magnitude component positive."""
    return v if v[np.argmax(np.abs(v))] >= 0 else -v


def within_class_pcs(X, y, k: int, seed: int = 0) -> np.ndarray:
    """Top ``k`` principal directions [k, d] of ``X`` minus its class means."""
    X = np.asarray(X, dtype=np.float64)
    Xc = X.copy()
    for c in np.unique(y):
        Xc[y == c] -= X[y == c].mean(axis=0)
    k = max(0, min(k, *Xc.shape))
    if k == 0:
        return np.zeros((0, X.shape[1]))
    if min(Xc.shape) > 500:
        from sklearn.utils.extmath import randomized_svd

        _, _, vt = randomized_svd(Xc, n_components=k, random_state=seed)
    else:
        _, _, vt = np.linalg.svd(Xc, full_matrices=False)
    return np.array([_sign_fix(v) for v in vt[:k]])


def fit_directions(X, y_c, groups=None, *, n_directions: int = 8, pca: int | None = None, seed: int = 0,
                   inner_folds: int = 3, Cs=None) -> dict:
    """Directions for one layer from ``X`` [n, d] (raw activations) and ``y_c`` (1 = C, 0 = non-C).

    The logistic probe is the same pipeline the CV scores (scaler, optional PCA, ``LogisticProbe`` with C
    chosen by inner grouped CV), fitted on all rows. Returns ``{"logistic", "mass_mean", "basis", "names",
    "resid_norm", "logistic_C", "n_rows", "n_C", "n_nonC", "cos_logistic_mass_mean"}``.
    """
    from probes.cv import pipeline_for
    from probes.estimators import raw_direction

    X = np.asarray(X, dtype=np.float64)
    y_c = np.asarray(y_c).astype(np.int64)
    if len(np.unique(y_c)) < 2:
        raise ProbeError("directions need both C and non-C rows")
    kw = {} if Cs is None else {"Cs": tuple(Cs)}
    pipe = pipeline_for("logistic", X.shape[0], X.shape[1], pca=pca, seed=seed, inner_folds=inner_folds, **kw)
    pipe.fit(X, y_c, probe__groups=groups)
    probe = pipe.named_steps["probe"]
    w = raw_direction(pipe)  # gradient of the C logit in raw coordinates
    if list(probe.classes_) == [0, 1]:
        w = -w  # point toward non-C
    logistic = _unit(w)
    mass = _unit(X[y_c == 0].mean(axis=0) - X[y_c == 1].mean(axis=0))
    n_pc = max(0, int(n_directions) - 2) + 2  # a couple spare, in case some are dependent
    pcs = within_class_pcs(X, y_c, n_pc, seed)
    cand = [logistic, mass] + list(pcs)
    cand_names = ["logistic", "mass_mean_orth"] + [f"within_pc{i + 1}" for i in range(len(pcs))]
    basis, names = _orthonormalise(cand, cand_names)
    basis, names = basis[: int(n_directions)], names[: int(n_directions)]
    return {
        "logistic": logistic.astype(np.float32),
        "mass_mean": mass.astype(np.float32),
        "basis": basis.astype(np.float32),
        "names": names,
        "resid_norm": float(np.linalg.norm(X, axis=1).mean()),
        "logistic_C": float(probe.C_),
        "n_rows": int(len(y_c)),
        "n_C": int(np.sum(y_c == 1)),
        "n_nonC": int(np.sum(y_c == 0)),
        "cos_logistic_mass_mean": float(logistic @ mass),
    }


def write_directions(path, per_layer: dict[int, dict], *, target: str, position: str, store: dict,
                     n_directions: int, selected_layer: int | None = None, selected_layer_method: str = "") -> Path:
    """Write ``directions.h5`` (see the module docstring) from :func:`fit_directions` results per layer."""
    import h5py

    path = Path(path)
    layers = sorted(per_layer)
    with h5py.File(path, "w") as f:
        f.attrs["schema_version"] = SCHEMA_VERSION
        f.attrs["kind"] = KIND
        f.attrs["layers"] = np.asarray(layers, dtype=np.int64)
        f.attrs["target"] = target
        f.attrs["position"] = position
        f.attrs["store"] = json.dumps(store, sort_keys=True, default=str)
        f.attrs["fitted_on"] = FITTED_ON
        f.attrs["conventions"] = CONVENTIONS
        f.attrs["n_directions"] = int(n_directions)
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
            for k in ("resid_norm", "logistic_C", "n_rows", "n_C", "n_nonC", "cos_logistic_mass_mean"):
                g.attrs[k] = r[k]
            d_model = len(r["logistic"])
        f.attrs["d_model"] = int(d_model or 0)
    return path


def _resolve(path) -> Path:
    p = Path(path)
    if p.is_dir():
        p = p / FILENAME
    if not p.is_file():
        raise ProbeError(f"no probe directions at {p}; create them with: python -m probes.train STORE")
    return p


def _open_layer(path, layer):
    import h5py

    p = _resolve(path)
    f = h5py.File(p, "r")
    if str(f.attrs.get("kind", "")) != KIND:
        f.close()
        raise ProbeError(f"{p} is not a probe directions file (kind={f.attrs.get('kind')!r})")
    layers = [int(x) for x in f.attrs["layers"]]
    try:
        L = int(layer)
    except (TypeError, ValueError):
        L = None
    if L not in layers:
        f.close()
        raise ProbeError(f"no directions for layer {layer!r} in {p}; available layers: {layers}")
    return f, f[f"layer_{L}"]


def load_directions(path: str | os.PathLike, layer: int) -> np.ndarray:
    """The orthonormal steering basis of ``layer``: float32 ``[k, d_model]`` (row 0 the logistic direction,
    row 1 mass-mean orthogonalised, then within-class PCs; all pointing from C toward non-C where signed).
    ``path`` is a probes output directory or its ``directions.h5``."""
    f, g = _open_layer(path, layer)
    try:
        return np.asarray(g["basis"][()], dtype=np.float32)
    finally:
        f.close()


def load_direction_info(path: str | os.PathLike, layer: int) -> dict:
    """``{"resid_norm", "names", "logistic", "mass_mean", "basis", ...attrs}`` for ``layer``."""
    f, g = _open_layer(path, layer)
    try:
        out = {k: (v.item() if isinstance(v, np.generic) else v) for k, v in g.attrs.items()}
        out["names"] = [x.decode() if isinstance(x, bytes) else str(x) for x in g.attrs["names"]]
        out["resid_norm"] = float(g.attrs["resid_norm"])
        out["logistic"] = np.asarray(g["logistic"][()], dtype=np.float32)
        out["mass_mean"] = np.asarray(g["mass_mean"][()], dtype=np.float32)
        out["basis"] = np.asarray(g["basis"][()], dtype=np.float32)
        out["layer"] = int(layer)
        out["target"] = str(f.attrs.get("target", ""))
        out["position"] = str(f.attrs.get("position", ""))
        return out
    finally:
        f.close()
