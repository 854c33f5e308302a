"""A number in text: every grammar the toolkit reads numbers with, named for what it is for, in one module.

    from loadbearing.answers.numbers import NUMBER_RE
    [m.group() for m in NUMBER_RE.finditer("Step 2: 1,250 - 3.5 = 1246.5")]   # ['2', '1,250', '3.5', '1246.5']

The grammars differ on purpose (each caller's behaviour is pinned by tests/test_answers_numbers.py):

* :data:`ANSWER_NUMBER_RE`: the number of a final answer (:func:`loadbearing.answers.normalize_number`):
  a sign (``-``, ``- `` or after a ``$``), ``$``, strictly grouped thousands or plain digits, decimals or a
  bare ``.5``; not inside a word or after a ``.``, not followed by a digit.
* :data:`NUMBER_RE`: a number of a reasoning line (the edit strategies, the uptake rule): ``-3``,
  ``1,250``, ``2.5``; not part of a word or of a decimal (nothing word-like or ``.`` before, no word
  character after).
* :data:`PAPER_NUMBER_RE`: the number the paper's ``arithmetic`` edit changes: ``+``/``-`` sign, strictly
  grouped thousands or plain digits, decimals; not after a word character, ``.`` or ``,``, not followed by a
  word character or by ``.``/``,`` and a digit (so ``1,000``'s groups and ``3.5``'s decimals are never
  edited on their own).
* :data:`NUMBER_TOKEN`: a number token of the rule labeller (a pattern string that it composes into larger
  patterns): strictly grouped thousands or plain digits, decimals; not after a word character or ``.``, not
  followed by a digit.
* :data:`PLAIN_NUMBER_RE`: digits with decimals and a minus, anywhere (inside words too): the paraphrase
  test's "every number kept" check compares these.
* :data:`NUMBER_OR_OPERATOR_RE`: a loose number (commas anywhere) or an arithmetic operator: the paper
  import's "only numbers or operators changed" check masks these.

The fragments (:data:`PLAIN`, :data:`GROUPED_DIGITS`, :data:`GROUPED`, :data:`LOOSE`) build the equation
patterns of the strategies and the labeller, so that a number inside an equation is one of these too.
"""
from __future__ import annotations

import re

__all__ = ["ANSWER_NUMBER_RE", "GROUPED", "GROUPED_DIGITS", "LOOSE", "NUMBER_OR_OPERATOR_RE", "NUMBER_RE",
           "NUMBER_TOKEN", "PAPER_NUMBER", "PAPER_NUMBER_RE", "PLAIN", "PLAIN_NUMBER_RE", "STRICT_GROUPED"]

#: digits, optional decimals, optional minus: ``-3``, ``2.5``
PLAIN = r"-?\d+(?:\.\d+)?"
#: digits with optional thousands groups and decimals, unsigned: ``1,250.5``
GROUPED_DIGITS = r"\d+(?:,\d{3})*(?:\.\d+)?"
#: :data:`GROUPED_DIGITS` with an optional minus
GROUPED = r"-?" + GROUPED_DIGITS
#: strictly grouped thousands (at least one group), optional decimals and minus: ``-1,250.5``
STRICT_GROUPED = r"-?\d{1,3}(?:,\d{3})+(?:\.\d+)?"
#: a digit then digits and commas anywhere, optional decimals and minus: ``12,34``
LOOSE = r"-?\d[\d,]*(?:\.\d+)?"
#: the paper's number: optional sign, thousands commas, decimals
PAPER_NUMBER = r"[+-]?(?:\d{1,3}(?:,\d{3})+|\d+)(?:\.\d+)?"

ANSWER_NUMBER_RE = re.compile(
    r"(?<![\w.])(?P<sign>-\s?)?\$?\s?(?P<sign2>-)?"
    r"(?P<num>\d{1,3}(?:,\d{3})+(?:\.\d+)?|\d+(?:\.\d+)?|\.\d+)(?![\d])"
)
NUMBER_RE = re.compile(rf"(?<![\w.]){GROUPED}(?![\w])")
PAPER_NUMBER_RE = re.compile(rf"(?<![\w.,]){PAPER_NUMBER}(?!\w|[.,]\d)")
NUMBER_TOKEN = rf"(?<![\w.]){STRICT_GROUPED}(?![\d])|(?<![\w.]){PLAIN}(?![\d])"
PLAIN_NUMBER_RE = re.compile(PLAIN)
NUMBER_OR_OPERATOR_RE = re.compile(LOOSE + r"|[-+*/×÷]")
