"""python -m study.compare (issue #36): question-paired comparisons of runs, on synthetic runs whose differences
are known by construction, and bad input as one ``error:`` line.

    .venv/bin/pytest -q tests/test_compare.py -m "not integration"
"""
from __future__ import annotations

import json
from pathlib import Path

import pytest
from helpers.compare_runs import write_run


def _row(res, measure, group="all"):
    return next(r for r in res["comparisons"] if r["measure"] == measure and r["group"] == group)


def test_a_known_difference_is_found_and_its_interval_covers_it(tmp_path):
    from study.compare.cli import compare, load

    # A propagates at every middle and late edit, B only at late: A - B = 1/3 exactly, on 30 questions
    a = write_run(tmp_path / "a", n_q=30, propagate=lambda i, p: p != "early", aoc=lambda i: 1)
    b = write_run(tmp_path / "b", n_q=30, propagate=lambda i, p: p == "late", aoc=lambda i: 3)
    res = compare(load([str(a), str(b)]))
    r = _row(res, "propagation")
    assert r["n_questions"] == 30 and r["n_pairs"] == 90 and r["pairing"] == "rows"
    assert r["rate_a"] == pytest.approx(2 / 3) and r["rate_b"] == pytest.approx(1 / 3)
    assert r["estimate"] == pytest.approx(1 / 3) and r["ci"][0] < 1 / 3 < r["ci"][1] and r["ci"][0] > 0
    assert r["test"].startswith("sign-flip over questions") and r["p_value"] < 1e-3
    assert 0 < r["mdd"] < 1 / 3
    # identical controls and baselines: no difference, p = 1
    ctl = _row(res, "control error")
    assert ctl["estimate"] == 0 and ctl["p_value"] == 1.0 and ctl["n_pairs"] == 90
    acc = _row(res, "baseline accuracy")
    assert acc["test"].startswith("McNemar exact") and acc["p_value"] == 1.0
    # AOC: A's answer settles at k = 1 (AOC 1 - trapz([0,1,1,1]) = 1/6 ... A), B's at k = 3
    aoc = _row(res, "AOC")
    assert aoc["pairing"] == "questions" and aoc["n_questions"] == 30
    assert aoc["estimate"] == pytest.approx((1 - 5 / 6) - (1 - 1 / 6))  # 1/6 - 5/6 = -2/3
    # Holm over the family: the adjusted p is never below the raw one
    assert all(x["p_holm"] >= x["p_value"] for x in res["comparisons"] if x["p_value"] is not None)
    assert "probe accuracy" not in {x["measure"] for x in res["comparisons"]}  # no probes stage: no row


def test_mcnemar_on_baselines_and_only_shared_questions_count(tmp_path):
    from study.compare.cli import compare, load
    from study.compare.stats import mcnemar_exact

    # 20 shared questions (ids 5..24); A right on all, B wrong on ids divisible by 3
    a = write_run(tmp_path / "a", n_q=25, propagate=lambda i, p: False)
    b = write_run(tmp_path / "b", n_q=25, offset=5, propagate=lambda i, p: False, correct=lambda i: i % 3 != 0)
    res = compare(load([str(a), str(b)]))
    acc = _row(res, "baseline accuracy")
    shared = range(5, 25)
    k = sum(i % 3 == 0 for i in shared)
    assert acc["n_questions"] == 20 and acc["estimate"] == pytest.approx(k / 20)
    assert acc["p_value"] == pytest.approx(mcnemar_exact(k, 0)) and acc["p_value"] < 0.05
    assert res["shared_questions"] == {"a vs b": 20}


