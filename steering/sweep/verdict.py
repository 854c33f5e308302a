"""python -m steering.sweep RUN_DIR --directions RUN_DIR/probes  (this module: the all-settings decision rule)

One rule, used by the sweep's summary (:mod:`steering.sweep.analysis`) and by the power simulation
(:mod:`steering.planning.power`), so the simulated power is the power of the verdict the toolkit prints. Two outcomes
are co-primary for every probe setting against its random controls (:mod:`steering.sweep.outcomes`):

* **moved among parsed**: of the steered C generations whose answer parses, the fraction now correct; the
  exact test's two-sided p, the sign of its statistic and the 95% interval of the probe-minus-control
  difference;
* **parse rate**: the fraction of steered C generations whose answer parses; its own exact test and interval.

Per setting (``setting_codes``), in this order:

* **uninformative**: the setting breaks (or mends) the answer line: the parse-rate difference from its
  control is beyond +/- ``parse_margin`` (default 10 points) and its exact test rejects (Holm-adjusted over
  the settings, p < level). Such a setting is never called null or effect, whatever its moved rate says;
* **effect**: moved-among-parsed beats the control: Holm-adjusted p < level (Holm over the operator's
  settings) and statistic > 0;
* **harm**: Holm p < level and statistic < 0;
* **null**: the moved interval lies inside (-SESOI, +SESOI) *and* the parse-rate interval inside
  (-parse_margin, +parse_margin): a TOST-style equivalence test of both outcomes (each one-sided bound at
  2.5%), so a null cannot rest on an answer line that stopped parsing;
* **inconclusive**: none of these.

Over the settings (``decide``): **effect** when some setting is effect; else **harm** when some is harm; else
**null** when every setting is null (an intersection-union test, no multiplicity correction needed); else
**uninformative** when every setting is uninformative; else **inconclusive** (the text names the
uninformative settings). Holm and the two-sided p-values (each the doubled smaller tail) test each direction
at level / 2.
"""
from __future__ import annotations

import numpy as np

CODES = ("effect", "harm", "null", "inconclusive", "uninformative")
PARSE_MARGIN = 0.10


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
          sesoi: float, parse: dict[str, np.ndarray] | None = None,
          parse_margin: float = PARSE_MARGIN) -> dict[str, np.ndarray]:
    """Per setting (last axis): Holm p, broken (uninformative), beats, harms, equivalent.

    ``parse`` holds the parse-rate outcome per setting: ``p`` (exact two-sided p), ``est`` (probe minus
    control parse rate), ``lo`` / ``hi`` (its 95% interval); None: every answer parsed (no parse outcome).
    A NaN moved p (no case whose probe and a control both parsed) tests nothing."""
    p_two = np.asarray(p_two, dtype=np.float64)
    ph = holm(np.where(np.isnan(p_two), 1.0, p_two))
    stat = np.nan_to_num(np.asarray(stat, dtype=np.float64))
    lo, hi = np.asarray(lo, dtype=np.float64), np.asarray(hi, dtype=np.float64)
    if parse is None:
        broken = np.zeros(ph.shape, dtype=bool)
        kept = np.ones(ph.shape, dtype=bool)
    else:
        pp = holm(np.where(np.isnan(np.asarray(parse["p"], dtype=np.float64)), 1.0, parse["p"]))
        broken = (pp < level) & (np.abs(np.asarray(parse["est"])) > parse_margin)
        kept = (np.asarray(parse["lo"]) > -parse_margin) & (np.asarray(parse["hi"]) < parse_margin)
    ok = ~broken
    eq = (lo > -sesoi) & (hi < sesoi)  # NaN bounds compare False: no interval, no equivalence
    return {"p_holm": ph, "broken": broken, "parse_kept": kept, "beats": ok & (ph < level) & (stat > 0),
            "harms": ok & (ph < level) & (stat < 0), "moved_equivalent": eq, "equivalent": ok & eq & kept}


def setting_codes(f: dict[str, np.ndarray]) -> np.ndarray:
    """Each setting's verdict code (an index in ``CODES``) from :func:`flags`."""
    return np.where(f["broken"], 4, np.where(f["beats"], 0, np.where(f["harms"], 1, np.where(f["equivalent"], 2, 3))))


def decide(p_two: np.ndarray, stat: np.ndarray, lo: np.ndarray, hi: np.ndarray, *, level: float,
           sesoi: float, parse: dict[str, np.ndarray] | None = None,
           parse_margin: float = PARSE_MARGIN) -> np.ndarray:
    """The verdict code of each sweep (leading axes) from its settings (last axis), as an index in ``CODES``."""
    f = flags(p_two, stat, lo, hi, level=level, sesoi=sesoi, parse=parse, parse_margin=parse_margin)
    eff, harm, eq, unin = f["beats"].any(-1), f["harms"].any(-1), f["equivalent"].all(-1), f["broken"].all(-1)
    return np.where(eff, 0, np.where(harm, 1, np.where(eq, 2, np.where(unin, 4, 3))))


__all__ = ["CODES", "PARSE_MARGIN", "decide", "flags", "holm", "setting_codes"]
