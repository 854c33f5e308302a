"""python -m steering.sweep RUN_DIR --directions RUN_DIR/probes  (this module: the all-settings decision rule)

One rule, used by the sweep's summary (:mod:`steering.analysis`) and by the power simulation
(:mod:`steering.power`), so the simulated power is the power of the verdict the toolkit prints. Over the K
probe settings that have a control, given each one's two-sided exact p-value, the sign of its statistic
(probe minus random moved) and the 95% interval of its difference:

* **effect**: some setting beats random: Holm-adjusted p < level and statistic > 0;
* **harm**: none beats random, but some setting is significantly worse than random (Holm p < level,
  statistic < 0);
* **null**: neither, and every setting's whole 95% interval lies inside (-SESOI, +SESOI): a TOST-style
  equivalence test of each setting (each one-sided bound at 2.5%), all of which must pass (an
  intersection-union test, so no multiplicity correction is needed);
* **inconclusive**: none of these.

Holm and the two-sided p-values (each the doubled smaller tail) test each direction at level / 2.
"""
from __future__ import annotations

import numpy as np

CODES = ("effect", "harm", "null", "inconclusive")


def holm(p: np.ndarray) -> np.ndarray:
    """Holm-adjusted p-values along the last axis (as ``statsmodels``' ``holm``), vectorised over the rest."""
    p = np.asarray(p, dtype=np.float64)
    K = p.shape[-1]
    if K == 0:
        return p.copy()
    order = np.argsort(p, axis=-1, kind="stable")
    ps = np.take_along_axis(p, order, axis=-1)
    adj = np.minimum(np.maximum.accumulate(ps * (K - np.arange(K)), axis=-1), 1.0)
    out = np.empty_like(adj)
    np.put_along_axis(out, order, adj, axis=-1)
    return out


def flags(p_two: np.ndarray, stat: np.ndarray, lo: np.ndarray, hi: np.ndarray, *, level: float,
          sesoi: float) -> dict[str, np.ndarray]:
    """Per setting (last axis): Holm p, beats, harms, equivalent (whole interval within +/- sesoi)."""
    ph = holm(p_two)
    stat = np.asarray(stat, dtype=np.float64)
    return {"p_holm": ph, "beats": (ph < level) & (stat > 0), "harms": (ph < level) & (stat < 0),
            "equivalent": (np.asarray(lo) > -sesoi) & (np.asarray(hi) < sesoi)}


def decide(p_two: np.ndarray, stat: np.ndarray, lo: np.ndarray, hi: np.ndarray, *, level: float,
           sesoi: float) -> np.ndarray:
    """The verdict code of each sweep (leading axes) from its settings (last axis), as an index in ``CODES``."""
    f = flags(p_two, stat, lo, hi, level=level, sesoi=sesoi)
    eff, harm, eq = f["beats"].any(-1), f["harms"].any(-1), f["equivalent"].all(-1)
    return np.where(eff, 0, np.where(harm, 1, np.where(eq, 2, 3)))


__all__ = ["CODES", "decide", "flags", "holm"]
