"""python -m steering.sweep RUN_DIR --directions RUN_DIR/probes  (this module: a setting's two outcomes)

A probe setting against its random-direction controls, case by case (one C case: the probe's generation and
the controls' generations of the same prefix), on two co-primary outcomes (:mod:`steering.sweep.verdict`):

* **moved among parsed** (``moved``): a case counts when its probe generation parses and at least one of its
  controls does; its values are the probe's moved (0/1) and each *parsed* control's. The exact randomisation
  test (:mod:`steering.sweep.exact`) is then exact conditionally on which generations parsed: under the null that
  the probe's generation is exchangeable with the random ones (on the whole outcome: parsed, and then
  correct or not), given that the probe's parsed, it is a uniform draw among the parsed ones of its case.
  Cases whose probe did not parse (``n_probe_unparsed``) or whose controls all failed to parse
  (``n_controls_unparsed``) are counted and left out; the rate then says nothing about them, which is why
  the parse rate is an outcome of its own.
* **parse rate** (``parse``): every case with a control; values: parsed (0/1) for the probe and each control;
  the same exact test (here unconditionally exact) and the same interval.

Each outcome's interval is the mean over questions of the per-question mean of (probe - mean control), with
the pseudo-question t-interval of :func:`adjusted_interval`. The old moved-of-all outcome (an unparsed
answer counts as not moved) is kept as ``difference_of_all`` for reference: it mixes the two outcomes, so a
setting that stops the answer from parsing scores a "null" on it by construction.
"""
from __future__ import annotations

import math
from collections import defaultdict
from collections.abc import Sequence
from typing import Any

import numpy as np

from loadbearing.runs import question_key_of
from steering.sweep.exact import randomisation_test

PI = "t-interval with one pseudo-question at +1 and one at -1"


def adjusted_interval(diffs: Sequence[float], level: float = 0.95) -> dict[str, Any]:
    """Mean of ``diffs`` with the pseudo-question t-interval: one question at +1 and one at -1 are added (an
    Agresti-Caffo-style adjustment: 20 questions that all show 0 give [-13.7, +13.7] points)."""
    from scipy.stats import t as t_dist  # deferred: scipy is heavy to import

    d = np.asarray(diffs, dtype=np.float64)
    if d.size == 0:
        return {"estimate": None, "ci": [None, None], "sd": None, "n_questions": 0}
    aug = np.concatenate([d, [1.0, -1.0]])
    sd = float(aug.std(ddof=1))
    se = sd / math.sqrt(aug.size)
    q = float(t_dist.ppf(1 - (1 - level) / 2, aug.size - 1))
    m = float(aug.mean())
    return {"estimate": float(d.mean()), "ci": [max(-1.0, m - q * se), min(1.0, m + q * se)], "sd": sd,
            "n_questions": int(d.size)}


def _moved(r: dict[str, Any]) -> float:
    return 1.0 if r.get("correct") is True else 0.0


def _parsed(r: dict[str, Any]) -> float:
    return 0.0 if r.get("correct") is None else 1.0


def _block(cases: list[list[float]], per_q: dict[str, list[float]], seed: int, method: str,
           **counts: int) -> dict[str, Any]:
    diffs = [float(np.mean(v)) for _, v in sorted(per_q.items())]
    diff = dict(adjusted_interval(diffs), n_cases=len(cases), **counts, method=method + "; " + PI)
    return {"difference": diff, "test": randomisation_test(cases, seed=seed) if cases else None}


