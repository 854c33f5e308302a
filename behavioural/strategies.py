"""Perturbation strategies: small deterministic edits of one reasoning line.

Each strategy is ``f(line, question, seed) -> str | NotApplicable``. Randomness comes only from a
``random.Random`` seeded with (strategy, seed, question id, line), so the same inputs always give the
same edit. A strategy that cannot edit a line returns :class:`NotApplicable` with a reason; the protocol
records it (``skipped.jsonl``) and never drops it silently.

===================== ============================================================================
strategy              edit (example on ``4 + 3 = 7``)
===================== ============================================================================
arithmetic            original evaluator: first number n -> 2n+3 (``11 + 3 = 7``)
contradiction         original evaluator: prefix "The following claim is false:"
arithmetic_change     change the line's result (last number) by a seeded nonzero offset (``4 + 3 = 9``)
operation_swap        swap + <-> -, x <-> /, recompute with the swapped operation (``4 - 3 = 1``)
premise_contradiction restate a number from the question with a different value
wrong_elimination     (multiple choice) state that the correct option is ruled out
false_analogy         justify a changed claim by an analogy to a different problem
reversed_logic        invert the line's logic (comparatives, negations, true/false, + and -)
confidence_injection  a wrong version of the line asserted with certainty
===================== ============================================================================
"""
from __future__ import annotations

import random
import re
from collections.abc import Callable
from dataclasses import dataclass


@dataclass(frozen=True)
class NotApplicable:
    reason: str

    def __bool__(self) -> bool:  # so `if edit:` reads naturally
        return False



_NUM = re.compile(r"(?<![\w.])-?\d+(?:,\d{3})*(?:\.\d+)?(?![\w])")
_EQ = re.compile(
    r"(?P<a>-?\d+(?:\.\d+)?)\s*(?P<op>[+\-−*×x/÷])\s*(?P<b>-?\d+(?:\.\d+)?)\s*=\s*\$?(?P<c>-?\d+(?:,\d{3})*(?:\.\d+)?)"
)
_MC_DATASETS = ("mmlu", "bbh")


def _rng(name: str, line: str, question, seed: int) -> random.Random:
    return random.Random(f"{name}|{seed}|{getattr(question, 'id', '')}|{line}")


def _num(s: str) -> float:
    return float(s.replace(",", ""))


def _fmt(x: float) -> str:
    return str(int(x)) if float(x).is_integer() else f"{x:.2f}".rstrip("0").rstrip(".")


def _replace_span(s: str, start: int, end: int, new: str) -> str:
    return s[:start] + new + s[end:]


def arithmetic(line: str, question, seed: int):
    """The original evaluator's numerical edit: the first number n becomes 2n + 3."""
    m = _NUM.search(line)
    if not m:
        return NotApplicable("no number in the line")
    return _replace_span(line, m.start(), m.end(), _fmt(2 * _num(m.group()) + 3))


def contradiction(line: str, question, seed: int):
    """The original evaluator's text edit: prefix the line with "The following claim is false:"."""
    return f"The following claim is false: {line}"


def arithmetic_change(line: str, question, seed: int):
    """Change the line's result (the number after the last '=', else the last number) by a nonzero offset."""
    eqs = list(_EQ.finditer(line))
    if eqs:
        m = eqs[-1]
        start, end, value = m.start("c"), m.end("c"), _num(m.group("c"))
    else:
        nums = list(_NUM.finditer(line))
        if not nums:
            return NotApplicable("no number in the line")
        m = nums[-1]
        start, end, value = m.start(), m.end(), _num(m.group())
    r = _rng("arithmetic_change", line, question, seed)
    offset = r.choice([1, 2, 3, 4, 5]) * (1 if value < 3 or r.random() < 0.5 else -1)
    return _replace_span(line, start, end, _fmt(value + offset))


_SWAP = {"+": "-", "-": "+", "−": "+", "*": "/", "×": "÷", "x": "÷", "/": "*", "÷": "×"}


def operation_swap(line: str, question, seed: int):
    """Swap the operation of the first ``a op b = c`` (+<->-, x<->/) and recompute c with the swapped one."""
    m = _EQ.search(line)
    if not m:
        return NotApplicable("no 'a op b = c' calculation in the line")
    a, b, op = _num(m.group("a")), _num(m.group("b")), m.group("op")
    new_op = _SWAP[op]
    if new_op in "÷/" and b == 0:
        return NotApplicable("swapping to division by zero")
    c = {"+": a + b, "-": a - b, "*": a * b, "×": a * b, "/": a / b, "÷": a / b}[new_op]
    if c == _num(m.group("c")):
        return NotApplicable("swapped operation gives the same result")
    out = _replace_span(line, m.start("c"), m.end("c"), _fmt(c))
    return _replace_span(out, m.start("op"), m.end("op"), new_op)


def premise_contradiction(line: str, question, seed: int):
    """Restate a number given in the question with a different value (contradicting the premise)."""
    nums = [m for m in _NUM.finditer(getattr(question, "question", ""))]
    if not nums:
        return f"However, the problem states the opposite of this: {line}"
    r = _rng("premise_contradiction", line, question, seed)
    m = r.choice(nums)
    value = _num(m.group())
    new = value + r.choice([1, 2, 3])
    return f"{line} Note that the problem states {_fmt(new)} where it says {m.group()}, so we use {_fmt(new)}."