def test_by_level_and_by_strategy_and_unpaired_strategies(tmp_path):
    from study.compare.cli import compare, load

    # level L1 (odd ids) propagates in A only: the difference lives in one level
    a = write_run(tmp_path / "a", n_q=24, propagate=lambda i, p: i % 2 == 1)
    b = write_run(tmp_path / "b", n_q=24, propagate=lambda i, p: False)
    res = compare(load([str(a), str(b)]), by="level")
    assert _row(res, "propagation", "L1")["estimate"] == 1.0 and _row(res, "propagation", "L0")["estimate"] == 0
    # a run with another strategy: no row pairs, so per-question rates are compared (question-weighted)
    c = write_run(tmp_path / "c", n_q=24, propagate=lambda i, p: p == "late", strategy="contradiction")
    res = compare(load([str(a), str(c)]))
    r = _row(res, "propagation")
    assert r["pairing"] == "questions" and r["n_questions"] == 24
    assert r["estimate"] == pytest.approx(0.5 * 1.0 - 1 / 3)
    res = compare(load([str(a), str(c)]), by="strategy")
    assert not [x for x in res["comparisons"] if x["measure"] == "propagation"]  # no strategy in common


def test_the_cli_prints_the_table_and_writes_the_section(tmp_path, capsys):
    from study.compare.cli import main

    a = write_run(tmp_path / "a", n_q=12, propagate=lambda i, p: True, model="m1")
    b = write_run(tmp_path / "b", n_q=12, propagate=lambda i, p: p == "early", model="m2")
    out = tmp_path / "cmp"
    assert main([str(a), str(b), "--output-dir", str(out)]) == 0
    text = capsys.readouterr().out
    assert "## Paired comparison" in text and "| propagation | all | a | b | 12 | 36 |" in text
    md = (out / "compare.md").read_text()
    assert "## Models x datasets" in md and "| m1 |" in md and "| m2 |" in md and "compare.png" in md
    assert (out / "compare.png").read_bytes()[:4] == b"\x89PNG"
    js = json.loads((out / "compare.json").read_text())
    assert {r["measure"] for r in js["comparisons"]} >= {"propagation", "control error", "baseline accuracy"}


def test_a_study_directory_compares_the_models_within_each_dataset(tmp_path, capsys):
    from study.compare.cli import main

    root = tmp_path / "study"
    for m in ("m1", "m2"):
        for ds in ("arith", "gsm8k"):
            write_run(root / m / ds, n_q=10, dataset=ds, model=m, propagate=lambda i, p, m=m: m == "m1")
    assert main([str(root), "--by", "dataset"]) == 0
    text = capsys.readouterr().out
    assert "| propagation | arith | m1/arith | m2/arith |" in text and "| propagation | gsm8k | m1/gsm8k | m2/gsm8k |" in text
    assert "## Models x datasets" in text and "| model | arith | gsm8k |" in text
    # the study file the driver writes back names its runs in [[run]] tables
    toml = root / "study.toml"
    toml.write_text("".join(f'[[run]]\nmodel = "{m}"\ndataset = "arith"\noutput_dir = "{root / m / "arith"}"\n\n'
                            for m in ("m1", "m2")))
    assert main([str(toml)]) == 0
    text = capsys.readouterr().out
    assert "| propagation | all | m1/arith | m2/arith | 10 | 30 |" in text and "gsm8k" not in text