def compare(by_setting: dict[str, dict[str, dict]], probe_key: str, keys: list[str],
            seed: int) -> dict[str, dict[str, Any]]:
    """``{"moved": .., "parse": .., "moved_of_all": ..}``, each ``{"difference", "test"}``, of a probe setting
    against the control settings ``keys`` (see the module docstring)."""
    mv, pa, al = [], [], []
    q_mv: dict[str, list[float]] = defaultdict(list)
    q_pa: dict[str, list[float]] = defaultdict(list)
    q_al: dict[str, list[float]] = defaultdict(list)
    n_dropped = n_probe_unp = n_ctrl_unp = n_unparsed = 0
    for cid, r in sorted(by_setting.get(probe_key, {}).items()):
        if r["case_label"] != "C":
            continue
        ctrl = [by_setting[k][cid] for k in keys if cid in by_setting.get(k, {})]
        if not ctrl:
            n_dropped += 1
            continue
        q = question_key_of(r)
        pv = [_parsed(c) for c in ctrl]
        pa.append([_parsed(r)] + pv)
        q_pa[q].append(_parsed(r) - float(np.mean(pv)))
        av = [_moved(c) for c in ctrl]
        al.append([_moved(r)] + av)
        q_al[q].append(_moved(r) - float(np.mean(av)))
        n_unparsed += int(r.get("correct") is None or min(pv) == 0.0)
        ok = [_moved(c) for c in ctrl if c.get("correct") is not None]
        if r.get("correct") is None:
            n_probe_unp += 1
        elif not ok:
            n_ctrl_unp += 1
        else:
            mv.append([_moved(r)] + ok)
            q_mv[q].append(_moved(r) - float(np.mean(ok)))
    return {
        "moved": _block(mv, q_mv, seed, "moved among parsed: mean over questions of per-question mean (moved_probe "
                        "- mean moved of the parsed controls), cases whose probe and >= 1 control parsed",
                        n_probe_unparsed=n_probe_unp, n_controls_unparsed=n_ctrl_unp, n_dropped=n_dropped),
        "parse": _block(pa, q_pa, seed, "parse rate: mean over questions of per-question mean (parsed_probe - mean "
                        "parsed control)", n_dropped=n_dropped),
        "moved_of_all": _block(al, q_al, seed, "moved-of-all (reference only: unparsed counts as not moved): mean "
                               "over questions of per-question mean (moved_probe - mean moved_control)",
                               n_unparsed_pairs=n_unparsed, n_dropped=n_dropped),
    }


def direction_rank(by_setting: dict[str, dict[str, dict]], probe_key: str, keys: list[str]) -> dict[str, Any] | None:
    """Direction-level test, when each control setting is one direction for every case (``--random-scope
    sweep``: all its records name one ``direction_seed``): the probe's moved-among-parsed rate ranked among
    the R random directions' rates over the same C cases. Under the null that the probe's direction is one
    more draw from the random directions' distribution, its rank is uniform over R + 1, so
    ``p_greater = (1 + #{r_j >= r_probe}) / (R + 1)`` is exact (ties counted against the probe; smallest
    attainable 1 / (R + 1)), and ``p_less`` likewise. None when a control mixes directions (per-case scope)."""
    probe = {cid: r for cid, r in by_setting.get(probe_key, {}).items() if r["case_label"] == "C"}
    if not probe or not keys:
        return None

    def rate(rs: list[dict[str, Any]]) -> float | None:
        parsed = [r for r in rs if r.get("correct") is not None]
        return float(np.mean([r["correct"] is True for r in parsed])) if parsed else None

    rates = []
    for k in keys:
        rs = [r for cid, r in by_setting.get(k, {}).items() if cid in probe]
        if not rs or len({r.get("direction_seed") for r in rs}) != 1 or rs[0].get("direction_seed") is None:
            return None
        rates.append(rate(rs))
    r0 = rate(list(probe.values()))
    got = [r for r in rates if r is not None]
    if r0 is None or not got:
        return None
    R = len(got)
    ge = (1 + sum(r >= r0 - 1e-12 for r in got)) / (R + 1)
    le = (1 + sum(r <= r0 + 1e-12 for r in got)) / (R + 1)
    return {"probe_rate": r0, "random_rates": got, "n_directions": R, "p_greater": ge, "p_less": le,
            "p_two": min(1.0, 2 * min(ge, le)), "min_p_greater": 1 / (R + 1),
            "method": f"rank of the probe's moved-among-parsed rate among {R} random directions, each applied to "
                      "every case (exact: the rank is uniform under the null; ties against the probe)"}


__all__ = ["adjusted_interval", "compare", "direction_rank"]
