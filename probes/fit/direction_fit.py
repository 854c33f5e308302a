"""Fitting steering directions for one layer: logistic normal, mass-mean, within-class PCs, orthonormalised.

    from probes.fit.direction_fit import fit_directions
    r = fit_directions(X, y_c, groups)          # X [n, d_model] raw activations, y_c 1 = C, 0 = non-C

The logistic probe is the same pipeline the cross-validation scores (scaler, optional PCA,
``LogisticProbe`` with C chosen by inner grouped CV), fitted on all rows; the result is written by
:func:`probes.directions.write_directions` and read back by :func:`probes.directions.read_directions`.

Beside the toolkit's basis, the two bases of the paper's multi-direction steering (r2m-ai/load-bearing-cot,
``experiments/steering/multi_direction.py``, ``build_basis_M2`` and ``build_basis_probe``), on the same rows:

* ``m2`` (:func:`m2_basis`): the class-mean difference, then the top principal axes of the within-C variation
  after the mean-difference component is projected out;
* ``probe_pc`` (:func:`probe_pc_basis`): the probe's weight direction, then the top principal components of
  the (centred) features after the probe direction is projected out. The paper's probe is a 3-class
  multinomial (three weight rows); this toolkit's direction probe is C vs non-C, so its probe basis has one
  weight row and one more principal component.

Signs follow this toolkit's convention (the mean difference and the probe direction point from C toward
non-C; the paper's M2 row points toward C), so a positive alpha pushes toward the correct answer.
"""
from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from probes.data import ProbeError


def _orthonormalise(rows: list[np.ndarray], names: list[str], tol: float = 1e-6) -> tuple[np.ndarray, list[str]]:
    """Gram-Schmidt (twice, for stability) keeping rows that are not (near) dependent on the ones before."""
    basis: list[np.ndarray] = []
    kept: list[str] = []
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


def _unit(v: np.ndarray) -> np.ndarray:
    v = np.asarray(v, dtype=np.float64)
    n = np.linalg.norm(v)
    return v / n if n > 0 else v


def _sign_fix(v: np.ndarray) -> np.ndarray:
    """Deterministic sign: the largest-magnitude component positive."""
    return v if v[np.argmax(np.abs(v))] >= 0 else -v


def within_class_pcs(X: np.ndarray, y: np.ndarray, k: int, seed: int = 0) -> np.ndarray:
    """Top ``k`` principal directions [k, d] of ``X`` minus its class means."""
    X = np.asarray(X, dtype=np.float64)
    Xc = X.copy()
    for c in np.unique(y):
        Xc[y == c] -= X[y == c].mean(axis=0)
    k = max(0, min(k, *Xc.shape))
    if k == 0:
        return np.zeros((0, X.shape[1]))
    if min(Xc.shape) > 500:
        from sklearn.utils.extmath import randomized_svd  # deferred: sklearn is heavy to import

        _, _, vt = randomized_svd(Xc, n_components=k, random_state=seed)
    else:
        _, _, vt = np.linalg.svd(Xc, full_matrices=False)
    return np.array([_sign_fix(v) for v in vt[:k]])


def top_principal_axes(xc: np.ndarray, k: int) -> np.ndarray:
    """The top ``k`` right singular vectors [k, d] of ``xc`` (largest first). Small matrices: a thin SVD. Larger
    ones (both sides > 500, as at a 7-9B model's width): the top eigenvectors of the smaller Gram matrix, the
    same axes to working precision at a fraction of a thin SVD's cost (one GEMM and the Lanczos eigenpairs of
    :func:`_top_eigvecs`, instead of an SVD of all rows); signs are left to the caller."""
    xc = np.asarray(xc, dtype=np.float64)
    n, d = xc.shape
    k = max(0, min(int(k), n, d))
    if k == 0:
        return np.zeros((0, d))
    if min(n, d) <= 500:
        return np.linalg.svd(xc, full_matrices=False)[2][:k]
    if d <= n:
        return _top_eigvecs(xc.T @ xc, k).T
    u = _top_eigvecs(xc @ xc.T, k)
    vt = (xc.T @ u).T
    return vt / np.linalg.norm(vt, axis=1, keepdims=True)


