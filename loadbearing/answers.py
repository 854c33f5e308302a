"""Strict final-answer extraction and scoring.

The paper's pipeline fell back to "any letter" / "last number in the text" and counted unparsed answers as
wrong; both inflate error rates. This module only reads an answer from an *explicit final-answer
statement* and returns None otherwise; None is never scored (``is_correct`` returns None)::

    from loadbearing.answers import score
    parsed, correct = score(model_text, q)   # THE scorer of every stage: ("18" | "B" | "(B)" | "Yes" | None,
                                             #  True | False | None = unscored)

The stop rule of generation lives here too (:func:`has_final_answer_line`): end of turn, or a complete
final-answer line anchored at a line start (``Answer: X``, ``Final answer: X``, ``#### X``, a lone
``\\boxed{X}``) whose answer is definitive; never a phrase in mid-sentence. See docs/protocol.md.

Rules, in order:

1. Reasoning models: if the text contains ``</think>`` only what follows the last ``</think>`` is read;
   an opened ``<think>`` that is never closed gives None.
2. Answer statements are found by these markers (case-insensitive): ``answer is`` / ``answer:`` (so
   ``The answer is``, ``So the answer is``, ``Final answer:``, ``The final answer is``, ``**Answer:**``,
   ``answer would be``), ``the correct option/choice is``, ``#### `` and ``\\boxed{...}``. Markdown bold,
   quotes, ``$...$`` and ``\\boxed{}`` around the answer are stripped. A bare bold ``**42**`` without a
   marker is *not* an answer statement.
3. The statement is the text right after the marker up to the end of that line, cut at the first sentence
   end (". "); after a bare marker line (``**The Correct Answer:**``) it is the next non-blank line. The
   LAST *definitive* statement that parses gives the answer (protocol 1.1): a statement is skipped when its
   sentence has "whether/if/unless/assuming/suppose/maybe/perhaps/probably/possibly/might/could" before the
   marker, when it is hedged or conditional after it ("probably", "likely", "if", "let me check", "?"),
   when it names several options ("A and B ...", unless it ends "..., so C"), and when it is negated
   ("not (B)"; "not 5, it is 7" reads its tail, 7). No statement that parses -> None; there is no
   fallback to "the last number in the text".
4. Numbers (GSM8K, arith, BBH ``multistep_arithmetic_two`` / ``object_counting``): the FIRST number
   after the marker is taken (``The answer is 18 dollars, 3 more than 15`` -> "18"), except that when
   that number opens an equation (``The answer is 9 * 2 = 18``) the number after the last ``=`` is taken.
   Commas, ``$``, units and trailing zeros are normalised (``$1,000.00`` -> "1000"); ``-3`` and the
   unicode minus ``−3`` are negative. Number words ("eighteen") and fractions (``1/2``) are not read: None.
5. Multiple choice: MMLU returns a letter ``"B"``, BBH returns ``"(B)"`` (the gold formats). Accepted:
   ``(B)``, ``B``, ``B.``, ``B)``, ``B:``, ``**B**``, ``option B``, ``choice (b)``; a parenthesised letter
   or ``option X`` anywhere in the statement counts if none opens it. A bare letter must be uppercase and
   stand alone, and when a lowercase word follows it must be a connective (``B because``, ``A is``), so
   the article in ``The answer is a reasonable ...`` / ``Answer: A good guess ...`` is never option A.
   For BBH multiple-choice tasks an answer without a letter is returned as text (a few published BBH
   targets are option texts, e.g. ``Monsters, Inc``); ``is_correct`` maps it onto the options.
6. BBH free-form: True/False, Yes/No, valid/invalid are returned in the gold's spelling; ``word_sorting``
   returns space-separated words; ``dyck_languages`` returns the closing brackets separated by spaces.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass
from decimal import Decimal, InvalidOperation
from types import SimpleNamespace
from typing import Any, NamedTuple

__all__ = [
    "BBH_MC_TASKS", "BBH_NUMBER_TASKS", "BBH_WORD_TASKS", "PARSER_VERSION", "STOP_RULE", "Score",
    "as_question", "choices_from_text", "extract_answer",
    "final_answer_line", "has_final_answer_line", "is_correct", "normalize_number", "score",
]

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
_ALL_WORDS = ("True", "False", "Yes", "No", "valid", "invalid")
_MMLU_LETTERS = "ABCD"
_BBH_LETTERS = "ABCDEFGHIJKLMNOPQR"

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
# a statement that is a negation ("not 5", "not (B)"); its corrected tail ("..., it is 7") is read instead
_NEGATED_RE = re.compile(r"^[\s*_]*(?:not|never|no\s+longer)\b", re.I)
_NEGATION_TAIL_RE = re.compile(
    r"(?:[,;]\s*(?:but\s+|rather\s+|instead\s+)?|\s+but\s+)(?:it(?:'s|\s+is)\s+|the\s+answer\s+is\s+)?(?P<tail>\S.*)$", re.I
)
_HEDGED_RE = re.compile(
    r"\b(?:probably|maybe|perhaps|possibly|likely|presumably|might|may\s+be|could\s+be|if|unless|whether|"
    r"assuming|not\s+sure|unsure|let\s+me\s+(?:check|verify|double[- ]check|re-?check)|"
    r"let's\s+(?:check|verify|double[- ]check))\b|\?",
    re.I,
)
_CONCLUSION_TAIL_RE = re.compile(r"[,;]\s*(?:so|therefore|thus|hence)\s*,?\s+(?:it(?:'s|\s+is)\s+)?(?P<tail>[^,;]+)$", re.I)
_BARE_OPTION_RE = re.compile(r"\W*(?:option\s+|choice\s+)?\(?[A-Za-z]\)?\W*")
_LETTER_LIST_RE = re.compile(r"^(?:option\s+)?\(?[A-Z]\)?\s*(?:,|and|or|/|&)\s*(?:option\s+)?\(?[A-Z]\)?(?:\W|$)")
# task-specific synonyms in the gold's vocabulary
_SYNONYMS: dict[str, tuple[tuple[str, str], ...]] = {
    "sports_understanding": ((r"\bnot\s+plausible\b", "no"), (r"\bimplausible\b", "no"), (r"\bplausible\b", "yes")),
}
#: recorded in every run manifest, so runs scored by different parsers / stop rules are never pooled silently
PARSER_VERSION = "1.1"
STOP_RULE = "eos or a complete line-anchored final-answer line (Answer:, Final answer:, ####, lone \\boxed{}) v1.1"
_LITERAL_TASKS = frozenset({"word_sorting"})
_WORD_SYNONYMS = {"plausible": "yes", "implausible": "no", "not plausible": "no"}
_MINUS = "\u2212"  # unicode minus sign
_NUM_RE = re.compile(
    r"(?<![\w.])(?P<sign>-\s?)?\$?\s?(?P<sign2>-)?"
    r"(?P<num>\d{1,3}(?:,\d{3})+(?:\.\d+)?|\d+(?:\.\d+)?|\.\d+)(?![\d])"
)
_MATH_RUN_RE = re.compile(r"[\d\s,.$+\-*/×÷x()=]*")
_SENTENCE_END_RE = re.compile(r"\.(?=\s|$)")
_LEAD_JUNK = " \t*_:`'\"$\u201c\u201d\u2018\u2019"
_HEDGE_RE = re.compile(
    r"(?:(?:clearly|definitely|certainly)\s+|the\s+)?(?P<opt>(?:option|choice|letter)\s+)?", re.I
)
_CONNECTIVES = frozenset(
    {"because", "since", "as", "is", "was", "which", "and", "or", "with", "in", "from", "here", "that", "option"}
)
_CLOSERS = ")]}>"
_BRACKETS = "([{<" + _CLOSERS


def normalize_number(s: Any) -> str | None:
    """Canonical string of the first number in ``s``, or None if there is none.

    Thousands commas, ``$`` and trailing zeros go (``"$1,000.00"`` -> ``"1000"``, ``"2.50"`` -> ``"2.5"``),
    the unicode minus counts as a sign (``"−3"`` -> ``"-3"``), words after the number are ignored
    (``"18 dollars"`` -> ``"18"``). Ints and floats are accepted too.
    """
    if s is None or isinstance(s, bool):
        return None
    m = _NUM_RE.search(str(s).replace(_MINUS, "-"))
    return _canonical(m) if m else None


def extract_answer(text: str, dataset: str, task: str | None = None,
                   choices: Sequence[str] | None = None) -> str | None:
    """The final answer stated in ``text`` for a question of ``dataset``/``task``, or None.

    See the module docstring for the exact rules. The result is in the gold's format: a number string
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
    for st in reversed(_statements(text)):
        if st.is_hash and not re.match(r"\s*[-\u2212$\d(.]", st.text):
            continue  # "#### Step 2" is a markdown heading, not GSM8K's final line
        got = _read(st, parse, task)
        if got is not None:
            return got
    return None


