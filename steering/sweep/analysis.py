"""python -m steering.sweep RUN_DIR --directions RUN_DIR/probes  (this module: the sweep's statistics)

From ``generations.jsonl`` to ``summary.json``: per probe setting, the fraction of type-C cases moved to a
correct answer, next to its random-direction controls, tested exactly and bounded at the level of questions.

* **Two co-primary outcomes** (:mod:`steering.sweep.outcomes`): *moved among parsed* (of the steered C generations
  whose answer parses, the fraction now correct) and the *parse rate* (the fraction that parses), each as the
  probe minus its control with its own exact test and interval. ``moved_of_all`` (an unparsed answer counts as
  not moved) is kept for reference with ``difference_of_all``: it mixes the two, so a setting that stops the
  answer from parsing scores a "null" on it by construction. Rates are Wilson intervals when every question
  gives one case, else question-clustered (:func:`loadbearing.stats.clustered_rate`).
* **Controls.** Each random generation of a case has its own direction (:mod:`steering.sweep.controls`). For k = 1
  the control is the isotropic random directions (``random``); for k > 1 it is the covariance-matched ones
  (``random_cov``) when the sweep drew them, with the isotropic comparison reported beside
  (``isotropic``: its own exact test, outside the verdict); without random controls, the alpha-0 rerun.
* **Test:** the exact randomisation test of :mod:`steering.sweep.exact` (within each case, which of the m+1
  generations is the probe's), statistic = mean over cases of (probe moved - mean random moved); two-sided
  p (``p_value``) and both one-sided p's, the attainable level; Holm (the verdict) and Benjamini-Hochberg
  across the grid.
* **Paired difference, per question.** Each question's difference is the mean over its cases of
  ``outcome(probe) - mean outcome(controls)``; the estimate is the mean over questions, with a t-interval computed
  with one pseudo-question at +1 and one at -1 added (an Agresti-Caffo-style adjustment: 20 questions that all
  show 0 give [-13.7, +13.7] points). For moved among parsed a case counts when its probe and one control parsed
  (the others are counted: ``n_probe_unparsed``, ``n_controls_unparsed``); a case with no control generation is
  dropped and counted (``n_dropped``).
* **Direction level** (``direction_rank``, :func:`steering.sweep.outcomes.direction_rank`), when every random
  setting is one direction for all cases (``--random-scope sweep``): the probe's moved-among-parsed rate
  ranked among the R random directions' (exact, smallest p 1 / (R + 1)); an effect then also needs the
  Holm-adjusted rank p <= level, so "effect" means the direction is special, not only that the probe's
  generations beat fresh random ones.
* **Verdict** (:mod:`steering.sweep.verdict`), per setting (``setting_verdict``) and over the settings:
  uninformative (the parse rate differs from the control's by more than ``parse_margin``, exact p < level:
  never null or effect) / effect / harm / null (the moved interval within +/- SESOI *and* the parse-rate
  interval within +/- ``parse_margin``) / inconclusive; ``insufficient_data`` when no C case was steered.
  ``uninformative`` lists the settings so called. ``power`` holds the minimum detectable effect and the cases a
  null would need, both by simulating both tests and the rule (:mod:`steering.planning.power`).
* **Operators.** Each operator of the sweep (``add``: steering; ``ablate``: directional ablation, the probe
  basis projected out against random bases projected out, :mod:`steering.ablation`) is its own family: its
  own Holm, strongest setting, verdict and power, in ``verdicts[operator]``; each setting names its
  ``operator``. The top-level ``verdict_code``, ``strongest``, ``power`` and ``multiple_comparisons`` are the
  first operator's (``add`` when it ran, so a one-operator summary reads as before); ``verdict`` is that
  operator's text, or every operator's as ``[add] ... [ablate] ...``.
"""
from __future__ import annotations

from collections import defaultdict
from collections.abc import Sequence
from typing import Any

import numpy as np

