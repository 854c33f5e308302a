"""python -m steering.sweep --plan [--sesoi 0.10] [--pilot RUN_DIR/steering | --base-rate R [--base-range LO,HI]
[--parse-rate Q] --effect E]

Before anything is generated: how many held-out C cases (questions) a definitive steering verdict needs, from
the simulation of the sweep's own two exact tests (moved among parsed, parse rate), Holm over the settings and
verdict rule (:mod:`steering.planning.power`, :mod:`steering.sweep.verdict`).

* A **null** is sized to hold (80% of sweeps) at effect 0 and the SESOI to be excluded (a null, or an effect
  whose intervals lie within the SESOI: a large sample rightly detects a real 3-point effect) at a true
  effect of SESOI/3, and over the base rate's uncertainty: the pilot's interval for its random controls'
  moved-among-parsed rate, or a stated prior (``--base-range``, default half to one and a half times
  ``--base-rate``). The n that holds only at effect 0
  with the base rate known (the optimistic plan) is printed beside it.
* The **SESOI** is stated relative to the base rate: at a 2.5% random rate a 10-point SESOI is four times the
  rate, so a probe that doubles it would be called null; the plan says so.
* At the planned n, for each base rate and each true effect (0, SESOI/3, SESOI, ``--effect``), it prints
  P(null), P(effect), P(inconclusive) and P(uninformative).

The design (settings, random generations per case) comes from ``--k``, ``--alphas``, ``--layers`` and
``--random-seeds``, or from the pilot sweep; the parse rate from the pilot's controls or ``--parse-rate``
(default 1). Prints one block; writes nothing; loads no model.
"""
from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from steering.planning import power
from steering.sweep.config import CONFIG_FILE, SUMMARY, SweepError


@dataclass(frozen=True)
class Design:
    n_settings: int
    m: int
    base_rate: float
    base_source: str
    effect: float | None
    effect_source: str
    n_pilot: int | None = None  # C cases of the pilot
    per_question: int | None = None
    parse_rate: float = 1.0
    base_range: tuple[float, float] | None = None  # the base rate's uncertainty (pilot interval or prior)
    range_source: str = ""


def _read(path: Path) -> dict[str, Any]:
    try:
        d = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError) as e:
        raise SweepError(f"--pilot: cannot read {str(path)!r} ({type(e).__name__}); pass a finished sweep's output "
                         "directory (RUN_DIR/steering)") from None
    if not isinstance(d, dict):
        raise SweepError(f"--pilot: {str(path)!r} is not a sweep summary")
    return d


def pilot_design(pilot: str | Path, effect: float | None) -> Design:
    """The design, random-move rate and (unless ``effect`` is given) effect of a finished pilot sweep."""
    p = Path(pilot)
    if not (p / SUMMARY).is_file() and (p / "steering" / SUMMARY).is_file():
        p = p / "steering"
    if not (p / SUMMARY).is_file():
        raise SweepError(f"--pilot {str(pilot)!r} holds no {SUMMARY}; pass a finished sweep's output directory "
                         "(RUN_DIR/steering)")
    summ = _read(p / SUMMARY)
    cfg = _read(p / CONFIG_FILE) if (p / CONFIG_FILE).is_file() else {}
    tested = [d for d in summ.get("settings") or [] if (d.get("control") or {}).get("kind")]
    if not tested:
        raise SweepError(f"--pilot {str(pilot)!r}: no setting with a control was summarised; nothing to plan from")
    key = "moved" if all("moved" in (d.get("control") or {}) for d in tested) else "moved_of_all"
    rates = [d["control"][key] for d in tested]
    k = sum(int(r["k"]) for r in rates)
    n = sum(int(r["n"]) for r in rates)
    cov = [(d.get("control") or {}).get("coverage_c") or {} for d in tested]
    n_cov = sum(int(c.get("n") or 0) for c in cov)
    parse = sum(int(c.get("k") or 0) for c in cov) / n_cov if n_cov else 1.0
    los = [r.get("lo") for r in rates if r.get("lo") is not None]
    his = [r.get("hi") for r in rates if r.get("hi") is not None]
    rng = (float(min(los)), float(max(his))) if los and his else None
    m = int(tested[0]["control"].get("m") or cfg.get("random_seeds") or 1)
    best = max(tested, key=lambda d: ((d.get("difference") or {}).get("estimate") or -1.0))
    est = (best.get("difference") or {}).get("estimate")
    eff: float | None = effect
    src = "--effect" if effect is not None else ""
    if effect is None and est is not None and est > 0:
        eff, src = float(est), f"the pilot's strongest difference ({best['key']})"
    what = "moved among parsed" if key == "moved" else "moved"
    return Design(len(tested), m, k / n if n else 0.0, f"the pilot's random controls ({k}/{n} {what})", eff, src,
                  int(summ.get("n_c_cases") or 0), cfg.get("per_question"), parse_rate=max(parse, 0.01),
                  base_range=rng, range_source="the 95% intervals of the pilot's control rates")


