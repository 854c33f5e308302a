"""Tests for loadbearing.questions.data: loaders on the real benchmark copies, the arith ladder, sampling, errors."""

from __future__ import annotations

import collections
import json
import re
import sys
import types
from pathlib import Path

import pytest

from loadbearing.questions.data import (
    ARITH_LEVELS,
    BBH_TASKS,
    DATASETS,
    MMLU_SUBJECTS,
    DataError,
    Question,
    arith_few_shot,
    arith_level_size,
    dataset_fingerprint,
    dedupe,
    load_questions,
    question_key,
    sample,
)

DATA = Path(__file__).resolve().parents[1].parent / "shared" / "data"
needs_data = pytest.mark.skipif(not DATA.is_dir(), reason=f"benchmark copies not found at {DATA}")


@pytest.fixture(scope="module")
def gsm8k():
    return load_questions("gsm8k", data_dir=DATA)


@pytest.fixture(scope="module")
def mmlu():
    return load_questions("mmlu", data_dir=DATA)


@pytest.fixture(scope="module")
def bbh():
    return load_questions("bbh", data_dir=DATA)


# ----------------------------------------------------------------------------------------------------
# real files


@needs_data
def test_gsm8k_counts_and_gold(gsm8k):
    assert len(gsm8k) == 1319
    first = gsm8k[0]
    assert first.id == "gsm8k/test/0" and first.dataset == "gsm8k" and first.task is None
    assert first.answer == "18" and first.question.startswith("Janet")
    assert all(re.fullmatch(r"-?\d+(\.\d+)?", q.answer) for q in gsm8k)  # commas gone ("1,450,000")
    assert "1450000" in {q.answer for q in gsm8k}
    assert len(load_questions("gsm8k", data_dir=DATA, split="train")) == 7473


@needs_data
def test_gsm8k_data_dir_may_be_the_dataset_folder(gsm8k):
    assert load_questions("gsm8k", data_dir=DATA / "gsm8k") == gsm8k


@needs_data
def test_mmlu_counts_and_format(mmlu):
    # 14,042 published rows; 105 repeat an earlier question text (78 in college_medicine) and are dropped
    assert len(mmlu) == 14042 - 105 and mmlu.duplicates_dropped == 105
    assert len(mmlu.dropped_ids) == 105 and len({question_key(q.question) for q in mmlu}) == len(mmlu)
    by_subject = collections.Counter(q.task for q in mmlu)
    assert set(by_subject) == set(MMLU_SUBJECTS) and len(MMLU_SUBJECTS) == 57
    assert by_subject["professional_law"] == 1534
    q = mmlu[0]
    assert q.id == "mmlu/abstract_algebra/test/0" and q.answer == "B" and len(q.choices) == 4
    assert q.question.splitlines()[-4:] == [f"{L}. {c}" for L, c in zip("ABCD", q.choices)]
    assert all(q.answer in "ABCD" and len(q.answer) == 1 for q in mmlu)
    one = load_questions("mmlu", task="anatomy", data_dir=DATA)
    assert one == [q for q in mmlu if q.task == "anatomy"]
    dev = load_questions("mmlu", data_dir=DATA, split="dev")
    assert len(dev) == 284 and dev.duplicates_dropped == 1 and dev[0].id == "mmlu/abstract_algebra/dev/0"


@needs_data
def test_mmlu_crlf_files_parse_like_lf_files(mmlu):
    # a CRLF file read without newline="" would leave "\r" in fields or split quoted newlines
    assert not any(c.endswith("\r") for q in mmlu for c in q.choices)


@needs_data
def test_bbh_counts(bbh):
    # 6,511 published examples; 4 repeat an earlier text (2 causal_judgement, 2 sports_understanding)
    assert len(bbh) == 6507 and bbh.duplicates_dropped == 4
    counts = collections.Counter(q.task for q in bbh)
    assert len(counts) == 27 and set(counts) == set(BBH_TASKS)
    assert counts["causal_judgement"] == 185 and counts["sports_understanding"] == 248
    assert counts["penguins_in_a_table"] == 146
    assert counts["snarks"] == 178
    odd = ("causal_judgement", "penguins_in_a_table", "snarks", "sports_understanding")
    assert all(n == 250 for t, n in counts.items() if t not in odd)
    assert len(load_questions("bbh", task="snarks", data_dir=DATA)) == 178


@needs_data
def test_bbh_targets_and_choices_as_published(bbh):
    raw = json.loads((DATA / "bbh" / "navigate.json").read_text(encoding="utf-8"))["examples"]
    nav = [q for q in bbh if q.task == "navigate"]
    assert [q.answer for q in nav] == [e["target"] for e in raw]
    assert [q.question for q in nav] == [e["input"] for e in raw]
    assert nav[12].id == "bbh/navigate/12" and nav[0].choices is None
    date = next(q for q in bbh if q.task == "date_understanding")
    assert date.choices == ("12/11/1937", "12/25/1937", "01/04/1938", "12/04/1937", "12/25/2006", "07/25/1937")
    assert all(q.choices is not None for q in bbh if q.task == "snarks")


