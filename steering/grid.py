"""python -m steering.sweep RUN_DIR --directions RUN_DIR/probes  (this module: the grid of settings)

The sweep's grid: one :class:`Setting` per (layer, k, alpha, basis) - the probe basis, ``seeds`` random
settings (isotropic, and for k > 1 covariance-matched when the activations are available; each draws a fresh
direction per case, see :mod:`steering.controls`), and an unsteered alpha-0 rerun - and the probe setting's
steering vector (:func:`setting_vector`, dose-matched through :func:`steering.vectors.combine_directions`).

Directions are read through their one home, :func:`probes.directions.read_directions`, as a
:class:`probes.directions.Directions`; :func:`load_directions` adds the sweep's own checks (no all-zero
direction, positive residual norms) and turns the reader's errors into :class:`~steering.config.SweepError`.
"""
from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from probes.data import ProbeError
from probes.directions import Directions, read_directions
from steering.config import SweepError
from steering.vectors import combine_directions


def load_directions(path: str | Path) -> Directions:
    """Read ``directions.h5`` (a probes output directory or the file) through the probes reader and check
    what the sweep needs; every problem is a one-line :class:`SweepError`."""
    try:
        dirs = read_directions(path)
    except ProbeError as e:
        raise SweepError(str(e).splitlines()[0]) from None
    for L, b in dirs.bases.items():
        if np.any(np.linalg.norm(b, axis=1) == 0):
            raise SweepError(f"{dirs.path}: layer {L}'s basis has an all-zero direction; re-run python -m probes.train")
        rn = dirs.resid_norm.get(L)
        if rn is not None and not (np.isfinite(rn) and rn > 0):
            raise SweepError(f"{dirs.path}: layer {L}'s resid_norm is {rn}; re-run python -m probes.train")
    return dirs


def random_basis(k: int, d: int, seed: int) -> np.ndarray:
    """A random orthonormal basis [k, d] (QR of a Gaussian matrix), reproducible from ``seed``."""
    rng = np.random.default_rng(seed)
    q, r = np.linalg.qr(rng.standard_normal((d, k)))
    q = q * np.sign(np.diag(r))[None, :]
    return q.T.astype(np.float32)


@dataclass(frozen=True)
class Setting:
    key: str
    basis: str  # probe | random | random_cov | none
    layer: int | None
    k: int
    alpha_rel: float
    alpha: float  # absolute (residual units)
    seed: int | None = None


def make_grid(layers: Sequence[int], ks: Sequence[int], alphas: Sequence[float], controls: Sequence[str],
              seeds: int, resid_norm: dict[int, float], *, covariance: bool = False) -> list[Setting]:
    """Every setting: the alpha-0 rerun (control ``none``), then per layer x k x alpha the probe basis,
    ``seeds`` isotropic random settings (control ``random``) and, for k > 1 with ``covariance`` (the
    activations' covariance is available) and control ``random_cov``, ``seeds`` covariance-matched ones."""
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
                if "random_cov" in controls and covariance and k > 1:
                    for s in range(seeds):
                        grid.append(Setting(f"L{L}|k{k}|a{a:g}|randcov{s}", "random_cov", L, k, float(a), aa, s))
    return grid


def setting_vector(s: Setting, dirs: Directions, dose: str, d: int) -> np.ndarray:
    """The combined steering vector [d_model] of a probe setting (zeros for the alpha-0 rerun); a random
    setting's vector depends on the case (:func:`steering.controls.control_vector`)."""
    if s.basis == "none":
        return np.zeros(d, dtype=np.float32)
    if s.basis != "probe" or s.layer is None:
        raise SweepError(f"setting {s.key}: a random control's vector is drawn per case (steering.controls)")
    return combine_directions(dirs.bases[s.layer][: s.k], dose).numpy()


__all__ = ["Setting", "load_directions", "make_grid", "random_basis", "setting_vector"]
