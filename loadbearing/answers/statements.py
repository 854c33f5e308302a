"""Answer statements: where a text states an answer, and whether that statement is definitive.

A statement is the text after an answer marker (``answer is``, ``Answer:``, ``the correct option is``,
``####``, ``\\boxed{...}``) up to the end of its line (or the next line after a bare marker line). A statement
is read only when it is definitive: not conditional in its sentence before the marker, not hedged, not a
negation without a corrected tail, not a list of several options. The rules are in :mod:`loadbearing.answers`.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass

__all__ = [
    "HASH_ANSWER_RE", "HEDGED_RE", "LEAD_JUNK", "NEGATED_RE", "NEGATION_TAIL_RE", "Statement",
    "braced", "clean", "cut_sentence", "find_statements", "read_statement",
]

_MARKER_RE = re.compile(
    r"(?P<boxed>\\boxed\s*\{)"
    r"|(?P<hash>\#\#\#\#)"
    r"|\b(?:answer|(?:correct|right|best)\s+(?:option|choice))\b[ \t]*(?:\*\*|__)?[ \t]*"
    r"(?:is\b|would\s+be\b|should\s+be\b|[:=])",
    re.IGNORECASE,
)
_SENTENCE_SPLIT_RE = re.compile(r"(?<=[.!?;])\s+")
# a marker line and nothing else (the answer follows on the next line)
_BARE_MARKER_LINE_RE = re.compile(
    r"^[\s>#*_`\-]*(?:(?:the|my|our)\s+)?(?:final\s+|correct\s+|best\s+)?answer[\s*_`]*[:：][\s*_`]*$", re.I
)
# words before the marker (same sentence) that make the statement not a claim of the answer
_NOT_DEFINITIVE_CONTEXT_RE = re.compile(
    r"\b(?:whether|if|unless|suppose|supposing|assuming|assume|not\s+sure|unsure|wonder|maybe|perhaps|"
    r"probably|possibly|might|could)\b",
    re.I,
)
#: a statement that is a negation ("not 5", "not (B)"); its corrected tail ("..., it is 7") is read instead
NEGATED_RE = re.compile(r"^[\s*_]*(?:not|never|no\s+longer)\b", re.I)
NEGATION_TAIL_RE = re.compile(
    r"(?:[,;]\s*(?:but\s+|rather\s+|instead\s+)?|\s+but\s+)(?:it(?:'s|\s+is)\s+|the\s+answer\s+is\s+)?(?P<tail>\S.*)$", re.I
)
#: a hedged or conditional statement ("probably 12", "12?", "12, let me check")
HEDGED_RE = re.compile(
    r"\b(?:probably|maybe|perhaps|possibly|likely|presumably|might|may\s+be|could\s+be|if|unless|whether|"
    r"assuming|not\s+sure|unsure|let\s+me\s+(?:check|verify|double[- ]check|re-?check)|"
    r"let's\s+(?:check|verify|double[- ]check))\b|\?",
    re.I,
)
_CONCLUSION_TAIL_RE = re.compile(r"[,;]\s*(?:so|therefore|thus|hence)\s*,?\s+(?:it(?:'s|\s+is)\s+)?(?P<tail>[^,;]+)$", re.I)
_BARE_OPTION_RE = re.compile(r"\W*(?:option\s+|choice\s+)?\(?[A-Za-z]\)?\W*")
_LETTER_LIST_RE = re.compile(r"^(?:option\s+)?\(?[A-Z]\)?\s*(?:,|and|or|/|&)\s*(?:option\s+)?\(?[A-Z]\)?(?:\W|$)")
#: a ``####`` statement that can be GSM8K's final line (else "#### Step 2" is a markdown heading)
HASH_ANSWER_RE = re.compile(r"\s*[-\u2212$\d(.]")
# task-specific synonyms in the gold's vocabulary
_SYNONYMS: dict[str, tuple[tuple[str, str], ...]] = {
    "sports_understanding": ((r"\bnot\s+plausible\b", "no"), (r"\bimplausible\b", "no"), (r"\bplausible\b", "yes")),
}
_LITERAL_TASKS = frozenset({"word_sorting"})
_SENTENCE_END_RE = re.compile(r"\.(?=\s|$)")
#: decoration stripped around an answer (spaces, bold/italic marks, colons, backticks, quotes, ``$``)
LEAD_JUNK = " \t*_:`'\"$\u201c\u201d\u2018\u2019"


@dataclass(frozen=True)
class Statement:
    """One answer statement found in a text."""

    text: str  # what follows the marker: the rest of its line, or the next line after a bare marker line
    context: str  # the sentence before the marker, on the marker's line ("Let's check whether the")
    is_hash: bool  # came from "####"


def find_statements(text: str) -> list[Statement]:
    """Every answer statement, in text order."""
    out = []
    for m in _MARKER_RE.finditer(text):
        line_start = text.rfind("\n", 0, m.start()) + 1
        context = _SENTENCE_SPLIT_RE.split(text[line_start:m.start()])[-1]
        if m.group("boxed"):
            inner = braced(text, m.end())
            if inner is not None:
                out.append(Statement(inner.strip(), context, False))
            continue
        rest = text[m.end():]
        first, _, after = rest.partition("\n")
        if not first.strip(LEAD_JUNK + " .") and _BARE_MARKER_LINE_RE.match(text[line_start:m.end()] + first):
            # a bare marker line ("**The Correct Answer:**"): the answer is on the next non-blank line
            first = next((ln for ln in after.split("\n") if ln.strip()), "")
        out.append(Statement(first.strip(), context, bool(m.group("hash"))))
    return out


def read_statement(st: Statement, parse: Callable[[str], str | None], task: str | None) -> str | None:
    """Parse one statement unless it is negated, hedged or conditional (then None)."""
    if _NOT_DEFINITIVE_CONTEXT_RE.search(st.context):
        return None  # "Let's check whether the answer is 12", "If the answer is 12, ..."
    s = cut_sentence(st.text)
    for pat, rep in _SYNONYMS.get(task or "", ()):
        s = re.sub(pat, rep, s, flags=re.I)
    if task in _LITERAL_TASKS:
        return parse(s)  # the answer is a list of arbitrary words ("maybe", "if", "not" included)
    if NEGATED_RE.match(s):  # "not 5, it is 7" -> "7"; a bare "not (B)" states no answer
        m = NEGATION_TAIL_RE.search(s)
        if not m:
            return None
        s = m.group("tail")
    if HEDGED_RE.search(s):
        return None  # "probably 12 but let me check", "12?"
    m = _CONCLUSION_TAIL_RE.search(s)
    if m and _BARE_OPTION_RE.fullmatch(m.group("tail")):  # "A and B are both wrong, so C": the conclusion
        got = parse(m.group("tail"))
        if got is not None:
            return got
    if _LETTER_LIST_RE.match(clean(s)):
        return None  # "A and B ..." names several options, not one answer
    return parse(s)


def cut_sentence(statement: str) -> str:
    """The statement up to its first sentence end (a '.' before whitespace/end, '!' or '?' kept)."""
    m = re.search(r"(?<=[^\d\s])\.(?=\s|$)|(?<=\d)\.(?=\s+[A-Z]|\s*$)", statement)
    return statement[: m.start()] if m else statement


def braced(text: str, start: int) -> str | None:
    """Text from ``start`` up to the brace closing the one just before it (nesting allowed)."""
    depth = 1
    for i in range(start, len(text)):
        if text[i] == "{":
            depth += 1
        elif text[i] == "}":
            depth -= 1
            if depth == 0:
                return text[start:i]
    return None


def clean(statement: str) -> str:
    """Strip decoration: \\boxed{}/\\text{}, bold, quotes, backticks; cut at the first sentence end."""
    s = statement
    m = re.search(r"\\boxed\s*\{", s)
    if m:
        inner = braced(s, m.end())
        if inner is not None:
            s = inner
    s = re.sub(r"\\text\w*\s*\{([^{}]*)\}", r"\1", s)
    s = s.replace("**", " ").replace("__", " ").replace("`", "").replace("$\\", "\\")
    s = s.strip(LEAD_JUNK)
    m = _SENTENCE_END_RE.search(s)
    if m:
        s = s[: m.start()]
    return s.strip(LEAD_JUNK + ".")
