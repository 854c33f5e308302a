"""python -m study.export_inspect: a run as an inspect_ai eval log, read back with inspect_ai's own readers
(``read_eval_log``, ``inspect_ai.analysis.samples_df``) and compared, sample by sample, with the run.

    .venv/bin/pytest -q tests/test_export_inspect.py -m "not integration"
"""
from __future__ import annotations

import functools
import json
from collections import Counter
from pathlib import Path

import pytest

FAST = ["--task", "s2_o5", "--max-examples", "16", "--stages", "behaviour,labels", "--quiet"]


@pytest.fixture(scope="module")
def run_dir(tmp_path_factory, tiny_lm) -> Path:
    """A labelled run of the scripted model (behaviour and labels only)."""
    from fakes import scripted_generate

    import behavioural.protocol as protocol
    import loadbearing.engine.models as models
    from study.driver import main

    out = tmp_path_factory.mktemp("inspect") / "run"
    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(models, "load_model", lambda *a, **k: tiny_lm)
        mp.setattr(protocol, "generate", functools.partial(scripted_generate))
        assert main(["--output-dir", str(out), *FAST]) == 0
    return out


def _value(score):
    return None if score is None else score.value


def test_the_log_reads_back_sample_by_sample(run_dir, capsys):
    from inspect_ai.log import read_eval_log

    from loadbearing.runs import Run
    from study.export_inspect.cli import DEFAULT_OUTPUT, main

    assert main([str(run_dir)]) == 0
    out = run_dir / DEFAULT_OUTPUT
    assert f"wrote {out}" in capsys.readouterr().out
    run = Run(run_dir)
    recs = run.continuations()
    name, labels = run.labels()
    log = read_eval_log(str(out))
    assert log.status == "success" and log.eval.task == "loadbearing/edit_and_continue"
    assert log.eval.dataset.samples == len(recs) == len(log.samples)
    by_id = {c.id: c for c in recs}
    assert sorted(s.id for s in log.samples) == sorted(by_id)  # one sample per generation (the reader may reorder)
    assert log.eval.metadata["labelling"] == name == "rule"
    from loadbearing.stats.design import merged_position

    n_merged = 0
    for s in log.samples:
        c = by_id[s.id]
        assert s.target == c.gold and s.metadata["input_text"] == c.input_text
        assert s.output.completion == c.continuation
        # the chat turns (issue #32): system, few-shot pairs, the question, then the assistant prefix, which
        # ends with the edited line; every turn is in the model's input, in order
        roles = [m.role for m in s.input]
        assert roles[0] == "system" and roles[-2:] == ["user", "assistant"] and len(roles) % 2 == 1
        assert s.input[-1].text == c.prefix_text and s.input[-1].text.rstrip("\n").endswith(c.edited_line)
        assert s.input[-2].text.strip() in c.input_text and s.metadata["input_as"] == "chat turns"
        assert [m.role for m in s.messages] == [*roles, "assistant"] and s.messages[-1].text == c.continuation
        # the edit is named on the first screen
        assert c.edited_line in s.description and (c.condition == "control" or c.original_line in s.description)
        own = merged_position(p for st, p in c.cells() if st == c.strategy)
        n_merged += "=" in own
        assert s.metadata["position"] == own and s.metadata["recorded_position"] == c.position
        scores = s.scores or {}
        assert _value(scores.get("outcome")) == c.label
        assert _value(scores.get("propagated")) == (None if c.label is None else float(c.label == "C"))
        assert _value(scores.get("abc")) == labels.get(c.id)
        md = s.metadata
        assert md["condition"] == c.condition
        assert md["strategy"] == (c.strategy if c.condition == "perturbed" else None)  # a control has none
        assert md["question_key"] == (c.question_key or c.question_id) and md["line_index"] == c.line_index
        assert md["cells"] == [f"{a}/{b}" for a, b in c.cells()]
        assert md["edit"] == (f"{c.original_line} -> {c.edited_line}" if c.condition == "perturbed" else None)
    assert n_merged, "the run has merged middle=late generations, tagged as merged"
    # the log's headline metrics are the run's per-generation rates over parseable answers
    prop = next(x for x in log.results.scores if x.name == "propagated")
    pert = [c.label == "C" for c in recs if c.condition == "perturbed" and c.label is not None]
    assert prop.metrics["perturbed"].value == pytest.approx(sum(pert) / len(pert))
    assert prop.scored_samples == sum(c.label is not None for c in recs)