def stated_design(base_rate: float, effect: float | None, n_settings: int, m: int, *, parse_rate: float = 1.0,
                  base_range: tuple[float, float] | None = None) -> Design:
    if base_range is None:
        rng, src = (base_rate / 2, min(1.0, 1.5 * base_rate)), "a stated prior: half to 1.5 times --base-rate"
    else:
        rng, src = base_range, "--base-range"
    return Design(n_settings, m, base_rate, "--base-rate", effect, "--effect" if effect is not None else "",
                  parse_rate=parse_rate, base_range=rng, range_source=src)


def _bases(design: Design) -> tuple[float, ...]:
    point = round(min(max(design.base_rate, 0.0), 1.0), 2)
    lo, hi = design.base_range or (point, point)
    return tuple(sorted({round(max(0.0, lo), 2), point, round(min(1.0, hi), 2)}))


def plan(design: Design, *, sesoi: float, level: float = 0.05, seed: int = 0, n_sims: int | None = None
         ) -> dict[str, Any]:
    """The numbers of the plan (see the module docstring); ``n_sims`` simulated sweeps per point (default
    :data:`steering.planning.power.N_SIMS`)."""
    base = round(min(max(design.base_rate, 0.0), 1.0), 2)
    K, m, q = design.n_settings, design.m, round(design.parse_rate, 2)
    bases = _bases(design)
    effects = (0.0, round(sesoi / 3, 3))
    sims = int(n_sims or power.N_SIMS)
    kw: dict[str, Any] = dict(level=level, seed=seed, parse_rate=q, n_sims=sims)
    n_null = power.n_for_null(m, K, base, sesoi=sesoi, effects=effects, base_rates=bases, **kw)
    n_naive = power.n_for_null(m, K, base, sesoi=sesoi, **kw)
    out: dict[str, Any] = {"n_settings": K, "m": m, "base_rate": base, "base_rates": list(bases), "parse_rate": q,
                           "sesoi": sesoi, "sesoi_relative": (sesoi / base) if base > 0 else None, "level": level,
                           "null_effects": list(effects), "n_cases_for_null": n_null, "n_cases_for_null_naive": n_naive,
                           "effect": design.effect, "n_cases_for_effect": None, "pilot_mde": None,
                           "n_sims": sims, "n_max": power.N_MAX, "seed": seed, "outcomes": []}
    if design.effect is not None and design.effect > 0:
        out["n_cases_for_effect"] = power.n_for_effect(round(design.effect, 2), m, K, base, **kw)
    if design.n_pilot:
        out["pilot_mde"] = power.mde(design.n_pilot, m, K, base, **kw)
    n_at = n_null or design.n_pilot
    out["n_at"] = n_at
    if n_at:
        grid = sorted({0.0, round(sesoi / 3, 3), sesoi} | ({round(design.effect, 2)} if design.effect else set()))
        for b in bases:
            for e in grid:
                r = power.simulate(n_at, m, K, b, e, sesoi=sesoi, **kw)
                out["outcomes"].append({"base_rate": b, "effect": e, "p_null": r["p_null"], "p_effect": r["power"],
                                        "p_sesoi_excluded": r["p_sesoi_excluded"],
                                        "p_inconclusive": r["p_inconclusive"], "p_uninformative": r["p_uninformative"],
                                        "p_harm": r["p_harm"]})
    return out


