"""loadbearing.answers on the endings of continuations: an adversarial table of hand-written endings in realistic
model styles (protocol 1.1: self-corrections, negations, hedges, several answers, think blocks, LaTeX, units,
option texts), and the stop rule (only a complete, line-anchored, definitive final-answer line ends generation)."""

from __future__ import annotations

import pytest

from loadbearing.answers import extract_answer

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

