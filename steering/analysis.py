"""python -m steering.sweep RUN_DIR --directions RUN_DIR/probes  (this module: the sweep's statistics)

From ``generations.jsonl`` to ``summary.json``: per probe setting, the fraction of type-C cases moved to a
correct answer, next to its random-direction controls, tested exactly and bounded at the level of questions.

* **Moved-of-all** ranks settings: a steered generation whose answer does not parse counts as *not moved*
  (coverage, the parsed fraction, is printed beside it). ``moved`` (parsed only) is kept for reference.
  Rates are Wilson intervals when every question gives one case, else question-clustered
  (:func:`loadbearing.stats.clustered_rate`).
* **Controls.** Each random generation of a case has its own direction (:mod:`steering.controls`). For k = 1
  the control is the isotropic random directions (``random``); for k > 1 it is the covariance-matched ones
  (``random_cov``) when the sweep drew them, with the isotropic comparison reported beside
  (``isotropic``: its own exact test, outside the verdict); without random controls, the alpha-0 rerun.
* **Test:** the exact randomisation test of :mod:`steering.exact` (within each case, which of the m+1
  generations is the probe's), statistic = mean over cases of (probe moved - mean random moved); two-sided
  p (``p_value``) and both one-sided p's, the attainable level; Holm (the verdict) and Benjamini-Hochberg
  across the grid.
* **Paired difference, per question.** Each question's difference is the mean over its cases of
  ``moved(probe) - mean moved(controls)``; the estimate is the mean over questions, with a t-interval computed
  with one pseudo-question at +1 and one at -1 added (an Agresti-Caffo-style adjustment: 20 questions that all
  show 0 give [-13.7, +13.7] points). A pair whose either side is unparsed is kept, scored not moved, and
  counted (``n_unparsed_pairs``); a case with no control generation is dropped and counted (``n_dropped``).
* **Verdict** (:mod:`steering.verdict`): effect / harm / null (every interval within +/- SESOI) /
  inconclusive; ``insufficient_data`` when no C case was steered. ``power`` holds the minimum detectable
  effect and the cases a null would need, both by simulating this test and rule (:mod:`steering.power`).
* **Operators.** Each operator of the sweep (``add``: steering; ``ablate``: directional ablation, the probe
  basis projected out against random bases projected out, :mod:`steering.ablation`) is its own family: its
  own Holm, strongest setting, verdict and power, in ``verdicts[operator]``; each setting names its
  ``operator``. The top-level ``verdict_code``, ``strongest``, ``power`` and ``multiple_comparisons`` are the
  first operator's (``add`` when it ran, so a one-operator summary reads as before); ``verdict`` is that
  operator's text, or every operator's as ``[add] ... [ablate] ...``.
"""
from __future__ import annotations

import math
from collections import defaultdict
from collections.abc import Sequence
from typing import Any

import numpy as np

from loadbearing.runs import question_key_of
from steering.exact import randomisation_test
from steering.grid import Setting
from steering.text import fmt_rate, format_summary, format_table, verdict_text
from steering.verdict import CODES, flags

VERDICTS = CODES + ("insufficient_data",)
MIN_DIRECTIONS = 20

# ------------------------------------------------------------------------------------------------ rates


def _rate(hits: Sequence[bool], groups: Sequence[str]) -> dict[str, Any]:
    """Wilson when every question gives one row, else the question-clustered rate."""
    from loadbearing.stats import clustered_rate, wilson_rate

    if len(set(groups)) == len(groups):
        n = len(hits)
        return wilson_rate(int(sum(bool(h) for h in hits)), n, n_questions=n).to_dict()
    return clustered_rate(list(hits), list(groups)).to_dict()


def adjusted_interval(diffs: Sequence[float], level: float = 0.95) -> dict[str, Any]:
    """Mean of ``diffs`` with the pseudo-question t-interval (see the module docstring)."""
    from scipy.stats import t as t_dist

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


# ------------------------------------------------------------------------------------------------ settings


def _moved(r: dict[str, Any]) -> float:
    """Moved-of-all: 1 when the steered C case now answers correctly; unparsed or wrong -> 0."""
    return 1.0 if r.get("correct") is True else 0.0