def _n(n: int | None, n_max: int) -> str:
    return f"more than {n_max}" if n is None else str(n)


def format_plan(design: Design, res: dict[str, Any]) -> str:
    """The planner's one printed block."""
    s = 100 * res["sesoi"]
    bases = ", ".join(f"{100 * b:.0f}%" for b in res["base_rates"])
    lines = [f"steering plan (simulated; no model loaded, nothing written): {res['n_settings']} probe settings, "
             f"m={res['m']} random generations per case and setting, random directions move "
             f"{100 * res['base_rate']:.0f}% of parsed C cases ({design.base_source}; range {bases}: "
             f"{design.range_source}), {100 * res['parse_rate']:.0f}% of answers parse, level {res['level']}, SESOI "
             f"{s:.0f} pp"]
    rel = res["sesoi_relative"]
    if rel is not None:
        lines.append(f"  SESOI relative to the base rate: {s:.0f} pp is {rel:.1f}x the random rate"
                     + (f"; a probe that doubles the random rate ({100 * res['base_rate']:.0f}% -> "
                        f"{200 * res['base_rate']:.0f}%) is below it and may be called null: argue the SESOI or "
                        "lower it" if rel > 1 else ""))
    e3 = 100 * res["null_effects"][-1]
    lines.append(f"  null (every moved interval within +/-{s:.0f} pp and every parse-rate interval within the parse "
                 f"margin) in 80% of sweeps at effect 0, and the SESOI excluded (null, or an effect below it) at a "
                 f"true {e3:.1f} pp = SESOI/3, at every base rate in {bases}: "
                 f"{_n(res['n_cases_for_null'], res['n_max'])} held-out C cases (at effect 0 with the base rate "
                 f"known: {_n(res['n_cases_for_null_naive'], res['n_max'])})")
    if res["effect"] is not None and res["effect"] > 0:
        lines.append(f"  effect of {100 * res['effect']:.0f} pp ({design.effect_source}) detected with 80% power "
                     f"(exact test, Holm over {res['n_settings']} settings): "
                     f"{_n(res['n_cases_for_effect'], res['n_max'])} held-out C cases")
    else:
        lines.append("  effect detection: give --effect E (a fraction) to size a sweep that detects E")
    if design.n_pilot:
        mde = res["pilot_mde"]
        lines.append(f"  the pilot's {design.n_pilot} cases detect "
                     + ("no effect up to 100 pp" if mde is None else f"about {100 * mde:.0f} pp") + " with 80% power")
    if res["outcomes"]:
        lines.append(f"  at n = {res['n_at']} held-out C cases, P(null) / P(effect) / P(inconclusive) / "
                     "P(uninformative) [P(SESOI excluded)]:")
        for o in res["outcomes"]:
            lines.append(f"    base {100 * o['base_rate']:.0f}%, true effect {100 * o['effect']:+.1f} pp: "
                         f"{o['p_null']:.2f} / {o['p_effect']:.2f} / {o['p_inconclusive']:.2f} / "
                         f"{o['p_uninformative']:.2f} [{o['p_sesoi_excluded']:.2f}]")
    pq = design.per_question
    lines.append(f"  cases are counted one per question (steer with --per-question 1; at --per-question "
                 f"{pq if pq and pq > 1 else 2} correlated cases of a question are worth less); "
                 f"{res['n_sims']} simulated sweeps per point, seed {res['seed']}")
    return "\n".join(lines)


__all__ = ["Design", "format_plan", "pilot_design", "plan", "stated_design"]
