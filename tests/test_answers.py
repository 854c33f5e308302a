"""Tests for loadbearing.answers: strict final-answer extraction and scoring.

Part one feeds a realistic answer sentence built from EVERY real gold answer of GSM8K, MMLU and BBH
(the files in ../shared/data) and checks the extracted answer is scored correct. Part two is a table of
hand-written model outputs with the traps that broke the paper's parser.
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
# protocol 1.1: an adversarial table of continuation endings (hand-written, realistic model styles)

MMLU_CHOICES = ("Mitochondria", "Ribosome", "Golgi apparatus", "Nucleus")

ADVERSARIAL = [
    # (ending, dataset, task, choices, expected parse)
    # --- the examples
    ("Let's check whether the answer is 12.", "gsm8k", None, None, None),
    ("The answer is not 5, it is 7.", "gsm8k", None, None, "7"),
    ("The answer is not (B).", "mmlu", None, None, None),
    ("I think the answer is probably 12 but let me check", "gsm8k", None, None, None),
    ("My answer: A and B are both wrong, so C", "mmlu", None, None, "C"),
    # --- self-corrections: the last definitive statement wins
    ("7 x 6 = 42, so the answer is 42.\nWait, the bags hold 7 each and there are 5 bags.\n7 x 5 = 35\nAnswer: 35",
     "gsm8k", None, None, "35"),
    ("Answer: 14\nHmm, I added the tip twice. Without it the total is $12.\nFinal answer: 12", "gsm8k", None, None, "12"),
    ("So the answer is (A).\nActually, (A) ignores the friction term.\nSo the answer is (C).", "bbh",
     "logical_deduction_three_objects", None, "(C)"),
    ("The answer is 20. No wait, I forgot the 4 she gave away: 20 - 4 = 16.\nThe answer is 16.", "gsm8k", None, None, "16"),
    ("Answer: B\nOn reflection the enzyme is not denatured at 37 C.\nAnswer: D", "mmlu", None, None, "D"),
    ("The answer is not 48; it is 36 because each box has 6.", "gsm8k", None, None, "36"),
    ("The answer isn't 9.", "gsm8k", None, None, None),
    ("The answer is never negative here, so the answer is 3.", "gsm8k", None, None, "3"),
    # --- negations and corrections inside one statement
    ("The answer is not (A), but (D).", "mmlu", None, None, "D"),
    ("The correct option is not C.", "mmlu", None, None, None),
    ("So the answer is no, she cannot arrive on time.", "bbh", "causal_judgement", None, "No"),
    ("So the answer is not plausible.", "bbh", "sports_understanding", None, "no"),
    # --- hedges and conditionals
    ("The answer is probably 24.", "gsm8k", None, None, None),
    ("The answer is maybe (B).", "mmlu", None, None, None),
    ("If the train left at 3 pm, the answer is 5 hours.", "gsm8k", None, None, None),
    ("Assuming no tax, the answer is $40.", "gsm8k", None, None, None),
    ("We need to decide whether the answer is (A) or (B).", "bbh", "snarks", None, None),
    ("Is the answer 12? Let me recount.", "gsm8k", None, None, None),
    ("The answer is 12?", "gsm8k", None, None, None),
    ("The answer is likely C, though D is close.", "mmlu", None, None, None),
    ("Answer: 18 if we include the weekend", "gsm8k", None, None, None),
    ("The answer might be 7.\nAfter checking, 3 + 4 = 7.\nAnswer: 7", "gsm8k", None, None, "7"),
    ("Answer: probably (B)\nLet me verify each option first.", "mmlu", None, None, None),
    ("If we add them, we get 9. So the answer is 9.", "gsm8k", None, None, "9"),  # the "if" is another sentence
    # --- several answers in one trace
    ("Option B gives 40 and option C gives 45.\nThe answer is C.", "mmlu", None, None, "C"),
    ("First pass: the answer is 30.\nSecond pass: the answer is 32.", "gsm8k", None, None, "32"),
    ("Answer: 8\n\nAnswer: 9", "arith", None, None, "9"),
    ("#### 72\nThe answer is 72.", "gsm8k", None, None, "72"),
    # --- <think> blocks
    ("<think>The answer is 10? Or 12. Let me add: 5 + 7 = 12.</think>\nAnswer: 12", "gsm8k", None, None, "12"),
    ("<think>Answer: 10</think>", "gsm8k", None, None, None),
    ("<think>(B) seems right.\nThe answer is B.\n", "mmlu", None, None, None),
    ("<think>try A</think><think>no, C</think>\nThe answer is C.", "mmlu", None, None, "C"),
    # --- LaTeX
    ("Thus the total is $\\boxed{156}$.", "gsm8k", None, None, "156"),
    ("\\[\\boxed{\\text{(B)}}\\]", "mmlu", None, None, "B"),
    ("The final answer is $\\boxed{-4}$.", "bbh", "multistep_arithmetic_two", None, "-4"),
    ("The answer is $\\frac{1}{2}$.", "gsm8k", None, None, None),
    ("Final answer: \\(\\boxed{2{,}500}\\)", "gsm8k", None, None, "2500"),  # LaTeX thousands separator
    # --- units, money, decimals, negatives
    ("The answer is $1,234.50.", "gsm8k", None, None, "1234.5"),
    ("Answer: 45 minutes", "gsm8k", None, None, "45"),
    ("Answer: -12 degrees", "gsm8k", None, None, "-12"),
    ("The answer is 3.75 kg.", "gsm8k", None, None, "3.75"),
    ("Final answer: 0.5", "gsm8k", None, None, "0.5"),
    ("#### 1,000", "gsm8k", None, None, "1000"),
    ("The answer is 60 km/h, which is 1 km per minute.", "gsm8k", None, None, "60"),
    ("Answer: 12 + 8 = 20 cookies", "gsm8k", None, None, "20"),
    # --- multiple-choice letters beside the article "a"
    ("The answer is a ribosome, so the answer is B.", "mmlu", None, None, "B"),
    ("Answer: a", "mmlu", None, None, None),
    ("The answer is a good example of osmosis.", "mmlu", None, None, None),
    ("Answer: A", "mmlu", None, None, "A"),
    ("Answer: (a)", "mmlu", None, None, "A"),
    ("The answer is A because ribosomes make proteins.", "mmlu", None, None, "A"),
    ("**Answer:** A) Mitochondria", "mmlu", None, None, "A"),
    # --- option text without its letter
    ("The answer is Golgi apparatus.", "mmlu", None, MMLU_CHOICES, "C"),
    ("Answer: nucleus", "mmlu", None, MMLU_CHOICES, "D"),
    ("The answer is Chloroplast.", "mmlu", None, MMLU_CHOICES, None),
    ("So the answer is Monsters, Inc.", "bbh", "movie_recommendation", ("Star Wars", "Monsters, Inc", "Up", "Heat"), "(B)"),
    # --- a bare marker line, the answer on the next line
    ("**The Correct Answer:**\nA) Mitochondria", "mmlu", None, None, "A"),
    ("Final Answer:\n\n42", "gsm8k", None, None, "42"),
    ("To get the answer:\n12 + 5 = 17 apples", "gsm8k", None, None, None),  # not a bare marker line
    # --- yes/no synonyms where the gold format implies them
    ("So the answer is plausible.", "bbh", "sports_understanding", None, "yes"),
    ("So the answer is implausible.", "bbh", "sports_understanding", None, "no"),
    ("So the answer is Yes.", "bbh", "web_of_lies", None, "Yes"),
    ("So the answer is True.", "bbh", "boolean_expressions", None, "True"),
    ("So the answer is invalid.", "bbh", "formal_fallacies", None, "invalid"),
]


@pytest.mark.parametrize("text,dataset,task,choices,expected", ADVERSARIAL)
def test_adversarial_endings(text, dataset, task, choices, expected):
    assert extract_answer(text, dataset, task, choices=choices) == expected


def test_adversarial_table_is_large_enough():
    assert len(ADVERSARIAL) >= 60


# ----------------------------------------------------------------------------------------------------
# the stop rule: only a complete, line-anchored, definitive final-answer line (else: end of turn)

STOPS = [
    ("Let's check whether the answer is 12.\n", False),
    ("So the answer is 12.\n", False),  # mid-sentence phrase: keep generating to end of turn
    ("The answer is not 5, it is 7.\n", False),
    ("Answer: 12\n", True),
    ("Answer: 12", False),  # not complete until its newline
    ("4 + 3 = 7\nAnswer: 7\n", True),
    ("**Final answer:** (B)\n", True),
    ("Final Answer: 42\n", True),
    ("#### 18\n", True),
    ("#### Step 2\n", False),
    ("\\boxed{12}\n", True),
    ("$\\boxed{12}$\n", True),
    ("The total is \\boxed{12} dollars\n", False),  # not a lone boxed line
    ("**The Correct Answer:**\n", False),  # bare marker: waits for its answer line
    ("**The Correct Answer:**\nA) Mitochondria\n", True),
    ("Answer: probably 12\n", False),
    ("Answer: not (B)\n", False),
    ("Answer: 18 if we include the weekend\n", False),
    ("<think>\nAnswer: 10\n", False),  # inside an open think block
    ("<think>x</think>\nAnswer: 10\n", True),
    ("My final answer: 9\n", True),
]


@pytest.mark.parametrize("text,stops", STOPS)
def test_stop_rule(text, stops):
    from loadbearing.answers import has_final_answer_line
    from loadbearing.engine.generation import has_complete_answer_line

    assert has_final_answer_line(text) is stops
    assert has_complete_answer_line(text) is stops  # the generation backend calls the same predicate


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