def _q(r: dict[str, Any]) -> str:
    return question_key_of(r)


def _setting_stats(rs: list[dict[str, Any]]) -> dict[str, Any]:
    c = [r for r in rs if r["case_label"] == "C"]
    n = [r for r in rs if r["case_label"] == "non-C"]
    c_parsed = [r for r in c if r["correct"] is not None]
    n_parsed = [r for r in n if r["correct"] is not None]
    return {"moved_of_all": _rate([r["correct"] is True for r in c], [_q(r) for r in c]),
            "moved": _rate([r["correct"] is True for r in c_parsed], [_q(r) for r in c_parsed]),
            "coverage_c": _rate([r["correct"] is not None for r in c], [_q(r) for r in c]),
            "broken": _rate([r["correct"] is False for r in n_parsed], [_q(r) for r in n_parsed]),
            "coverage_non_c": _rate([r["correct"] is not None for r in n], [_q(r) for r in n]),
            "n_generations": len(rs)}


def _controls(s: Setting, grid: list[Setting], has_baseline: bool) -> tuple[str | None, list[str], list[str]]:
    """(kind, keys) of the setting's primary control, and the isotropic keys shown beside a covariance one."""
    same = [g for g in grid if (g.layer, g.k, g.alpha_rel, g.operator) == (s.layer, s.k, s.alpha_rel, s.operator)]
    iso = [g.key for g in same if g.basis == "random"]
    cov = [g.key for g in same if g.basis == "random_cov"]
    if cov:
        return "random_cov", cov, iso
    if iso:
        return "random", iso, []
    return ("none", ["none|alpha0"], []) if has_baseline else (None, [], [])


def _compare(by_setting: dict[str, dict[str, dict]], probe_key: str, keys: list[str],
             seed: int) -> dict[str, Any]:
    """The exact test, the per-question difference and the pair counts of a probe setting vs ``keys``."""
    cases, per_q = [], defaultdict(list)
    n_unparsed = n_dropped = 0
    for cid, r in sorted(by_setting.get(probe_key, {}).items()):
        if r["case_label"] != "C":
            continue
        ctrl = [by_setting[k][cid] for k in keys if cid in by_setting.get(k, {})]
        if not ctrl:
            n_dropped += 1
            continue
        n_unparsed += int(r.get("correct") is None or any(c.get("correct") is None for c in ctrl))
        vals = [_moved(c) for c in ctrl]
        cases.append([_moved(r)] + vals)
        per_q[_q(r)].append(_moved(r) - float(np.mean(vals)))
    diffs = [float(np.mean(v)) for _, v in sorted(per_q.items())]
    diff = dict(adjusted_interval(diffs), n_cases=len(cases), n_unparsed_pairs=n_unparsed, n_dropped=n_dropped,
                method="mean over questions of per-question mean (moved_probe - mean moved_control), moved-of-all; "
                       "t-interval with one pseudo-question at +1 and one at -1")
    test = randomisation_test(cases, seed=seed) if cases else None
    return {"difference": diff, "test": test}


def _setting_summary(s: Setting, grid: list[Setting], by_setting: dict[str, dict[str, dict]], has_baseline: bool,
                     seed: int) -> dict[str, Any]:
    st = _setting_stats(list(by_setting.get(s.key, {}).values()))
    kind, keys, iso = _controls(s, grid, has_baseline)
    ctrl = _setting_stats([r for k in keys for r in by_setting.get(k, {}).values()])
    cmp = _compare(by_setting, s.key, keys, seed) if kind else {"difference": None, "test": None}
    test = cmp["test"]
    out = dict(key=s.key, operator=s.operator, directions=s.directions, layer=s.layer, k=s.k, alpha_rel=s.alpha_rel,
               alpha=s.alpha, **st,
               control={"kind": kind, "keys": keys, "m": len(keys), "moved_of_all": ctrl["moved_of_all"],
                        "moved": ctrl["moved"], "coverage_c": ctrl["coverage_c"], "broken": ctrl["broken"]},
               difference=cmp["difference"], exact=test,
               p_value=test["p_two"] if test else None,
               p_greater=test["p_greater"] if test else None, p_less=test["p_less"] if test else None,
               test=(test or {}).get("method", "") + ("; two-sided p = twice the smaller one-sided p" if test else ""))
    if iso:
        ic = _compare(by_setting, s.key, iso, seed)
        out["isotropic"] = {"keys": iso, "moved_of_all": _setting_stats(
            [r for k in iso for r in by_setting.get(k, {}).values()])["moved_of_all"],
            "difference": ic["difference"], "p_value": ic["test"]["p_two"] if ic["test"] else None}
    return out


