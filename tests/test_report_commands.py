"""The re-run commands the report prints beside its verdicts reproduce their stage (issue #32, finding 1).

    .venv/bin/pytest -q tests/test_report_commands.py

A small study runs with settings that differ from the stage CLIs' defaults (seed 42, steer_holdout 0.5,
max_cases, the steering budget and batch size); each command the report prints is then run as printed (its
module's ``main`` on the shlex-split line, in process, on the same tiny model) and its summary compared with
the study's own. Before the fix the probe line dropped ``--seed 42 --steer-holdout 0.5`` (directions fitted on
every question) and the steering line stopped at "output directory already exists".
"""
from __future__ import annotations

import importlib
import json
import shlex
from pathlib import Path

import pytest

ARGV = ["--task", "s2_o5", "--max-examples", "16", "--folds", "2", "--k", "1", "--alphas", "0.5", "--max-cases", "2",
        "--random-seeds", "1", "--max-new-tokens", "16", "--quiet", "--seed", "42", "--steer-holdout", "0.5"]


def _run_printed(cmd: str, capsys) -> str:
    """Run ``python -m MODULE ARGS`` as printed; the module's stdout."""
    words = shlex.split(cmd)
    assert words[:2] == ["python", "-m"], cmd
    capsys.readouterr()
    rc = importlib.import_module(words[2]).main(words[3:])
    cap = capsys.readouterr()
    assert rc in (0, None), (cmd, cap.err)
    return cap.out


def _strip(summary: dict, drop=("created", "command", "output", "elapsed_s", "seconds", "wall_s")) -> dict:
    return {k: v for k, v in summary.items() if k not in drop}


@pytest.mark.integration  # a whole small study and two stage re-runs (~40 s on 2 cores)
def test_every_printed_command_reproduces_its_stage(tmp_path, fake_models, capsys):  # noqa: F811
    from study.driver import main
    from study.report.verdicts import read_verdicts

    out = tmp_path / "study"
    toml = tmp_path / "study.toml"  # one probe (a setting only a study file gives): half the probes' time
    toml.write_text('probe = "logistic"\n')
    assert main(["--config", str(toml), "--output-dir", str(out), *ARGV]) == 0
    verdicts = {v.key: v for v in read_verdicts(out)}
    md = (out / "report.md").read_text()
    for v in verdicts.values():  # the report prints exactly these commands
        assert f"command `{v.command}`" in md, v.command
    probe_cmd, steer_cmd = verdicts["probe"].command, verdicts["steering"].command
    for flag in ("--seed 42", "--steer-holdout 0.5", "--folds 2", "--probe logistic"):
        assert flag in probe_cmd, probe_cmd
    for flag in ("--seed 42", "--max-cases 2", "--max-new-tokens 64", "--random-seeds 1", "--k 1", "--alphas 0.5"):
        assert flag in steer_cmd, steer_cmd

    # (a) the behavioural summary, recomputed, prints the study's
    from behavioural.summary import format_summary

    printed = _run_printed(verdicts["propagation"].command, capsys)
    assert printed.strip() == format_summary(json.loads((out / "summary.json").read_text()), "text").strip()

    # (b) the probes, re-trained into a fresh directory: the same split, the same scores
    _run_printed(probe_cmd, capsys)
    ours = json.loads((out / "probes" / "results.json").read_text())
    again = json.loads((out / "rerun" / "probes" / "results.json").read_text())
    for key in ("headline", "metadata_baseline", "data"):
        assert again[key] == ours[key], key
    settings = {k: v for k, v in again["settings"].items() if k not in ("output", "command", "created", "quiet")}
    assert settings == {k: v for k, v in ours["settings"].items() if k in settings}

    # (c) the sweep, re-run into a fresh directory with the study's directions: the same cases, the same verdict
    _run_printed(steer_cmd, capsys)
    s1 = json.loads((out / "steering" / "summary.json").read_text())
    s2 = json.loads((out / "rerun" / "steering" / "summary.json").read_text())
    for key in ("verdict", "verdict_code", "settings", "n_c_questions"):
        assert s2.get(key) == s1.get(key), key
    # the trace browser counts the probe's moves as the report does (issue #32, finding 2)
    from study.browse.data import collect

    counts = {d["setting"]: d for d in collect([out])["steer"]["counts"]}
    assert s1["settings"]
    for d in s1["settings"]:  # the summary's settings are the probe's (each beside its matched control)
        assert (counts[d["key"]]["k"], counts[d["key"]]["n"]) == (d["moved_of_all"]["k"], d["moved_of_all"]["n"])
        assert counts[d["key"]]["strongest"] == bool(d.get("strongest"))
    _check_api_names_and_reprs(out)
    c1 = json.loads((out / "steering" / "config.json").read_text())
    c2 = json.loads((out / "rerun" / "steering" / "config.json").read_text())
    assert c2["case_ids"] == c1["case_ids"] and c2["split"] == c1["split"]
    assert {k: v for k, v in c2["config"].items() if k != "output"} == {
        k: v for k, v in c1["config"].items() if k != "output"}