def _top_eigvecs(G: np.ndarray, k: int) -> np.ndarray:
    """The top ``k`` eigenvectors [m, k] of the symmetric ``G`` [m, m], largest first: implicitly restarted
    Lanczos (ARPACK, to machine precision, from a fixed start) while k is small against m, which needs a few
    hundred products with G instead of its tridiagonalisation (4 s at m = 3,584); a partial ``eigh`` otherwise."""
    from scipy.linalg import eigh  # deferred: scipy is heavy to import
    from scipy.sparse.linalg import eigsh  # deferred: scipy is heavy to import

    m = G.shape[0]
    if k <= m // 8:
        v0 = np.random.default_rng(0).standard_normal(m)
        w, v = eigsh(G, k=k, which="LA", v0=v0, tol=0)
    else:
        w, v = eigh(G, subset_by_index=[m - k, m - 1])
    return v[:, np.argsort(-w, kind="stable")]


def _lead_then_pcs(lead: np.ndarray, xc: np.ndarray | None, k: int, names: tuple[str, str],
                   gram: tuple[np.ndarray, int] | None = None) -> tuple[np.ndarray, list[str]]:
    """``lead`` (unit), then the top ``k - 1`` principal axes of the centred rows ``xc`` with ``lead``'s component
    projected out; orthonormalised, named ``names[0]``, ``names[1]1``, ``names[1]2``... ``gram`` = ``(xc^T xc, rows)``
    instead of ``xc`` (d <= rows): the projection is applied to the Gram matrix, ``P G P`` with ``P = I - l l^T``,
    the same axes without a copy of the rows."""
    if gram is not None:
        G, rows = gram
        Gl = G @ lead
        Gp = G - np.outer(lead, Gl) - np.outer(Gl, lead) + float(lead @ Gl) * np.outer(lead, lead)
        n_pc = max(0, min(int(k) - 1, rows, G.shape[0]))
        axes = _top_eigvecs(Gp, n_pc).T if n_pc else np.zeros((0, G.shape[0]))
    else:
        assert xc is not None
        xc = xc - np.outer(xc @ lead, lead)
        n_pc = max(0, min(int(k) - 1, *xc.shape))
        axes = top_principal_axes(xc, n_pc) if n_pc else np.zeros((0, xc.shape[1]))
    pcs = [_sign_fix(v) for v in axes]
    return _orthonormalise([lead, *pcs], [names[0]] + [f"{names[1]}{i + 1}" for i in range(len(pcs))])


def _wide_grams(X: np.ndarray, is_c: np.ndarray) -> tuple[np.ndarray, np.ndarray] | None:
    """``(Gram of the C rows centred on their mean, Gram of all rows centred)`` [d, d] each, from two GEMMs over
    the rows split by class (the all-rows Gram is their sum about the global mean), or None where
    :func:`top_principal_axes` would not take the Gram route (either side <= 500, or fewer C rows than d)."""
    n, d = X.shape
    n_c = int(is_c.sum())
    if min(n_c, d) <= 500 or d > n_c:
        return None
    Xg = X - X.mean(axis=0)
    Xc_rows, Xn_rows = Xg[is_c], Xg[~is_c]
    G_c = Xc_rows.T @ Xc_rows
    G_all = G_c + Xn_rows.T @ Xn_rows
    m_c = Xc_rows.mean(axis=0)
    return G_c - n_c * np.outer(m_c, m_c), G_all


def m2_basis(X: np.ndarray, y_c: np.ndarray, k: int, _grams: tuple[np.ndarray, np.ndarray] | None = None
             ) -> tuple[np.ndarray, list[str]]:
    """The paper's M2 basis [<= k, d]: unit ``mean(non-C) - mean(C)``, then the top ``k - 1`` principal axes of
    the C rows centred on their mean with the mean-difference component removed; orthonormalised."""
    X = np.asarray(X, dtype=np.float64)
    is_c = np.asarray(y_c).astype(bool)
    d_mean = _unit(X[~is_c].mean(axis=0) - X[is_c].mean(axis=0))
    if _grams is not None:
        return _lead_then_pcs(d_mean, None, k, ("mean_diff", "within_c_pc"), gram=(_grams[0], int(is_c.sum())))
    return _lead_then_pcs(d_mean, X[is_c] - X[is_c].mean(axis=0), k, ("mean_diff", "within_c_pc"))


def probe_pc_basis(w: np.ndarray, X: np.ndarray, k: int, _grams: tuple[np.ndarray, np.ndarray] | None = None
                   ) -> tuple[np.ndarray, list[str]]:
    """The paper's probe basis [<= k, d]: the unit probe direction ``w``, then the top ``k - 1`` principal
    components of ``X`` (centred) after ``w`` is projected out; orthonormalised."""
    X = np.asarray(X, dtype=np.float64)
    if _grams is not None:
        return _lead_then_pcs(_unit(w), None, k, ("probe", "pc"), gram=(_grams[1], len(X)))
    return _lead_then_pcs(_unit(w), X - X.mean(axis=0), k, ("probe", "pc"))


