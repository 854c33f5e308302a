"""Calibration of the steering statistics: the exact randomisation test, the power simulation, the five-outcome
verdict (uninformative when the answer line breaks) and the planner (seeded, deterministic, a few seconds; no model)."""
from __future__ import annotations

import itertools
import os

import numpy as np
import pytest

from steering.sweep.exact import randomisation_test
from steering.sweep.grid import make_grid


def _brute(cases):
    m = [len(c) - 1 for c in cases]
    obs = np.mean([c[0] - (sum(c) - c[0]) / mi for c, mi in zip(cases, m)])
    ts = np.array([np.mean([c[p] - (sum(c) - c[p]) / mi for c, p, mi in zip(cases, perm, m)])
                   for perm in itertools.product(*[range(len(c)) for c in cases])])
    return float(np.mean(ts >= obs - 1e-12)), float(np.mean(ts <= obs + 1e-12))


def test_exact_test_equals_full_enumeration():
    rng = np.random.default_rng(3)
    for _ in range(40):
        n = int(rng.integers(1, 6))
        cases = [rng.integers(0, 2, size=int(rng.integers(2, 5))).tolist() for _ in range(n)]  # m varies by case
        t = randomisation_test(cases)
        ge, le = _brute(cases)
        assert t["p_greater"] == pytest.approx(ge, abs=1e-9) and t["p_less"] == pytest.approx(le, abs=1e-9)
        assert t["p_two"] == pytest.approx(min(1.0, 2 * min(ge, le)), abs=1e-9)
    # non-integer scores: enumerated when small, else Monte Carlo with the +1 correction (stated)
    small = randomisation_test([[0.5, 0.2, 0.1], [0.3, 0.3, 0.9]])
    assert "enumerated" in small["method"]
    big = randomisation_test([[0.5, 0.25, 0.1]] * 12, n_draws=2000)
    assert "Monte Carlo (2000" in big["method"] and "+1" in big["method"] and big["p_greater"] >= 1 / 2001


def test_attainable_level_with_five_informative_cases():
    one = randomisation_test([[1, 0]] * 5 + [[0, 0]] * 7)  # m = 1: the old sign-flip floor
    assert one["n_informative"] == 5 and one["min_p_two"] == pytest.approx(2 / 32) and one["min_p_two"] > 0.05
    two = randomisation_test([[1, 0, 0]] * 5)  # m = 2: each case's probe is the moved one of three
    assert two["min_p_two"] == pytest.approx(2 / 3 ** 5) and two["p_two"] == two["min_p_two"] < 0.01
    none = randomisation_test([[0, 0, 0]] * 4)
    assert none["p_two"] == 1.0 and none["n_informative"] == 0


def test_size_under_the_null_and_power_rises_with_effect():
    from steering.planning.power import simulate

    for n in (24, 57):
        s = simulate(n, 2, 1, 0.2, 0.0, n_sims=1500, seed=1)
        assert s["size_any_rejection"] <= 0.08, s
    powers = [simulate(24, 2, 4, 0.05, e, n_sims=400, seed=2)["power"] for e in (0.0, 0.15, 0.3, 0.45)]
    assert powers == sorted(powers) and powers[0] <= 0.08 and powers[-1] >= 0.8, powers


