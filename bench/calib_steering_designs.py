"""python bench/calibration.py --only steering_designs [--fast]   (this module: entries of the bench)

The steering verdict at the designs the toolkit actually runs, with the parse failures they show, and the
direction effect the per-case exact test does not cover. Every sweep is simulated and judged by the sweep's
own tests and rule (:func:`steering.planning.power.simulate`: both exact tests, both intervals, Holm, the verdict of
:mod:`steering.sweep.verdict`).

Designs (cases one per question; ``base`` = random moved rate among parsed; ``parse`` = parse rate):

* ``demo``: 24 C cases, m = 2 random generations per case, K = 4 settings, base 5%, parse 80%;
* ``reproduce``: ``make reproduce``'s, 150 C cases, m = 4, K = 2, base 7%, parse 35% (random bases parsed
  208/600 there).

Entries per design:

* ``rule.size``: effect or harm when every probe is a random direction in distribution (nominal 0.05);
* ``uninformative.size``: some setting called uninformative when the probe parses like its controls
  (nominal 0.05: the parse test, Holm over the settings, and beyond the 10-point margin);
* ``null.size.broken``: the verdict ``null`` when one probe basis parses 1/150 (reproduce) or 1/24 (demo)
  and moves 30% of what it parses: the issue's case, which the moved-of-all rule called null in 91% of
  sweeps (nominal 0.025: a null must be impossible here); beside it, informational, the same judged by that
  old rule (``.moved_of_all_rule``);
* ``effect.size.breaks_less``: ``effect`` when one probe parses every answer, random ones parse ``parse``,
  and both move ``base`` of what they parse (nominal 0.05: a probe that breaks the format less must not be
  called better);
* ``direction.size`` (informational; what the test does *not* cover): the exact test's rejection rate when
  every direction, the probe's included, has its own effect on the logit of moving (SD 1) and the probe is
  just one more random direction. The per-case test treats each random generation as a fresh direction and
  the probe as one fixed one, so it rejects well above 0.05: an ``effect`` says the probe's direction moves
  more than the random ones did, not that it is special among directions;
* ``direction.rank.size``: the direction rank test that answers that (``--random-scope sweep``: 19 random
  directions, each applied to every case; the probe's moved-among-parsed rate ranked among theirs) on the
  same data: p <= 0.05 at most 1 time in 20 (exact; ties make it conservative).

Seeded and deterministic; ``run(fast)`` returns ``{name: entry}`` with ``size`` / ``coverage``, ``nominal``,
``n_sims``.
"""
from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

DESIGNS = {"demo": dict(n_cases=24, m=2, n_settings=4, base_rate=0.05, parse_rate=0.8),
           "reproduce": dict(n_cases=150, m=4, n_settings=2, base_rate=0.07, parse_rate=0.35)}
LEVEL = 0.05


def design_entries(n_sims: int, seed: int) -> dict[str, dict[str, Any]]:
    from steering.planning.power import simulate

    out: dict[str, dict[str, Any]] = {}
    for name, d in DESIGNS.items():
        kw = dict(n_sims=n_sims, level=LEVEL, sesoi=0.10, seed=seed)
        z = simulate(**d, effect=0.0, **kw)
        common = {**d, "n_sims": n_sims}
        out[f"steering.design.{name}.rule.size"] = {
            "test": "verdict effect or harm, every probe a random direction in distribution", **common,
            "size": z["size_any_rejection"], "nominal": LEVEL, "p_null": z["p_null"],
            "p_uninformative": z["p_uninformative"]}
        out[f"steering.design.{name}.uninformative.size"] = {
            "test": "some setting uninformative when the probe parses like its controls", **common,
            "size": z["p_any_uninformative"], "nominal": LEVEL}
        q_broken = 1.0 / d["n_cases"]
        b = simulate(**{**d, "n_settings": 1}, effect=max(0.0, 0.30 - d["base_rate"]),
                     probe_parse_rate=q_broken, **kw)
        out[f"steering.design.{name}.null.size.broken"] = {
            "test": f"verdict null when the probe parses 1/{d['n_cases']} and moves 30% of what it parses", **common,
            "n_settings": 1, "size": b["p_null"], "nominal": LEVEL / 2, "p_uninformative": b["p_uninformative"]}
        out[f"steering.design.{name}.null.size.broken.moved_of_all_rule"] = {
            "test": "the same, judged by the rule before (moved-of-all, no parse outcome)", **common,
            "n_settings": 1, "size": _old_rule_null(d, q_broken, 0.30, n_sims, seed), "nominal": LEVEL / 2,
            "informational": True}
        e = simulate(**{**d, "n_settings": 1}, effect=0.0, probe_parse_rate=1.0, **kw)
        out[f"steering.design.{name}.effect.size.breaks_less"] = {
            "test": "verdict effect when the probe parses all and random directions parse "
                    f"{d['parse_rate']:g}, both moving {d['base_rate']:g} of what they parse", **common,
            "n_settings": 1, "size": e["power"], "nominal": LEVEL, "p_uninformative": e["p_uninformative"]}
        out[f"steering.design.{name}.direction.size"] = {
            "test": "exact test, one setting, direction effects SD 1 on the logit; the probe is one more random "
                    "direction (what the per-case test does not cover)", **common, "n_settings": 1,
            "size": _direction_size(d, n_sims, seed), "nominal": LEVEL, "informational": True}
        out[f"steering.design.{name}.direction.rank.size"] = {
            "test": f"direction rank test (--random-scope sweep, R = {RANK_R} directions each applied to every "
                    "case), direction effects SD 1 on the logit, the probe one more direction: p_greater <= 0.05",
            **common, "n_settings": 1, "n_directions": RANK_R, "size": _rank_size(d, n_sims, seed),
            "nominal": LEVEL, "attainable": 1 / (RANK_R + 1)}
    return out