from loadbearing.results.check import RateJSON
from loadbearing.runs import question_key_of
from loadbearing.stats import clustered_rate, wilson_rate
from steering.planning import power
from steering.sweep.grid import Setting
from steering.sweep.outcomes import adjusted_interval, compare, direction_rank
from steering.sweep.text import fmt_rate, format_summary, format_table, verdict_text
from steering.sweep.verdict import CODES, PARSE_MARGIN, flags, setting_codes
from steering.sweep.verdict import holm as f_holm

VERDICTS = CODES + ("insufficient_data",)

MIN_DIRECTIONS = 20

# ------------------------------------------------------------------------------------------------ rates


def _rate(hits: Sequence[bool], groups: Sequence[str]) -> RateJSON:
    """Wilson when every question gives one row, else the question-clustered rate."""
    if len(set(groups)) == len(groups):
        n = len(hits)
        return wilson_rate(int(sum(bool(h) for h in hits)), n, n_questions=n).to_dict()
    return clustered_rate(list(hits), list(groups)).to_dict()


# ------------------------------------------------------------------------------------------------ settings


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


def _setting_summary(s: Setting, grid: list[Setting], by_setting: dict[str, dict[str, dict]], has_baseline: bool,
                     seed: int) -> dict[str, Any]:
    st = _setting_stats(list(by_setting.get(s.key, {}).values()))
    kind, keys, iso = _controls(s, grid, has_baseline)
    ctrl = _setting_stats([r for k in keys for r in by_setting.get(k, {}).values()])
    cmp = compare(by_setting, s.key, keys, seed) if kind else None
    test = cmp["moved"]["test"] if cmp else None
    pt = cmp["parse"]["test"] if cmp else None
    out = dict(key=s.key, operator=s.operator, directions=s.directions, layer=s.layer, k=s.k, alpha_rel=s.alpha_rel,
               alpha=s.alpha, **st,
               control={"kind": kind, "keys": keys, "m": len(keys), "moved_of_all": ctrl["moved_of_all"],
                        "moved": ctrl["moved"], "coverage_c": ctrl["coverage_c"], "broken": ctrl["broken"]},
               difference=cmp["moved"]["difference"] if cmp else None, exact=test,
               p_value=test["p_two"] if test else None,
               p_greater=test["p_greater"] if test else None, p_less=test["p_less"] if test else None,
               test=(test or {}).get("method", "") + ("; two-sided p = twice the smaller one-sided p" if test else ""),
               parse={"difference": cmp["parse"]["difference"] if cmp else None, "exact": pt,
                      "p_value": pt["p_two"] if pt else None},
               direction_rank=direction_rank(by_setting, s.key, keys) if kind in ("random", "random_cov") else None,
               difference_of_all=cmp["moved_of_all"]["difference"] if cmp else None,
               p_value_of_all=(cmp["moved_of_all"]["test"] or {}).get("p_two") if cmp else None)
    if iso:
        ic = compare(by_setting, s.key, iso, seed)
        out["isotropic"] = {"keys": iso, "moved_of_all": _setting_stats(
            [r for k in iso for r in by_setting.get(k, {}).values()])["moved_of_all"],
            "moved": _setting_stats([r for k in iso for r in by_setting.get(k, {}).values()])["moved"],
            "difference": ic["moved"]["difference"], "parse_difference": ic["parse"]["difference"],
            "p_value": ic["moved"]["test"]["p_two"] if ic["moved"]["test"] else None}
    return out


# ------------------------------------------------------------------------------------------------ summary


def _nan(x: Any) -> float:
    return float("nan") if x is None else float(x)


