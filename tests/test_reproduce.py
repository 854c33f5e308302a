"""``make reproduce``: the study preset (checked offline), its planner-sized sample, the paper-design stage, and
the closing print (``python -m study.reproduce``) on a study directory's files."""
from __future__ import annotations

import json
from pathlib import Path

import pytest

from loadbearing.errors import LoadBearingError
from study.config import StudyConfig


def _preset() -> dict:
    from study.files import read_config_file

    (run,) = read_config_file("reproduce")
    return run


def test_the_preset_fixes_at_most_four_settings_and_the_planner_sizes_it(capsys):
    from steering.planning.planner import plan, stated_design
    from study.driver import main

    p = _preset()
    n_settings = len(p["k"].split(",")) * len(p["alphas"].split(",")) * len(p["steer_layers"].split(","))
    assert 1 <= n_settings <= 4 and p["sesoi"] == 0.10 and p["per_question"] == 1 and p["steer_holdout"] == 0.5
    assert p["activation_layers"] == p["steer_layers"] == "16"  # one layer stored: the one both sweeps steer
    # the preset states what the planner asks for at its own design (Holm over its settings) and that its sample
    # falls short of it (the honest planner: a null at a true SESOI/3 and over the base rate's uncertainty)
    need = plan(stated_design(0.07, None, n_settings, p["random_seeds"]), sesoi=p["sesoi"],
                n_sims=500)["n_cases_for_null"]
    text = (Path(__file__).parents[1] / "study/presets/reproduce.toml").read_text()
    assert need is not None and need > p["max_cases"], need
    assert f"needs {need} held-out C cases" in text and "fall short of both" in text  # as stated
    # 800 questions at the demo's eligibility (66 of 160), half held out, one C case each, cover the cap
    assert p["max_examples"] * 66 / 160 / 2 >= p["max_cases"]
    assert main(["--config", "reproduce", "--dry-run"]) == 0
    out = capsys.readouterr().out
    assert "160 C cases x 15" in out and "2400 generations" in out
    assert "paper_steering <= 4 C + 4 non-C cases x 91" in out and "728 generations" in out
    assert "activation_layers            = 16" in out and "dry run:" in out
    assert "total: <= 13,528 generations" in out  # 10,400 behaviour + 2,400 steering + 728 paper design


def test_paper_steering_stage_and_the_new_settings():
    from study.dryrun.plan import select_stages
    from study.stages.core import REGISTRY

    st = REGISTRY["paper_steering"]
    assert not st.default and st.needs == ("probes",) and "paper_steering" not in select_stages(None)
    c = StudyConfig(output_dir="x", steer_max_new_tokens=64, paper_steer_cases=3)
    assert "3 C + 3 non-C cases x 91" in st.bound(c) and "546 generations" in st.bound(c)
    for bad, needle in ((dict(probe="linear"), "unknown --probe"), (dict(activation_layers="1,x"), "layer"),
                        (dict(paper_steer_cases=0), "--paper-steer-cases")):
        with pytest.raises(LoadBearingError, match=needle):  # StudyError / UsageError: one line naming the setting
            StudyConfig(output_dir="x", **bad).validate()


def test_the_stages_pass_the_stored_layers_probes_and_paper_table(monkeypatch, tmp_path):
    import activations.cache as cache
    import probes.train as train
    from study.stages.core import REGISTRY

    seen = {}
    monkeypatch.setattr(cache, "cache_activations", lambda cfg: seen.setdefault("cache", cfg))
    monkeypatch.setattr(train, "train", lambda cfg: seen.setdefault("probes", cfg))
    c = StudyConfig(output_dir=str(tmp_path), activation_layers="16", probe="logistic,mlp", paper_table=True)
    REGISTRY["activations"].run(tmp_path, c)
    REGISTRY["probes"].run(tmp_path, c)
    assert seen["cache"].layers == "16"
    assert seen["probes"].probe == "logistic,mlp" and seen["probes"].paper_table is True


