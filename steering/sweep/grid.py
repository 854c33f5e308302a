"""python -m steering.sweep RUN_DIR --directions RUN_DIR/probes  (this module: the grid of settings)

The sweep's grid: one :class:`Setting` per (layer, k, alpha, basis) - the probe basis, ``seeds`` random
settings (isotropic, and for k > 1 covariance-matched when the activations are available; each draws a fresh
direction per case, see :mod:`steering.sweep.controls`), and an unsteered alpha-0 rerun - and the probe setting's
steering vector (:func:`setting_vector`, dose-matched through :func:`steering.vectors.combine_directions`).
With the ``ablate`` operator (:mod:`steering.ablation`) the grid also has one setting per (layer, k, basis)
with no alpha (``L5|k4|ablate|probe``, ``L5|k4|ablate|random0``, ...), after every additive one, whose probe
basis is :func:`setting_basis`.

Directions are read through their one home, :func:`probes.directions.read_directions`, as a
:class:`probes.directions.Directions`; :func:`sweep_directions` adds the sweep's own checks (no all-zero
direction, positive residual norms; a :class:`~steering.sweep.config.SweepError`), and lets the reader's own errors through.
"""
from __future__ import annotations

from collections.abc import Collection, Sequence
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from probes.directions import Directions, read_directions
from steering.ablation import orthonormal_rows
from steering.sweep.config import SweepError
from steering.vectors import combine_directions


def sweep_directions(path: str | Path) -> Directions:
    """Read ``directions.h5`` (a probes output directory or the file) through the probes reader
    (:func:`probes.directions.read_directions`; an unreadable file is its one-line :class:`ProbeError`) and check
    what the sweep needs beyond it (a :class:`SweepError`). Not :func:`probes.directions.load_directions`, which
    returns one layer's basis as an array."""
    dirs = read_directions(path)
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
    alpha_rel: float | None  # None for an ablate setting (it has no strength)
    alpha: float | None  # absolute (residual units); None for an ablate setting
    seed: int | None = None
    operator: str = "add"  # add | ablate | none (the unsteered rerun)
    directions: str = "basis"  # a probe setting's stored basis (probes.directions.BASES: basis | m2 | probe_pc)


def make_grid(layers: Sequence[int], ks: Sequence[int], alphas: Sequence[float], controls: Sequence[str],
              seeds: int, resid_norm: dict[int, float], *, covariance: bool | Collection[int] = False,
              operators: Sequence[str] = ("add",), bases: Sequence[str] = ("basis",),
              raw: bool = False) -> list[Setting]:
    """Every setting: the alpha-0 rerun (control ``none``), then (operator ``add``) per layer x k x alpha the
    probe basis, ``seeds`` isotropic random settings (control ``random``) and, for k > 1 with ``covariance``
    (the activations' covariance is available: True for every layer, or the collection of layers that have it)
    and control ``random_cov``, ``seeds`` covariance-matched ones;
    then (operator ``ablate``) the same per layer x k, without alpha. One probe setting per stored basis in
    ``bases`` (keyed ``|probe`` for the toolkit's ``basis``, else by the basis name, e.g. ``|m2``), sharing the
    random controls. ``raw``: the alphas are in residual-stream units (keys ``L16|k2|raw10|m2``), not times the
    layer's mean residual norm."""
    grid = []
    if "none" in controls:
        grid.append(Setting("none|alpha0", "none", None, 0, 0.0, 0.0, None, "none"))
    for L in layers:
        for k in ks:
            for a in alphas if "add" in operators else ():
                norm = float(resid_norm[L])
                rel, aa = (float(a) / norm, float(a)) if raw else (float(a), float(a) * norm)
                grid += _family(f"L{L}|k{k}|{'raw' if raw else 'a'}{a:g}", L, k, rel, aa, "add", controls, seeds,
                                _has(covariance, L), bases)
    for L in layers if "ablate" in operators else ():
        for k in ks:
            grid += _family(f"L{L}|k{k}|ablate", L, k, None, None, "ablate", controls, seeds, _has(covariance, L), bases)
    return grid


def _has(covariance: bool | Collection[int], layer: int) -> bool:
    return covariance if isinstance(covariance, bool) else layer in covariance


def _family(prefix: str, L: int, k: int, a: float | None, aa: float | None, operator: str, controls: Sequence[str],
            seeds: int, covariance: bool, bases: Sequence[str] = ("basis",)) -> list[Setting]:
    """One probe setting per basis and their random controls (``seeds`` isotropic, and ``seeds`` covariance-matched
    for k > 1)."""
    out = [Setting(f"{prefix}|{'probe' if b == 'basis' else b}", "probe", L, k, a, aa, None, operator, b) for b in bases]
    if "random" in controls:
        out += [Setting(f"{prefix}|random{s}", "random", L, k, a, aa, s, operator) for s in range(seeds)]
    if "random_cov" in controls and covariance and k > 1:
        out += [Setting(f"{prefix}|randcov{s}", "random_cov", L, k, a, aa, s, operator) for s in range(seeds)]
    return out


def setting_vector(s: Setting, dirs: Directions, dose: str, d: int) -> np.ndarray:
    """The combined steering vector [d_model] of a probe setting (zeros for the alpha-0 rerun); a random
    setting's vector depends on the case (:func:`steering.sweep.controls.control_vector`)."""
    if s.basis == "none":
        return np.zeros(d, dtype=np.float32)
    if s.basis != "probe" or s.layer is None:
        raise SweepError(f"setting {s.key}: a random control's vector is drawn per case (steering.sweep.controls)")
    return combine_directions(dirs.named_basis(s.directions, s.layer, s.k), dose).numpy()


def setting_basis(s: Setting, dirs: Directions) -> np.ndarray:
    """The orthonormal basis [k, d_model] an ablate probe setting projects out (the span of the directions'
    first k rows); a random setting's basis depends on the case (:func:`steering.sweep.controls.control_basis`)."""
    if s.operator != "ablate" or s.basis != "probe" or s.layer is None:
        raise SweepError(f"setting {s.key}: only an ablate probe setting has a fixed basis")
    return orthonormal_rows(dirs.named_basis(s.directions, s.layer, s.k))


__all__ = ["Setting", "make_grid", "random_basis", "setting_basis", "setting_vector", "sweep_directions"]