@needs_data
def test_ids_unique_and_stable(gsm8k, mmlu, bbh):
    for qs in (gsm8k, mmlu, bbh):
        assert len({q.id for q in qs}) == len(qs)
    again = load_questions("bbh", task="navigate", data_dir=DATA)
    assert [q.id for q in again] == [q.id for q in bbh if q.task == "navigate"]
    assert dataset_fingerprint(again) == dataset_fingerprint([q for q in bbh if q.task == "navigate"])


# ----------------------------------------------------------------------------------------------------
# arith ladder


def _recompute(text: str) -> int:
    m = re.fullmatch(r"(?:Start|Begin) with (?:the number )?(\d+)(?: [a-z]+)?\. ((?:(?:Add|Subtract) \d+\. )+)"
                     r"(?:What is the result|What number do you get|What is the final number|How many [a-z]+ are there now)\?",
                     text)
    assert m, text
    value = int(m.group(1))
    assert value >= 1
    for op, x in re.findall(r"(Add|Subtract) (\d+)", m.group(2)):
        value = value + int(x) if op == "Add" else value - int(x)
        assert value >= 0  # never negative along the way
    return value


def test_arith_ladder_gold_and_shape():
    qs = load_questions("arith", n_per_level=30, seed=3)
    assert len(qs) == 30 * len(ARITH_LEVELS)
    for q in qs:
        steps, max_operand = map(int, re.fullmatch(r"s(\d+)_o(\d+)", q.difficulty).groups())
        assert q.dataset == "arith" and q.task == q.difficulty and q.id.startswith(f"arith/{q.difficulty}/")
        assert q.answer == str(_recompute(q.question))
        assert len(re.findall(r"(?:Add|Subtract) ", q.question)) == steps
        assert max(map(int, re.findall(r"\d+", q.question))) == max_operand  # operands 1..M, one equal to M
    assert len({q.id for q in qs}) == len(qs)
    assert len({question_key(q.question) for q in qs}) == len(qs)  # unique within and across levels


def test_arith_determinism_and_levels():
    a = load_questions("arith", n_per_level=10, seed=1)
    assert a == load_questions("arith", n_per_level=10, seed=1)
    assert a != load_questions("arith", n_per_level=10, seed=2)
    # ids are stable: a larger n keeps the first ones; one level alone gives the same questions
    assert load_questions("arith", n_per_level=20, seed=1)[:10] == a[:10]
    assert load_questions("arith", task=ARITH_LEVELS[0], n_per_level=10, seed=1) == a[:10]
    two = load_questions("arith", task="s3_o9, s2_o5", n_per_level=5)
    assert [q.task for q in two] == ["s3_o9"] * 5 + ["s2_o5"] * 5
    assert len(load_questions("arith")) == 50 * len(ARITH_LEVELS)
    custom = load_questions("arith", task="s5_o3", n_per_level=5)
    assert all(q.answer == str(_recompute(q.question)) for q in custom)


def test_arith_samples_without_replacement_and_levels_are_disjoint():
    # the easy levels hold >= 500 distinct questions each, and a level never repeats a text
    for level in ("s2_o3", "s2_o5"):
        assert arith_level_size(level) >= 500
        qs = load_questions("arith", task=level, n_per_level=500, seed=0)
        assert len({question_key(q.question) for q in qs}) == 500 and qs.duplicates_dropped == 0
    both = load_questions("arith", task="s2_o3,s2_o5,s2_o4", n_per_level=200, seed=3)
    assert len({question_key(q.question) for q in both}) == 600
    shots = {question_key(q) for q, _ in arith_few_shot()}
    assert not shots & {question_key(q.question) for q in load_questions("arith", task="s3_o5", n_per_level=2000)}
    with pytest.raises(DataError, match="holds only"):
        load_questions("arith", task="s1_o2", n_per_level=100)
    # wordings vary, the answer shape does not
    texts = [q.question for q in load_questions("arith", task="s2_o3", n_per_level=200)]
    assert any(t.startswith("Begin with") for t in texts) and any("How many" in t for t in texts)


