"""Inference on difficulty where it varies: between cells (task-or-level x model), not between rows.

    from behavioural.gradient.cells import cell_slope, meta_regression
    cell_slope(data.rows, cells, diff, axis="accuracy")    # {"status": "ok", "per_model": {...}}

Difficulty takes one value per cell, so its evidence is the number of cells, not of rows: a row-level logistic
model clustered by question treats hundreds of rows as if each carried information on the slope and rejects
a true null far too often when cells differ by more than difficulty (issue 23: 7.7% with no level effects,
15% at a logit SD of 0.35). Here each cell is one observation:

* ``y_c`` = the empirical logit of the cell's propagation over distinct generations, log((k + 0.5) /
  (n - k + 0.5)), with variance ``deff / (n p (1 - p))`` at the rate ``p`` pooled over the model's cells (a
  cell's own rate would tie its weight to its logit when events are rare) and the design effect of
  :func:`loadbearing.stats.design_effect_interval` (questions as clusters, floored where events are few);
* ``x_c`` = the cell's difficulty, with variance ``acc (1 - acc) / n_baselines`` when it is 1 - baseline
  accuracy (an estimate) and 0 for a level ordinal;
* a random-effects meta-regression ``y_c = a + b x_c + u_c + e_c`` (:func:`meta_regression`): between-cell
  variance by the method of moments (DerSimonian-Laird), each cell weighted by ``1 / (v_y + b^2 v_x + tau^2)``
  (the estimated difficulty's error carried through the slope), and the Knapp-Hartung t statistic;
* its reference distribution is a parametric bootstrap under the fitted null (:func:`bootstrap_t`): the
  intercept-only random-effects model (DerSimonian-Laird) draws ``n_boot`` = 999 sets of cell logits, each
  refitted by the same procedure with the cells' own difficulties and variances, and ``p = (1 + #{|t*| >=
  |t|}) / (n_boot + 1)``; the 95% interval is ``slope +/- c se`` with ``c`` the 95th percentile of ``|t*|``, so
  it excludes 0 when p < 0.05 (to the draws' resolution). The t distribution on C - 2 degrees of freedom (``p_t``, kept for
  reference) ignores that the weights depend on the fitted slope through the difficulty's error; it rejected a
  true null in up to 6.0% of simulations at 3-8 cells, the bootstrap in 4.3-5.7% (5.1% at 32,000 simulations
  for the 5.7%) (``bench/calib_gradient.py``, 4,000 simulations each; docs/gradient.md). Seeded per data set, from
  the seed and the CRC-32 of the cells' data (:func:`data_seed`): the same cells give the same p, different
  data sets independent draws.

With fewer than 3 cells the slope is descriptive: no p-value, and the reason is given. The size and power of
this test at the ladder's cell counts are in ``bench/calib_gradient.py``.
"""
from __future__ import annotations

import math
import zlib
from collections import defaultdict
from collections.abc import Sequence
from typing import Any

import numpy as np

from behavioural.gradient.rates import scored

MIN_CELLS = 3
N_BOOT = 999  # bootstrap draws of the null t: p resolution 0.001


def logit_and_var(k_g: Sequence[int] | np.ndarray, n_g: Sequence[int] | np.ndarray, p_ref: float | None = None
                  ) -> tuple[float, float]:
    """Empirical logit log((k + 0.5) / (n - k + 0.5)) and its question-clustered variance ``deff / (n p (1 -
    p))``, with ``p`` the pooled rate over all cells (``p_ref``; default the cell's own smoothed rate): weights
    taken from a cell's own count are correlated with its logit when events are rare, which biases the slope."""
    kg = np.asarray(k_g, dtype=float)
    ng = np.asarray(n_g, dtype=float)
    k, n = kg.sum(), ng.sum()
    p = (k + 0.5) / (n + 1.0)
    K = len(kg)
    deff = 1.0
    if K >= 2:
        var_c = K / (K - 1) * ((kg - p * ng) ** 2).sum() / n ** 2
        deff = max(1.0, var_c / (p * (1 - p) / n))
        m_w = (ng ** 2).sum() / n
        deff = max(deff, 1.0 + (m_w - 1.0) / (1.0 + min(k, n - k)))
    q = p if p_ref is None else min(max(p_ref, 0.5 / (n + 1.0)), 1 - 0.5 / (n + 1.0))
    return math.log((k + 0.5) / (n - k + 0.5)), deff / (n * q * (1 - q))