# ------------------------------------------------------------------------------------------------ summary


def _adjust(out: list[dict[str, Any]], level: float, sesoi: float) -> list[int]:
    from statsmodels.stats.multitest import multipletests

    idx = [i for i, d in enumerate(out) if d["p_value"] is not None]
    p = np.array([out[i]["p_value"] for i in idx])
    stat = np.array([out[i]["exact"]["stat"] for i in idx])
    ci = np.array([out[i]["difference"]["ci"] for i in idx], dtype=np.float64).reshape(-1, 2)
    f = flags(p, stat, ci[:, 0], ci[:, 1], level=level, sesoi=sesoi)
    bh = multipletests(p, method="fdr_bh")[1] if idx else []
    for d in out:
        d.update(p_holm=None, p_bh=None, beats_control=False, harms=False, equivalent=False, strongest=False)
    for j, i in enumerate(idx):
        out[i].update(p_holm=float(f["p_holm"][j]), p_bh=float(bh[j]), beats_control=bool(f["beats"][j]),
                      harms=bool(f["harms"][j]), equivalent=bool(f["equivalent"][j]))
    for d in out:
        d["excludes_sesoi"] = d["equivalent"]
    return idx


def power_summary(out: list[dict[str, Any]], idx: list[int], *, level: float, sesoi: float,
                  seed: int) -> dict[str, Any] | None:
    """The sweep's minimum detectable effect and the cases a null would need, by simulation (steering.power)."""
    from steering import power

    if not idx:
        return None
    n = int(np.median([out[i]["difference"]["n_cases"] for i in idx]))
    m = int(np.median([out[i]["control"]["m"] for i in idx]))
    k_n = sum(out[i]["control"]["moved_of_all"]["k"] for i in idx)
    n_n = sum(out[i]["control"]["moved_of_all"]["n"] for i in idx)
    base = round(k_n / n_n, 2) if n_n else 0.0
    if n < 1 or m < 1:
        return None
    kw = dict(level=level, seed=seed)
    return {"mde": power.mde(n, m, len(idx), base, **kw),
            "n_cases_for_null": power.n_for_null(m, len(idx), base, sesoi=sesoi, **kw),
            "n_cases": n, "m": m, "n_settings": len(idx), "base_rate": base, "power": power.POWER,
            "n_sims": power.N_SIMS, "n_max": power.N_MAX,
            "method": (f"simulated: {power.N_SIMS} sweeps of the exact test + Holm over {len(idx)} settings + the "
                       "verdict rule; one case per question, one setting carrying the effect, random controls "
                       "moving at the observed pooled rate")}


