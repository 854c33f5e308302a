"""Tests for loadbearing.answers: strict final-answer extraction and scoring.

Part one feeds a realistic answer sentence built from EVERY real gold answer of GSM8K, MMLU and BBH
(the files in ../shared/data) and checks the extracted answer is scored correct. Part two is a table of
hand-written model outputs with the traps that broke the paper's parser. Part three: the behavioural protocol,
the labelling stage and steering score every text alike. The adversarial endings and the stop rule:
tests/test_answers_endings.py.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from loadbearing.answers import extract_answer, is_correct, normalize_number
from loadbearing.questions.data import Question, arith_few_shot, load_questions

DATA = Path(__file__).resolve().parents[1].parent / "shared" / "data"
needs_data = pytest.mark.skipif(not DATA.is_dir(), reason=f"benchmark copies not found at {DATA}")


def Q(dataset, answer, task=None, choices=None, question="q"):
    return Question(id="t/0", dataset=dataset, task=task, question=question, answer=answer, choices=choices)


# ----------------------------------------------------------------------------------------------------
# every real gold answer round-trips


@needs_data
def test_every_gsm8k_gold_from_worked_solution():
    for split in ("test", "train"):
        rows = [json.loads(ln) for ln in (DATA / "gsm8k" / f"{split}.jsonl").open(encoding="utf-8")]
        qs = load_questions("gsm8k", data_dir=DATA, split=split)
        assert len(rows) == len(qs)
        for row, q in zip(rows, qs):
            # the published worked solution itself, calculator annotations and "#### N" line included
            assert is_correct(extract_answer(row["answer"], "gsm8k"), q), (q.id, row["answer"][-60:])
            gold_as_written = row["answer"].rsplit("####", 1)[1].strip()  # e.g. "1,450,000"
            text = f"Let me work it out.\n{row['answer'].rsplit('####', 1)[0]}So the answer is ${gold_as_written}."
            assert is_correct(extract_answer(text, "gsm8k"), q), q.id


@needs_data
def test_every_mmlu_gold():
    qs = load_questions("mmlu", data_dir=DATA)
    assert len(qs) + qs.duplicates_dropped == 14042  # duplicate question texts are dropped by the loader
    templates = [
        "Let's think step by step. Option A is wrong. So the answer is {L}.",
        "Looking at the options, B and C contradict the premise.\nAnswer: ({L})",
        "**Answer:** {L}",
        "The final answer is $\\boxed{{{L}}}$",
    ]
    for i, q in enumerate(qs):
        text = templates[i % len(templates)].format(L=q.answer)
        pred = extract_answer(text, "mmlu", q.task)
        assert pred == q.answer and is_correct(pred, q), (q.id, text, pred)
        wrong = "ABCD"[("ABCD".index(q.answer) + 1) % 4]
        assert is_correct(extract_answer(f"So the answer is {wrong}.", "mmlu"), q) is False


@needs_data
def test_every_bbh_gold():
    qs = load_questions("bbh", data_dir=DATA)
    assert len(qs) + qs.duplicates_dropped == 6511
    for q in qs:
        text = f"Let's think step by step.\nWe reason about (A) and the rest.\nSo the answer is {q.answer}."
        pred = extract_answer(text, "bbh", q.task)
        assert is_correct(pred, q), (q.id, q.answer, pred)
        assert pred == q.answer or q.task in ("word_sorting",), (q.id, q.answer, pred)


@needs_data
def test_bbh_answers_stated_in_other_ways():
    qs = {q.task: q for q in load_questions("bbh", data_dir=DATA)}  # last example per task
    q = qs["navigate"]
    other = "No" if q.answer == "Yes" else "Yes"
    assert is_correct(extract_answer(f"**Final answer:** {q.answer.lower()}", "bbh", "navigate"), q)
    assert is_correct(extract_answer(f"The answer is {other}.", "bbh", "navigate"), q) is False
    q = qs["sports_understanding"]
    assert extract_answer("So the answer is Yes.", "bbh", "sports_understanding") == "yes"
    q = qs["word_sorting"]
    assert is_correct(extract_answer("The answer is: " + ", ".join(q.answer.split()) + ".", "bbh", "word_sorting"), q)
    q = qs["dyck_languages"]
    assert is_correct(extract_answer(f"Answer: `{q.answer.replace(' ', '')}`", "bbh", "dyck_languages"), q)
    q = qs["multistep_arithmetic_two"]
    text = f"Then A - B = {q.answer}.\nSo the answer is {q.answer.replace('-', chr(0x2212))}."
    assert is_correct(extract_answer(text, "bbh", q.task), q)


@needs_data
def test_bbh_option_text_answers_map_onto_options():
    movie = [q for q in load_questions("bbh", task="movie_recommendation", data_dir=DATA) if q.answer == "Monsters, Inc"]
    assert len(movie) == 1  # a published target that is an option text, not a letter
    assert is_correct(extract_answer("So the answer is Monsters, Inc.", "bbh", "movie_recommendation"), movie[0])
    assert is_correct(extract_answer("So the answer is (B).", "bbh", "movie_recommendation"), movie[0]) is False
    q = load_questions("bbh", task="date_understanding", data_dir=DATA)[0]  # gold (B) 12/25/1937
    assert q.answer == "(B)" and q.choices[1] == "12/25/1937"
    assert is_correct(extract_answer("So the answer is 12/25/1937.", "bbh", q.task), q) is True
    assert is_correct(extract_answer("So the answer is 12/11/1937.", "bbh", q.task), q) is False
    assert is_correct(extract_answer("So the answer is a reasonable guess.", "bbh", q.task), q) is None


def test_arith_few_shot_answers_parse():
    for _question, solution in arith_few_shot():
        gold = solution.rsplit("Answer:", 1)[1].strip()
        assert is_correct(extract_answer(solution, "arith"), Q("arith", gold))


# ----------------------------------------------------------------------------------------------------
# hand-written model outputs with traps

CASES = [
    # (text, dataset, task, expected extraction)
    # --- numbers: several numbers, units, separators, signs
    ("She sells 16 - 3 - 4 = 9 eggs.\nShe makes 9 * 2 = 18 dollars.\nThe answer is 18.", "gsm8k", None, "18"),
    ("The answer is 18 dollars, which is 3 more than 15.", "gsm8k", None, "18"),  # FIRST number after marker
    ("The answer is $18.00.", "gsm8k", None, "18"),
    ("So the answer is $1,450,000.", "gsm8k", None, "1450000"),
    ("Answer: 2.50", "gsm8k", None, "2.5"),
    ("The temperature drops below zero. The answer is -3.", "gsm8k", None, "-3"),
    ("The answer is \u22123 degrees.", "gsm8k", None, "-3"),
    ("The answer is 9 * 2 = 18.", "gsm8k", None, "18"),  # an equation: its result
    ("Final answer: 42", "gsm8k", None, "42"),
    ("**Answer:** 42", "gsm8k", None, "42"),
    ("The answer is **42**.", "gsm8k", None, "42"),
    ("The final answer is $\\boxed{1,000}$.", "gsm8k", None, "1000"),
    ("First 5 + 7 = 12.\n#### 12", "gsm8k", None, "12"),
    ("The answer is 12.\n#### Step 3: check\n12 + 1 = 13", "gsm8k", None, "12"),  # markdown heading, not ####
    ("The answer is 10.\nWait, I made an error. 4 + 4 = 8.\nThe answer is 8.", "gsm8k", None, "8"),  # LAST statement
    ("Answer: 7\n\nI hope this answer is helpful!", "arith", None, "7"),  # unparseable later marker is skipped
    ("We start with 4.\n4 + 3 = 7\n7 - 2 = 5", "arith", None, None),  # no answer statement: no last-number fallback
    ("She has 5 apples and buys 3 more, so 8 apples.", "gsm8k", None, None),
    ("The answer is eighteen.", "gsm8k", None, None),  # number words are not read
    # --- reasoning models
    ("<think>The answer is 7? no, 9 - 1 = 8.</think>\nThe answer is 8.", "gsm8k", None, "8"),
    ("<think>Let me compute. The answer is 7 so far", "gsm8k", None, None),  # unterminated think
    ("<think>Option B looks right. The answer is B.</think>", "mmlu", None, None),  # nothing after </think>
    ("the prompt opened the think block\n</think>\n\nAnswer: 12", "gsm8k", None, "12"),
    ("<think>a</think>The answer is 3.<think>hmm, maybe", "gsm8k", None, None),  # a second, open block
    # --- MMLU letters
    ("The answer is (B).", "mmlu", None, "B"),
    ("The answer is B.", "mmlu", None, "B"),
    ("Answer: B)", "mmlu", None, "B"),
    ("**Answer: C**", "mmlu", None, "C"),
    ("The correct answer is **D**", "mmlu", None, "D"),
    ("The answer is option B.", "mmlu", None, "B"),
    ("The answer is B because the enzyme is denatured.", "mmlu", None, "B"),
    ("A. 4\nB. 6\nC. 8\nD. 10\nThe answer is C. 8", "mmlu", None, "C"),  # restated options before the answer
    ("The answer is a reasonable estimate of the mean.", "mmlu", None, None),  # the article "a"
    ("Answer: A good approach is to factor first.", "mmlu", None, None),  # capital article, not option A
    ("I think the answer is A.", "mmlu", None, "A"),
    ("The answer is a.", "mmlu", None, None),  # lone lowercase letter is not trusted
    ("The answer is (c)", "mmlu", None, "C"),  # parenthesised: unambiguous
    ("The answer is E.", "mmlu", None, None),  # not an MMLU option
    ("Option A is wrong because of X. Option B is correct.", "mmlu", None, None),  # no answer statement
    # v1.1: a hedged statement is not an answer (v1.0 read "most likely (B)" as B)
    ("The answer is most likely (B), since the others fail.", "mmlu", None, None),
    # --- BBH letters and free-form
    ("So the answer is (B).", "bbh", "snarks", "(B)"),
    ("So the answer is B.", "bbh", "snarks", "(B)"),
    ("The sarcastic one is the second. So the answer is the second option, (B).", "bbh", "snarks", "(B)"),
    ("So the answer is (Q).", "bbh", "reasoning_about_colored_objects", "(Q)"),
    ("So the answer is No.", "bbh", "web_of_lies", "No"),
    ("So the answer is no, we are not back at the start.", "bbh", "navigate", "No"),
    ("So the answer is yes.", "bbh", "sports_understanding", "yes"),
    ("So the answer is TRUE.", "bbh", "boolean_expressions", "True"),
    ("So the answer is invalid.", "bbh", "formal_fallacies", "invalid"),
    ("So the answer is valid.", "bbh", "formal_fallacies", "valid"),
    ("Then the final equation is 3969 + -40 = 3929. So the answer is 3929.", "bbh", "multistep_arithmetic_two", "3929"),
    ("So the answer is -219.", "bbh", "multistep_arithmetic_two", "-219"),
    ("1 + 1 + 2 = 4. So the answer is 4.", "bbh", "object_counting", "4"),
    ("So, we need \"]\", \")\", \")\". So the answer is ] ) ).", "bbh", "dyck_languages", "] ) )"),
    ("So the answer is arson aspect census.", "bbh", "word_sorting", "arson aspect census"),
    ("Let me think about each option.", "bbh", "snarks", None),
]


@pytest.mark.parametrize("text,dataset,task,expected", CASES)
def test_extract_answer_table(text, dataset, task, expected):
    assert extract_answer(text, dataset, task) == expected


SCORING = [
    # (pred, gold question, expected is_correct)
    (None, Q("gsm8k", "18"), None),  # unparsed is never wrong
    ("18", Q("gsm8k", "18"), True),
    ("18.0", Q("gsm8k", "18"), True),
    ("17", Q("gsm8k", "18"), False),
    ("-3", Q("arith", "3"), False),
    ("B", Q("mmlu", "B", "anatomy"), True),
    ("(B)", Q("mmlu", "B", "anatomy"), True),
    ("C", Q("mmlu", "B", "anatomy"), False),
    ("(B)", Q("bbh", "(B)", "snarks"), True),
    ("B", Q("bbh", "(B)", "snarks"), True),
    ("(A)", Q("bbh", "(B)", "snarks"), False),
    ("no", Q("bbh", "No", "navigate"), True),
    ("Yes", Q("bbh", "No", "navigate"), False),
    ("] ]", Q("bbh", "] ]", "dyck_languages", question="Input: [ ["), True),
    ("[ [ ] ]", Q("bbh", "] ]", "dyck_languages", question="Input: [ ["), True),  # restated input + closers
    ("]", Q("bbh", "] ]", "dyck_languages", question="Input: [ ["), False),
    ("Apple banana", Q("bbh", "apple banana", "word_sorting"), True),
    ("banana apple", Q("bbh", "apple banana", "word_sorting"), False),
    ("Paris", Q("custom", "paris"), True),
    ("18 dollars", Q("custom", "18"), True),
]


@pytest.mark.parametrize("pred,question,expected", SCORING)
def test_is_correct_table(pred, question, expected):
    assert is_correct(pred, question) is expected


@pytest.mark.parametrize(
    "raw,expected",
    [
        ("18", "18"), ("1,000", "1000"), ("$1,000.00", "1000"), ("2.50", "2.5"), ("18.", "18"),
        ("-3", "-3"), ("\u22123", "-3"), ("-$5", "-5"), ("18 dollars", "18"), ("007", "7"), ("0.5", "0.5"),
        (18, "18"), (2.0, "2"), ("-0", "0"), ("no number", None), (None, None), ("", None),
    ],
)
def test_normalize_number(raw, expected):
    assert normalize_number(raw) == expected


def test_custom_dataset_generic_extraction():
    assert extract_answer("The answer is Paris.", "custom") == "Paris"
    assert extract_answer("The answer is 1,200 km.", "custom") == "1200"
    assert extract_answer("Answer: (C)", "custom") == "C"
    assert extract_answer("nothing stated", "custom") is None
    assert extract_answer("", "gsm8k") is None


# ----------------------------------------------------------------------------------------------------
# one scorer: the behavioural protocol, the labelling stage and steering agree on every text

SCORED = [
    # (question, text)
    (Question("mmlu/biology/0", "mmlu", "biology", "Where are proteins made?\nA. Mitochondria\nB. Ribosome\n"
              "C. Golgi apparatus\nD. Nucleus", "B", choices=("Mitochondria", "Ribosome", "Golgi apparatus", "Nucleus")),
     "Proteins are made on ribosomes.\nAnswer: Ribosome"),
    (Question("mmlu/biology/0", "mmlu", "biology", "Where are proteins made?\nA. Mitochondria\nB. Ribosome\n"
              "C. Golgi apparatus\nD. Nucleus", "B", choices=("Mitochondria", "Ribosome", "Golgi apparatus", "Nucleus")),
     "The answer is not (B).\nAnswer: (C)"),
    (Question("bbh/date_understanding/0", "bbh", "date_understanding", "What is the date?\nOptions:\n(A) 12/11/1937\n"
              "(B) 12/25/1937\n(C) 01/04/1938", "(B)", choices=("12/11/1937", "12/25/1937", "01/04/1938")),
     "So the answer is 12/25/1937."),
    (Question("bbh/sports_understanding/3", "bbh", "sports_understanding", "Is the sentence plausible?", "no"),
     "A goalie does not shoot free throws.\nSo the answer is implausible."),
    (Question("gsm8k/test/5", "gsm8k", None, "How many?", "16"), "20 - 4 = 16\nAnswer: 16"),
    (Question("gsm8k/test/5", "gsm8k", None, "How many?", "16"), "I think the answer is probably 16 but let me check"),
    (Question("gsm8k/test/5", "gsm8k", None, "How many?", "16"), "The answer is not 16, it is 12."),
]


@pytest.mark.parametrize("q,text", SCORED)
def test_three_stages_agree(q, text):
    from behavioural.labels.records import make_record
    from behavioural.protocol import _continuation_record, _Job
    from loadbearing.answers import Score, score
    from loadbearing.engine.generation import Generation
    from steering.sweep.cli import score as steering_score

    want = score(text, q)
    assert isinstance(want, Score)
    # behavioural stage: the continuation record
    job = _Job(id=f"{q.id}|s|middle|perturbed", question=q, baseline={"lines": ["a", "b", "c"]}, strategy="s",
               position="middle", line_index=1, edited="b!", condition="perturbed", prefix_text="a\nb!\n",
               input_text="P a\nb!\n", edit_span=(4, 6))
    rec = _continuation_record(job, Generation(text, 5, "eos"), 9).to_dict()
    assert (rec["parsed_answer"], rec["correct"]) == (want.parsed, want.correct)
    # steering stage: a case built from the record (no choices: they are read back from the question text)
    case = {"dataset": q.dataset, "task": q.task, "gold": q.answer, "question_id": q.id}
    assert steering_score(text, case, {q.id: q.question}) == (want.parsed, want.correct)
    # labelling stage: the label record's correctness and outcome
    lab = make_record(rec, {"rule": {"noticed": False}}, ["rule"], "rule")
    assert lab.correct is want.correct
    # and the record alone (gold + question text, no Question object) scores the same
    assert score(text, dict(rec, question=q.question)) == want
