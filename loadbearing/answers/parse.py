"""Reading the final answer of a text: :func:`extract_answer` and its per-kind parsers.

The last definitive answer statement (:mod:`loadbearing.answers.statements`) that parses gives the answer,
in the gold's format: a number string (gsm8k, arith, numeric BBH tasks), ``"B"`` (mmlu), ``"(B)"`` or the
target spelling (bbh). The rules are in :mod:`loadbearing.answers`.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Sequence
from decimal import Decimal, InvalidOperation
from typing import Any

from loadbearing.answers.numbers import ANSWER_NUMBER_RE
from loadbearing.answers.statements import HASH_ANSWER_RE, clean, find_statements, read_statement

__all__ = [
    "BBH_LETTERS", "BBH_MC_TASKS", "BBH_NUMBER_TASKS", "BBH_WORD_TASKS", "BRACKETS", "MINUS", "MMLU_LETTERS",
    "PARSER_VERSION", "extract_answer", "normalize_number", "tokens",
]

#: recorded in every run manifest, so runs scored by different parsers / stop rules are never pooled silently
PARSER_VERSION = "1.1"

BBH_MC_TASKS = frozenset({
    "date_understanding", "disambiguation_qa", "geometric_shapes", "hyperbaton",
    "logical_deduction_five_objects", "logical_deduction_seven_objects", "logical_deduction_three_objects",
    "movie_recommendation", "penguins_in_a_table", "reasoning_about_colored_objects", "ruin_names",
    "salient_translation_error_detection", "snarks", "temporal_sequences",
    "tracking_shuffled_objects_five_objects", "tracking_shuffled_objects_seven_objects",
    "tracking_shuffled_objects_three_objects",
})
BBH_NUMBER_TASKS = frozenset({"multistep_arithmetic_two", "object_counting"})
BBH_WORD_TASKS = {  # task -> accepted words in the gold's spelling
    "boolean_expressions": ("True", "False"),
    "causal_judgement": ("Yes", "No"),
    "navigate": ("Yes", "No"),
    "web_of_lies": ("Yes", "No"),
    "sports_understanding": ("yes", "no"),
    "formal_fallacies": ("valid", "invalid"),
}
MMLU_LETTERS = "ABCD"
BBH_LETTERS = "ABCDEFGHIJKLMNOPQR"
MINUS = "\u2212"  # unicode minus sign
_CLOSERS = ")]}>"
BRACKETS = "([{<" + _CLOSERS

_MATH_RUN_RE = re.compile(r"[\d\s,.$+\-*/×÷x()=]*")
_HEDGE_RE = re.compile(
    r"(?:(?:clearly|definitely|certainly)\s+|the\s+)?(?P<opt>(?:option|choice|letter)\s+)?", re.I
)
_CONNECTIVES = frozenset(
    {"because", "since", "as", "is", "was", "which", "and", "or", "with", "in", "from", "here", "that", "option"}
)

Parser = Callable[[str], str | None]


def normalize_number(s: Any) -> str | None:
    """Canonical string of the first number in ``s``, or None if there is none.

    Thousands commas, ``$`` and trailing zeros go (``"$1,000.00"`` -> ``"1000"``, ``"2.50"`` -> ``"2.5"``),
    the unicode minus counts as a sign (``"−3"`` -> ``"-3"``), words after the number are ignored
    (``"18 dollars"`` -> ``"18"``). Ints and floats are accepted too.
    """
    if s is None or isinstance(s, bool):
        return None
    m = ANSWER_NUMBER_RE.search(str(s).replace(MINUS, "-"))
    return _canonical(m) if m else None


def extract_answer(text: str, dataset: str, task: str | None = None,
                   choices: Sequence[str] | None = None) -> str | None:
    """The final answer stated in ``text`` for a question of ``dataset``/``task``, or None.

    See :mod:`loadbearing.answers` for the exact rules. The result is in the gold's format: a number string
    (gsm8k, arith, numeric BBH tasks), ``"B"`` (mmlu), ``"(B)"`` or the target spelling (bbh), or the
    statement text (custom datasets and BBH tasks this module does not know). With ``choices`` (the option
    texts) a multiple-choice answer given as an option's text without its letter maps to that letter.
    """
    if not text:
        return None
    if "</think>" in text:
        text = text.rsplit("</think>", 1)[1]
    if "<think>" in text:
        return None  # a think block that is still open: no answer yet
    parse = _parser(dataset, task, tuple(choices) if choices else None)
    for st in reversed(find_statements(text)):
        if st.is_hash and not HASH_ANSWER_RE.match(st.text):
            continue  # "#### Step 2" is a markdown heading, not GSM8K's final line
        got = read_statement(st, parse, task)
        if got is not None:
            return got
    return None


def tokens(s: str) -> list[str]:
    """Lowercased words of ``s`` split at spaces and commas, a final '.' dropped (how option texts compare)."""
    return [t for t in re.split(r"[\s,]+", s.lower().strip().rstrip(".")) if t]


# ----------------------------------------------------------------------------------------------------
# statement parsers


def _parser(dataset: str, task: str | None, choices: tuple[str, ...] | None = None) -> Parser:
    if dataset in ("gsm8k", "arith"):
        return _parse_number
    if dataset == "mmlu":
        return lambda s: _parse_letter(s, MMLU_LETTERS, parens=False) or _option_text(s, choices, parens=False)
    if dataset == "bbh" and task is not None:
        if task in BBH_MC_TASKS:
            return lambda s: (_parse_letter(s, BBH_LETTERS, parens=True) or _option_text(s, choices, parens=True)
                              or _parse_text(s))
        if task in BBH_NUMBER_TASKS:
            return _parse_number
        if task in BBH_WORD_TASKS:
            return lambda s: _parse_word(s, BBH_WORD_TASKS[task])
        if task == "dyck_languages":
            return _parse_dyck
        if task == "word_sorting":
            return _parse_words
    return _parse_generic


def _canonical(m: re.Match) -> str | None:
    try:
        d = Decimal(m.group("num").replace(",", ""))
    except InvalidOperation:
        return None
    if m.group("sign") or m.group("sign2"):
        d = -d
    if d == d.to_integral_value():
        return str(int(d))
    return format(d.normalize(), "f")


def _parse_number(statement: str) -> str | None:
    if re.search(r"\\d?frac\b", statement):
        return None  # a LaTeX fraction is not read (rather than misread as its numerator)
    s = clean(statement.replace("{,}", ",")).replace(MINUS, "-")
    m = ANSWER_NUMBER_RE.search(s)
    if not m:
        return None
    run_m = _MATH_RUN_RE.match(s, m.start())
    run = run_m.group() if run_m else ""
    if "=" not in run and re.match(r"\s*/\s*\d", s[m.end():]):
        return None  # a fraction such as "1/2" is not read (rather than misread as "1")
    if "=" in run:  # "9 * 2 = 18": the result, not the first operand
        after = ANSWER_NUMBER_RE.search(run[run.rindex("=") + 1:])
        if after:
            return _canonical(after)
    return _canonical(m)


def _parse_letter(statement: str, letters: str, parens: bool) -> str | None:
    s = clean(statement)
    hedge = _HEDGE_RE.match(s)  # always matches (everything in it is optional)
    option_word = bool(hedge and hedge.group("opt"))
    s = s[hedge.end():] if hedge else s
    letter = None
    m = re.match(r"[(\[]\s*([A-Za-z])\s*[)\]]", s)
    if m:
        letter = m.group(1).upper()
    elif option_word and re.match(r"[A-Za-z](?![\w])", s):
        letter = s[0].upper()
    else:
        m = re.match(r"([A-Z])(?=$|[.):,;*\]]|\s)", s)
        if m:
            nxt = re.match(r"\s+([a-z]+)\b", s[1:])
            if not nxt or nxt.group(1) in _CONNECTIVES:
                letter = m.group(1)
    if letter is None:  # "the third one, (C)" / "Maelstrom, option B"
        m = re.search(r"\(([A-Z])\)|\b(?:option|choice)\s+\(?([A-Za-z])\)?(?!\w)", s, re.I)
        if m and (m.group(1) is None or m.group(1).isupper()):
            letter = (m.group(1) or m.group(2)).upper()
    if letter is None or letter not in letters:
        return None
    return f"({letter})" if parens else letter


def _option_text(statement: str, choices: tuple[str, ...] | None, parens: bool) -> str | None:
    """The letter of the option whose text the statement is (``Paris`` -> ``B``), else None."""
    if not choices:
        return None
    said = tokens(clean(statement))
    hits = [i for i, c in enumerate(choices) if said and tokens(c) == said]
    if len(hits) != 1:
        return None
    letter = BBH_LETTERS[hits[0]]
    return f"({letter})" if parens else letter


def _parse_word(statement: str, words: tuple[str, ...]) -> str | None:
    s = clean(statement)
    pattern = r"\b(" + "|".join(re.escape(w) for w in words) + r")\b"
    m = re.search(pattern, s, re.I)
    if not m:
        return None
    return next(w for w in words if w.lower() == m.group(1).lower())


def _parse_dyck(statement: str) -> str | None:
    s = clean(statement)
    m = re.match(r"[\s,()\[\]{}<>]+", s)
    chars = [c for c in (m.group() if m else "") if c in BRACKETS]
    return " ".join(chars) if chars else None


def _parse_words(statement: str) -> str | None:
    words = [w.strip("'\"") for w in re.split(r"[\s,]+", clean(statement))]
    words = [w for w in words if w]
    return " ".join(words) if words else None


def _parse_text(statement: str) -> str | None:
    s = " ".join(clean(statement).split())
    return s or None


def _parse_generic(statement: str) -> str | None:
    """Unknown task or custom data: a letter, else a word answer, else a leading number, else the text."""
    letter = _parse_letter(statement, BBH_LETTERS, parens=False)
    if letter:
        return letter
    s = clean(statement)
    if re.fullmatch(r"(?i)(true|false|yes|no|valid|invalid)", s):
        return s
    if re.match(r"[-\u2212]?\$?\s?\d|\.\d", s):
        return _parse_number(statement)
    return _parse_text(statement)
