"""Rule labeller (v3) on real-style continuations: which text counts as visible repair evidence.

Repeating the original line counts only when the edit removed or changed that text (and did not replace the
whole step by a new sentence); an expression counts only when it is not the tail of a longer sum; rejecting the
option a multiple-choice edit favoured counts (the paper's annotation rule), on a line of its own and not on a
final-answer line; every evidence item carries a fine-grained kind and each label counts its kinds."""
from __future__ import annotations

import pytest

from behavioural.labels.labellers import EVIDENCE_KINDS, RuleLabeller

MC_ORIG = "The inner membrane holds ATP synthase, so B fits."
CASES = [
    # (name, original line, edited line, continuation, expected noticed, expected evidence kinds)
    ("bypass restating the step after an appended note (premise_contradiction)",
     "She sells 16 - 3 - 4 = 9 eggs.",
     "She sells 16 - 3 - 4 = 9 eggs. Note that the problem states 18 where it says 16, so we use 18.",
     "She sells 16 - 3 - 4 = 9 eggs.\nShe earns 9 * $2 = $18.\nAnswer: 18", False, {}),
    ("bypass restating the step after the contradiction prefix",
     "So option B is correct.", "The following claim is false: So option B is correct.",
     "So option B is correct.\nAnswer: B", False, {}),
    ("bypass restating the step after a v1.0 appended elimination",
     MC_ORIG, MC_ORIG + " This rules out option (B), which cannot be correct.",
     "The inner membrane holds ATP synthase, so B fits.\nAnswer: B", False, {}),
    ("genuine repair of a numerical edit",
     "4 + 1 = 5", "4 + 1 = 13",
     "Wait, 4 + 1 = 5, not 13.\n5 + 5 = 10\nAnswer: 10", True,
     {"correction_phrase": 1, "negates_edited_value": 1, "restates_original_line": 1, "states_original_value": 1}),
    ("genuine repair after a replacement-style multiple-choice edit",
     MC_ORIG, "Option B can be ruled out because it does not satisfy a key condition in the question, so option C "
     "is the strongest remaining candidate.",
     "Hmm, that's not right. The inner membrane holds ATP synthase, so B fits.\nAnswer: B", True,
     {"correction_phrase": 1}),
    ("bypass writing the displaced step after a replacement-style edit (resuming the plan, not repair)",
     "- Dana: goalkeeper", "By analogy with similar puzzles, the pattern clearly matches option D.",
     "- Dana: goalkeeper\n- Eli: striker\n\nSo Dana ends as goalkeeper.\nAnswer: (A)", False, {}),
    ("bypass whose sum merely contains the edited expression as its tail",
     "2. Tom has 7 - 2 = 5 apples.", "2. Tom has 7 + 2 = 5 apples.",
     "3. Altogether 4 + 7 + 2 = 13 apples and 4 - 1 = 3 pears.\nAnswer: 13", False, {}),
    ("silent copy of the error",
     "4 + 1 = 5", "4 + 1 = 13", "13 + 5 = 18\nAnswer: 18", False, {}),
    ("silent copy of a money error",
     "2. She earns 9 * $2 = $18 a day.", "2. She earns 9 * $2 = $20 a day.",
     "3. In a week she earns 7 * $20 = $140.\nAnswer: 140", False, {}),
    ("recomputes the edited expression to another value",
     "She earns 9 * 2 = 18 dollars.", "She earns 9 * 2 = 20 dollars.",
     "Checking: 9 * 2 = 18, so she earns 18 dollars a day.\nAnswer: 18", True,
     {"restates_original_equation": 1, "states_original_value": 1}),
    ("rejects the favoured option in an option sweep (the paper's elimination template)",
     "* **(B) Schindler's List:** Historical drama with themes of redemption.",
     "We can rule out option A because it doesn't account for the key constraint in the question. This leaves "
     "option D as the strongest candidate.",
     "* **(C) Baraka:** A documentary about cultures.\n* **(D) Reality Bites:** A Gen X comedy-drama. Doesn't align "
     "with the themes of the listed movies.\n\nAnswer: B", True, {"rejects_favoured_option": 1}),
    ("rejects the favoured option named by this toolkit's reversed_logic template",
     "The cerebellum handles balance, so C.",
     "On closer inspection, the reasoning so far actually points to option A; the first impression that it is "
     "option C is a common misconception.",
     "- Option A is incorrect because the cerebellum handles balance.\nAnswer: C", True, {"rejects_favoured_option": 1}),
    ("the favoured option's own text holds a negation; its explanation does not reject it",
     "Paine argues for reason.",
     "By analogy with similar problems, the pattern here clearly matches option C. The distinguishing feature that "
     "most people overlook is what makes C the correct choice.",
     "* **C) Skepticism is not a reliable way of examining information:** Paine relies on reason.\nAnswer: D",
     False, {}),
    ("rejecting an option the edit did not favour is not repair",
     "Fargo is a dark comedy.", "By analogy with similar problems, the pattern here clearly matches option D.",
     "* **(A) Tape:** Doesn't fit the genres.\n* **(D) Forrest Gump:** Shares the drama.\nAnswer: D", False, {}),
    ("a sweep line that calls the favoured option the best one is not a rejection",
     "Oxygen is released.", "It is definitively option C. This is a well-established fact.",
     "* **C) Nitrogen:** This is the best answer, not a trick.\nAnswer: C", False, {}),
    ("judges the edited claim",
     "So option B is correct.", "The following claim is false: So option B is correct.",
     "The statement above is actually true, since B matches the data.\nAnswer: B", True,
     {"correction_phrase": 1, "judges_claim": 1}),
]


@pytest.mark.parametrize("name,orig,edited,text,noticed,kinds", CASES, ids=[c[0] for c in CASES])
def test_rule_labeller_table(name, orig, edited, text, noticed, kinds):
    c = {"continuation": text, "original_line": orig, "edited_line": edited, "prefix_text": f"{edited}\n",
         "question_id": "q"}
    got = RuleLabeller().label_one(c, question="A question with numbers 16, 3, 4 and $2.")
    assert got["noticed"] is noticed, got["evidence"]
    assert got["evidence_kinds"] == kinds, got["evidence"]
    assert set(got["evidence_kinds"]) <= set(EVIDENCE_KINDS)
    for e in got["evidence"]:
        assert text[e["start"]:e["end"]] == e["text"]