def _old_rule_null(d: dict[str, Any], q_probe: float, moved_probe: float, n_sims: int, seed: int) -> float:
    """How often the moved-of-all rule (an unparsed answer counts as not moved; no parse outcome) said null."""
    from steering.planning.power import exact_p_binary, interval_binary
    from steering.sweep.verdict import decide

    rng = np.random.default_rng(seed + 17)
    n, m, base, q = d["n_cases"], d["m"], d["base_rate"], d["parse_rate"]
    a = ((rng.random((n_sims, n)) < q_probe) & (rng.random((n_sims, n)) < moved_probe)).astype(np.int64)
    b = ((rng.random((n_sims, n, m)) < q) & (rng.random((n_sims, n, m)) < base)).astype(np.int64)
    p2, _, _, st = exact_p_binary(a, b)
    lo, hi = interval_binary(a - b.mean(-1))
    codes = decide(p2[:, None], st[:, None], lo[:, None], hi[:, None], level=LEVEL, sesoi=0.10)
    return float(np.mean(codes == 2))


RANK_R = 19


def _rank_size(d: dict[str, Any], n_sims: int, seed: int, sd: float = 1.0) -> float:
    """How often :func:`steering.sweep.outcomes.direction_rank`'s p_greater <= 0.05 when every direction (the
    probe's and R random ones, each over the same cases, parse at ``parse``) has its own logit effect."""
    from scipy.special import expit, logit

    rng = np.random.default_rng(seed + 19)
    n, base, q = d["n_cases"], d["base_rate"], d["parse_rate"]
    u = rng.normal(0, sd, size=(n_sims, RANK_R + 1))
    parsed = rng.binomial(n, q, size=(n_sims, RANK_R + 1))
    moved = rng.binomial(parsed, expit(logit(base) + u))
    rate = np.where(parsed > 0, moved / np.maximum(parsed, 1), np.nan)
    r0, rr = rate[:, :1], rate[:, 1:]
    ok = ~np.isnan(r0[:, 0])
    ge = (1 + np.sum(np.nan_to_num(rr, nan=-1.0) >= r0 - 1e-12, axis=1)) / (1 + np.sum(~np.isnan(rr), axis=1))
    return float(np.mean(ok & (ge <= LEVEL + 1e-12)))


def _direction_size(d: dict[str, Any], n_sims: int, seed: int, sd: float = 1.0) -> float:
    """Rejection rate of the per-case exact test (every answer parsed) when each direction has its own logit
    effect: the probe one fixed direction for all cases, each random generation a fresh direction."""
    from scipy.special import expit, logit

    from steering.planning.power import exact_p_binary

    rng = np.random.default_rng(seed + 13)
    n, m, base = d["n_cases"], d["m"], d["base_rate"]
    u0 = rng.normal(0, sd, size=(n_sims, 1))  # the probe's direction: one per sweep
    ub = rng.normal(0, sd, size=(n_sims, n, m))  # fresh random directions
    a = (rng.random((n_sims, n)) < expit(logit(base) + u0)).astype(np.int64)
    b = (rng.random((n_sims, n, m)) < expit(logit(base) + ub)).astype(np.int64)
    p2, _, _, _ = exact_p_binary(a, b)
    return float((p2 < LEVEL).mean())


def run(fast: bool = True, seed: int = 0) -> dict[str, dict[str, Any]]:
    """Every entry (``fast``: 400 simulated sweeps per entry, else 2,000)."""
    return design_entries(400 if fast else 2000, seed)
