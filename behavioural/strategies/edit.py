"""What every perturbation strategy shares: the not-applicable result, the step label, the seeded draw and
number formatting.

    from behavioural.strategies.edit import split_label, labelled
    split_label("Step 2: 16 - 3 = 13")   # ("Step 2: ", "16 - 3 = 13")

A leading step label (``1.``, ``2)``, ``Step 3:``, a ``-``/``*`` bullet) is formatting, not content: a
strategy decorated with :func:`labelled` edits only the text after it and keeps the label.
"""
from __future__ import annotations

import random
import re
from collections.abc import Callable
from dataclasses import dataclass
from fractions import Fraction

from loadbearing.answers.numbers import NUMBER_RE  # noqa: F401  (its old home: a line's number, now in answers.numbers)


@dataclass(frozen=True)
class NotApplicable:
    reason: str

    def __bool__(self) -> bool:  # so `if edit:` reads naturally
        return False


# a leading step label: "1. ", "2) ", "3: ", "Step 4: ", "**Step 5:** ", or a bullet "- " / "* " / "• "
_LABEL_RE = re.compile(
    r"^[ \t]*(?:(?:\*\*)?(?:Step[ \t]+)?\d+[.):](?:\*\*)?(?:[ \t]+|$)|(?:\*\*)?Step[ \t]+\d+(?:\*\*)?[ \t]*[-\u2013\u2014:][ \t]*"
    r"(?:\*\*)?[ \t]*|[-*\u2022][ \t]+)",
    re.I,
)


def split_label(line: str) -> tuple[str, str]:
    """(step label, body): ``"Step 2: 16 - 3 = 13"`` -> ``("Step 2: ", "16 - 3 = 13")``; no label -> ("", line)."""
    m = _LABEL_RE.match(line)
    return (line[: m.end()], line[m.end():]) if m else ("", line)


def seeded_rng(name: str, line: str, question, seed: int) -> random.Random:
    """The strategy's only source of randomness, seeded with (strategy, seed, question id, line)."""
    return random.Random(f"{name}|{seed}|{getattr(question, 'id', '')}|{line}")


def to_number(s: str) -> float:
    return float(s.replace(",", "").replace("$", ""))


def format_number(x: float | Fraction) -> str:
    """``3.0`` -> ``"3"``, ``2.50`` -> ``"2.5"`` (two decimals at most)."""
    if isinstance(x, Fraction) and x.denominator == 1:
        return str(x.numerator)
    x = float(x)
    return str(int(x)) if x.is_integer() else f"{x:.2f}".rstrip("0").rstrip(".")


def replace_span(s: str, start: int, end: int, new: str) -> str:
    return s[:start] + new + s[end:]


def labelled(fn: Callable) -> Callable:
    """Run a body edit on the text after the step label and put the label back."""
    def wrapper(line: str, question, seed: int):
        head, body = split_label(line)
        if not body.strip():
            return NotApplicable("the line is only a step label")
        out = fn(body, question, seed)
        return out if isinstance(out, NotApplicable) else head + out

    wrapper.__name__, wrapper.__doc__ = fn.__name__, fn.__doc__
    return wrapper