def summarize_records(recs: list[dict[str, Any]], grid: list[Setting], *, sesoi: float = 0.10,
                      level: float = 0.05, seed: int = 0, power: bool = True) -> dict[str, Any]:
    """The statistics part of ``summary.json`` from the generation records of one sweep (``power=False``
    skips the simulated MDE and the cases a null would need)."""
    by_setting: dict[str, dict[str, dict]] = defaultdict(dict)
    for r in recs:
        by_setting[r["setting"]][r["case_id"]] = r  # one per (setting, case); the writer never duplicates

    baseline = None
    has_baseline = any(s.basis == "none" for s in grid)
    if has_baseline:
        rs = list(by_setting.get("none|alpha0", {}).values())
        c = [r for r in rs if r["case_label"] == "C"]
        nn = [r for r in rs if r["case_label"] == "non-C"]
        baseline = dict(_setting_stats(rs), key="none|alpha0",
                        reproduced_c=_rate([r["correct"] is False for r in c], [_q(r) for r in c]),
                        reproduced_non_c=_rate([r["correct"] is True for r in nn], [_q(r) for r in nn]))

    c_recs = [r for r in recs if r["case_label"] == "C"]
    n_c = len({r["case_id"] for r in c_recs})
    ops = list(dict.fromkeys(s.operator for s in grid if s.basis == "probe")) or ["add"]
    blocks = {op: _operator_verdict(op, recs, grid, by_setting, has_baseline, n_c, sesoi=sesoi, level=level,
                                    seed=seed, power=power) for op in ops}
    first = blocks[ops[0]]
    codes = [b["verdict_code"] for b in blocks.values()]
    summary = {
        "status": "ok" if any(c != "insufficient_data" for c in codes) else "insufficient_data",
        "verdict_code": first["verdict_code"],
        "sesoi": sesoi,
        "level": level,
        "n_c_cases": n_c,
        "n_c_questions": len({_q(r) for r in c_recs}),
        "n_non_c_cases": len({r["case_id"] for r in recs if r["case_label"] == "non-C"}),
        "n_generations": len(recs),
        "n_random_directions": sum(b["n_random_directions"] for b in blocks.values()),
        "baseline": baseline,
        "strongest": first["strongest"],
        "multiple_comparisons": first["multiple_comparisons"],
        "power": first["power"],
        "operators": ops,
        "verdicts": {op: {k: v for k, v in b.items() if k != "settings"} for op, b in blocks.items()},
        "settings": [d for b in blocks.values() for d in b["settings"]],
    }
    summary["verdict"] = (first["verdict"] if len(ops) == 1 or all(c == "insufficient_data" for c in codes)
                          else " ".join(f"[{op}] {b['verdict']}" for op, b in blocks.items()))
    return summary


def _operator_verdict(op: str, recs: list[dict[str, Any]], grid: list[Setting], by_setting: dict[str, dict[str, dict]],
                      has_baseline: bool, n_c: int, *, sesoi: float, level: float, seed: int,
                      power: bool) -> dict[str, Any]:
    """One operator's family of tests (``add`` or ``ablate``): its probe settings against their controls, Holm
    over them alone, its strongest setting, verdict code and text, and power."""
    out = [_setting_summary(s, grid, by_setting, has_baseline, seed) for s in grid
           if s.basis == "probe" and s.operator == op]
    idx = _adjust(out, level, sesoi)
    ranked = [d for d in out if d["moved_of_all"]["n"]]
    strongest = None
    if ranked:
        strongest = max(ranked, key=lambda d: (d["moved_of_all"]["rate"],
                                               -(d["p_value"] if d["p_value"] is not None else 1.0)))
        strongest["strongest"] = True
    tested = [out[i] for i in idx]
    if strongest is None or n_c == 0:
        code = "insufficient_data"
    elif any(d["beats_control"] for d in tested):
        code = "effect"
    elif any(d["harms"] for d in tested):
        code = "harm"
    elif tested and all(d["equivalent"] for d in tested):
        code = "null"
    else:
        code = "inconclusive"
    block = {
        "operator": op,
        "verdict_code": code,
        "sesoi": sesoi,
        "level": level,
        "n_random_directions": sum(1 for r in recs if r.get("basis") in ("random", "random_cov")
                                   and r.get("operator", "add") == op),
        "strongest": strongest["key"] if strongest else None,
        "multiple_comparisons": {"method": "holm (verdict) and fdr_bh", "n_tests": len(idx), "level": level},
        "power": (power_summary(out, idx, level=level, sesoi=sesoi, seed=seed)
                  if power and code != "insufficient_data" else None),
        "settings": out,
    }
    block["verdict"] = verdict_text(block)
    return block


__all__ = ["MIN_DIRECTIONS", "VERDICTS", "adjusted_interval", "fmt_rate", "format_summary", "format_table",
           "power_summary", "summarize_records", "verdict_text"]