def meta_regression(y: np.ndarray, x: np.ndarray, vy: np.ndarray, vx: np.ndarray | None = None, *,
                    level: float = 0.95, n_boot: int = N_BOOT, seed: int = 0) -> dict[str, Any]:
    """Random-effects meta-regression of ``y`` on ``x`` (one value per cell), its Knapp-Hartung t referred to the
    parametric bootstrap of :func:`bootstrap_t`.

    ``vy``: within-cell sampling variances of ``y``; ``vx``: of ``x`` (default 0). Returns ``{"slope",
    "intercept", "se", "t", "df", "p", "ci95", "tau2", "q", "p_t", "ci95_t", "n_boot", "reference"}``: ``p`` and
    ``ci95`` from the bootstrap, ``p_t`` and ``ci95_t`` from the t distribution on C - 2 df (reference only);
    vectorised callers use :func:`kh_slopes` and :func:`bootstrap_t`."""
    args = (np.asarray(y, float)[None], np.asarray(x, float)[None], np.asarray(vy, float)[None],
            None if vx is None else np.asarray(vx, float)[None])
    r = kh_slopes(*args, level=level)
    out = {k: (float(v[0]) if isinstance(v, np.ndarray) else v) for k, v in r.items() if k != "ci95"}
    out["p_t"] = out.pop("p")
    out["ci95_t"] = [float(r["ci95"][0][0]), float(r["ci95"][1][0])]
    b = bootstrap_t(*args, n_boot=n_boot, seed=seed, level=level)
    h = float(b["crit"][0]) * out["se"]
    out.update(p=float(b["p"][0]), ci95=[out["slope"] - h, out["slope"] + h], n_boot=n_boot,
               reference=f"parametric bootstrap of the t under the fitted null ({n_boot} draws, seed {seed} and the data)")
    return out