def is_correct(pred: str | None, question: Any) -> bool | None:
    """Whether ``pred`` (from :func:`extract_answer`) matches ``question.answer``.

    Returns None when ``pred`` is None, and also when a BBH option text matches none of the question's
    options (it cannot be scored); unscored answers are never counted wrong.
    """
    if pred is None:
        return None
    gold = str(question.answer).strip()
    kind = _kind(question.dataset, question.task, gold)
    pred = str(pred).strip()
    if kind == "number":
        p, g = normalize_number(pred), normalize_number(gold)
        return p is not None and p == g
    if kind == "letter":
        return _compare_letter(pred, gold, getattr(question, "choices", None))
    if kind == "word":
        pred = _WORD_SYNONYMS.get(pred.lower(), pred) if gold.lower() in ("yes", "no") else pred
        return pred.lower() == gold.lower()
    if kind == "dyck":
        p, g = _squash(pred), _squash(gold)
        start = _dyck_input(question.question)
        return p == g or (bool(start) and p == start + g)
    return _tokens(pred) == _tokens(gold)


class Score(NamedTuple):
    """The one verdict on a text: the parsed answer (None = unparseable) and whether it is right (None = unscored).

    A named tuple: ``s.parsed, s.correct`` or ``parsed, correct = score(text, q)``."""

    parsed: str | None
    correct: bool | None


