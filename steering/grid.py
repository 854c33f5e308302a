"""python -m steering.sweep RUN_DIR --directions RUN_DIR/probes  (this module: the grid of settings)

The sweep's grid: one :class:`Setting` per (layer, k, alpha, basis) - the probe basis, norm-matched random
orthonormal bases (one per seed), and an unsteered alpha-0 rerun - and the per-setting steering vector
(:func:`setting_vector`, dose-matched through :func:`steering.hooks.combine_directions`).

Directions are read through their one home, :func:`probes.directions.read_directions`;
:func:`load_directions` adds the sweep's own checks (finite bases, named layers present) and turns the
reader's errors into :class:`~steering.config.SweepError`.
"""
from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from steering.config import SweepError


@dataclass
class Directions:
    """What the sweep needs from ``directions.h5`` (a view of :class:`probes.directions.DirectionSet`)."""

    path: str
    layers: list[int]
    bases: dict[int, np.ndarray]  # layer -> [k_max, d_model]
    resid_norm: dict[int, float | None]
    selected_layer: int | None
    sha256: str
    attrs: dict[str, Any] = field(default_factory=dict)

    def fit_split(self) -> dict[str, Any] | None:
        """The question split the probes recorded (questions the directions were fitted on, and held out),
        or None when the file does not record one. Keys: ``fit`` and/or ``held_out`` (lists of question keys
        or ids), ``key`` (what the lists hold)."""
        a = self.attrs
        out: dict[str, Any] = {}
        for name, keys in (("fit", ("fit_question_keys", "fitted_question_keys", "fit_questions",
                                    "fitted_questions", "fit_question_ids")),
                           ("held_out", ("held_out_question_keys", "heldout_question_keys", "held_out_questions",
                                         "heldout_questions", "held_out_question_ids"))):
            for k in keys:
                if k in a and a[k] is not None:
                    v = a[k]
                    if isinstance(v, (str, bytes)):
                        try:
                            v = json.loads(v)
                        except ValueError:
                            v = [x for x in str(v).splitlines() if x.strip()]
                    if isinstance(v, dict):  # {"fit": [...], "held_out": [...]}
                        for kk in ("fit", "held_out"):
                            if kk in v:
                                out[kk] = [str(x) for x in v[kk]]
                    else:
                        out[name] = [str(x.decode() if isinstance(x, bytes) else x) for x in np.atleast_1d(v)]
                    break
        split = a.get("question_split")
        if isinstance(split, (str, bytes)):
            try:
                d = json.loads(split)
                for kk in ("fit", "held_out"):
                    if kk in d:
                        out[kk] = [str(x) for x in d[kk]]
            except ValueError:
                pass
        return out or None


def _attr(obj: Any, *names: str, default: Any = None) -> Any:
    for n in names:
        if isinstance(obj, dict) and n in obj:
            return obj[n]
        if hasattr(obj, n):
            return getattr(obj, n)
    return default


