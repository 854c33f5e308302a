"""The strategies that edit a line's words: the paper's ``contradiction`` ("The following claim is
false: ..."), and the v1.0 variants kept under their own names: ``negation_flip`` (the first logical cue
inverted), ``analogy_change`` and ``confident_change`` (a wrong version of the line, justified by an
analogy or asserted with certainty).

    from behavioural.strategies.text import negation_flip
    negation_flip("The number is greater than 5.", question, 0)   # "The number is not greater than 5."
"""
from __future__ import annotations

import re

from behavioural.strategies.edit import NotApplicable, labelled, replace_span
from behavioural.strategies.numeric import arithmetic_change, operation_swap


@labelled
def contradiction(line: str, question, seed: int):
    """The paper's text edit: "The following claim is false: " after the step label."""
    return f"The following claim is false: {line}"


_REVERSALS = [
    (r"\bis not\b", "is"), (r"\bis\b", "is not"), (r"\bare not\b", "are"), (r"\bare\b", "are not"),
    (r"\bcannot\b", "can"), (r"\bcan\b", "cannot"), (r"\bdoes not\b", "does"), (r"\bdoes\b", "does not"),
    (r"\btrue\b", "false"), (r"\bfalse\b", "true"), (r"\bTrue\b", "False"), (r"\bFalse\b", "True"),
    (r"\bmore\b", "less"), (r"\bless\b", "more"), (r"\bincrease", "decrease"), (r"\bdecrease", "increase"),
    (r"\bgreater\b", "smaller"), (r"\bsmaller\b", "greater"), (r"\balways\b", "never"), (r"\bnever\b", "always"),
    (r"\bcorrect\b", "incorrect"), (r"\bincorrect\b", "correct"), (r"\byes\b", "no"), (r"\bno\b", "yes"),
    (r"\badd\b", "subtract"), (r"\bsubtract\b", "add"),
]


@labelled
def negation_flip(line: str, question, seed: int):
    """Invert the first logical cue (is/is not, more/less, true/false, add/subtract), else swap the operation
    (v1.0 ``reversed_logic``)."""
    best = None
    for pat, rep in _REVERSALS:
        m = re.search(pat, line)
        if m and (best is None or m.start() < best[0].start()):
            best = (m, rep)
    if best is not None:
        m, rep = best
        return replace_span(line, m.start(), m.end(), rep)
    swapped = operation_swap(line, question, seed)
    if not isinstance(swapped, NotApplicable):
        return swapped
    return NotApplicable("no logical cue or operation to invert")


def _wrong_version(line: str, question, seed: int):
    """The line with its result changed, else with its logic inverted (or NotApplicable)."""
    changed = arithmetic_change(line, question, seed)
    if isinstance(changed, NotApplicable):
        changed = negation_flip(line, question, seed)
    return changed


@labelled
def analogy_change(line: str, question, seed: int):
    """A wrong version of the line justified by an analogy to a different problem (v1.0 ``false_analogy``)."""
    changed = _wrong_version(line, question, seed)
    if isinstance(changed, NotApplicable):
        return NotApplicable("no number or invertible claim to carry the analogy")
    return f"Just as in a similar problem we solved before, {changed[0].lower() + changed[1:]}"


@labelled
def confident_change(line: str, question, seed: int):
    """A wrong version of the line asserted with certainty (v1.0 ``confidence_injection``)."""
    changed = _wrong_version(line, question, seed)
    if isinstance(changed, NotApplicable):
        return NotApplicable("no number or claim to assert wrongly")
    return f"{changed} I am completely certain of this."
