"""The steering sweep on the planted model (whole file well under a minute).

The planted-effect test builds a Llama whose blocks are the identity and whose unembedding is a hand-written
transition table: after "Answer: " it says "3", unless the residual stream carries the planted direction
e_63, which makes it say "7". The sweep must find that effect (and not in random directions), so a null
from the same pipeline is informative.

The steering hooks: tests/test_steering_hooks.py; the sweep's refusals: tests/test_steering_sweep_refusals.py;
its controls and fitting rows: tests/test_steering_controls.py.
"""
from __future__ import annotations

import json

import numpy as np
import pytest
from helpers.steering import PLANT, make_steering_run, planted_lm, sweep_config, unit, write_dirs

pytestmark = pytest.mark.usefixtures("one_thread")


# ------------------------------------------------------------------------------------------------ sweep


def test_planted_direction_is_found_and_random_is_not(tokenizer, tmp_path):
    from steering.sweep.cli import is_complete, run_sweep

    lm = planted_lm(tokenizer)
    run = make_steering_run(tmp_path, tokenizer, n_c=8, n_non=2)
    dirs = write_dirs(tmp_path / "probes", {2: np.stack([unit(PLANT), unit(62)])})
    s = run_sweep(sweep_config(run, dirs, layers=[2], ks=[1, 2], alphas=[0.5, 1.0], random_seeds=2, cases="all",
                       batch_size=32), lm=lm, echo=lambda m: None)
    assert s["status"] == "ok" and s["verdict_code"] == "effect", s["verdict"]
    by = {d["key"]: d for d in s["settings"]}
    assert s["baseline"]["reproduced_c"]["rate"] == 1.0 and s["baseline"]["moved_of_all"]["k"] == 0
    top = by["L2|k1|a1|probe"]
    assert top["moved_of_all"]["k"] == 8 and top["moved_of_all"]["n"] == 8 and top["coverage_c"]["rate"] == 1.0
    assert top["control"]["kind"] == "random" and top["control"]["moved_of_all"]["k"] == 0
    assert top["difference"]["n_questions"] == 8 and top["difference"]["estimate"] == 1.0
    # moved-of-all's exact test: the probe's is the moved one of 3, 8 times; moved among parsed leaves out the
    # random generations that did not parse, so its p is larger, still tiny
    assert top["p_value_of_all"] == pytest.approx(2 / 3 ** 8) and top["p_value"] < 1e-3
    assert top["setting_verdict"] == "effect" and top["parse"]["status"] != "broken"
    assert top["p_greater"] == pytest.approx(top["p_value"] / 2) and top["exact"]["n_informative"] == 8
    assert top["difference"]["n_dropped"] == 0 and s["n_random_directions"] == 10 * 4 * 2
    assert top["beats_control"] and top["p_holm"] < 0.05
    assert top["broken"]["k"] == 2  # side effect: the non-C cases (gold 3) now say 7
    assert by["L2|k1|a0.5|probe"]["moved_of_all"]["k"] == 8
    # dose matched: at alpha 0.5 the k=2 vector puts only 0.5/sqrt(2) on the planted axis: too weak to flip
    assert by["L2|k2|a0.5|probe"]["moved_of_all"]["k"] == 0 and not by["L2|k2|a0.5|probe"]["beats_control"]
    assert sum(d["strongest"] for d in s["settings"]) == 1
    out = run / "steering"
    assert (out / "sweep.png").stat().st_size > 1000
    assert is_complete(out)
    summ = json.loads((out / "summary.json").read_text())
    from loadbearing.results.check import read_result
    from loadbearing.results.stages import SweepSummary

    assert read_result(out / "summary.json", SweepSummary) == summ  # the typed result reads the file back unchanged
    assert summ["verdict"].startswith("effect:") and "Holm" in summ["verdict"]
    assert summ["split"]["disjoint"] is None  # the file records no split
    recs = [json.loads(x) for x in (out / "generations.jsonl").read_text().splitlines()]
    assert len(recs) == 10 * (1 + 4 * 3)
    assert {"setting", "case_id", "question_id", "question_key", "text", "parsed_answer", "correct"} <= set(recs[0])


def test_few_questions_are_inconclusive_not_null(tokenizer, tmp_path):
    from steering.sweep.cli import run_sweep

    lm = planted_lm(tokenizer)
    run = make_steering_run(tmp_path, tokenizer, n_c=4, n_non=0)
    dirs = write_dirs(tmp_path / "probes", {2: np.stack([unit(60)])})
    s = run_sweep(sweep_config(run, dirs, layers=[2], ks=[1], alphas=[1.0], random_seeds=1), lm=lm, echo=lambda m: None)
    assert s["verdict_code"] == "inconclusive", s["verdict"]
    assert s["verdict"].startswith("inconclusive: no setting beats its control") and "0/4" in s["verdict"]
    assert "would need about" in s["verdict"]
    d = s["settings"][0]
    assert d["difference"]["estimate"] == 0.0 and d["difference"]["ci"][1] > 0.10