def score(text: str, question_like: Any) -> Score:
    """Parse ``text`` and score it against ``question_like`` - the ONE scorer of every stage.

    ``question_like`` is a :class:`~loadbearing.questions.data.Question`, a record (``Baseline``/``Continuation``) or a
    dict with ``dataset``, ``task``, the gold (``answer`` or ``gold``) and optionally ``choices`` and
    ``question``. Missing choices are read back from the question text (MMLU ``A. ...`` lines, BBH
    ``Options:`` block), so a record scores exactly like the question it came from.
    """
    q = as_question(question_like)
    parsed = extract_answer(text, q.dataset, q.task, choices=q.choices)
    return Score(parsed, is_correct(parsed, q))


def as_question(question_like: Any) -> SimpleNamespace:
    """``dataset``, ``task``, ``answer``, ``question``, ``choices`` of a question, record or dict."""
    def get(name: str, default: Any = None) -> Any:
        if isinstance(question_like, dict):
            return question_like.get(name, default)
        return getattr(question_like, name, default)

    answer = get("answer")
    if answer is None:
        answer = get("gold")
    question = get("question") or ""
    choices = get("choices") or choices_from_text(str(question), get("dataset"))
    return SimpleNamespace(dataset=get("dataset"), task=get("task"), answer="" if answer is None else str(answer),
                           question=str(question), choices=tuple(choices) if choices else None)


def choices_from_text(question: str, dataset: str | None = None) -> tuple[str, ...] | None:
    """Option texts written in a question: a BBH ``Options:`` block of ``(A) ...`` lines, or MMLU's trailing
    ``A. ...`` .. ``D. ...`` lines; None when there are none."""
    lines = [ln.strip() for ln in (question or "").splitlines()]
    if "Options:" in lines:
        opts: list[str] = []
        for ln in lines[lines.index("Options:") + 1:]:
            m = re.match(r"\(([A-Z])\)\s*(.*)$", ln)
            if not m or m.group(1) != _BBH_LETTERS[len(opts)]:
                break
            opts.append(m.group(2).strip())
        return tuple(opts) or None
    if dataset in (None, "mmlu") and len(lines) >= 4:
        tail = lines[-4:]
        ms = [re.match(rf"{L}\.\s(.*)$", ln) for L, ln in zip(_MMLU_LETTERS, tail)]
        if all(ms):
            return tuple(m.group(1).strip() for m in ms)  # type: ignore[union-attr]
    return None