def test_vectorised_rule_matches_the_summary():
    """The simulation's vectorised test, interval and rule give the verdict summarize_records gives."""
    from steering.planning.power import exact_p_binary, interval_binary
    from steering.sweep.analysis import summarize_records
    from steering.sweep.verdict import CODES, decide

    grid = make_grid([2], [1, 2], [1.0], ("random",), 2, {2: 1.0})
    rng = np.random.default_rng(5)
    for trial in range(6):
        n = 15 + 5 * trial
        a = (rng.random((2, n)) < [[0.1], [0.1 + 0.15 * trial]]).astype(int)
        b = (rng.random((2, n, 2)) < 0.1).astype(int)
        recs = []
        for si, k in enumerate((1, 2)):
            for i in range(n):
                for key, v in [(f"L2|k{k}|a1|probe", a[si, i])] + [(f"L2|k{k}|a1|random{j}", b[si, i, j]) for j in (0, 1)]:
                    recs.append({"setting": key, "case_id": f"c{i}", "question_key": f"q{i}", "case_label": "C",
                                 "correct": bool(v), "basis": "random" if "random" in key else "probe"})
        summ = summarize_records(recs, grid, power=False)
        p2, _, _, st = exact_p_binary(a, b)
        lo, hi = interval_binary(a - b.mean(-1))
        code = CODES[int(decide(p2[None], st[None], lo[None], hi[None], level=0.05, sesoi=0.10)[0])]
        assert code == summ["verdict_code"], (trial, code, summ["verdict"])
        got = [d["p_value"] for d in summ["settings"]]
        assert got == pytest.approx(list(p2))


def _recs(grid, n, probe, rand):
    """n cases (one per question); probe(i) / rand(i, j) -> correct (True/False/None)."""
    out = []
    for s in grid:
        for i in range(n):
            v = probe(i) if s.basis == "probe" else rand(i, s.seed)
            out.append({"setting": s.key, "case_id": f"c{i}", "question_key": f"q{i}", "case_label": "C",
                        "correct": v, "basis": s.basis})
    return out


def test_four_verdicts_on_constructed_data():
    from steering.sweep.analysis import format_table, summarize_records

    grid = make_grid([2], [1], [1.0], ("random",), 2, {2: 1.0})
    eff = summarize_records(_recs(grid, 12, lambda i: True, lambda i, j: False), grid)
    assert eff["verdict_code"] == "effect" and eff["verdict"].startswith("effect:")
    harm = summarize_records(_recs(grid, 20, lambda i: False, lambda i, j: True), grid)
    assert harm["verdict_code"] == "harm" and harm["settings"][0]["harms"], harm["verdict"]
    null = summarize_records(_recs(grid, 150, lambda i: i % 10 == 0, lambda i, j: (i + j) % 10 == 0), grid)
    assert null["verdict_code"] == "null", null["verdict"]
    ci = null["settings"][0]["difference"]["ci"]
    assert -0.10 < ci[0] and ci[1] < 0.10
    inc = summarize_records(_recs(grid, 10, lambda i: i < 2, lambda i, j: False), grid)
    assert inc["verdict_code"] == "inconclusive", inc["verdict"]
    assert inc["power"]["mde"] is not None and inc["power"]["n_cases_for_null"] > 10
    # unparsed pairs are counted in the table
    unp = summarize_records(_recs(grid, 12, lambda i: None if i < 3 else True, lambda i, j: False), grid)
    d = unp["settings"][0]
    assert d["difference"]["n_probe_unparsed"] == 3 and d["difference"]["n_cases"] == 9
    assert d["difference_of_all"]["n_unparsed_pairs"] == 3 and "9 (3 probe unparsed)" in format_table(unp)
    # one case per question: Wilson intervals
    assert eff["settings"][0]["moved_of_all"]["method"] == "wilson"


def test_sesoi_is_a_fraction():
    from steering.sweep.cli import SweepConfig
    from steering.sweep.config import SweepError

    with pytest.raises(SweepError, match=r"--sesoi 10 is a fraction of cases \(0 < s < 1\); for 10 points use --sesoi 0\.10"):
        SweepConfig(run_dir="r", directions="d", sesoi=10).validate()
    SweepConfig(run_dir="r", directions="d", sesoi=0.05).validate()


