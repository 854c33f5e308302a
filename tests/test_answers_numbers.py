"""The number-in-text grammars of loadbearing.answers.numbers: what each one reads, and that each caller uses its own."""
from __future__ import annotations

import importlib
import re

import pytest

from loadbearing.answers import normalize_number
from loadbearing.answers.numbers import (
    ANSWER_NUMBER_RE,
    NUMBER_OR_OPERATOR_RE,
    NUMBER_RE,
    NUMBER_TOKEN,
    PAPER_NUMBER_RE,
    PLAIN_NUMBER_RE,
)

TEXT = "x2 has 1,250.5 - 3 = 1247.5, then -4 and +7; 12,34 v3.5 or 5kg, 1,2345"


def _all(rx, text=TEXT):
    return [m.group() for m in re.compile(rx).finditer(text)]


def test_each_grammar_reads_what_its_docstring_says():
    # a line's numbers: not inside a word ("x2", "v3.5", "5kg"); loose groups split ("12,34", "1,2345")
    assert _all(NUMBER_RE) == ["1,250.5", "3", "1247.5", "-4", "7", "12", "34", "1", "2345"]
    # the paper's: "+7" signed, and a number touching ",digit" / ".digit" is never edited on its own
    assert _all(PAPER_NUMBER_RE) == ["1,250.5", "3", "1247.5", "-4", "+7"]
    # the labeller's token: a word may follow it ("5kg" -> 5)
    assert _all(NUMBER_TOKEN) == ["1,250.5", "3", "1247.5", "-4", "7", "12", "34", "5", "1", "2345"]
    # the paraphrase check's: digits anywhere, groups not joined
    assert _all(PLAIN_NUMBER_RE) == ["2", "1", "250.5", "3", "1247.5", "-4", "7", "12", "34", "3.5", "5", "1", "2345"]
    assert NUMBER_OR_OPERATOR_RE.sub("#", "3 + 4 = 1,007") == "# # # = #"
    assert [m.group("num") for m in ANSWER_NUMBER_RE.finditer("$1,000.00 or - 3 or .5 v2")] == ["1,000.00", "3", ".5"]
    assert normalize_number("$1,000.00") == "1000" and normalize_number("−3") == "-3"


@pytest.mark.parametrize("module, name, grammar", [
    ("behavioural.strategies.numeric", "NUMBER_RE", NUMBER_RE),
    ("behavioural.strategies.numeric", "PAPER_NUMBER_RE", PAPER_NUMBER_RE),
    ("behavioural.gradient.uptake", "NUMBER_RE", NUMBER_RE),
    ("behavioural.causal.paraphrase", "PLAIN_NUMBER_RE", PLAIN_NUMBER_RE),
    ("behavioural.paper_import.convert", "NUMBER_OR_OPERATOR_RE", NUMBER_OR_OPERATOR_RE),
    ("behavioural.labels.rule", "NUMBER_TOKEN", NUMBER_TOKEN),
    ("loadbearing.answers.parse", "ANSWER_NUMBER_RE", ANSWER_NUMBER_RE),
])
def test_each_caller_uses_the_one_grammar_object(module, name, grammar):
    assert getattr(importlib.import_module(module), name) is grammar


def test_callers_behave_as_before():
    from behavioural.causal.paraphrase import numbers
    from behavioural.gradient.uptake import _numbers
    from behavioural.labels.rule import _numbers as rule_numbers
    from behavioural.strategies.numeric import arithmetic

    assert numbers("a2 = 3.5, -1") == ["-1", "2", "3.5"]
    assert _numbers("1,250 and 2.50 but x3") == {"1250", "2.5"}
    assert rule_numbers("so 1,250 - 3 = 1247") == ["1250", "3", "1247"]
    assert arithmetic("Step 2: $1,250.50 - 3 = 1247.50", None, 0).endswith("$2504.00 - 3 = 1247.50")