# ----------------------------------------------------------------------------------------------------
# the stop rule

_FINAL_LINE_RE = re.compile(
    r"^[ \t>*_`\-]*(?:(?:the|my|our)[ \t]+)?(?:final[ \t]+|correct[ \t]+|best[ \t]+)?answer[ \t*_`]*[:：]"
    r"(?P<rest>.*)$"
    r"|^[ \t]*\#\#\#\#[ \t]*(?P<hash>.*)$"
    r"|^[ \t]*\$*[ \t]*\\boxed[ \t]*\{(?P<boxed>.*)\}[ \t]*\$*[ \t.]*$",
    re.I,
)


def final_answer_line(line: str) -> bool | None:
    """Whether ``line`` is a complete, definitive final-answer line anchored at its start.

    True for ``Answer: 12``, ``**Final answer:** (B)``, ``#### 12``, a lone ``\boxed{12}``; None for a bare
    marker line (``**The Correct Answer:**``: the answer follows on the next line); False for anything else,
    including a phrase in mid-sentence (``Let's check whether the answer is 12.``) and a negated, hedged or
    conditional answer line (``Answer: not 5``, ``Answer: probably 12``).
    """
    m = _FINAL_LINE_RE.match(line)
    if not m:
        return False
    rest = next(g for g in (m.group("rest"), m.group("hash"), m.group("boxed")) if g is not None)
    if m.group("hash") is not None and not re.match(r"\s*[-\u2212$\d(.]", rest):
        return False  # "#### Step 2" is a heading
    body = _cut_sentence(rest.strip(_LEAD_JUNK + " "))
    if not body.strip(_LEAD_JUNK + " ."):
        return None if m.group("rest") is not None else False
    if _NEGATED_RE.match(body) and not _NEGATION_TAIL_RE.search(body):
        return False
    return not _HEDGED_RE.search(body)


def has_final_answer_line(text: str) -> bool:
    """The stop rule: True once ``text`` holds a complete (newline-terminated) final-answer line.

    Only :func:`final_answer_line` lines count (or a bare marker line followed by a complete non-blank
    line); text inside a ``<think>`` block that is still open never counts. Generation otherwise runs to
    the end of the turn.
    """
    if "\n" not in text:
        return False
    if "</think>" in text:
        text = text.rsplit("</think>", 1)[1]
    if "<think>" in text:
        return False
    pending = False  # a bare marker line waits for the next non-blank line
    for line in text[: text.rfind("\n")].split("\n"):
        if pending:
            if line.strip():
                return True
            continue
        verdict = final_answer_line(line)
        if verdict:
            return True
        pending = verdict is None
    return False


# ----------------------------------------------------------------------------------------------------
# statement finding


@dataclass(frozen=True)
class _Statement:
    text: str  # what follows the marker: the rest of its line, or the next line after a bare marker line
    context: str  # the sentence before the marker, on the marker's line ("Let's check whether the")
    is_hash: bool  # came from "####"


def _statements(text: str) -> list[_Statement]:
    """Every answer statement, in text order."""
    out = []
    for m in _MARKER_RE.finditer(text):
        line_start = text.rfind("\n", 0, m.start()) + 1
        context = _SENTENCE_SPLIT_RE.split(text[line_start:m.start()])[-1]
        if m.group("boxed"):
            inner = _braced(text, m.end())
            if inner is not None:
                out.append(_Statement(inner.strip(), context, False))
            continue
        rest = text[m.end():]
        first, _, after = rest.partition("\n")
        if not first.strip(_LEAD_JUNK + " .") and _BARE_MARKER_LINE_RE.match(text[line_start:m.end()] + first):
            # a bare marker line ("**The Correct Answer:**"): the answer is on the next non-blank line
            first = next((ln for ln in after.split("\n") if ln.strip()), "")
        out.append(_Statement(first.strip(), context, bool(m.group("hash"))))
    return out