def test_planner_prints_numbers_and_writes_nothing(tmp_path, capsys, monkeypatch):
    import loadbearing.engine.models as models
    from steering.sweep.cli import main

    monkeypatch.setattr(models, "load_model", lambda *a, **k: (_ for _ in ()).throw(AssertionError("no model")))
    monkeypatch.chdir(tmp_path)
    rc = main(["--plan", "--sesoi", "0.10", "--base-rate", "0.05", "--effect", "0.4", "--k", "1", "--alphas", "1",
               "--random-seeds", "2", "--plan-sims", "100"])
    out = capsys.readouterr().out
    assert rc == 0 and out.startswith("steering plan") and "held-out C cases" in out
    import re

    assert re.search(r"null .*: \d+ held-out C cases", out) and re.search(r"effect of 40 pp .*: \d+ held-out", out)
    assert os.listdir(tmp_path) == []
    assert main(["--plan", "--sesoi", "10", "--base-rate", "0.05"]) == 2
    err = capsys.readouterr().err.strip()
    assert "for 10 points use --sesoi 0.10" in err and "\n" not in err
    assert main(["--plan"]) == 2 and "--base-rate" in capsys.readouterr().err


def test_planner_reads_a_pilot(tmp_path, capsys):
    from loadbearing.files import write_json
    from steering.sweep.analysis import summarize_records
    from steering.sweep.cli import main

    grid = make_grid([2], [1], [1.0], ("random",), 2, {2: 1.0})
    summ = summarize_records(_recs(grid, 10, lambda i: i < 4, lambda i, j: i == 9 and j == 0), grid, power=False)
    pilot = tmp_path / "steering"
    pilot.mkdir()
    write_json(pilot / "summary.json", summ)
    write_json(pilot / "config.json", {"random_seeds": 2, "per_question": 1})
    before = sorted(os.listdir(pilot))
    assert main(["--plan", "--pilot", str(tmp_path), "--plan-sims", "100"]) == 0
    out = capsys.readouterr().out
    assert "pilot's random controls (1/20 moved among parsed" in out and "the pilot's 10 cases detect" in out
    assert "the pilot's strongest difference" in out
    assert sorted(os.listdir(pilot)) == before


def _parse_recs(grid, n, probe, rand):
    """n cases, one per question; probe(i) / rand(i, j) -> correct (True / False / None = unparsed)."""
    return _recs(grid, n, probe, rand)


def _reproduce_like(n=150):
    """The issue's case: random bases parse 35% and move 7% of that (about 1 in 5 parsed C cases here), the
    probe basis parses 1/150 (and moves what it parses)."""
    return (lambda i: True if i == 0 else None,
            lambda i, j: (None if (i + 3 * j) % 20 >= 7 else (i * 7 + j) % 14 == 0))


def test_a_basis_that_breaks_the_answer_line_is_uninformative_never_null():
    from steering.sweep.analysis import format_summary, format_table, summarize_records

    grid = make_grid([16], [4], [1.0], ("random",), 4, {16: 1.0})
    probe, rand = _reproduce_like()
    s = summarize_records(_parse_recs(grid, 150, probe, rand), grid, power=False)
    d = s["settings"][0]
    assert d["coverage_c"]["k"] == 1 and d["control"]["coverage_c"]["k"] == 208  # 1/150 vs 208/600, as make reproduce
    assert d["parse"]["difference"]["estimate"] == pytest.approx(1 / 150 - 208 / 600)
    assert d["parse"]["p_value"] < 1e-10 and d["parse"]["status"] == "broken"
    assert d["setting_verdict"] == "uninformative" and d["uninformative"] and not d["equivalent"]
    assert s["verdict_code"] == "uninformative" and s["uninformative"] == ["L16|k4|a1|probe"]
    assert s["verdict"].startswith("uninformative: every tested setting breaks the answer line")
    assert "parsed 1/150" in s["verdict"] and "208/600" in s["verdict"]
    # the old moved-of-all outcome would have read this as a narrow "null"
    old = d["difference_of_all"]
    assert old["ci"][0] > -0.10 and old["ci"][1] < 0.10
    assert "uninformative" in format_table(s) and "parse diff" in format_table(s) and format_summary(s, "md")