def fit_directions(X: np.ndarray, y_c: np.ndarray, groups: np.ndarray | None = None, *, n_directions: int = 8,
                   pca: int | None = None, seed: int = 0,
                   inner_folds: int = 3, Cs: Sequence[float] | None = None, solver: str = "sklearn",
                   device: str = "cpu") -> dict:
    """Directions for one layer from ``X`` [n, d] (raw activations) and ``y_c`` (1 = C, 0 = non-C).

    The logistic probe is the same pipeline the CV scores (scaler, optional PCA, ``LogisticProbe`` with C
    chosen by inner grouped CV), fitted on all rows; ``solver="torch"`` fits it with the batched solver
    (:func:`probes.fit.fast.logistic_fits`, no PCA). Returns ``{"logistic", "mass_mean", "basis", "names",
    "resid_norm", "logistic_C", "n_rows", "n_C", "n_nonC", "cos_logistic_mass_mean", "basis_m2", "names_m2",
    "basis_probe_pc", "names_probe_pc"}`` (the last four: the paper's two bases, :func:`m2_basis` and
    :func:`probe_pc_basis`, each of up to ``n_directions`` rows).
    """
    from probes.fit.cv import pipeline_for  # deferred: probes.fit.cv loads sklearn
    from probes.fit.estimators import raw_direction  # deferred: probes.fit.estimators loads sklearn

    X_in = X
    X = np.asarray(X, dtype=np.float64)
    y_c = np.asarray(y_c).astype(np.int64)
    if len(np.unique(y_c)) < 2:
        raise ProbeError("directions need both C and non-C rows")
    if solver == "torch" and not pca:
        from probes.fit.estimators import DEFAULT_CS  # deferred: probes.fit.estimators loads sklearn
        from probes.fit.fast import logistic_fits  # deferred: probes.fit.fast loads sklearn, torch

        g = np.arange(len(y_c)) if groups is None else np.asarray(groups)
        fit = logistic_fits(X_in, y_c, g, [np.ones(len(y_c), bool)], Cs=DEFAULT_CS if Cs is None else Cs,
                            inner_folds=inner_folds, seed=seed, device=device)[0]
        assert fit is not None
        w = -np.asarray(fit["coef"][0], dtype=np.float64)  # the C logit's gradient, negated: toward non-C
        C_ = float(fit["C"])
    else:
        kw = {} if Cs is None else {"Cs": tuple(Cs)}
        pipe = pipeline_for("logistic", X.shape[0], X.shape[1], pca=pca, seed=seed, inner_folds=inner_folds, **kw)
        pipe.fit(X, y_c, probe__groups=groups)
        probe = pipe.named_steps["probe"]
        w = raw_direction(pipe)  # gradient of the C logit in raw coordinates
        if list(probe.classes_) == [0, 1]:
            w = -w  # point toward non-C
        C_ = float(probe.C_)
    logistic = _unit(w)
    mass = _unit(X[y_c == 0].mean(axis=0) - X[y_c == 1].mean(axis=0))
    n_pc = max(0, int(n_directions) - 2) + 2  # a couple spare, in case some are dependent
    pcs = within_class_pcs(X, y_c, n_pc, seed)
    cand = [logistic, mass] + list(pcs)
    cand_names = ["logistic", "mass_mean_orth"] + [f"within_pc{i + 1}" for i in range(len(pcs))]
    basis, names = _orthonormalise(cand, cand_names)
    basis, names = basis[: int(n_directions)], names[: int(n_directions)]
    grams = _wide_grams(X, y_c == 1)  # both bases' Gram matrices from one pass over the rows (wide layers)
    m2, m2_names = m2_basis(X, y_c, int(n_directions), _grams=grams)
    ppc, ppc_names = probe_pc_basis(logistic, X, int(n_directions), _grams=grams)
    return {
        "logistic": logistic.astype(np.float32),
        "mass_mean": mass.astype(np.float32),
        "basis": basis.astype(np.float32),
        "names": names,
        "resid_norm": float(np.linalg.norm(X, axis=1).mean()),
        "logistic_C": C_,
        "n_rows": int(len(y_c)),
        "n_C": int(np.sum(y_c == 1)),
        "n_nonC": int(np.sum(y_c == 0)),
        "cos_logistic_mass_mean": float(logistic @ mass),
        "basis_m2": m2.astype(np.float32),
        "names_m2": m2_names,
        "basis_probe_pc": ppc.astype(np.float32),
        "names_probe_pc": ppc_names,
    }


