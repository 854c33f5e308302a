"""python -m steering.sweep RUN_DIR --directions RUN_DIR/probes  (this module: the random-direction controls)

Every random generation of a case gets its own direction: the basis of random setting ``j`` of (layer, k,
alpha) for case ``c`` is drawn from a generator seeded by ``(seed, c, layer, k, alpha, kind, j)``
(:func:`direction_seed`), so a sweep of n cases and m random settings per probe setting draws ``n * m`` fresh
directions per setting instead of reusing m of them for every case and alpha. Two kinds:

* ``random`` (isotropic): a uniformly random orthonormal basis of k rows (QR of a Gaussian matrix);
* ``random_cov`` (k > 1 only): k Gaussian vectors with the covariance of the activations the directions were
  fitted on, within class (the fitting rows minus their class mean: the variation the probe basis's
  within-class principal components come from), orthonormalised. Drawn as ``Xc^T g`` with ``g ~ N(0, I)``
  over the rows, so no d x d matrix is formed. Needs the activation store the directions name
  (:func:`covariance_rows`); when it cannot be read the sweep says so and keeps isotropic controls only. A
  layer whose within-class activations span fewer than k dimensions (a position whose activations do not vary,
  as a tiny model's embeddings at a token every row shares) has no k-dimensional covariance-matched basis:
  it gets isotropic controls only, and the sweep's controls note names it and its rank.

Either kind is norm-matched to the probe basis row by row and combined with the same dose
(:mod:`steering.vectors`), exactly as before. An ``ablate`` control projects the random basis itself out
(:func:`control_basis`; a projection does not depend on the rows' norms, so norm matching is implicit); its
seed names ``ablate`` where an additive one names its alpha, so the two operators never share a direction.
"""
from __future__ import annotations

import hashlib
from typing import Any

import numpy as np

from probes.directions import Directions
from steering.sweep.config import SweepError
from steering.sweep.grid import Setting, random_basis
from steering.vectors import combine_directions

RANDOM_KINDS = ("random", "random_cov")
MAX_COV_ROWS = 4096


SWEEP_SCOPE = "*"  # the case id every case shares with random_scope="sweep": one direction per random setting


def scope_id(case_id: str, random_scope: str = "case") -> str:
    """The id a random direction is seeded by: the case's own (``case``), or one for the whole sweep
    (``sweep``: random setting j is then the same direction for every case)."""
    return case_id if random_scope == "case" else SWEEP_SCOPE


def direction_seed(seed: int, case_id: str, s: Setting) -> int:
    """The seed of setting ``s``'s random direction for case ``case_id`` (stable across runs and machines)."""
    how = "ablate" if s.operator == "ablate" else f"a{s.alpha_rel:g}"
    text = f"{int(seed)}|{case_id}|L{s.layer}|k{s.k}|{how}|{s.basis}|{s.seed}"
    return int.from_bytes(hashlib.sha256(text.encode("utf-8")).digest()[:8], "little")


def covariance_basis(k: int, rows: np.ndarray, seed: int) -> np.ndarray:
    """An orthonormal basis [k, d] of k Gaussian vectors with covariance ``rows^T rows`` (``rows``: [n, d],
    centred within class)."""
    rng = np.random.default_rng(seed)
    g = rng.standard_normal((rows.shape[0], k))  # [n, k]
    v = rows.T.astype(np.float64) @ g  # [d, k], each column ~ N(0, rows^T rows)
    q, r = np.linalg.qr(v)
    if np.any(np.diag(r) == 0):  # a zero row would enter the dose as nothing (all zero: no direction at all)
        raise SweepError(f"the within-class covariance has rank < k = {k}, so no covariance-matched basis of k rows "
                         "exists; covariance_rows leaves such layers out")
    q = q * np.sign(np.diag(r))[None, :]
    return q.T.astype(np.float32)


def control_basis(s: Setting, case_id: str, d: int, seed: int,
                  cov: dict[int, np.ndarray] | None = None) -> np.ndarray:
    """The orthonormal random basis [k, d_model] of random setting ``s`` for case ``case_id`` (what an ablate
    control projects out; an additive control norm-matches and doses it, :func:`control_vector`)."""
    assert s.layer is not None and s.basis in RANDOM_KINDS
    ds = direction_seed(seed, case_id, s)
    if s.basis == "random_cov":
        if not cov or s.layer not in cov:
            raise ValueError(f"setting {s.key} needs the activation covariance of layer {s.layer}")
        return covariance_basis(s.k, cov[s.layer], ds)
    return random_basis(s.k, d, seed=ds)