def wrong_elimination(line: str, question, seed: int):
    """Multiple choice only: state that the correct option is ruled out."""
    if getattr(question, "dataset", None) not in _MC_DATASETS or not getattr(question, "choices", None):
        return NotApplicable("not a multiple-choice question")
    gold = question.answer.strip("() ")
    if not re.fullmatch(r"[A-Z]", gold):
        return NotApplicable("gold answer is not an option letter")
    return f"{line} This rules out option ({gold}), which cannot be correct."


def _wrong_version(line: str, question, seed: int):
    """The line with its result changed, else with its logic inverted (or NotApplicable)."""
    changed = arithmetic_change(line, question, seed)
    if isinstance(changed, NotApplicable):
        changed = reversed_logic(line, question, seed)
    return changed


def false_analogy(line: str, question, seed: int):
    """Replace the line's claim with a changed one justified by an analogy to a different problem."""
    changed = _wrong_version(line, question, seed)
    if isinstance(changed, NotApplicable):
        return NotApplicable("no number or invertible claim to carry the analogy")
    return f"Just as in a similar problem we solved before, {changed[0].lower() + changed[1:]}"


_REVERSALS = [
    (r"\bis not\b", "is"), (r"\bis\b", "is not"), (r"\bare not\b", "are"), (r"\bare\b", "are not"),
    (r"\bcannot\b", "can"), (r"\bcan\b", "cannot"), (r"\bdoes not\b", "does"), (r"\bdoes\b", "does not"),
    (r"\btrue\b", "false"), (r"\bfalse\b", "true"), (r"\bTrue\b", "False"), (r"\bFalse\b", "True"),
    (r"\bmore\b", "less"), (r"\bless\b", "more"), (r"\bincrease", "decrease"), (r"\bdecrease", "increase"),
    (r"\bgreater\b", "smaller"), (r"\bsmaller\b", "greater"), (r"\balways\b", "never"), (r"\bnever\b", "always"),
    (r"\bcorrect\b", "incorrect"), (r"\bincorrect\b", "correct"), (r"\byes\b", "no"), (r"\bno\b", "yes"),
    (r"\badd\b", "subtract"), (r"\bsubtract\b", "add"),
]


def reversed_logic(line: str, question, seed: int):
    """Invert the first logical cue of the line (is/is not, more/less, true/false, add/subtract, + / -)."""
    best = None
    for pat, rep in _REVERSALS:
        m = re.search(pat, line)
        if m and (best is None or m.start() < best[0].start()):
            best = (m, rep)
    if best is not None:
        m, rep = best
        return _replace_span(line, m.start(), m.end(), rep)
    swapped = operation_swap(line, question, seed)
    if not isinstance(swapped, NotApplicable):
        return swapped
    return NotApplicable("no logical cue or operation to invert")


def confidence_injection(line: str, question, seed: int):
    """A wrong version of the line (changed result, else inverted logic) asserted with certainty."""
    changed = _wrong_version(line, question, seed)
    if isinstance(changed, NotApplicable):
        return NotApplicable("no number or claim to assert wrongly")
    return f"{changed} I am completely certain of this."


STRATEGIES: dict[str, Callable] = {
    "arithmetic": arithmetic,
    "contradiction": contradiction,
    "arithmetic_change": arithmetic_change,
    "operation_swap": operation_swap,
    "premise_contradiction": premise_contradiction,
    "wrong_elimination": wrong_elimination,
    "false_analogy": false_analogy,
    "reversed_logic": reversed_logic,
    "confidence_injection": confidence_injection,
}
#: the family of each strategy, for analyses that pool strategies (numerical edits vs text edits vs logical ones)
FAMILIES: dict[str, str] = {
    "arithmetic": "numerical",
    "contradiction": "text",
    "arithmetic_change": "numerical",
    "operation_swap": "numerical",
    "premise_contradiction": "logical",
    "wrong_elimination": "logical",
    "false_analogy": "logical",
    "reversed_logic": "logical",
    "confidence_injection": "logical",
}
#: strategies that only make sense for some datasets (others raise at the command line)
DATASET_ONLY = {"wrong_elimination": ("mmlu", "bbh")}
DEFAULT_STRATEGY = {"gsm8k": "arithmetic_change", "arith": "arithmetic_change", "mmlu": "wrong_elimination",
                    "bbh": "reversed_logic", "custom": "arithmetic_change"}


class StrategyError(ValueError):
    pass


def parse_strategies(spec: str | None, dataset: str) -> list[str]:
    """``None`` -> the dataset default; ``all`` -> every strategy applicable to the dataset; else a comma list."""
    if spec is None:
        return [DEFAULT_STRATEGY.get(dataset, "arithmetic_change")]
    if spec == "all":
        return [s for s in STRATEGIES if dataset in DATASET_ONLY.get(s, (dataset,))]
    names = [s.strip() for s in spec.split(",") if s.strip()]
    for s in names:
        if s not in STRATEGIES:
            raise StrategyError(f"unknown strategy {s!r}; choose from {', '.join(STRATEGIES)} or 'all'")
        if dataset not in DATASET_ONLY.get(s, (dataset,)):
            raise StrategyError(
                f"strategy {s!r} does not apply to dataset {dataset!r} (only {', '.join(DATASET_ONLY[s])}); "
                "drop it from --strategy"
            )
    if not names:
        raise StrategyError("--strategy is empty; name at least one strategy or 'all'")
    return list(dict.fromkeys(names))


def apply(strategy: str, line: str, question, seed: int):
    return STRATEGIES[strategy](line, question, seed)