def test_bad_input_is_one_error_line(tmp_path, capsys):
    from study.compare.cli import main

    a = write_run(tmp_path / "a", n_q=5, propagate=lambda i, p: True)
    b = write_run(tmp_path / "b", n_q=5, offset=100, propagate=lambda i, p: True)
    for argv, needle in (([str(a), str(b)], "shares no question"), ([str(a)], "needs two or more runs"),
                         ([str(a), str(tmp_path / "nope")], "no such run")):
        rc = main(argv)
        err = capsys.readouterr().err
        assert rc == 2 and err.startswith("error: ") and err.count("\n") == 1 and needle in err, err
    m = json.loads((b / "manifest.json").read_text())
    (b / "manifest.json").write_text(json.dumps(m | {"status": "running"}))
    assert main([str(a), str(b)]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "has not finished" in err
    (tmp_path / "empty").mkdir()
    assert main([str(a), str(tmp_path / "empty")]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "holds no run" in err
    with pytest.raises(SystemExit) as e:
        main([str(a), str(b), "--by", "colour"])
    assert e.value.code == 2 and capsys.readouterr().err.count("\n") == 1


def test_the_tests_and_holm_by_hand():
    from study.compare.stats import holm, mcnemar_exact, paired_continuous, sign_flip_p

    assert mcnemar_exact(0, 0) == 1.0 and mcnemar_exact(6, 0) == pytest.approx(2 * 0.5 ** 6)
    p, how = sign_flip_p([1, 1, 1, 1, 1])
    assert how == "exact" and p == pytest.approx(2 / 32)
    p, how = sign_flip_p([1.0] * 30, seed=1)
    assert how == "monte carlo" and p < 0.001
    assert sign_flip_p([0, 0]) == (1.0, "exact")
    assert holm([0.01, None, 0.04, 0.03]) == pytest.approx([0.03, None, 0.06, 0.06])
    r = paired_continuous([(q, 0.5 + 0.1 * (q % 3), 0.5) for q in range(12)])
    assert r["estimate"] == pytest.approx(0.1) and r["ci"][0] < 0.1 < r["ci"][1]


def test_the_calibration_entry_holds_its_size_at_small_sims():
    """bench/calib_compare.py at 150 simulations: the sign-flip test and McNemar hold their size, the intervals
    their coverage (the full bench: python bench/calibration.py --only compare)."""
    import sys

    sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "bench"))
    import calibration as cal

    mod = cal.discover(["compare"])["compare"]
    res = mod.binary_entries(150, 0, (20,)) | mod.continuous_entries(150, 0, (20,))
    for name in ("compare.signflip.size.q20", "compare.mcnemar.size.q20", "compare.paired_rows.coverage.q20",
                 "compare.continuous.size.q20", "compare.continuous.coverage.q20"):
        assert cal.check_entry(res[name]).startswith("ok"), (name, res[name])
    assert res["compare.signflip.power_at_mdd.q20"]["power"] > 0.5


@pytest.mark.integration
def test_two_embedded_runs_of_different_settings(tmp_path):
    """Two tiny behaviour runs of the embedded model on the same 6 questions, one with the arithmetic edit and
    one with contradiction: rows do not pair, so propagation compares per-question rates; baselines pair."""
    import os
    import subprocess
    import sys

    repo = Path(__file__).resolve().parents[1]
    env = dict(os.environ, PYTHONPATH=str(repo))
    base = [sys.executable, "-m", "study", "--task", "s2_o3", "--max-examples", "6", "--max-new-tokens", "48",
            "--stages", "behaviour,labels", "--quiet"]
    for name, strategy in (("a", "arithmetic"), ("b", "contradiction")):
        r = subprocess.run([*base, "--output-dir", str(tmp_path / name), "--strategy", strategy], cwd=repo,
                           capture_output=True, text=True, env=env, timeout=300)
        assert r.returncode == 0, r.stderr[-2000:]
    r = subprocess.run([sys.executable, "-m", "study.compare", str(tmp_path / "a"), str(tmp_path / "b"), "--output-dir",
                        str(tmp_path / "cmp")], cwd=repo, capture_output=True, text=True, env=env, timeout=120)
    assert r.returncode == 0, r.stderr
    assert "a vs b: 6 shared questions" in r.stdout and "| baseline accuracy | all | a | b | 6 | 6 |" in r.stdout
    res = json.loads((tmp_path / "cmp" / "compare.json").read_text())
    acc = next(x for x in res["comparisons"] if x["measure"] == "baseline accuracy")
    assert acc["estimate"] == 0 and acc["p_value"] == 1.0  # the same greedy baselines in both runs
    prop = [x for x in res["comparisons"] if x["measure"] == "propagation"]
    assert all(x["pairing"] == "questions" for x in prop)