def load_directions(path: str | Path) -> Directions:
    """Read ``directions.h5`` (a probes output directory or the file) through the probes reader."""
    p = Path(path)
    f = p / "directions.h5" if p.is_dir() else p
    if not f.is_file():
        raise SweepError(f"no directions file at {str(f)!r}; run python -m probes.train first or pass "
                         "--directions PROBES_DIR")
    from probes.data import ProbeError
    from probes.directions import read_directions

    try:
        ds = read_directions(f)
    except ProbeError as e:
        raise SweepError(str(e).splitlines()[0]) from None
    except (OSError, KeyError, ValueError, TypeError) as e:  # anything h5py raises that the reader let through
        msg = str(e).splitlines()[0] if str(e) else type(e).__name__
        raise SweepError(f"cannot read directions file {str(f)!r} ({msg}); re-run python -m probes.train") from None
    layers = [int(x) for x in _attr(ds, "layers", default=[])]
    raw_bases = _attr(ds, "bases", "basis", default={})
    bases = {int(L): np.asarray(raw_bases[L], dtype=np.float32) for L in layers}
    raw_norms = _attr(ds, "resid_norm", "resid_norms", default={}) or {}
    norms = {int(L): (float(raw_norms[L]) if raw_norms.get(L) is not None else None) for L in layers}
    sel = _attr(ds, "selected_layer")
    attrs = dict(_attr(ds, "attrs", default={}) or {})
    sha = _attr(ds, "sha256", "file_sha256", default="") or ""
    out = Directions(str(f), layers, bases, norms, int(sel) if sel is not None else None, str(sha), attrs)
    if not out.layers:
        raise SweepError(f"{out.path} holds no layers; re-run python -m probes.train")
    for L, b in out.bases.items():
        if b.ndim != 2 or b.shape[0] < 1:
            raise SweepError(f"{out.path}: layer {L}'s basis has shape {tuple(b.shape)}, expected [k, d_model]")
        if not np.all(np.isfinite(b)):
            raise SweepError(f"{out.path}: layer {L}'s basis holds NaN or inf values; re-run python -m probes.train")
        if np.any(np.linalg.norm(b, axis=1) == 0):
            raise SweepError(f"{out.path}: layer {L}'s basis has an all-zero direction; re-run python -m probes.train")
        rn = out.resid_norm.get(L)
        if rn is not None and not (np.isfinite(rn) and rn > 0):
            raise SweepError(f"{out.path}: layer {L}'s resid_norm is {rn}; re-run python -m probes.train")
    return out


def random_basis(k: int, d: int, seed: int) -> np.ndarray:
    """A random orthonormal basis [k, d] (QR of a Gaussian matrix), reproducible from ``seed``."""
    rng = np.random.default_rng(seed)
    q, r = np.linalg.qr(rng.standard_normal((d, k)))
    q = q * np.sign(np.diag(r))[None, :]
    return q.T.astype(np.float32)


@dataclass(frozen=True)
class Setting:
    key: str
    basis: str  # probe | random | none
    layer: int | None
    k: int
    alpha_rel: float
    alpha: float  # absolute (residual units)
    seed: int | None = None


def make_grid(layers: Sequence[int], ks: Sequence[int], alphas: Sequence[float], controls: Sequence[str],
              seeds: int, resid_norm: dict[int, float]) -> list[Setting]:
    """Every setting: the alpha-0 rerun (control ``none``), then per layer x k x alpha the probe basis and
    ``seeds`` random bases (control ``random``)."""
    grid = []
    if "none" in controls:
        grid.append(Setting("none|alpha0", "none", None, 0, 0.0, 0.0))
    for L in layers:
        for k in ks:
            for a in alphas:
                aa = float(a) * float(resid_norm[L])
                grid.append(Setting(f"L{L}|k{k}|a{a:g}|probe", "probe", L, k, float(a), aa))
                if "random" in controls:
                    for s in range(seeds):
                        grid.append(Setting(f"L{L}|k{k}|a{a:g}|random{s}", "random", L, k, float(a), aa, s))
    return grid


def setting_vector(s: Setting, dirs: Directions, dose: str, d: int) -> np.ndarray:
    """The combined steering vector [d_model] of a setting (zeros for the alpha-0 rerun)."""
    from steering.hooks import combine_directions

    if s.basis == "none":
        return np.zeros(d, dtype=np.float32)
    assert s.layer is not None
    if s.basis == "probe":
        basis = dirs.bases[s.layer][: s.k]
    else:
        basis = random_basis(s.k, d, seed=1_000_003 * ((s.seed or 0) + 1) + 1009 * s.layer + s.k)
        # norm-matched: same row norms as the probe basis (unit rows for orthonormal probes)
        basis = basis * np.linalg.norm(dirs.bases[s.layer][: s.k], axis=1)[:, None]
    return combine_directions(basis, dose).numpy()


__all__ = ["Directions", "Setting", "load_directions", "make_grid", "random_basis", "setting_vector"]