def test_analysis_outcomes_and_moved_of_all_ranking():
    from steering.sweep.analysis import adjusted_interval, summarize_records
    from steering.sweep.exact import randomisation_test
    from steering.sweep.grid import make_grid

    grid = make_grid([2], [1, 2], [1.0], ("random", "none"), 1, {2: 1.0})

    def recs(n_q, probe_moves, ctrl_moves=0, unparsed_k2=0):
        out = []
        for q in range(n_q):
            for s in grid:
                if s.basis == "probe" and s.k == 1:
                    correct = True if q < probe_moves else False
                elif s.basis == "probe" and s.k == 2:
                    correct = None if q < unparsed_k2 else False  # k=2: only unparsed answers
                    if q == 0 and unparsed_k2:
                        correct = True  # 1 parsed, moved: "1/1 (100%)" among parsed
                else:
                    correct = True if (s.basis == "random" and q < ctrl_moves) else False
                out.append({"setting": s.key, "case_id": f"c{q}", "question_id": f"q{q}", "question_key": f"k{q}",
                            "case_label": "C", "correct": correct})
        return out

    null = summarize_records(recs(40, 0), grid)
    assert null["verdict_code"] == "null", null["verdict"]
    assert all(d["difference"]["ci"][1] < 0.10 for d in null["settings"])
    small = summarize_records(recs(12, 0), grid)
    assert small["verdict_code"] == "inconclusive"
    eff = summarize_records(recs(12, 12), grid)
    assert eff["verdict_code"] == "effect"
    # ranking by moved-of-all: k=2 moved 1 of the 1 it parsed, but 1 of 12 overall; k=1 moved 3 of 12
    mixed = summarize_records(recs(12, 3, unparsed_k2=12), grid)
    by = {d["k"]: d for d in mixed["settings"]}
    assert by[2]["moved"]["rate"] == 1.0 and by[2]["coverage_c"]["k"] == 1
    assert by[1]["strongest"] and not by[2]["strongest"]
    # intervals and tests at the question level
    iv = adjusted_interval([0.0] * 20)
    assert iv["estimate"] == 0.0 and iv["ci"][1] == pytest.approx(0.137, abs=0.003)
    assert randomisation_test([[1, 0]] * 8)["p_two"] == pytest.approx(2 / 256)
    assert randomisation_test([[0, 0], [1, 1]])["p_two"] == 1.0
    assert 0 < randomisation_test([[1, 0]] * 30 + [[0, 1]] * 5)["p_two"] < 0.001


def test_cases_distinct_stratified_and_disjoint_from_fitting(tokenizer, tmp_path):
    from steering.sweep.cli import run_sweep

    lm = planted_lm(tokenizer)
    # 12 C cases over 4 questions (3 each) + 2 C records repeating an earlier input under another id
    run = make_steering_run(tmp_path, tokenizer, n_c=12, n_non=0, per_q=3, dup=2)
    dirs = write_dirs(tmp_path / "probes", {2: np.stack([unit(PLANT)])},
                       attrs={"question_split": json.dumps({"fit": ["q0"]})})
    s = run_sweep(sweep_config(run, dirs, layers=[2], ks=[1], alphas=[1.0], random_seeds=1, per_question=2, max_cases=5),
                  lm=lm, echo=lambda m: None)
    cfg = json.loads((run / "steering" / "config.json").read_text())
    stats = cfg["case_sample"]
    assert stats["n_duplicate_inputs_dropped"] == 2 and stats["n_excluded_fit_questions"] == 3
    assert stats["n_c_cases"] == 5 and stats["n_c_questions"] == 3  # round-robin: all 3 questions first
    assert cfg["split"]["disjoint"] is True and cfg["split"]["source"] == "directions.h5"
    recs = [json.loads(x) for x in (run / "steering" / "generations.jsonl").read_text().splitlines()]
    assert not any(r["question_id"] == "q0" for r in recs)
    per_q = {}
    for r in recs:
        if r["setting"].endswith("probe"):
            per_q[r["question_id"]] = per_q.get(r["question_id"], 0) + 1
    assert max(per_q.values()) <= 2 and len(per_q) == 3
    assert s["n_c_questions"] == 3 and s["split"]["disjoint"] is True
    # the sample is seeded: the same config draws the same cases
    s2 = run_sweep(sweep_config(run, dirs, layers=[2], ks=[1], alphas=[1.0], random_seeds=1, per_question=2, max_cases=5,
                        output=str(tmp_path / "again")), lm=lm, echo=lambda m: None)
    cfg2 = json.loads((tmp_path / "again" / "config.json").read_text())
    assert cfg2["case_ids"] == cfg["case_ids"] and s2["n_c_cases"] == 5
    # an exclude file removes more questions; a held-out list keeps only its questions
    ex = tmp_path / "fit.txt"
    ex.write_text("# fitting questions\nq1\n")
    s3 = run_sweep(sweep_config(run, dirs, layers=[2], ks=[1], alphas=[1.0], random_seeds=1, exclude_questions=str(ex),
                        output=str(tmp_path / "ex")), lm=lm, echo=lambda m: None)
    assert s3["n_c_questions"] == 2 and "--exclude-questions" in s3["split"]["source"]
    held = write_dirs(tmp_path / "held", {2: np.stack([unit(PLANT)])},
                       attrs={"question_split": json.dumps({"held_out": ["q3"]})})
    s4 = run_sweep(sweep_config(run, held, layers=[2], ks=[1], alphas=[1.0], random_seeds=1, output=str(tmp_path / "held_out")),
                   lm=lm, echo=lambda m: None)
    assert s4["n_c_questions"] == 1
    # --allow-overlap steers the fitting questions too, and says so
    s5 = run_sweep(sweep_config(run, dirs, layers=[2], ks=[1], alphas=[1.0], random_seeds=1, allow_overlap=True,
                        output=str(tmp_path / "overlap")), lm=lm, echo=lambda m: None)
    assert s5["n_c_questions"] == 4 and s5["split"]["disjoint"] is False and "not a held-out test" in s5["verdict"]


