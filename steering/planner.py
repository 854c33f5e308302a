"""python -m steering.sweep --plan [--sesoi 0.10] [--pilot RUN_DIR/steering | --base-rate R --effect E]

Before anything is generated: how many held-out C cases (questions) a definitive steering verdict needs -
a ``null`` at the SESOI when the probe is no better than random, or ``effect`` at a given effect - from the
simulation of the sweep's own exact test, Holm over the settings and verdict rule (:mod:`steering.power`).
The design (settings, random generations per case) comes from ``--k``, ``--alphas``, ``--layers`` and
``--random-seeds``, or from the pilot sweep; the rate at which random directions move a C case comes from
the pilot (its pooled control rate) or ``--base-rate``; the effect from ``--effect`` or the pilot's strongest
difference. Prints one block; writes nothing; loads no model.
"""
from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from steering.config import CONFIG_FILE, SUMMARY, SweepError


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
    k = sum(int(d["control"]["moved_of_all"]["k"]) for d in tested)
    n = sum(int(d["control"]["moved_of_all"]["n"]) for d in tested)
    m = int(tested[0]["control"].get("m") or cfg.get("random_seeds") or 1)
    best = max(tested, key=lambda d: ((d.get("difference") or {}).get("estimate") or -1.0))
    est = (best.get("difference") or {}).get("estimate")
    eff: float | None = effect
    src = "--effect" if effect is not None else ""
    if effect is None and est is not None and est > 0:
        eff, src = float(est), f"the pilot's strongest difference ({best['key']})"
    return Design(len(tested), m, k / n if n else 0.0, f"the pilot's random controls ({k}/{n} moved)", eff, src,
                  int(summ.get("n_c_cases") or 0), cfg.get("per_question"))


def stated_design(base_rate: float, effect: float | None, n_settings: int, m: int) -> Design:
    return Design(n_settings, m, base_rate, "--base-rate", effect, "--effect" if effect is not None else "")


def plan(design: Design, *, sesoi: float, level: float = 0.05, seed: int = 0) -> dict[str, Any]:
    """The numbers of the plan (see the module docstring)."""
    from steering import power

    base = round(min(max(design.base_rate, 0.0), 1.0), 2)
    K, m = design.n_settings, design.m
    n_null = power.n_for_null(m, K, base, sesoi=sesoi, level=level, seed=seed)
    out: dict[str, Any] = {"n_settings": K, "m": m, "base_rate": base, "sesoi": sesoi, "level": level,
                           "n_cases_for_null": n_null,
                           "half_width_at_null_n": power.half_width(n_null, m, base) if n_null else None,
                           "effect": design.effect, "n_cases_for_effect": None, "pilot_mde": None,
                           "n_sims": power.N_SIMS, "n_max": power.N_MAX, "seed": seed}
    if design.effect is not None and design.effect > 0:
        out["n_cases_for_effect"] = power.n_for_effect(round(design.effect, 2), m, K, base, level=level, seed=seed)
    if design.n_pilot:
        out["pilot_mde"] = power.mde(design.n_pilot, m, K, base, level=level, seed=seed)
    return out


def _n(n: int | None, n_max: int) -> str:
    return f"more than {n_max}" if n is None else str(n)


def format_plan(design: Design, res: dict[str, Any]) -> str:
    """The planner's one printed block."""
    s = 100 * res["sesoi"]
    lines = [f"steering plan (simulated; no model loaded, nothing written): {res['n_settings']} probe settings, "
             f"m={res['m']} random generations per case and setting, random directions move "
             f"{100 * res['base_rate']:.0f}% of C cases ({design.base_source}), level {res['level']}, SESOI "
             f"{s:.0f} pp"]
    hw = res["half_width_at_null_n"]
    lines.append(f"  null (every 95% CI within +/-{s:.0f} pp when the probe is no better than random, 80% of "
                 f"sweeps): {_n(res['n_cases_for_null'], res['n_max'])} held-out C cases; the CI half-width must "
                 f"stay below {s:.0f} pp" + (f" (about +/-{100 * hw:.1f} pp at that n)" if hw else ""))
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
    pq = design.per_question
    lines.append(f"  cases are counted one per question (steer with --per-question 1; at --per-question "
                 f"{pq if pq and pq > 1 else 2} correlated cases of a question are worth less); "
                 f"{res['n_sims']} simulated sweeps per point, seed {res['seed']}")
    return "\n".join(lines)


__all__ = ["Design", "format_plan", "pilot_design", "plan", "stated_design"]