def test_a_basis_that_breaks_the_answer_line_less_is_no_effect():
    """Random bases break the format (parse 35%), the probe does not (parses all), both move 30% of what they
    parse: moved-of-all would call the probe better; the verdict says uninformative."""
    from steering.sweep.analysis import summarize_records

    grid = make_grid([16], [4], [1.0], ("random",), 4, {16: 1.0})
    rand = lambda i, j: None if (i + 3 * j) % 20 >= 7 else (i * 7 + j) % 10 < 3  # noqa: E731
    s = summarize_records(_parse_recs(grid, 150, lambda i: i % 10 < 3, rand), grid, power=False)
    d = s["settings"][0]
    assert d["p_value_of_all"] < 0.05 and d["difference_of_all"]["estimate"] > 0  # the old reading: "effect"
    assert d["setting_verdict"] == "uninformative" and s["verdict_code"] == "uninformative"


def test_one_broken_setting_keeps_the_sweep_from_a_null_and_is_named():
    from steering.sweep.analysis import summarize_records

    grid = make_grid([2], [1, 2], [1.0], ("random",), 2, {2: 1.0})
    recs = []
    for s in grid:
        broken = s.k == 2 and s.basis == "probe"
        for i in range(150):
            v = (None if i >= 2 else True) if broken else (i + (s.seed or 0)) % 10 == 0
            recs.append({"setting": s.key, "case_id": f"c{i}", "question_key": f"q{i}", "case_label": "C",
                         "correct": v, "basis": s.basis})
    summ = summarize_records(recs, grid, power=False)
    by = {d["k"]: d for d in summ["settings"]}
    assert by[1]["setting_verdict"] == "null" and by[2]["setting_verdict"] == "uninformative"
    assert summ["verdict_code"] == "inconclusive" and summ["uninformative"] == ["L2|k2|a1|probe"]
    assert "uninformative (the parse rate differs" in summ["verdict"] and "L2|k2|a1|probe" in summ["verdict"]
    assert by[1]["strongest"] and not by[2]["strongest"]


def test_simulated_broken_basis_is_never_null():
    """The issue's simulation: a basis parsing 1/150 and moving 30% of what it parses, random bases moving 7%
    of the 35% they parse; the moved-of-all rule called it null in 91% of sweeps."""
    from steering.planning.power import simulate

    r = simulate(150, 4, 1, 0.07, 0.23, parse_rate=0.35, probe_parse_rate=1 / 150, n_sims=200, seed=3)
    assert r["p_null"] == 0.0 and r["power"] == 0.0 and r["p_uninformative"] >= 0.99, r
    # parse rates alike: the size of the exact tests stays at the level
    r0 = simulate(60, 2, 1, 0.2, 0.0, parse_rate=0.6, n_sims=600, seed=4)
    assert r0["size_any_rejection"] <= 0.05 + 2 * (0.05 * 0.95 / 600) ** 0.5 and r0["p_uninformative"] <= 0.06, r0


def test_planner_sizes_a_null_over_small_effects_and_the_base_rate(capsys):
    """The planner's null holds at a true SESOI/3 and over the base rate's range, not just at effect 0 with the
    base rate known; it states the SESOI against the base rate and prints the four outcome probabilities."""
    from steering.planning.planner import plan, stated_design

    d = stated_design(0.05, None, 1, 2, base_range=(0.03, 0.08))
    res = plan(d, sesoi=0.10, n_sims=200)
    assert res["base_rates"] == [0.03, 0.05, 0.08] and res["null_effects"] == [0.0, 0.033]
    assert res["n_cases_for_null"] > res["n_cases_for_null_naive"]
    at = {(o["base_rate"], o["effect"]): o for o in res["outcomes"]}
    for b in res["base_rates"]:  # the plan holds at its own n over the whole range
        assert at[(b, 0.0)]["p_null"] >= 0.8 and at[(b, 0.033)]["p_sesoi_excluded"] >= 0.8
        assert at[(b, 0.1)]["p_effect"] >= 0.9  # an effect at the SESOI is not called null
        o = at[(b, 0.0)]
        assert o["p_null"] + o["p_effect"] + o["p_inconclusive"] + o["p_uninformative"] + o["p_harm"] == pytest.approx(1)
    from steering.planning.planner import format_plan

    text = format_plan(d, res)
    assert "10 pp is 2.0x the random rate" in text and "P(null) / P(effect) / P(inconclusive) / P(uninformative)" in text
    assert "true 3.3 pp = SESOI/3" in text and "(at effect 0 with the base rate known: " in text