def _adjust(out: list[dict[str, Any]], level: float, sesoi: float, parse_margin: float) -> list[int]:
    """Holm / BH over the tested settings (those with a control), both outcomes, and each setting's code."""
    from statsmodels.stats.multitest import multipletests  # deferred: statsmodels is heavy to import

    idx = [i for i, d in enumerate(out) if d["parse"]["p_value"] is not None]
    p = np.array([_nan(out[i]["p_value"]) for i in idx])
    stat = np.array([_nan((out[i]["exact"] or {}).get("stat")) for i in idx])
    ci = np.array([(out[i]["difference"] or {}).get("ci") or [None, None] for i in idx], dtype=np.float64).reshape(-1, 2)
    pd_ = [out[i]["parse"]["difference"] for i in idx]
    pci = np.array([d["ci"] for d in pd_], dtype=np.float64).reshape(-1, 2)
    parse = {"p": np.array([out[i]["parse"]["p_value"] for i in idx], dtype=np.float64),
             "est": np.array([d["estimate"] for d in pd_], dtype=np.float64), "lo": pci[:, 0], "hi": pci[:, 1]}
    f = flags(p, stat, ci[:, 0], ci[:, 1], level=level, sesoi=sesoi, parse=parse, parse_margin=parse_margin)
    # direction level (--random-scope sweep): an effect must also rank the probe's direction above the random
    # ones (Holm over the ranked settings, exact p <= level); without fixed random directions it is not ranked
    ranks = [out[i].get("direction_rank") for i in idx]
    has_rank = np.array([r is not None for r in ranks], dtype=bool)
    rank_holm = np.full(len(idx), np.nan)
    if has_rank.any():
        rank_holm[has_rank] = f_holm(np.array([r["p_greater"] for r in ranks if r is not None]))
        f["beats"] = f["beats"] & (~has_rank | (np.nan_to_num(rank_holm, nan=1.0) <= level + 1e-12))
    codes = setting_codes(f)
    has_p = ~np.isnan(p)
    bh = np.full(len(idx), np.nan)
    if has_p.any():
        bh[has_p] = multipletests(p[has_p], method="fdr_bh")[1]
    ph_parse = f_holm(parse["p"])
    for d in out:
        d.update(p_holm=None, p_bh=None, beats_control=False, harms=False, equivalent=False, strongest=False,
                 uninformative=False, setting_verdict=None)
        d["parse"].update(p_holm=None, status=None, margin=parse_margin)
    for j, i in enumerate(idx):
        d = out[i]
        d.update(p_holm=float(f["p_holm"][j]) if has_p[j] else None, p_bh=float(bh[j]) if has_p[j] else None,
                 beats_control=bool(f["beats"][j]), harms=bool(f["harms"][j]), equivalent=bool(f["equivalent"][j]),
                 uninformative=bool(f["broken"][j]), setting_verdict=CODES[int(codes[j])])
        if d.get("direction_rank"):
            d["direction_rank"]["p_holm"] = float(rank_holm[j])
        d["parse"].update(p_holm=float(ph_parse[j]),
                          status="broken" if f["broken"][j] else "kept" if f["parse_kept"][j] else "unclear")
    for d in out:
        d["excludes_sesoi"] = d["equivalent"]
    return idx


def power_summary(out: list[dict[str, Any]], idx: list[int], *, level: float, sesoi: float, seed: int,
                  parse_margin: float = PARSE_MARGIN) -> dict[str, Any] | None:
    """The sweep's minimum detectable effect and the cases a null would need, by simulation (steering.planning.power),
    at the controls' observed moved-among-parsed rate and parse rate."""
    if not idx:
        return None
    n = int(np.median([out[i]["parse"]["difference"]["n_cases"] for i in idx]))
    m = int(np.median([out[i]["control"]["m"] for i in idx]))
    k_n = sum(out[i]["control"]["moved"]["k"] for i in idx)
    n_n = sum(out[i]["control"]["moved"]["n"] for i in idx)
    k_p = sum(out[i]["control"]["coverage_c"]["k"] for i in idx)
    n_p = sum(out[i]["control"]["coverage_c"]["n"] for i in idx)
    base = round(k_n / n_n, 2) if n_n else 0.0
    parse = round(k_p / n_p, 2) if n_p else 1.0
    if n < 1 or m < 1 or parse <= 0:
        return None
    kw = dict(level=level, seed=seed, parse_rate=parse, parse_margin=parse_margin)
    return {"mde": power.mde(n, m, len(idx), base, **kw),
            "n_cases_for_null": power.n_for_null(m, len(idx), base, sesoi=sesoi, **kw),
            "n_cases": n, "m": m, "n_settings": len(idx), "base_rate": base, "parse_rate": parse,
            "power": power.POWER, "n_sims": power.N_SIMS, "n_max": power.N_MAX,
            "method": (f"simulated: {power.N_SIMS} sweeps of both exact tests + Holm over {len(idx)} settings + the "
                       "verdict rule; one case per question, one setting carrying the effect, every generation "
                       "parsing at the controls' observed rate and random controls moving (among parsed) at "
                       "their observed pooled rate")}