def kh_slopes(Y: np.ndarray, X: np.ndarray, VY: np.ndarray, VX: np.ndarray | None = None, *,
              level: float = 0.95) -> dict[str, Any]:
    """:func:`meta_regression` for ``S`` data sets at once (arrays ``[S, C]``)."""
    from scipy import stats  # deferred: scipy is heavy to import

    Y, X, VY = np.atleast_2d(Y), np.atleast_2d(X), np.atleast_2d(VY)
    VX = np.zeros_like(X) if VX is None else np.atleast_2d(VX)
    S, C = Y.shape
    df = C - 2

    def wls(w: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        sw, sx, sy = w.sum(1), (w * X).sum(1), (w * Y).sum(1)
        sxx, sxy = (w * X * X).sum(1), (w * X * Y).sum(1)
        det = sw * sxx - sx * sx
        with np.errstate(invalid="ignore", divide="ignore"):
            b = (sw * sxy - sx * sy) / det
            a = (sy - b * sx) / sw
            var_b = sw / det
        return a, b, var_b

    b = np.zeros(S)
    tau2 = np.zeros(S)
    for _ in range(3):  # v = vy + b^2 vx, then tau^2 by moments, then the weights (a few fixed-point passes)
        v = VY + (b[:, None] ** 2) * VX
        w0 = 1.0 / v
        a0, b0, _ = wls(w0)
        res0 = Y - a0[:, None] - b0[:, None] * X
        Q = (w0 * res0 ** 2).sum(1)
        sw, sx, sxx = w0.sum(1), (w0 * X).sum(1), (w0 * X * X).sum(1)
        sw2, sw2x, sw2xx = (w0 ** 2).sum(1), (w0 ** 2 * X).sum(1), (w0 ** 2 * X * X).sum(1)
        det = sw * sxx - sx * sx
        with np.errstate(invalid="ignore", divide="ignore"):
            trace = sw - (sxx * sw2 - 2 * sx * sw2x + sw * sw2xx) / det  # tr(P) of the weighted projection
            tau2 = np.maximum(0.0, (Q - df) / trace)
        w = 1.0 / (v + tau2[:, None])
        a, b, var_fe = wls(w)
    res = Y - a[:, None] - b[:, None] * X
    q = (w * res ** 2).sum(1) / max(df, 1)
    se = np.sqrt(q * var_fe)
    t = b / se
    p = 2 * stats.t.sf(np.abs(t), max(df, 1))
    h = stats.t.ppf(1 - (1 - level) / 2, max(df, 1)) * se
    return {"slope": b, "intercept": a, "se": se, "t": t, "df": df, "p": p, "ci95": [b - h, b + h],
            "tau2": tau2, "q": q}


def null_fit(Y: np.ndarray, VY: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """The null model of :func:`bootstrap_t` per data set (arrays ``[S, C]``): the intercept-only random-effects
    fit, ``(a, tau2)`` with tau^2 by DerSimonian-Laird and ``a`` the mean weighted by ``1 / (v_y + tau^2)``."""
    w = 1.0 / VY
    sw = w.sum(1)
    a = (w * Y).sum(1) / sw
    Q = (w * (Y - a[:, None]) ** 2).sum(1)
    tau2 = np.maximum(0.0, (Q - (Y.shape[1] - 1)) / (sw - (w ** 2).sum(1) / sw))
    w = 1.0 / (VY + tau2[:, None])
    return (w * Y).sum(1) / w.sum(1), tau2


def data_seed(seed: int, *arrays: np.ndarray) -> list[int]:
    """The bootstrap's seed for one data set: ``[seed, CRC-32 of the arrays' float64 bytes]`` (a
    :class:`numpy.random.SeedSequence` entropy list). The same data and ``seed`` give the same draws; different
    data sets get independent ones."""
    crc = 0
    for a in arrays:
        crc = zlib.crc32(np.ascontiguousarray(a, dtype=np.float64).tobytes(), crc)
    return [int(seed), crc]


def bootstrap_t(Y: np.ndarray, X: np.ndarray, VY: np.ndarray, VX: np.ndarray | None = None, *,
                n_boot: int = N_BOOT, seed: int = 0, level: float = 0.95) -> dict[str, np.ndarray]:
    """The reference distribution of the Knapp-Hartung t of :func:`kh_slopes` under no slope, for ``S`` data sets
    (arrays ``[S, C]``): ``n_boot`` draws ``y* = a + sqrt(v_y + tau^2) z`` from :func:`null_fit`, each refitted
    with the data set's own ``x``, ``v_y`` and ``v_x``. Returns ``{"p", "crit"}`` ``[S]``: ``p = (1 + #{|t*| >=
    |t|}) / (n_boot + 1)`` and the ``level`` quantile of ``|t*|`` (the interval's multiplier).

    Each data set draws its own standard normals ``z``, seeded from ``seed`` and the CRC-32 of its own ``y``,
    ``x``, ``v_y`` and ``v_x`` (:func:`data_seed`): a rerun on the same data gives the same p, a data set's p does
    not depend on the others passed with it, and different data sets get independent draws. With one fixed set of
    draws for every data set (before), the Monte Carlo error of those 999 draws was shared by every simulation of
    the calibration bench and did not average out: the size at 4 cells read 0.058 against a mark of 0.057."""
    Y, X, VY = np.atleast_2d(Y), np.atleast_2d(X), np.atleast_2d(VY)
    VX = np.zeros_like(X) if VX is None else np.atleast_2d(VX)
    S, C = Y.shape
    t_obs = np.abs(kh_slopes(Y, X, VY, VX)["t"])
    a, tau2 = null_fit(Y, VY)
    p, crit = np.empty(S), np.empty(S)
    step = max(1, 200_000 // max(n_boot, 1))  # data sets per chunk: n_boot x C x step floats at a time
    for i in range(0, S, step):
        j = slice(i, min(i + step, S))
        m = j.stop - j.start
        z = np.stack([np.random.default_rng(data_seed(seed, Y[s], X[s], VY[s], VX[s])).standard_normal((n_boot, C))
                      for s in range(j.start, j.stop)])  # [m, n_boot, C]: each data set its own draws
        sd = np.sqrt(VY[j] + tau2[j, None])
        Ys = a[j, None, None] + sd[:, None, :] * z

        shape = (m, n_boot, C)
        X_, VY_, VX_ = (np.broadcast_to(A[j][:, None, :], shape).reshape(-1, C) for A in (X, VY, VX))
        ts = np.abs(kh_slopes(Ys.reshape(-1, C), X_, VY_, VX_)["t"]).reshape(m, n_boot)
        ts = np.where(np.isfinite(ts), ts, np.inf)
        p[j] = (1 + (ts >= t_obs[j, None] * (1 - 1e-12)).sum(1)) / (n_boot + 1)
        crit[j] = np.quantile(ts, level, axis=1)
    return {"p": np.where(np.isfinite(t_obs), p, np.nan), "crit": crit}


def _cells_of(rows: Sequence[dict], cells: list[dict], diff: dict, axis: str) -> dict[str, list[dict]]:
    """Per model: one entry per cell with scored generations (y, its variance, x, its variance)."""
    per_q: dict[tuple[str, str], dict[str, list[int]]] = defaultdict(lambda: defaultdict(lambda: [0, 0]))
    for r in scored(rows):
        if r["first"]:  # one row per generation
            cnt = per_q[(r["model"], r["cell"])][r["qkey"]]
            cnt[0] += r["label"] == "C"
            cnt[1] += 1
    out: dict[str, list[dict]] = defaultdict(list)
    tot: dict[str, list[int]] = defaultdict(lambda: [0, 0])
    for (m, cell), qs in per_q.items():
        if (m, cell) in diff:
            tot[m][0] += sum(a for a, _ in qs.values())
            tot[m][1] += sum(b for _, b in qs.values())
    for c in cells:
        key = (c["model"], c["cell"])
        if key not in per_q or key not in diff:
            continue
        kq = list(per_q[key].values())
        t = tot[c["model"]]
        yv, vy = logit_and_var([a for a, _ in kq], [b for _, b in kq], (t[0] + 0.5) / (t[1] + 1.0))
        acc = c.get("baseline_accuracy") or {}
        vx = 0.0
        if axis == "accuracy" and acc.get("n") and acc.get("rate") is not None:
            vx = acc["rate"] * (1 - acc["rate"]) / acc["n"]
        out[c["model"]].append({"cell": c["cell"], "x": float(diff[key]), "vx": vx, "y": yv, "vy": vy,
                                "k": int(sum(a for a, _ in kq)), "n": int(sum(b for _, b in kq)),
                                "n_questions": len(kq)})
    return out


def cell_slope(rows: Sequence[dict], cells: list[dict], diff: dict, *, axis: str) -> dict[str, Any]:
    """The slope of logit propagation on difficulty across cells, per model (see the module docstring)."""
    per_model = {}
    for model, cs in sorted(_cells_of(rows, cells, diff, axis).items()):
        xs = np.array([c["x"] for c in cs])
        entry: dict[str, Any] = {"n_cells": len(cs), "cells": cs, "axis": axis}
        if len(cs) < 2 or np.ptp(xs) == 0:
            entry.update(status="skipped", message=f"{len(cs)} cell(s) with distinct difficulty: no slope")
        elif len(cs) < MIN_CELLS:
            ys = np.array([c["y"] for c in cs])
            entry.update(status="descriptive", slope=float((ys[1] - ys[0]) / (xs[1] - xs[0])), p=None,
                         message="2 cells: the slope through them is descriptive; a test needs >= 3 cells, "
                                 "because difficulty varies only between cells and their spread beyond "
                                 "difficulty cannot be estimated from two")
        else:
            r = meta_regression(np.array([c["y"] for c in cs]), xs, np.array([c["vy"] for c in cs]),
                                np.array([c["vx"] for c in cs]))
            entry.update(status="ok", **r,
                         test=f"random-effects meta-regression over {len(cs)} cells, Knapp-Hartung t against "
                              f"its parametric bootstrap under no slope ({r['n_boot']} draws; difficulty's error "
                              f"carried through the weights)")
        per_model[model] = entry
    return {"status": "ok" if per_model else "skipped", "per_model": per_model,
            "method": "one observation per cell: logit propagation (question-clustered variance) on difficulty; "
                      "random-effects meta-regression, its Knapp-Hartung t against a parametric bootstrap under no slope "
                      "(p_t: the t on C - 2 df, for reference); < 3 cells: descriptive"}


__all__ = ["cell_slope", "meta_regression", "kh_slopes", "bootstrap_t", "data_seed", "null_fit", "logit_and_var",
           "MIN_CELLS", "N_BOOT"]
