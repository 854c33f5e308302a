"""Strict final-answer extraction and scoring (the package: its modules and the rules they follow).

The paper's pipeline fell back to "any letter" / "last number in the text" and counted unparsed answers as
wrong; both inflate error rates. This package only reads an answer from an *explicit final-answer
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

Modules, one idea each: :mod:`~loadbearing.answers.statements` (where a text states an answer, and whether the
statement is definitive), :mod:`~loadbearing.answers.lines` (the final-answer line and the stop rule),
:mod:`~loadbearing.answers.parse` (:func:`extract_answer` and the per-kind parsers) and
:mod:`~loadbearing.answers.scoring` (:func:`is_correct`, :func:`score`). Import the names from here.
"""

from __future__ import annotations

from loadbearing.answers.lines import (
    STOP_RULE,
    final_answer_line,
    has_final_answer_line,
    mentions_answer,
    split_so_the_answer,
    starts_with_answer_label,
)
from loadbearing.answers.parse import (
    BBH_MC_TASKS,
    BBH_NUMBER_TASKS,
    BBH_WORD_TASKS,
    PARSER_VERSION,
    extract_answer,
    normalize_number,
)
from loadbearing.answers.scoring import Score, as_question, choices_from_text, is_correct, score

__all__ = [
    "BBH_MC_TASKS", "BBH_NUMBER_TASKS", "BBH_WORD_TASKS", "PARSER_VERSION", "STOP_RULE", "Score",
    "as_question", "choices_from_text", "extract_answer",
    "final_answer_line", "has_final_answer_line", "is_correct", "mentions_answer", "split_so_the_answer",
    "normalize_number", "score",
    "starts_with_answer_label",
]