def test_question_key_and_dedupe(tmp_path):
    assert question_key("Start with 3.  Add 2.\n") == question_key(" start with 3. ADD 2.")
    assert question_key("Start with 3. Add 2.") != question_key("Start with 3. Add 3.")
    assert re.fullmatch(r"[0-9a-f]{16}", question_key("x"))
    qs = [Question(f"c/{i}", "custom", None, t, "1") for i, t in enumerate(["A b", "a  B", "c", "A B "])]
    d = dedupe(qs)
    assert [q.id for q in d] == ["c/0", "c/2"] and d.duplicates_dropped == 2 and d.dropped_ids == ("c/1", "c/3")
    f = tmp_path / "q.jsonl"
    f.write_text("".join(json.dumps(q.to_dict()) + "\n" for q in qs))
    loaded = load_questions("custom", input_file=f)
    assert len(loaded) == 2 and loaded.duplicates_dropped == 2
    s = sample(loaded, 1, seed=0)
    assert len(s) == 1 and s.duplicates_dropped == 2  # the count travels with a sample


def test_arith_few_shot_format():
    shots = arith_few_shot()
    assert len(shots) == 2
    q, a = shots[0]
    assert q == "Start with 7. Add 2. Subtract 4. What is the result?"
    assert a == "We start with 7.\n7 + 2 = 9\n9 - 4 = 5\nAnswer: 5"
    q2, a2 = shots[1]
    assert len(re.findall(r"(?:Add|Subtract) ", q2)) == 3 and q2 != q
    lines = a2.splitlines()
    assert lines[0].startswith("We start with ") and len(lines) == 5
    assert lines[-1] == f"Answer: {_recompute(q2)}"
    assert all(re.fullmatch(r"\d+ [-+] \d+ = \d+", line) for line in lines[1:-1])


# ----------------------------------------------------------------------------------------------------
# sampling, fingerprint, records


def test_sample_deterministic_and_nested():
    qs = load_questions("arith", n_per_level=25)
    s1 = sample(qs, 20, seed=0)
    assert s1 == sample(qs, 20, seed=0) and len(s1) == 20
    assert s1 != sample(qs, 20, seed=1)
    assert [q for q in qs if q in s1] == s1  # original order kept
    assert set(q.id for q in sample(qs, 10, seed=0)) <= set(q.id for q in s1)
    assert sample(list(reversed(qs)), 20, seed=0) == list(reversed(s1))  # depends on ids, not order
    assert sample(qs, None, seed=0) == qs and sample(qs, 10_000, seed=5) == qs
    assert sample(qs, 0, seed=0) == []
    with pytest.raises(DataError):
        sample(qs, -1, seed=0)


def test_fingerprint():
    qs = load_questions("arith", n_per_level=5)
    fp = dataset_fingerprint(qs)
    assert re.fullmatch(r"[0-9a-f]{64}", fp)
    assert dataset_fingerprint(list(reversed(qs))) == fp
    changed = [Question(**{**q.to_dict(), "answer": "999", "choices": None}) if i == 0 else q for i, q in enumerate(qs)]
    assert dataset_fingerprint(changed) != fp
    assert dataset_fingerprint(qs[1:]) != fp


def test_question_dict_roundtrip():
    q = Question("mmlu/anatomy/test/0", "mmlu", "anatomy", "Q?\nA. x\nB. y", "B", choices=("x", "y"))
    d = q.to_dict()
    assert json.loads(json.dumps(d)) == d and d["choices"] == ["x", "y"]
    assert Question.from_dict(d) == q
    with pytest.raises(DataError):
        Question.from_dict({"id": "x"})


# ----------------------------------------------------------------------------------------------------
# input files


def test_input_file(tmp_path):
    p = tmp_path / "qs.jsonl"
    rows = [
        {"id": "a1", "question": "2+2?", "answer": 4},
        {"id": "a2", "question": "Pick", "answer": "B", "choices": ["x", "y"], "task": "t1"},
    ]
    p.write_text("\n".join(json.dumps(r) for r in rows) + "\n\n", encoding="utf-8")
    qs = load_questions("custom", input_file=p)
    assert [q.id for q in qs] == ["a1", "a2"] and qs[0].answer == "4" and qs[0].dataset == "custom"
    assert qs[1].choices == ("x", "y") and qs[1].task == "t1"
    assert [q.id for q in load_questions("custom", input_file=p, task="t1")] == ["a2"]
    assert load_questions("gsm8k", input_file=p)[0].dataset == "gsm8k"


def test_input_file_errors(tmp_path):
    p = tmp_path / "bad.jsonl"
    p.write_text('{"id": "1", "question": "q", "answer": "1"}\n{"id": "2", "question": \n', encoding="utf-8")
    with pytest.raises(DataError, match=r"bad\.jsonl:2"):
        load_questions("custom", input_file=p)
    p.write_text('{"id": "1", "question": "q", "answer": "1"}\n\n{"id": "2", "question": "q"}\n', encoding="utf-8")
    with pytest.raises(DataError, match=r"bad\.jsonl:3.*answer"):
        load_questions("custom", input_file=p)
    p.write_text('{"id": "1", "question": "q", "answer": "1"}\n{"id": "1", "question": "q", "answer": "2"}\n')
    with pytest.raises(DataError, match="duplicate id"):
        load_questions("custom", input_file=p)
    with pytest.raises(DataError, match="nope.jsonl"):
        load_questions("custom", input_file=tmp_path / "nope.jsonl")
    with pytest.raises(DataError, match="input"):
        load_questions("custom")