def _study_dir(tmp: Path, *, with_tables: bool = True) -> Path:
    from steering.sweep.analysis import summarize_records
    from steering.sweep.grid import Setting

    d = tmp / "study"
    (d / "steering").mkdir(parents=True)
    (d / "study.json").write_text(json.dumps({"kind": "study", "settings": {}}))
    grid = [Setting("none|alpha0", "none", None, 0, 0.0, 0.0, None, "none"),
            Setting("L16|k1|a0.5|probe", "probe", 16, 1, 0.5, 70.0),
            Setting("L16|k1|a0.5|random0", "random", 16, 1, 0.5, 70.0, 0)]
    recs = []
    for i in range(30):
        for s, ok in ((grid[0], False), (grid[1], i < 2), (grid[2], i < 1)):
            recs.append({"setting": s.key, "basis": s.basis, "case_id": f"c{i}", "question_id": f"q{i}",
                         "question_key": f"q{i}", "case_label": "C", "correct": ok})
    summary = summarize_records(recs, grid, sesoi=0.10, power=False)
    (d / "steering" / "summary.json").write_text(json.dumps(summary))
    if with_tables:
        (d / "probes").mkdir()
        (d / "probes" / "paper_table.md").write_text("# Probe accuracy in the paper's layout\n| task |\n")
        (d / "steering-paper").mkdir()
        (d / "steering-paper" / "table7.md").write_text("# Steering in the paper's Table 7 layout\n| Direction |\n")
    return d


def test_the_closing_print_has_the_verdict_its_interval_and_both_tables(tmp_path, capsys):
    from study.reproduce import main

    d = _study_dir(tmp_path)
    assert main([str(d)]) == 0
    out = capsys.readouterr().out
    summ = json.loads((d / "steering" / "summary.json").read_text())
    s = summ["settings"][0]
    lo, hi = s["difference"]["ci"]
    assert out.startswith(f"steering verdict: {summ['verdict_code']} (SESOI 10 pp")
    assert f"95% CI [{100 * lo:+.1f}, {100 * hi:+.1f}] over 30 questions" in out
    assert "moved among parsed 2/30 vs 1/30" in out and "parsed 30/30 vs random control 30/30" in out
    assert "uninformative settings (the answer line broken: neither null nor effect): none" in out
    assert out.index("steering verdict") < out.index("paper's layout") < out.index("Table 7 layout")


def test_the_closing_print_names_the_uninformative_settings(tmp_path, capsys):
    """make reproduce's case: a k = 4 basis whose answers parse 1/150 against 208/600 for its random bases."""
    from steering.sweep.analysis import summarize_records
    from steering.sweep.grid import make_grid
    from study.reproduce import main

    d = _study_dir(tmp_path)
    grid = make_grid([16], [1, 4], [0.5], ("random", "none"), 4, {16: 1.0})
    recs = []
    for s in grid:
        for i in range(150):
            if s.basis == "none":
                ok = False
            elif s.basis == "probe" and s.k == 4:
                ok = True if i == 0 else None  # parses 1/150
            else:
                ok = None if (i + 3 * (s.seed or 0)) % 20 >= 7 else (i * 7 + (s.seed or 0)) % 14 == 0
            recs.append({"setting": s.key, "basis": s.basis, "case_id": f"c{i}", "question_id": f"q{i}",
                         "question_key": f"q{i}", "case_label": "C", "correct": ok})
    (d / "steering" / "summary.json").write_text(json.dumps(summarize_records(recs, grid, power=False)))
    assert main([str(d)]) == 0
    out = capsys.readouterr().out
    assert "L16|k4|a0.5|probe: uninformative; parsed 1/150 vs random control 208/600" in out
    assert "uninformative settings (the answer line broken: neither null nor effect): L16|k4|a0.5|probe" in out
    assert not out.startswith("steering verdict: null")


def test_the_closing_print_names_what_is_missing(tmp_path, capsys):
    from study.reproduce import main

    d = _study_dir(tmp_path, with_tables=False)
    assert main([str(d)]) == 1
    out = capsys.readouterr().out
    assert "missing: probes/paper_table.md: run the probes" in out and "missing: steering-paper/table7.md" in out
    assert main([str(tmp_path / "nowhere")]) == 2
    err = capsys.readouterr().err.strip()
    assert err.startswith("error: ") and "not a study directory" in err and "\n" not in err


def test_the_study_passes_the_random_scope_to_the_sweep(monkeypatch, tmp_path):
    import steering.sweep.cli as sweep
    from study.stages.core import _run_steering

    seen = {}
    monkeypatch.setattr(sweep, "run_sweep", lambda cfg, echo=None: seen.setdefault("cfg", cfg))
    c = StudyConfig(output_dir=str(tmp_path), random_scope="sweep", random_seeds=19, steer_max_new_tokens=8)
    _run_steering(tmp_path, c)
    assert seen["cfg"].random_scope == "sweep" and seen["cfg"].random_seeds == 19
    with pytest.raises(LoadBearingError, match="--random-scope must be case or sweep"):
        StudyConfig(output_dir="x", random_scope="all").validate()