def _direction_recs(n, probe_rate_of, rates, seed_of=lambda j, i: 1000 + j):
    """n C cases; the probe moves when probe_rate_of(i); random setting j (a fixed direction when seed_of
    ignores i) moves case i when i < rates[j] * n."""
    from steering.sweep.grid import Setting

    grid = [Setting("L2|k1|a1|probe", "probe", 2, 1, 1.0, 1.0)] + [
        Setting(f"L2|k1|a1|random{j}", "random", 2, 1, 1.0, 1.0, j) for j in range(len(rates))]
    recs = []
    for i in range(n):
        recs.append({"setting": grid[0].key, "case_id": f"c{i}", "question_key": f"q{i}", "case_label": "C",
                     "correct": bool(probe_rate_of(i)), "basis": "probe"})
        for j, r in enumerate(rates):
            recs.append({"setting": grid[j + 1].key, "case_id": f"c{i}", "question_key": f"q{i}", "case_label": "C",
                         "correct": (i * 7 + j * 3) % n < r * n, "basis": "random", "direction_seed": seed_of(j, i)})
    return grid, recs


def test_direction_rank_makes_effect_mean_the_direction_is_special():
    from steering.sweep.analysis import summarize_records

    # 19 fixed random directions whose moved rates spread from 5% to 95% (a direction effect); the probe moves
    # 60%: far above the per-case average of the random generations, but in the middle of the directions
    rates = [0.05 + 0.05 * j for j in range(19)]
    grid, recs = _direction_recs(100, lambda i: i % 5 < 3, rates)
    s = summarize_records(recs, grid, power=False)
    d = s["settings"][0]
    rk = d["direction_rank"]
    assert rk["n_directions"] == 19 and rk["min_p_greater"] == pytest.approx(0.05)
    assert rk["p_greater"] == pytest.approx((1 + sum(r >= 0.6 - 1e-9 for r in rates)) / 20)
    assert d["p_value"] < 0.05 and not d["beats_control"] and s["verdict_code"] != "effect"
    # a probe above every random direction: the rank is 1 of 20, p = 1/20, and the effect stands
    grid, recs = _direction_recs(100, lambda i: True, rates)
    s = summarize_records(recs, grid, power=False)
    d = s["settings"][0]
    assert d["direction_rank"]["p_greater"] == pytest.approx(0.05) and d["beats_control"]
    assert s["verdict_code"] == "effect" and "direction rank p=0.05 among 19 random directions" in s["verdict"]
    # per-case directions (each case its own seed): no rank, and the text says the direction is not ranked
    grid, recs = _direction_recs(100, lambda i: True, rates, seed_of=lambda j, i: 1000 * j + i)
    s = summarize_records(recs, grid, power=False)
    assert s["settings"][0]["direction_rank"] is None and "not ranked among random directions" in s["verdict"]


def test_random_scope_sweep_draws_one_direction_per_setting():
    from steering.sweep.cli import SweepConfig
    from steering.sweep.controls import SWEEP_SCOPE, direction_seed, scope_id
    from steering.sweep.grid import Setting

    s = Setting("L2|k1|a1|random3", "random", 2, 1, 1.0, 1.0, 3)
    assert scope_id("c1", "sweep") == scope_id("c2", "sweep") == SWEEP_SCOPE and scope_id("c1") == "c1"
    assert direction_seed(0, scope_id("c1", "sweep"), s) == direction_seed(0, scope_id("c9", "sweep"), s)
    assert direction_seed(0, "c1", s) != direction_seed(0, "c9", s)
    from steering.sweep.config import SweepError

    with pytest.raises(SweepError, match="--random-scope must be case or sweep"):
        SweepConfig(run_dir="r", directions="d", random_scope="all").validate()
