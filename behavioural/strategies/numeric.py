"""The strategies that edit numbers: the paper's ``arithmetic`` (n -> 2n+3), ``arithmetic_change`` (the
line's result moved by a seeded offset), ``operation_swap`` (one operator swapped, the result recomputed)
and ``premise_contradiction`` (a number of the question restated with another value).

    from behavioural.strategies.numeric import operation_swap
    operation_swap("3 + 4 + 5 = 12", question, 0)   # "3 + 4 - 5 = 2"
"""
from __future__ import annotations

import re
from decimal import Decimal
from fractions import Fraction

from behavioural.strategies.edit import NotApplicable, format_number, labelled, replace_span, seeded_rng, to_number
from loadbearing.answers.numbers import GROUPED, GROUPED_DIGITS, NUMBER_RE, PAPER_NUMBER_RE, PLAIN

_EQ = re.compile(rf"(?P<a>{PLAIN})\s*(?P<op>[+\-−*×x/÷])\s*(?P<b>{PLAIN})\s*=\s*\$?(?P<c>{GROUPED})")
_OPERAND = r"\$?" + GROUPED_DIGITS
_OP = r"[+\-\u2212*\u00d7x/\u00f7]"
_CHAIN = re.compile(
    rf"(?<![\w.,$])(?P<expr>-?{_OPERAND}(?:[ \t]*{_OP}[ \t]*{_OPERAND})+)[ \t]*=[ \t]*(?P<c>-?{_OPERAND})"
    r"(?![\d])"
)
_SWAP = {"+": "-", "-": "+", "\u2212": "+", "*": "/", "\u00d7": "\u00f7", "x": "\u00f7", "/": "*", "\u00f7": "\u00d7"}


@labelled
def arithmetic(line: str, question, seed: int):
    """The paper's numerical edit: the first eligible number n becomes 2n + 3 (n + 1 when that equals n).

    Eligible: after any step label, and not preceded by a letter, digit, '.' or ',' (so ``x2``, ``3.5``'s
    decimals and ``1,000``'s groups are never edited on their own). Decimal arithmetic as in the paper:
    ``$1,250.50`` -> ``$2504.00``.
    """
    m = PAPER_NUMBER_RE.search(line)
    if not m:
        return NotApplicable("no editable number in the line (after its step label)")
    value = Decimal(m.group().replace(",", ""))
    new = value * 2 + 3
    if new == value:
        new = value + 1
    return replace_span(line, m.start(), m.end(), str(new))


@labelled
def arithmetic_change(line: str, question, seed: int):
    """Change the line's result (the number after the last '=', else the last number) by a nonzero offset."""
    eqs = list(_EQ.finditer(line))
    if eqs:
        m = eqs[-1]
        start, end, value = m.start("c"), m.end("c"), to_number(m.group("c"))
    else:
        nums = list(NUMBER_RE.finditer(line))
        if not nums:
            return NotApplicable("no number in the line (after its step label)")
        m = nums[-1]
        start, end, value = m.start(), m.end(), to_number(m.group())
    r = seeded_rng("arithmetic_change", line, question, seed)
    offset = r.choice([1, 2, 3, 4, 5]) * (1 if value < 3 or r.random() < 0.5 else -1)
    return replace_span(line, start, end, format_number(value + offset))


def _evaluate(numbers: list[Fraction], ops: list[str]) -> Fraction | None:
    """Value of ``n0 op0 n1 op1 n2 ...`` with * and / before + and -; None on division by zero."""
    terms, signs = [numbers[0]], []
    for op, n in zip(ops, numbers[1:]):
        if op in "*\u00d7x":
            terms[-1] = terms[-1] * n
        elif op in "/\u00f7":
            if n == 0:
                return None
            terms[-1] = terms[-1] / n
        else:
            signs.append(1 if op == "+" else -1)
            terms.append(n)
    return terms[0] + sum(s * t for s, t in zip(signs, terms[1:]))


@labelled
def operation_swap(line: str, question, seed: int):
    """Swap one operator of the first calculation (+<->-, x<->/) and recompute its result for the whole chain.

    The last operator whose swap changes the value is swapped; the result keeps its ``$``. ``3 + 4 + 5 = 12``
    -> ``3 + 4 - 5 = 2``; ``9 * 2 = $18`` -> ``9 / 2 = $4.5``.
    """
    m = _CHAIN.search(line)
    if not m:
        return NotApplicable("no 'a op b = c' calculation in the line")
    expr = m.group("expr")
    toks = list(re.finditer(rf"(?P<num>{_OPERAND})|(?P<op>{_OP})", expr))
    negate = bool(toks) and toks[0].group("op") in ("-", "\u2212")
    toks = toks[1:] if negate else toks
    if len(toks) < 3 or len(toks) % 2 == 0 or any(bool(t.group("num")) != (i % 2 == 0) for i, t in enumerate(toks)):
        return NotApplicable("calculation not in 'a op b op c = d' form")
    numbers = [Fraction(Decimal(t.group("num").replace(",", "").replace("$", ""))) for t in toks[0::2]]
    numbers[0] = -numbers[0] if negate else numbers[0]
    ops = toks[1::2]
    c_text = m.group("c")
    old = to_number(c_text)
    for k in range(len(ops) - 1, -1, -1):
        new_ops = [o.group("op") for o in ops]
        new_ops[k] = _SWAP[new_ops[k]]
        value = _evaluate(numbers, [o.replace("\u2212", "-") for o in new_ops])
        if value is None or float(value) == old:
            continue
        out = replace_span(line, m.start("c"), m.end("c"), ("$" if "$" in c_text else "") + format_number(value))
        pos = m.start("expr") + ops[k].start()
        return replace_span(out, pos, pos + 1, new_ops[k])
    return NotApplicable("no swapped operation changes the result (or it divides by zero)")


def premise_contradiction(line: str, question, seed: int):
    """Restate a number given in the question with a different value (contradicting the premise)."""
    nums = [m for m in NUMBER_RE.finditer(getattr(question, "question", ""))]
    if not nums:
        return f"{line} However, the problem states the opposite of this."
    r = seeded_rng("premise_contradiction", line, question, seed)
    m = r.choice(nums)
    value = to_number(m.group())
    new = value + r.choice([1, 2, 3])
    return (f"{line} Note that the problem states {format_number(new)} where it says {m.group()}, so we use "
            f"{format_number(new)}.")
