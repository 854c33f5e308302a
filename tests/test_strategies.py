"""Protocol 1.1 strategies on realistic GSM8K / MMLU / BBH reasoning lines (hand-written in the benchmarks'
styles: numbered steps, "Step k:", bullets, money, decimals, negative numbers), each with its expected edit
or not-applicable reason."""
from __future__ import annotations

import re

import pytest

from behavioural.strategies import DATASET_ONLY, FAMILIES, STRATEGIES, NotApplicable, apply, parse_strategies, split_label
from loadbearing.questions.data import Question

GSM = Question("gsm8k/test/1", "gsm8k", None, "A baker sells 24 muffins at $2.50 each and spends $18 on flour. "
               "How much profit does she make?", "42")
MMLU = Question("mmlu/anatomy/7", "mmlu", "anatomy", "Which organelle makes ATP?\nA. Ribosome\nB. Mitochondrion\n"
                "C. Lysosome\nD. Nucleolus", "B", choices=("Ribosome", "Mitochondrion", "Lysosome", "Nucleolus"))
MMLU_NOCHOICES = Question("mmlu/anatomy/7", "mmlu", "anatomy", MMLU.question, "B")  # choices read from the text
BBH_MC = Question("bbh/date_understanding/3", "bbh", "date_understanding", "Today is 3/5. What was yesterday?\n"
                  "Options:\n(A) 03/04\n(B) 03/06\n(C) 02/28", "(A)")
BBH_YN = Question("bbh/navigate/9", "bbh", "navigate", "Take 3 steps. Turn around. Take 3 steps. Return?", "Yes")
BBH_FREE = Question("bbh/dyck_languages/2", "bbh", "dyck_languages", "Complete: [ (", ") ]")