def control_vector(s: Setting, case_id: str, dirs: Directions, dose: str, d: int, seed: int,
                   cov: dict[int, np.ndarray] | None = None) -> np.ndarray:
    """The combined vector [d_model] of random setting ``s`` for case ``case_id`` (norm-matched, dosed)."""
    assert s.layer is not None
    basis = control_basis(s, case_id, d, seed, cov)
    basis = basis * np.linalg.norm(dirs.bases[s.layer][: s.k], axis=1)[:, None]  # norm-matched
    return combine_directions(basis, dose).numpy()


def within_class_rank(rows: np.ndarray, k: int, scale: float, rel_tol: float = 1e-5) -> int:
    """The rank, up to ``k``, of the within-class rows ``[n, d]``: the rank of ``rows^T g`` for a seeded Gaussian
    ``g`` [n, k] (almost surely ``min(rank, k)``; no SVD of the rows), counting singular values above ``rel_tol``
    times ``scale`` (the raw activations' mean row norm) per row, so rounding noise left by centring counts as none."""
    if rows.size == 0:
        return 0
    g = np.random.default_rng(0).standard_normal((rows.shape[0], k))
    sv = np.linalg.svd(rows.T.astype(np.float64) @ g / np.sqrt(rows.shape[0]), compute_uv=False)
    return int(np.sum(sv > rel_tol * max(scale, np.finfo(np.float32).tiny)))


def covariance_rows(dirs: Directions, layers: list[int], max_k: int) -> tuple[dict[int, np.ndarray] | None, str]:
    """Per layer, the fitting rows' activations centred within class ([n, d], at most ``MAX_COV_ROWS`` rows,
    a seeded subsample), from the activation store ``directions.h5`` names; ``(None, why)`` when unavailable.
    A layer whose centred rows have rank below ``max_k`` (:func:`within_class_rank`) is left out and named in
    the note (no covariance-matched basis of k rows exists there); ``(None, why)`` when that leaves none."""
    path = dirs.provenance.path
    if path is None:
        return None, "directions.h5 names no readable activation store"
    try:
        from probes.data import load_probe_data  # deferred: tests monkeypatch probes.data.load_probe_data

        position = str(dirs.attrs.get("position") or "prefix_last")
        with dirs.provenance.open() as st:
            data = load_probe_data(st, target="propagation", position=position)
            keep = _fit_rows(dirs, data.questions)
            if int(keep.sum()) <= max_k:
                return None, f"only {int(keep.sum())} fitting rows in {path} (need more than k = {max_k})"
            idx = np.flatnonzero(keep)
            if idx.size > MAX_COV_ROWS:
                idx = np.sort(np.random.default_rng(0).choice(idx, MAX_COV_ROWS, replace=False))
            y = data.y_c[idx]
            out: dict[int, np.ndarray] = {}
            low: dict[int, int] = {}
            for L in layers:
                X = np.asarray(data.X(L)[idx], dtype=np.float64)
                if X.shape[1] != dirs.bases[L].shape[1]:
                    return None, f"the store's layer {L} width differs from the directions'"
                scale = float(np.linalg.norm(X, axis=1).mean())
                for c in np.unique(y):
                    X[y == c] -= X[y == c].mean(axis=0)
                rank = within_class_rank(X, max_k, scale)
                if rank < max_k:
                    low[L] = rank
                    continue
                out[L] = X.astype(np.float32)
    except Exception as e:  # a moved, damaged or foreign store: isotropic controls only, said so
        return None, f"the activation store {path} could not be read ({type(e).__name__}: {str(e).splitlines()[0][:120]})"
    flat = "; ".join(f"layer {L}: within-class rank {r} < k = {max_k}" for L, r in low.items())
    if not out:
        return None, (f"the {idx.size} fitting rows' activations at position {position!r} do not vary in {max_k} "
                      f"dimensions within class ({flat})")
    return out, (f"within-class covariance of {idx.size} fitting rows of {path} at position {position!r}"
                 + (f"; none at {flat}: isotropic controls only there" if low else ""))


def _fit_rows(dirs: Directions, questions: Any) -> np.ndarray:
    """Rows of the questions the directions were fitted on (the recorded split), else every row."""
    q = np.asarray([str(x) for x in questions], dtype=object)
    split = dirs.fit_split() or {}
    if "fit" in split:
        return np.isin(q, list(split["fit"]))
    if "held_out" in split:
        return ~np.isin(q, list(split["held_out"]))
    return np.ones(len(q), dtype=bool)


__all__ = ["MAX_COV_ROWS", "RANDOM_KINDS", "control_basis", "control_vector", "covariance_basis", "covariance_rows",
           "direction_seed", "scope_id", "within_class_rank"]