def test_samples_df_counts_match_the_run(run_dir, tmp_path):
    from inspect_ai import analysis

    from loadbearing.runs import Run
    from study.export_inspect.cli import export_inspect

    path = export_inspect(run_dir, str(tmp_path / "run.eval"))
    df = analysis.samples_df(str(path))
    # the .json format too (this inspect_ai's samples_df reads a .json log given as an EvalLog, not as a path)
    from inspect_ai.log import read_eval_log

    js = export_inspect(run_dir, str(tmp_path / "run.json"))
    assert json.loads(js.read_text())["eval"]["task"] == "loadbearing/edit_and_continue"
    assert len(analysis.samples_df(read_eval_log(str(js)))) == len(df)
    run = Run(run_dir)
    recs = run.continuations()
    _, labels = run.labels()
    assert len(df) == len(recs) and sorted(df.id) == sorted(c.id for c in recs)
    assert Counter(df.metadata_condition) == Counter(c.condition for c in recs)
    assert Counter(df.score_outcome.dropna()) == Counter(c.label for c in recs if c.label is not None)
    assert Counter(df.score_abc.dropna()) == Counter(v for v in labels.values() if v is not None)
    assert df.score_outcome.isna().sum() == sum(c.label is None for c in recs)  # unscored, not counted as 0
    ctl = df[df.metadata_condition == "control"]
    assert len(ctl) and ctl.metadata_strategy.isna().all()


def test_the_export_is_stable_and_follows_the_suffix(run_dir, tmp_path):
    from inspect_ai.log import read_eval_log

    from study.export_inspect.cli import export_inspect

    a = read_eval_log(str(export_inspect(run_dir, str(tmp_path / "a.eval"))))
    b = read_eval_log(str(export_inspect(run_dir, str(tmp_path / "b.json"))))
    assert a.eval.eval_id == b.eval.eval_id and a.eval.run_id == b.eval.run_id
    assert sorted(s.id for s in a.samples) == sorted(s.id for s in b.samples)
    assert not list(tmp_path.glob(".export_inspect.*"))  # the temporary directory is gone


def test_bad_input_is_one_error_line(run_dir, tmp_path, capsys):
    from study.export_inspect.cli import main

    assert main([str(tmp_path)]) == 2  # not a run directory
    err = capsys.readouterr().err
    assert err.startswith("error: ") and err.count("\n") == 1 and "manifest.json" in err
    assert main([str(tmp_path / "missing")]) == 2
    assert capsys.readouterr().err.count("\n") == 1
    assert main([str(run_dir), "--output-file", str(tmp_path / "log.txt")]) == 2
    err = capsys.readouterr().err
    assert ".eval or .json" in err and err.count("\n") == 1 and not (tmp_path / "log.txt").exists()
    assert main([str(run_dir), "--labelling", "nope", "--output-file", str(tmp_path / "x.eval")]) == 2
    assert "labelling" in capsys.readouterr().err and not (tmp_path / "x.eval").exists()
    with pytest.raises(SystemExit) as e:
        main([])
    assert e.value.code == 2 and capsys.readouterr().err.count("\n") == 1


def test_an_unfinished_run_is_refused_unless_asked(run_dir, tmp_path, capsys):
    import shutil

    from study.export_inspect.cli import main

    d = tmp_path / "run"
    shutil.copytree(run_dir, d)
    m = json.loads((d / "manifest.json").read_text())
    (d / "manifest.json").write_text(json.dumps({**m, "status": "running"}))
    assert main([str(d), "--output-file", str(tmp_path / "x.eval")]) == 2
    assert "has not finished" in capsys.readouterr().err
    assert main([str(d), "--output-file", str(tmp_path / "x.eval"), "--allow-incomplete"]) == 0
    from inspect_ai.log import read_eval_log

    assert read_eval_log(str(tmp_path / "x.eval")).status == "cancelled"