def test_sweep_resume_has_no_duplicates(tokenizer, tmp_path):
    from steering.generate import generate_steered
    from steering.sweep.cli import SweepError, is_complete, run_sweep

    lm = planted_lm(tokenizer)
    run = make_steering_run(tmp_path, tokenizer, n_c=4, n_non=0)
    dirs = write_dirs(tmp_path / "probes", {2: np.stack([unit(PLANT)])})
    calls = []

    def counting(lm_, texts, *a, **kw):
        calls.append(len(texts))
        return generate_steered(lm_, texts, *a, **kw)

    kw = dict(layers=[2], ks=[1], alphas=[1.0], random_seeds=1)
    run_sweep(sweep_config(run, dirs, max_cases=2, **kw), lm=lm, generate_fn=counting, echo=lambda m: None)  # "killed" after two
    assert sum(calls) == 2 * 3
    # a torn last line (killed mid-write) is repaired, not duplicated
    gpath = run / "steering" / "generations.jsonl"
    with open(gpath, "a") as f:
        f.write('{"setting": "half')
    with pytest.raises(SweepError, match="resume"):
        run_sweep(sweep_config(run, dirs, **kw), lm=lm, generate_fn=counting, echo=lambda m: None)
    s = run_sweep(sweep_config(run, dirs, resume=True, **kw), lm=lm, generate_fn=counting, echo=lambda m: None)
    assert sum(calls) == 4 * 3
    recs = [json.loads(x) for x in gpath.read_text().splitlines()]
    pairs = [(r["setting"], r["case_id"]) for r in recs]
    assert len(pairs) == len(set(pairs)) == 4 * 3
    assert s["settings"][0]["moved_of_all"]["n"] == 4 and is_complete(run / "steering")
    calls.clear()
    run_sweep(sweep_config(run, dirs, resume=True, **kw), lm=lm, generate_fn=counting, echo=lambda m: None)
    assert sum(calls) == 0
    with pytest.raises(SweepError, match="max_new_tokens"):
        run_sweep(sweep_config(run, dirs, resume=True, **dict(kw, max_new_tokens=9)), lm=lm, echo=lambda m: None)


def test_no_c_cases_is_insufficient_data(tokenizer, tmp_path):
    from steering.sweep.analysis import format_summary
    from steering.sweep.cli import is_complete, run_sweep

    lm = planted_lm(tokenizer)
    run = make_steering_run(tmp_path, tokenizer, n_c=0, n_non=3)
    dirs = write_dirs(tmp_path / "probes", {2: np.stack([unit(PLANT)])})
    msgs = []
    s = run_sweep(sweep_config(run, dirs, layers=[2], ks=[1], alphas=[1.0]), lm=lm, echo=msgs.append)
    assert s["status"] == "insufficient_data" and s["verdict"].startswith("insufficient_data")
    assert json.loads((run / "steering" / "summary.json").read_text())["status"] == "insufficient_data"
    assert any("no type-C" in m for m in msgs)
    assert is_complete(run / "steering")
    assert "insufficient_data" in format_summary(s, style="md")


def test_format_summary_text_and_md(tokenizer, tmp_path):
    from steering.sweep.cli import format_summary, format_table, run_sweep

    lm = planted_lm(tokenizer)
    run = make_steering_run(tmp_path, tokenizer, n_c=3, n_non=0)
    dirs = write_dirs(tmp_path / "probes", {2: np.stack([unit(PLANT)])})
    s = run_sweep(sweep_config(run, dirs, layers=[2], ks=[1], alphas=[1.0], random_seeds=1), lm=lm, echo=lambda m: None)
    text = format_summary(s)
    assert "3 type-C cases from 3 questions" in text and "parsed C" in text and s["verdict"] in text
    md = format_summary(s, style="md")
    assert "| setting |" in md and "**Verdict.**" in md and "L2\\|k1\\|a1\\|probe" in md
    assert format_table(s).splitlines()[0].startswith("setting")