def summarize_records(recs: list[dict[str, Any]], grid: list[Setting], *, sesoi: float = 0.10,
                      level: float = 0.05, seed: int = 0, power: bool = True,
                      parse_margin: float = PARSE_MARGIN) -> dict[str, Any]:
    """The statistics part of ``summary.json`` from the generation records of one sweep (``power=False``
    skips the simulated MDE and the cases a null would need; ``parse_margin``: the parse-rate difference
    beyond which a setting is ``uninformative``, :mod:`steering.sweep.verdict`)."""
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
                                    seed=seed, power=power, parse_margin=parse_margin) for op in ops}
    first = blocks[ops[0]]
    codes = [b["verdict_code"] for b in blocks.values()]
    summary = {
        "status": "ok" if any(c != "insufficient_data" for c in codes) else "insufficient_data",
        "verdict_code": first["verdict_code"],
        "sesoi": sesoi,
        "parse_margin": parse_margin,
        "level": level,
        "uninformative": first["uninformative"],
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
                      power: bool, parse_margin: float) -> dict[str, Any]:
    """One operator's family of tests (``add`` or ``ablate``): its probe settings against their controls, Holm
    over them alone, its strongest setting, verdict code and text, and power."""
    out = [_setting_summary(s, grid, by_setting, has_baseline, seed) for s in grid
           if s.basis == "probe" and s.operator == op]
    idx = _adjust(out, level, sesoi, parse_margin)
    # strongest: the highest moved-among-parsed rate of the settings that keep the answer line (all, if none)
    ranked = ([d for d in out if d["moved"]["n"] and not d["uninformative"]]
              or [d for d in out if d["moved_of_all"]["n"]])
    strongest = None
    if ranked:
        strongest = max(ranked, key=lambda d: ((d["moved"]["rate"] or 0.0) if d["moved"]["n"] else -1.0,
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
    elif tested and all(d["uninformative"] for d in tested):
        code = "uninformative"
    else:
        code = "inconclusive"
    block = {
        "operator": op,
        "verdict_code": code,
        "sesoi": sesoi,
        "parse_margin": parse_margin,
        "level": level,
        "uninformative": [d["key"] for d in tested if d["uninformative"]],
        "n_random_directions": sum(1 for r in recs if r.get("basis") in ("random", "random_cov")
                                   and r.get("operator", "add") == op),
        "strongest": strongest["key"] if strongest else None,
        "multiple_comparisons": {"method": "holm (verdict) and fdr_bh, each outcome on its own", "n_tests": len(idx),
                                 "level": level},
        "power": (power_summary(out, idx, level=level, sesoi=sesoi, seed=seed, parse_margin=parse_margin)
                  if power and code != "insufficient_data" else None),
        "settings": out,
    }
    block["verdict"] = verdict_text(block)
    return block


__all__ = ["MIN_DIRECTIONS", "VERDICTS", "adjusted_interval", "fmt_rate", "format_summary", "format_table",
           "power_summary", "summarize_records", "verdict_text"]