# ----------------------------------------------------------------------------------------------------
# bad requests


def _one_line(e: pytest.ExceptionInfo) -> str:
    msg = str(e.value)
    assert "\n" not in msg
    return msg


def test_unknown_dataset_task_split(tmp_path):
    with pytest.raises(DataError) as e:
        load_questions("squad", data_dir=DATA)
    assert all(d in _one_line(e) for d in DATASETS)
    with pytest.raises(DataError) as e:
        load_questions("bbh", task="nagivate", data_dir=DATA)
    assert "navigate" in _one_line(e)
    with pytest.raises(DataError) as e:
        load_questions("mmlu", task="astrology", data_dir=DATA)
    assert "astronomy" in _one_line(e)
    with pytest.raises(DataError) as e:
        load_questions("gsm8k", split="validation", data_dir=DATA)
    assert "train" in _one_line(e)
    with pytest.raises(DataError, match="dev"):
        load_questions("mmlu", split="train", data_dir=DATA)
    with pytest.raises(DataError):
        load_questions("bbh", split="train", data_dir=DATA)
    with pytest.raises(DataError, match="s2_o5"):
        load_questions("arith", task="hard")
    with pytest.raises(DataError):
        load_questions("gsm8k", task="x", data_dir=DATA)


def test_missing_data_dir_and_files(tmp_path):
    missing = tmp_path / "nowhere"
    with pytest.raises(DataError) as e:
        load_questions("gsm8k", data_dir=missing)
    assert str(missing) in _one_line(e)
    with pytest.raises(DataError, match="bbh"):
        load_questions("bbh", data_dir=tmp_path)  # exists but holds no bbh/
    (tmp_path / "bbh").mkdir()
    with pytest.raises(DataError) as e:
        load_questions("bbh", task="snarks", data_dir=tmp_path)
    assert "snarks.json" in _one_line(e)
    (tmp_path / "gsm8k").mkdir()
    (tmp_path / "gsm8k" / "test.jsonl").write_text('{"question": "q", "answer": "no final line"}\n')
    with pytest.raises(DataError, match="####"):
        load_questions("gsm8k", data_dir=tmp_path)


def test_hub_failure_becomes_data_error(monkeypatch):
    fake = types.ModuleType("datasets")

    def load_dataset(*args, **kwargs):
        raise ConnectionError("Couldn't reach 'openai/gsm8k' on the Hub")

    fake.load_dataset = load_dataset
    monkeypatch.setitem(sys.modules, "datasets", fake)
    for ds in ("gsm8k", "mmlu", "bbh"):
        with pytest.raises(DataError) as e:
            load_questions(ds)
        msg = _one_line(e)
        assert "Hugging Face hub" in msg and "--data-dir" in msg


def test_hub_offline_real_datasets(monkeypatch, tmp_path):
    # offline and with an empty cache, so nothing can be found; set before `datasets` is imported, and
    # patched where it was imported already (both libraries read these at import time)
    settings = {"HF_HUB_OFFLINE": "1", "HF_DATASETS_OFFLINE": "1", "HF_HOME": str(tmp_path),
                "HF_DATASETS_CACHE": str(tmp_path / "datasets"), "HF_HUB_CACHE": str(tmp_path / "hub")}
    for k, v in settings.items():
        monkeypatch.setenv(k, v)
    pytest.importorskip("datasets")
    patches = [("datasets.config", "HF_HUB_OFFLINE", True), ("huggingface_hub.constants", "HF_HUB_OFFLINE", True),
               ("datasets.config", "HF_DATASETS_CACHE", tmp_path / "datasets"),
               ("huggingface_hub.constants", "HF_HUB_CACHE", str(tmp_path / "hub"))]
    for mod, attr, value in patches:
        if mod in sys.modules and hasattr(sys.modules[mod], attr):
            monkeypatch.setattr(sys.modules[mod], attr, value)
    with pytest.raises(DataError) as e:
        load_questions("bbh", task="navigate", revision="main")
    assert "offline?" in _one_line(e)


def test_arith_level_too_large_to_enumerate_is_refused_at_once():
    import time

    from loadbearing.questions.data import DataError

    t0 = time.perf_counter()
    with pytest.raises(DataError, match="out of range"):
        load_questions("arith", task="s9_o99")
    assert time.perf_counter() - t0 < 5  # refused, not enumerated