def _read(st: _Statement, parse, task: str | None) -> str | None:
    """Parse one statement unless it is negated, hedged or conditional (then None)."""
    if _NOT_DEFINITIVE_CONTEXT_RE.search(st.context):
        return None  # "Let's check whether the answer is 12", "If the answer is 12, ..."
    s = _cut_sentence(st.text)
    for pat, rep in _SYNONYMS.get(task or "", ()):
        s = re.sub(pat, rep, s, flags=re.I)
    if task in _LITERAL_TASKS:
        return parse(s)  # the answer is a list of arbitrary words ("maybe", "if", "not" included)
    if _NEGATED_RE.match(s):  # "not 5, it is 7" -> "7"; a bare "not (B)" states no answer
        m = _NEGATION_TAIL_RE.search(s)
        if not m:
            return None
        s = m.group("tail")
    if _HEDGED_RE.search(s):
        return None  # "probably 12 but let me check", "12?"
    m = _CONCLUSION_TAIL_RE.search(s)
    if m and _BARE_OPTION_RE.fullmatch(m.group("tail")):  # "A and B are both wrong, so C": the conclusion
        got = parse(m.group("tail"))
        if got is not None:
            return got
    if _LETTER_LIST_RE.match(_clean(s)):
        return None  # "A and B ..." names several options, not one answer
    return parse(s)


def _cut_sentence(statement: str) -> str:
    """The statement up to its first sentence end (a '.' before whitespace/end, '!' or '?' kept)."""
    m = re.search(r"(?<=[^\d\s])\.(?=\s|$)|(?<=\d)\.(?=\s+[A-Z]|\s*$)", statement)
    return statement[: m.start()] if m else statement


def _braced(text: str, start: int) -> str | None:
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


def _clean(statement: str) -> str:
    """Strip decoration: \\boxed{}/\\text{}, bold, quotes, backticks; cut at the first sentence end."""
    s = statement
    m = re.search(r"\\boxed\s*\{", s)
    if m:
        inner = _braced(s, m.end())
        if inner is not None:
            s = inner
    s = re.sub(r"\\text\w*\s*\{([^{}]*)\}", r"\1", s)
    s = s.replace("**", " ").replace("__", " ").replace("`", "").replace("$\\", "\\")
    s = s.strip(_LEAD_JUNK)
    m = _SENTENCE_END_RE.search(s)
    if m:
        s = s[: m.start()]
    return s.strip(_LEAD_JUNK + ".")


# ----------------------------------------------------------------------------------------------------
# statement parsers


