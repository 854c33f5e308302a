"""Few-shot exemplars of the benchmarks (loadbearing.questions.exemplars) and the study's rule that uses them.

    .venv/bin/pytest -q tests/test_study_fewshot.py
"""
from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
DATA = Path(os.environ.get("LOADBEARING_DATA", REPO.parent / "shared" / "data"))


def _tasks():
    from loadbearing.questions.data import BBH_TASKS

    return BBH_TASKS


@pytest.mark.parametrize("task", _tasks())
def test_every_bbh_exemplar_is_one_step_per_line_with_a_parseable_answer(task):
    from loadbearing.answers import extract_answer
    from loadbearing.questions.exemplars import few_shot_turns
    from loadbearing.questions.prompts import split_trace

    turns = few_shot_turns("bbh", task)
    assert len(turns) == 3
    for _q, a in turns:
        last = a.splitlines()[-1]
        assert last.startswith("Answer: ") and "So the answer" not in a and "step by step" not in a
        assert extract_answer(a, "bbh", task) is not None, (task, a)
        assert len(split_trace(a, "bbh", task).lines) >= 1


def test_gsm8k_and_mmlu_exemplars_have_three_steps_and_parse():
    from loadbearing.answers import extract_answer
    from loadbearing.questions.exemplars import few_shot_turns
    from loadbearing.questions.prompts import split_trace

    for ds in ("gsm8k", "mmlu"):
        turns = few_shot_turns(ds)
        assert len(turns) == 3
        for _, a in turns:
            assert "<<" not in a and "####" not in a
            assert len(split_trace(a, ds).lines) >= 3 and extract_answer(a, ds) is not None


def test_the_shipped_exemplars_are_rewritten_from_the_official_files(tmp_path):
    from loadbearing.questions.exemplars import write_exemplars

    ship = REPO / "loadbearing" / "questions" / "exemplars"
    for p in write_exemplars(DATA, tmp_path):
        assert p.read_bytes() == (ship / p.name).read_bytes(), p.name


def test_few_shot_only_when_asked_outside_arith():
    from loadbearing.questions.data import load_questions
    from loadbearing.questions.prompts import build_messages

    q = load_questions("bbh", task="navigate", data_dir=DATA)[0]
    assert len(build_messages(q)) == 2  # the default prompt is unchanged: zero-shot
    msgs = build_messages(q, few_shot=True)
    assert len(msgs) == 8 and msgs[2]["content"].splitlines()[-1] == "Answer: No"


def test_the_study_turns_exemplars_on_for_the_embedded_model_only():
    from study.config import StudyConfig
    from study.settings import resolve
    from study.stages.core import _behaviour_settings

    emb, rules = resolve(StudyConfig(output_dir="x", dataset="bbh", task="navigate"))
    assert _behaviour_settings(emb).few_shot is True and "exemplars" in rules["few_shot"]
    other, _ = resolve(StudyConfig(output_dir="x", model="gemma-2-9b-it", dataset="bbh"))
    assert _behaviour_settings(other).few_shot is None
    assert json.loads(json.dumps(_behaviour_settings(emb).to_dict()))["few_shot"] is True  # as the manifest has it