def test_a_default_setting_is_not_printed_and_a_changed_one_is():
    from probes.train import ProbeConfig, build_parser
    from study.report.commands import non_default_flags

    defaults = ProbeConfig(store="x.h5").__dict__
    assert non_default_flags(build_parser(), ["x.h5"], defaults) == []
    changed = dict(defaults, seed=7, steer_holdout=0.25, transfer=False, cs=[0.1, 1.0], paper_table=True)
    flags = non_default_flags(build_parser(), ["x.h5"], changed)  # --no-transfer: the field it sets
    assert sorted(flags) == sorted(["--seed 7", "--cs 0.1,1", "--paper-table", "--no-transfer", "--steer-holdout 0.25"])


def test_a_study_without_recorded_settings_still_prints_a_fresh_output_dir(tmp_path):
    from study.report.verdicts import steering_verdict

    v = steering_verdict({"verdict_code": "null", "settings": [{"layer": 3, "k": 1, "alpha_rel": 0.5}]}, "S")
    assert "--output-dir S/rerun/steering" in v.command and "--layers 3" in v.command
    assert Path("S/steering").as_posix() not in v.command.replace("S/rerun/steering", "")


def _check_api_names_and_reprs(out: Path) -> None:
    """Issue #32, finding 8, on the study's real files: exact seeds, short reprs, one name per field."""
    import probes
    import steering
    from activations.store import open_store
    from loadbearing import Run
    from study.export_inspect.cli import build_log

    g = steering.read_sweep(out)
    raw = [json.loads(x).get("direction_seed") for x in (out / "steering" / "generations.jsonl").read_text().splitlines()]
    assert str(g.direction_seed.dtype) == "UInt64"
    assert [None if v is pd_na() else int(v) for v in g.direction_seed] == raw and any(x is not None for x in raw)
    d = probes.read_directions(out / "probes")
    with open_store(out / "activations.h5") as st:
        for obj in (d, st):
            assert len(repr(obj)) < 400 and "array(" not in repr(obj)
    df = Run(out).continuations_df()
    assert (df.continuation_id == df.id).all()
    assert (g.continuation_id == g.case_id).all() and (g.outcome == g.case_label).all()
    by_id = df.drop_duplicates("continuation_id").set_index("continuation_id")
    for _, r in g.iterrows():  # the steered case's outcome is the continuation's, under one name
        assert by_id.loc[r.continuation_id, "outcome"] == r.outcome
    samples = {s.metadata["continuation_id"]: s for s in build_log(Run(out)).samples}
    for cid, r in by_id.iterrows():
        sc = samples[cid].scores or {}
        assert (sc["outcome"].value if "outcome" in sc else None) == r.outcome
        assert (sc["abc"].value if "abc" in sc else None) == r.abc


def pd_na():
    import pandas as pd

    return pd.NA
