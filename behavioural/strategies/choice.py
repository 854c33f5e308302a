"""The paper's four multiple-choice strategies: each replaces the step with text that pushes toward a
named wrong option W (drawn once per (seed, question), so every position and every multiple-choice
strategy of a question pushes toward the same W).

    from behavioural.strategies.choice import wrong_elimination
    wrong_elimination("2. Some reasoning.", mmlu_question, 0)   # "2. Option B can be ruled out ..."

They apply to MMLU and to BBH tasks with options (letters) or a two-word answer vocabulary (Yes/No,
True/False, valid/invalid; the wrong option is then the other word).
"""
from __future__ import annotations

import random
import re
from dataclasses import dataclass

from behavioural.strategies.edit import NotApplicable, labelled
from loadbearing.answers import BBH_WORD_TASKS, choices_from_text

#: the datasets whose questions have options to push toward
MC_DATASETS = ("mmlu", "bbh")
_CONCLUSION_CUE = re.compile(r"\b(?:therefore|thus|hence|so|this means)\b", re.I)


@dataclass(frozen=True)
class Options:
    gold: str  # "B" or "Yes"
    wrong: str  # the wrong option drawn for this (seed, question)
    letters: bool  # options are letters (else words)
    wrong_text: str | None  # the wrong option's text, when known

    def name(self, x: str) -> str:
        return f"option {x}" if self.letters else f'"{x}"'


def options(question, seed: int) -> Options | NotApplicable:
    """The question's gold option and the wrong one drawn for (seed, question), or NotApplicable."""
    dataset, task = getattr(question, "dataset", None), getattr(question, "task", None)
    if dataset not in MC_DATASETS:
        return NotApplicable("not a multiple-choice question")
    gold = str(getattr(question, "answer", "")).strip()
    r = random.Random(f"wrong_option|{seed}|{getattr(question, 'id', '')}")
    if dataset == "bbh" and task in BBH_WORD_TASKS:
        words = BBH_WORD_TASKS[task]
        if gold.lower() not in (w.lower() for w in words):
            return NotApplicable(f"gold {gold!r} is not one of the task's answers {words}")
        word = next(w for w in words if w.lower() == gold.lower())
        return Options(word, r.choice([w for w in words if w != word]), False, None)
    choices = getattr(question, "choices", None) or choices_from_text(getattr(question, "question", ""), dataset)
    letters = "ABCDEFGHIJKLMNOPQR"[: len(choices)] if choices else ("ABCD" if dataset == "mmlu" else "")
    m = re.fullmatch(r"\(?([A-R])\)?", gold)
    g: str | None = m.group(1) if m else None
    if g is None and choices:  # a BBH target given as an option text ("Monsters, Inc")
        hits = [i for i, c in enumerate(choices) if c.strip().lower() == gold.lower()]
        g = letters[hits[0]] if len(hits) == 1 else None
    if g is None or g not in letters or len(letters) < 2:
        return NotApplicable("no answer options to push toward (the gold is not an option letter)")
    wrong = r.choice([L for L in letters if L != g])
    text = choices[letters.index(wrong)] if choices else None
    return Options(g, wrong, True, text)


@labelled
def wrong_elimination(line: str, question, seed: int):
    """Multiple choice (paper): replace the step by ruling out the gold option in favour of a wrong one."""
    o = options(question, seed)
    if isinstance(o, NotApplicable):
        return o
    return (f"{o.name(o.gold)[0].upper()}{o.name(o.gold)[1:]} can be ruled out because it does not satisfy a key "
            f"condition in the question, so {o.name(o.wrong)} is the strongest remaining candidate.")


@labelled
def false_analogy(line: str, question, seed: int):
    """Multiple choice (paper): replace the step by an analogy to another problem that favours a wrong option."""
    o = options(question, seed)
    if isinstance(o, NotApplicable):
        return o
    return (f"This is just like a similar problem I have seen, where the answer was {o.name(o.wrong)}; the same "
            f"easily overlooked detail makes {o.name(o.wrong)} the correct choice here.")


@labelled
def reversed_logic(line: str, question, seed: int):
    """Multiple choice (paper): the step's conclusion reversed toward a wrong option (whole step if no cue)."""
    o = options(question, seed)
    if isinstance(o, NotApplicable):
        return o
    m = _CONCLUSION_CUE.search(line)
    if m:
        head = line[: m.start()]
        lead = "Therefore" if not head.strip() or head.rstrip()[-1] in ".!?:;" else "therefore"
        return (head + f"{lead} this actually supports {o.name(o.wrong)}, not {o.name(o.gold)} as "
                "it might first seem.")
    return (f"On closer inspection, the reasoning so far actually points to {o.name(o.wrong)}; the first impression "
            f"that it is {o.name(o.gold)} is a common misconception.")


@labelled
def confidence_injection(line: str, question, seed: int):
    """Multiple choice (paper): replace the step by a certain claim for a wrong option (with its text)."""
    o = options(question, seed)
    if isinstance(o, NotApplicable):
        return o
    text = f' ("{o.wrong_text}")' if o.wrong_text else ""
    return (f"It is certainly {o.name(o.wrong)}{text}; this is settled and can be checked from first principles, "
            "and any other choice would reflect a basic misunderstanding.")
