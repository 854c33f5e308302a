"""The inspect export's grouped columns, grouped clustered rates and causal-test logs (issue #36), read back with
inspect_ai's own readers (``read_eval_log``, ``samples_df``), on a synthetic run with causal stages.

    .venv/bin/pytest -q tests/test_export_inspect_groups.py
"""
from __future__ import annotations

import json
from collections import Counter
from pathlib import Path

import pytest
from helpers.compare_runs import write_run


def _stage(run: Path, name: str, rows: list[dict]) -> None:
    d = run / name
    d.mkdir()
    (d / "records.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
    (d / "manifest.json").write_text(json.dumps({"kind": f"behavioural.{name}", "status": "ok"}))
    (d / "summary.json").write_text(json.dumps({"definition": f"{name} (synthetic)"}))


@pytest.fixture()
def run(tmp_path) -> Path:
    from loadbearing.runs import Run

    d = write_run(tmp_path / "run", n_q=6, propagate=lambda i, p: p != "early" and i % 3 != 0, aoc=lambda i: 1 + i % 3)
    for f, v in (("manifest.json", {"kind": "behavioural.causal.early_answer", "status": "ok"}), ("summary.json", {})):
        (d / "early_answer" / f).write_text(json.dumps(v))
    bases = Run(d).baselines()
    meta = [{"question_id": b.question_id, "question_key": b.question_key, "dataset": b.dataset, "task": b.task,
             "difficulty": b.difficulty, "n_lines": 3} for b in bases]
    _stage(d, "filler", [m | {"id": f"{m['question_id']}|{c}", "condition": c, "fraction": None, "assistant_text": ". . .",
                              "generation": " 1" if c == "full" else " 7", "parsed_answer": "1" if c == "full" else "7",
                              "correct": c == "full"} for m in meta for c in ("full", "dots")])
    _stage(d, "paraphrase", [m | {"id": f"{m['question_id']}|p", "fraction": 1.0, "assistant_text": "x\n",
                                  "continuation": "Answer: 1", "parsed_answer": "1", "correct": True,
                                  "reference_answer": "1", "same_answer": True} for m in meta])
    _stage(d, "resample", [m | {"id": f"{m['question_id']}|k=0|r={r}", "kind": "rollout", "k": 0, "rollout": r,
                                "assistant_text": "", "generation": "Answer: 1", "parsed_answer": None if r else "1",
                                "correct": None if r else True} for m in meta for r in (0, 1)])
    return d


def test_columns_groups_and_causal_logs_read_back(run, capsys):
    from inspect_ai import analysis
    from inspect_ai.log import read_eval_log

    from loadbearing.runs import Run
    from study.export_inspect.cli import main
    from study.export_inspect.groups import CELL_FIELDS

    assert main([str(run)]) == 0
    out = capsys.readouterr().out
    logs = {p.stem: p for p in (run / "inspect").glob("*.eval")}
    assert set(logs) == {"continuations", "early_answer", "filler", "paraphrase", "resample"}
    assert all(f"wrote {p}" in out for p in logs.values())
    log = read_eval_log(str(logs["continuations"]))
    # the viewer's sample list: the grouping columns first, sorted by level
    view = log.eval.viewer.task_samples_view
    ids = [c.id for c in view.columns]
    assert ids[:6] == ["sampleId", *[f"score__cell__{f}" for f in CELL_FIELDS]] and "score__outcome__outcome" in ids
    assert view.sort[0].column == "score__cell__level"
    recs = {c.id: c for c in Run(run).continuations()}
    for s in log.samples:
        c, cell = recs[s.id], s.scores["cell"].value
        assert cell["level"] == c.difficulty and cell["position"] == c.position
        assert cell["strategy"] == (c.strategy if c.condition == "perturbed" else "control")
        assert cell["moved"] == (c.parsed_answer != "1")  # the baseline's answer is "1"
    # the grouped rates: pooled and per level, each with the clustered interval of loadbearing.stats
    from loadbearing.stats import clustered_rate

    g = next(x for x in log.results.scores if x.name == "propagated_by_group")
    pert = [c for c in recs.values() if c.condition == "perturbed"]
    for lvl in ("L0", "L1"):
        sub = [c for c in pert if c.difficulty == lvl]
        want = clustered_rate([c.label == "C" for c in sub], [c.question_key for c in sub])
        m = g.metrics[f"level={lvl}"]
        assert m.group == "level" and m.name == lvl and m.value == pytest.approx(want.value)
        assert m.metadata["lo"] == pytest.approx(want.lo) and m.metadata["n_questions"] == 3
    assert g.metrics["all"].value == pytest.approx(sum(c.label == "C" for c in pert) / len(pert))
    assert g.metrics["position=early"].value == 0.0  # no early edit propagates
    # samples_df reads the grouping score (as its JSON text)
    df = analysis.samples_df(str(logs["continuations"]))
    assert Counter(json.loads(v)["level"] for v in df.score_cell) == Counter(c.difficulty for c in recs.values())

    # the causal tests: early answering, one sample per cut, moved against the full chain's forced answer
    ea = read_eval_log(str(logs["early_answer"]))
    assert ea.eval.task == "loadbearing/early_answer" and len(ea.samples) == 6 * 4
    cells = [s.scores["cell"].value for s in ea.samples]
    assert {c["strategy"] for c in cells} == {"early answering"}
    assert Counter(c["position"] for c in cells) == Counter({f"k={k}/3": 6 for k in range(4)})
    moved = next(x for x in ea.results.scores if x.name == "moved_by_group")
    # question i settles at k = 1 + i % 3: cuts before it moved; k = 3 never moves
    assert moved.metrics["position=k=3/3"].value == 0.0 and moved.metrics["position=k=0/3"].value == 1.0
    fl = read_eval_log(str(logs["filler"]))
    corr = next(x for x in fl.results.scores if x.name == "correct_by_group")
    assert corr.metrics["strategy=filler:full"].value == 1.0 and corr.metrics["strategy=filler:dots"].value == 0.0
    rs = read_eval_log(str(logs["resample"]))
    unscored = [s for s in rs.samples if "correct" not in s.scores]
    assert len(unscored) == 6  # an unparsed answer is unscored, never 0
    assert next(x for x in rs.results.scores if x.name == "correct_by_group").scored_samples == 6
    df = analysis.samples_df(str(logs["paraphrase"]))
    assert len(df) == 6 and {json.loads(v)["strategy"] for v in df.score_cell} == {"paraphrase"}


def test_no_causal_stage_no_causal_log(tmp_path):
    from study.export_inspect.cli import export_inspect

    d = write_run(tmp_path / "run", n_q=3, propagate=lambda i, p: True)
    (d / "filler").mkdir()  # an unfinished stage (no manifest) is not exported
    out = export_inspect(d)
    assert sorted(p.name for p in out.parent.iterdir()) == ["continuations.eval"]