def _parser(dataset: str, task: str | None, choices: tuple[str, ...] | None = None):
    if dataset in ("gsm8k", "arith"):
        return _parse_number
    if dataset == "mmlu":
        return lambda s: _parse_letter(s, _MMLU_LETTERS, parens=False) or _option_text(s, choices, parens=False)
    if dataset == "bbh" and task is not None:
        if task in BBH_MC_TASKS:
            return lambda s: (_parse_letter(s, _BBH_LETTERS, parens=True) or _option_text(s, choices, parens=True)
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
    s = _clean(statement.replace("{,}", ",")).replace(_MINUS, "-")
    m = _NUM_RE.search(s)
    if not m:
        return None
    run_m = _MATH_RUN_RE.match(s, m.start())
    run = run_m.group() if run_m else ""
    if "=" not in run and re.match(r"\s*/\s*\d", s[m.end():]):
        return None  # a fraction such as "1/2" is not read (rather than misread as "1")
    if "=" in run:  # "9 * 2 = 18": the result, not the first operand
        after = _NUM_RE.search(run[run.rindex("=") + 1:])
        if after:
            return _canonical(after)
    return _canonical(m)


def _parse_letter(statement: str, letters: str, parens: bool) -> str | None:
    s = _clean(statement)
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
    said = _tokens(_clean(statement))
    hits = [i for i, c in enumerate(choices) if said and _tokens(c) == said]
    if len(hits) != 1:
        return None
    letter = _BBH_LETTERS[hits[0]]
    return f"({letter})" if parens else letter


def _parse_word(statement: str, words: tuple[str, ...]) -> str | None:
    s = _clean(statement)
    pattern = r"\b(" + "|".join(re.escape(w) for w in words) + r")\b"
    m = re.search(pattern, s, re.I)
    if not m:
        return None
    return next(w for w in words if w.lower() == m.group(1).lower())


def _parse_dyck(statement: str) -> str | None:
    s = _clean(statement)
    m = re.match(r"[\s,()\[\]{}<>]+", s)
    chars = [c for c in (m.group() if m else "") if c in _BRACKETS]
    return " ".join(chars) if chars else None


def _parse_words(statement: str) -> str | None:
    words = [w.strip("'\"") for w in re.split(r"[\s,]+", _clean(statement))]
    words = [w for w in words if w]
    return " ".join(words) if words else None


def _parse_text(statement: str) -> str | None:
    s = " ".join(_clean(statement).split())
    return s or None


def _parse_generic(statement: str) -> str | None:
    """Unknown task or custom data: a letter, else a word answer, else a leading number, else the text."""
    letter = _parse_letter(statement, _BBH_LETTERS, parens=False)
    if letter:
        return letter
    s = _clean(statement)
    if re.fullmatch(r"(?i)(true|false|yes|no|valid|invalid)", s):
        return s
    if re.match(r"[-\u2212]?\$?\s?\d|\.\d", s):
        return _parse_number(statement)
    return _parse_text(statement)


# ----------------------------------------------------------------------------------------------------
# scoring helpers


def _kind(dataset: str, task: str | None, gold: str) -> str:
    if dataset in ("gsm8k", "arith"):
        return "number"
    if dataset == "mmlu":
        return "letter"
    if dataset == "bbh" and task is not None:
        if task in BBH_MC_TASKS:
            return "letter"
        if task in BBH_NUMBER_TASKS:
            return "number"
        if task in BBH_WORD_TASKS:
            return "word"
        if task == "dyck_languages":
            return "dyck"
        if task == "word_sorting":
            return "text"
    if _letter_of(gold):
        return "letter"
    if re.fullmatch(r"-?[\d,]*\.?\d+", gold.replace(_MINUS, "-")):
        return "number"
    if gold.lower() in {w.lower() for w in _ALL_WORDS}:
        return "word"
    return "text"


def _letter_of(s: str) -> str | None:
    m = re.fullmatch(r"\(?([A-Z])\)?", s.strip())
    return m.group(1) if m else None


def _compare_letter(pred: str, gold: str, choices) -> bool | None:
    p, g = _letter_of(pred), _letter_of(gold)
    if p is not None:
        return p == g
    if g is None:  # published target is an option text (e.g. "Monsters, Inc")
        return _tokens(pred) == _tokens(gold)
    if not choices:
        return None
    texts = [_tokens(c) for c in choices]
    idx = ord(g) - ord("A")
    if idx < len(texts) and _tokens(pred) == texts[idx]:
        return True
    return False if _tokens(pred) in texts else None


def _tokens(s: str) -> list[str]:
    return [t for t in re.split(r"[\s,]+", s.lower().strip().rstrip(".")) if t]


def _squash(s: str) -> str:
    return "".join(c for c in s if c in _BRACKETS)


def _dyck_input(question: str) -> str:
    m = re.search(r"Input:\s*(.*)$", question or "", re.S)
    return _squash(m.group(1)) if m else ""


# ----------------------------------------------------------------------------------------------------
# looser answer-line tests (kept exactly as the rule labeller and the paper importer have always used them)

_ANSWER_MENTION_RE = re.compile(r"answer|####|\\boxed", re.IGNORECASE)
_ANSWER_LABEL_RE = re.compile(r"^\s*\**\s*(final\s+answer|answer)\s*\**\s*:", re.I)


def mentions_answer(line: str) -> bool:
    """Whether ``line`` mentions an answer marker anywhere ("answer", ``####``, ``\\boxed``): a loose superset
    of :func:`final_answer_line`, used to keep answer lines out of the rule labeller's evidence."""
    return bool(_ANSWER_MENTION_RE.search(line))


def starts_with_answer_label(line: str) -> bool:
    """Whether ``line`` opens with an ``Answer:`` / ``Final answer:`` label (markdown bold allowed): the paper's
    rule for the answer line of a released baseline chain of thought."""
    return bool(_ANSWER_LABEL_RE.match(line))


__all__ += ["mentions_answer", "starts_with_answer_label"]