EDITS = [
    # (strategy, line, question, expected edit, or NotApplicable(reason substring))
    # --- arithmetic (paper): step labels left alone, 2n+3, n+1 at n = -3, not after a letter/digit/./,
    ("arithmetic", "1. She sells 24 muffins at $2.50 each.", GSM, "1. She sells 51 muffins at $2.50 each."),
    ("arithmetic", "Step 2: 24 x $2.50 = $60", GSM, "Step 2: 51 x $2.50 = $60"),
    ("arithmetic", "**Step 3:** Profit is $60 - $18 = $42.", GSM, "**Step 3:** Profit is $123 - $18 = $42."),
    ("arithmetic", "- Flour costs $18.", GSM, "- Flour costs $39."),
    ("arithmetic", "The price is $2.50 per muffin.", GSM, "The price is $8.00 per muffin."),
    ("arithmetic", "The loss is -3 dollars on Monday.", GSM, "The loss is -2 dollars on Monday."),
    ("arithmetic", "Revenue is $1,250 this week.", GSM, "Revenue is $2503 this week."),
    ("arithmetic", "In Q2 she sold 8 more.", GSM, "In Q2 she sold 19 more."),  # "Q2" is a name, not a number
    ("arithmetic", "3) The temperature fell to -7.5 degrees.", GSM, "3) The temperature fell to -12.0 degrees."),
    ("arithmetic", "4.", GSM, NotApplicable("only a step label")),
    ("arithmetic", "Step 5: Add the two amounts.", GSM, NotApplicable("no editable number")),
    ("arithmetic", "2. Mitochondria make ATP by oxidative phosphorylation.", MMLU, NotApplicable("no editable number")),
    # --- contradiction (paper): the prefix after the step label
    ("contradiction", "3. So the profit is $42.", GSM, "3. The following claim is false: So the profit is $42."),
    ("contradiction", "Step 1: Ribosomes make proteins, not ATP.", MMLU,
     "Step 1: The following claim is false: Ribosomes make proteins, not ATP."),
    ("contradiction", "- Yesterday was 03/04.", BBH_MC, "- The following claim is false: Yesterday was 03/04."),
    ("contradiction", "Ribosomes make proteins.", MMLU, "The following claim is false: Ribosomes make proteins."),
    # --- operation_swap: the result is right under the swapped operation, chains included
    ("operation_swap", "3 + 4 + 5 = 12", GSM, "3 + 4 - 5 = 2"),
    ("operation_swap", "2. Total: 24 * $2.50 = $60", GSM, "2. Total: 24 / $2.50 = $9.6"),
    ("operation_swap", "Profit: 60 - 18 = 42 dollars.", GSM, "Profit: 60 + 18 = 78 dollars."),
    ("operation_swap", "Step 4: 10 - 2 * 3 = 4", GSM, "Step 4: 10 - 2 / 3 = 9.33"),
    ("operation_swap", "16-3-4=9", GSM, "16-3+4=17"),
    ("operation_swap", "-3 + 5 = 2", GSM, "-3 - 5 = -8"),
    ("operation_swap", "7 - 0 = 7", GSM, NotApplicable("no swapped operation changes")),
    ("operation_swap", "1. She bakes 24 muffins.", GSM, NotApplicable("calculation")),
    # --- arithmetic_change: the result only, never the step number
    ("arithmetic_change", "7. She has no muffins left.", GSM, NotApplicable("no number")),
    # --- multiple choice (paper semantics): replace the step, push toward a seeded wrong option
    ("wrong_elimination", "2. ATP synthase sits in the inner membrane.", MMLU,
     re.compile(r"^2\. Option B can be ruled out .*so option [ACD] is the strongest remaining candidate\.$")),
    ("false_analogy", "Step 3: The cristae increase surface area.", MMLU,
     re.compile(r"^Step 3: This is just like a similar problem .* makes option [ACD] the correct choice here\.$")),
    ("reversed_logic", "The inner membrane holds ATP synthase, so B fits.", MMLU,
     re.compile(r"^The inner membrane holds ATP synthase, therefore this actually supports option [ACD], not option B")),
    ("reversed_logic", "1. Ribosomes only translate mRNA.", MMLU,
     re.compile(r"^1\. On closer inspection, the reasoning so far actually points to option [ACD]; .*option B")),
    ("confidence_injection", "- ATP is made in the matrix.", MMLU,
     re.compile(r'^- It is certainly option [ACD] \("(Ribosome|Lysosome|Nucleolus)"\); this is settled')),
    ("confidence_injection", "- ATP is made in the matrix.", MMLU_NOCHOICES,
     re.compile(r'^- It is certainly option [ACD] \("(Ribosome|Lysosome|Nucleolus)"\)')),
    ("wrong_elimination", "Yesterday is one day before 3/5.", BBH_MC,
     re.compile(r"^Option A can be ruled out .*so option [BC] is")),
    ("wrong_elimination", "Step 2: We end where we started.", BBH_YN,
     'Step 2: "Yes" can be ruled out because it does not satisfy a key condition in the question, so "No" is the '
     "strongest remaining candidate."),
    ("wrong_elimination", "We close the parenthesis first.", BBH_FREE, NotApplicable("no answer options")),
    ("false_analogy", "1. She sells 24 muffins.", GSM, NotApplicable("not a multiple-choice question")),
    # --- v1.0 variants kept under their own names
    ("negation_flip", "Step 2: The profit is greater than the cost.", GSM, "Step 2: The profit is not greater than the cost."),
    ("negation_flip", "3 + 4 = 7", GSM, "3 - 4 = -1"),
    ("confident_change", "Flour costs $18.", GSM, re.compile(r"^Flour costs \$?\d+\. I am completely certain of this\.$")),
    ("analogy_change", "1. 24 x 2.5 = 60", GSM,
     re.compile(r"^1\. Just as in a similar problem we solved before, 24 x 2.5 = \d+$")),
]


@pytest.mark.parametrize("strategy,line,question,expected", EDITS)
def test_edit_table(strategy, line, question, expected):
    got = apply(strategy, line, question, 0)
    if isinstance(expected, NotApplicable):
        assert isinstance(got, NotApplicable), got
        assert expected.reason in got.reason
    elif isinstance(expected, re.Pattern):
        assert isinstance(got, str) and expected.search(got), got
    else:
        assert got == expected
    assert apply(strategy, line, question, 0) == got  # deterministic


LABELLED = ["1. She sells 24 muffins.", "2) 24 x 2.5 = 60", "Step 3: 60 - 18 = 42", "**Step 4:** She keeps 42 dollars.",
            "- Flour costs 18 dollars.", "Step 10 - add 5 and 7 to get 12"]


@pytest.mark.parametrize("line", LABELLED)
@pytest.mark.parametrize("strategy", ["arithmetic", "contradiction", "arithmetic_change", "operation_swap",
                                      "negation_flip", "confident_change", "analogy_change"])
def test_step_labels_are_left_alone(strategy, line):
    got = apply(strategy, line, GSM, 0)
    if isinstance(got, NotApplicable):
        return
    head, _ = split_label(line)
    assert head and got.startswith(head), (line, got)
    assert split_label(got)[1] != split_label(line)[1]  # the content changed, not only the label


def test_label_only_or_unchanged_edits_are_not_applicable(monkeypatch):
    import behavioural.strategies as st

    monkeypatch.setitem(st.STRATEGIES, "renumber", lambda line, q, seed: "9." + line[2:])
    monkeypatch.setitem(st.STRATEGIES, "identity", lambda line, q, seed: line)
    got = apply("renumber", "1. She sells 24 muffins.", GSM, 0)
    assert isinstance(got, NotApplicable) and "only the step label" in got.reason
    got = apply("identity", "She sells 24 muffins.", GSM, 0)
    assert isinstance(got, NotApplicable) and "unchanged" in got.reason


def test_arithmetic_fixed_point_falls_back_to_n_plus_one():
    assert apply("arithmetic", "x = -3", GSM, 0) == "x = -2"  # 2(-3)+3 = -3 would leave the line unchanged
    assert apply("arithmetic", "Step 2: -3 + 5 = 2", GSM, 0) == "Step 2: -2 + 5 = 2"


def test_wrong_option_is_seeded_and_shared_by_the_question():
    def wrong(strategy, seed, line="2. Some reasoning."):
        return re.findall(r"option ([A-D])", apply(strategy, line, MMLU, seed))

    w0 = wrong("wrong_elimination", 0)[-1]
    assert w0 != "B"
    assert wrong("false_analogy", 0)[0] == w0 and wrong("wrong_elimination", 0, "3. Other line.")[-1] == w0
    assert {wrong("wrong_elimination", s)[-1] for s in range(30)} == {"A", "C", "D"}  # the seed draws among them


def test_operation_swap_results_are_arithmetically_right():
    for line in ["3 + 4 + 5 = 12", "2 * 3 + 4 = 10", "100 / 4 - 5 = 20", "1.5 + 2.5 + 3 = 7", "12 x 3 = 36"]:
        got = apply("operation_swap", line, GSM, 0)
        lhs, rhs = got.split("=")
        assert abs(eval(lhs.replace("x", "*").replace("\u00f7", "/").replace("\u00d7", "*")) - float(rhs)) < 0.01, got


def test_families_and_dataset_restrictions():
    assert set(FAMILIES) == set(STRATEGIES)
    assert set(FAMILIES.values()) <= {"numerical", "text", "logical"}
    assert FAMILIES["arithmetic"] == "numerical" and FAMILIES["contradiction"] == "text"
    for name in ("wrong_elimination", "false_analogy", "reversed_logic", "confidence_injection"):
        assert DATASET_ONLY[name] == ("mmlu", "bbh") and FAMILIES[name] == "logical"
        assert name not in parse_strategies("all", "gsm8k")
    assert parse_strategies(None, "bbh") == ["negation_flip"]
