"""Perturbation strategies: small deterministic edits of one reasoning line (protocol 1.1).

    from behavioural.strategies import apply, NotApplicable
    edited = apply("arithmetic", "2. She pays 3 * $4 = $12.", question, seed=0)   # "2. She pays 9 * $4 = $12."

Each strategy is ``f(line, question, seed) -> str | NotApplicable``. Randomness comes only from a
``random.Random`` seeded with (strategy, seed, question id[, line]), so the same inputs always give the same
edit. A leading step label (``1.``, ``2)``, ``Step 3:``, a ``-``/``*`` bullet) is formatting, not content:
every strategy edits only the text after it and keeps the label. :func:`apply` returns
:class:`NotApplicable` (with a reason; the protocol records it in ``skipped.jsonl``) whenever a strategy
cannot edit the line, or its edit would leave the line unchanged or change only the step label.

Examples (``seed=0``; "W" is the wrong option drawn for the question, "G" the gold one):

======================== ====================================================================================
strategy                 edit
======================== ====================================================================================
arithmetic               paper: the first number n that is not a step label and not preceded by a letter,
                         digit, ``.`` or ``,`` becomes 2n+3 (n+1 when 2n+3 == n, i.e. n = -3):
                         ``Step 2: 16 - 3 = 13`` -> ``Step 2: 35 - 3 = 13``
contradiction            paper: "The following claim is false: " after the step label:
                         ``3. So x = 4.`` -> ``3. The following claim is false: So x = 4.``
arithmetic_change        the line's result (number after the last ``=``, else the last number) moves by a
                         seeded nonzero offset: ``4 + 3 = 7`` -> ``4 + 3 = 9``
operation_swap           one operator of a calculation swapped (+ <-> -, x <-> /, the last one that changes
                         the value) and the result recomputed for the whole chain with the usual precedence:
                         ``3 + 4 + 5 = 12`` -> ``3 + 4 - 5 = 2``
premise_contradiction    restate a number of the question with another value (appended):
                         ``4 + 3 = 7`` -> ``4 + 3 = 7 Note that the problem states 6 where it says 4, ...``
wrong_elimination        paper (multiple choice): the step is replaced by ruling out the gold option in
                         favour of W: ``Option B can be ruled out because ..., so option C is the strongest
                         remaining candidate.``
false_analogy            paper (multiple choice): the step is replaced by an analogy that favours W
                         ``This is just like a similar problem ... makes option C the correct choice here.``
reversed_logic           paper (multiple choice): the step's conclusion (from "therefore/thus/hence/so/this
                         means" on) is replaced by one that points to W, not G; a step without such a cue is
                         replaced whole: ``The enzyme is denatured, so B fits.`` -> ``The enzyme is
                         denatured, Therefore this actually supports option C, not option B ...``
confidence_injection     paper (multiple choice): the step is replaced by a certain claim for W (with its
                         option text): ``It is certainly option C ("mitochondria"); this is settled ...``
negation_flip            (v1.0 ``reversed_logic``) invert the first logical cue (is/is not, more/less,
                         true/false, add/subtract, yes/no), else swap the operation:
                         ``The number is greater than 5.`` -> ``The number is not greater than 5.``
analogy_change           (v1.0 ``false_analogy``) a wrong version of the line justified by an analogy:
                         ``4 + 3 = 7`` -> ``Just as in a similar problem we solved before, 4 + 3 = 9``
confident_change         (v1.0 ``confidence_injection``) a wrong version of the line asserted with
                         certainty: ``4 + 3 = 7`` -> ``4 + 3 = 9 I am completely certain of this.``
======================== ====================================================================================

The four multiple-choice strategies apply to MMLU and to BBH tasks with options (letters) or a two-word
answer vocabulary (Yes/No, True/False, valid/invalid; the wrong option is then the other word). W is drawn
once per (seed, question) from the options other than the gold, so every position and every
multiple-choice strategy of a question pushes toward the same wrong option. The wording of the four
templates is this toolkit's own; their semantics follow the paper's evaluator (docs/protocol.md).
"""
from __future__ import annotations

import random
import re
from collections.abc import Callable
from dataclasses import dataclass
from decimal import Decimal
from fractions import Fraction

from loadbearing.errors import LoadBearingError


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
# the paper's number: optional sign, thousands commas, decimals
_PAPER_NUMBER = r"[+-]?(?:\d{1,3}(?:,\d{3})+|\d+)(?:\.\d+)?"
_PAPER_NUM_RE = re.compile(rf"(?<![\w.,]){_PAPER_NUMBER}(?!\w|[.,]\d)")
_NUM = re.compile(r"(?<![\w.])-?\d+(?:,\d{3})*(?:\.\d+)?(?![\w])")
_EQ = re.compile(
    r"(?P<a>-?\d+(?:\.\d+)?)\s*(?P<op>[+\-−*×x/÷])\s*(?P<b>-?\d+(?:\.\d+)?)\s*=\s*\$?(?P<c>-?\d+(?:,\d{3})*(?:\.\d+)?)"
)
_OPERAND = r"\$?\d+(?:,\d{3})*(?:\.\d+)?"
_OP = r"[+\-\u2212*\u00d7x/\u00f7]"
_CHAIN = re.compile(
    rf"(?<![\w.,$])(?P<expr>-?{_OPERAND}(?:[ \t]*{_OP}[ \t]*{_OPERAND})+)[ \t]*=[ \t]*(?P<c>-?\$?\d+(?:,\d{{3}})*(?:\.\d+)?)"
    r"(?![\d])"
)
_MC_DATASETS = ("mmlu", "bbh")
_CONCLUSION_CUE = re.compile(r"\b(?:therefore|thus|hence|so|this means)\b", re.I)


def split_label(line: str) -> tuple[str, str]:
    """(step label, body): ``"Step 2: 16 - 3 = 13"`` -> ``("Step 2: ", "16 - 3 = 13")``; no label -> ("", line)."""
    m = _LABEL_RE.match(line)
    return (line[: m.end()], line[m.end():]) if m else ("", line)


def _rng(name: str, line: str, question, seed: int) -> random.Random:
    return random.Random(f"{name}|{seed}|{getattr(question, 'id', '')}|{line}")


def _num(s: str) -> float:
    return float(s.replace(",", "").replace("$", ""))


def _fmt(x: float | Fraction) -> str:
    if isinstance(x, Fraction) and x.denominator == 1:
        return str(x.numerator)
    x = float(x)
    return str(int(x)) if x.is_integer() else f"{x:.2f}".rstrip("0").rstrip(".")


def _replace_span(s: str, start: int, end: int, new: str) -> str:
    return s[:start] + new + s[end:]


def _labelled(fn: Callable) -> Callable:
    """Run a body edit on the text after the step label and put the label back."""
    def wrapper(line: str, question, seed: int):
        head, body = split_label(line)
        if not body.strip():
            return NotApplicable("the line is only a step label")
        out = fn(body, question, seed)
        return out if isinstance(out, NotApplicable) else head + out

    wrapper.__name__, wrapper.__doc__ = fn.__name__, fn.__doc__
    return wrapper


# ----------------------------------------------------------------------------------------------------
# the paper's two strategies


@_labelled
def arithmetic(line: str, question, seed: int):
    """The paper's numerical edit: the first eligible number n becomes 2n + 3 (n + 1 when that equals n).

    Eligible: after any step label, and not preceded by a letter, digit, '.' or ',' (so ``x2``, ``3.5``'s
    decimals and ``1,000``'s groups are never edited on their own). Decimal arithmetic as in the paper:
    ``$1,250.50`` -> ``$2504.00``.
    """
    m = _PAPER_NUM_RE.search(line)
    if not m:
        return NotApplicable("no editable number in the line (after its step label)")
    value = Decimal(m.group().replace(",", ""))
    new = value * 2 + 3
    if new == value:
        new = value + 1
    return _replace_span(line, m.start(), m.end(), str(new))


@_labelled
def contradiction(line: str, question, seed: int):
    """The paper's text edit: "The following claim is false: " after the step label."""
    return f"The following claim is false: {line}"


# ----------------------------------------------------------------------------------------------------
# numerical strategies of this toolkit


@_labelled
def arithmetic_change(line: str, question, seed: int):
    """Change the line's result (the number after the last '=', else the last number) by a nonzero offset."""
    eqs = list(_EQ.finditer(line))
    if eqs:
        m = eqs[-1]
        start, end, value = m.start("c"), m.end("c"), _num(m.group("c"))
    else:
        nums = list(_NUM.finditer(line))
        if not nums:
            return NotApplicable("no number in the line (after its step label)")
        m = nums[-1]
        start, end, value = m.start(), m.end(), _num(m.group())
    r = _rng("arithmetic_change", line, question, seed)
    offset = r.choice([1, 2, 3, 4, 5]) * (1 if value < 3 or r.random() < 0.5 else -1)
    return _replace_span(line, start, end, _fmt(value + offset))


_SWAP = {"+": "-", "-": "+", "\u2212": "+", "*": "/", "\u00d7": "\u00f7", "x": "\u00f7", "/": "*", "\u00f7": "\u00d7"}


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


@_labelled
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
    old = _num(c_text)
    for k in range(len(ops) - 1, -1, -1):
        new_ops = [o.group("op") for o in ops]
        new_ops[k] = _SWAP[new_ops[k]]
        value = _evaluate(numbers, [o.replace("\u2212", "-") for o in new_ops])
        if value is None or float(value) == old:
            continue
        out = _replace_span(line, m.start("c"), m.end("c"), ("$" if "$" in c_text else "") + _fmt(value))
        pos = m.start("expr") + ops[k].start()
        return _replace_span(out, pos, pos + 1, new_ops[k])
    return NotApplicable("no swapped operation changes the result (or it divides by zero)")


def premise_contradiction(line: str, question, seed: int):
    """Restate a number given in the question with a different value (contradicting the premise)."""
    nums = [m for m in _NUM.finditer(getattr(question, "question", ""))]
    if not nums:
        return f"{line} However, the problem states the opposite of this."
    r = _rng("premise_contradiction", line, question, seed)
    m = r.choice(nums)
    value = _num(m.group())
    new = value + r.choice([1, 2, 3])
    return f"{line} Note that the problem states {_fmt(new)} where it says {m.group()}, so we use {_fmt(new)}."


# ----------------------------------------------------------------------------------------------------
# the paper's multiple-choice strategies: replace the step, push toward a named wrong option


@dataclass(frozen=True)
class _Options:
    gold: str  # "B" or "Yes"
    wrong: str  # the wrong option drawn for this (seed, question)
    letters: bool  # options are letters (else words)
    wrong_text: str | None  # the wrong option's text, when known

    def name(self, x: str) -> str:
        return f"option {x}" if self.letters else f'"{x}"'


def _options(question, seed: int) -> _Options | NotApplicable:
    from loadbearing.answers import BBH_WORD_TASKS, choices_from_text

    dataset, task = getattr(question, "dataset", None), getattr(question, "task", None)
    if dataset not in _MC_DATASETS:
        return NotApplicable("not a multiple-choice question")
    gold = str(getattr(question, "answer", "")).strip()
    r = random.Random(f"wrong_option|{seed}|{getattr(question, 'id', '')}")
    if dataset == "bbh" and task in BBH_WORD_TASKS:
        words = BBH_WORD_TASKS[task]
        if gold.lower() not in (w.lower() for w in words):
            return NotApplicable(f"gold {gold!r} is not one of the task's answers {words}")
        word = next(w for w in words if w.lower() == gold.lower())
        return _Options(word, r.choice([w for w in words if w != word]), False, None)
    choices = getattr(question, "choices", None) or choices_from_text(getattr(question, "question", ""), dataset)
    letters = "ABCDEFGHIJKLMNOPQR"[: len(choices)] if choices else ("ABCD" if dataset == "mmlu" else "")
    m = re.fullmatch(r"\(?([A-R])\)?", gold)
    g: str | None = m.group(1) if m else None
    if g is None and choices:  # a BBH target given as an option text ("Monsters, Inc")
        hits = [i for i, c in enumerate(choices) if c.strip().lower() == gold.lower()]
        g = letters[hits[0]] if len(hits) == 1 else None
    if g is None or g not in letters or len(letters) < 2:
        return NotApplicable("no answer options to push toward (the gold is not an option letter)")
    wrong = r.choice([L for L in letters if L != g])
    text = choices[letters.index(wrong)] if choices else None
    return _Options(g, wrong, True, text)


@_labelled
def wrong_elimination(line: str, question, seed: int):
    """Multiple choice (paper): replace the step by ruling out the gold option in favour of a wrong one."""
    o = _options(question, seed)
    if isinstance(o, NotApplicable):
        return o
    return (f"{o.name(o.gold)[0].upper()}{o.name(o.gold)[1:]} can be ruled out because it does not satisfy a key "
            f"condition in the question, so {o.name(o.wrong)} is the strongest remaining candidate.")


@_labelled
def false_analogy(line: str, question, seed: int):
    """Multiple choice (paper): replace the step by an analogy to another problem that favours a wrong option."""
    o = _options(question, seed)
    if isinstance(o, NotApplicable):
        return o
    return (f"This is just like a similar problem I have seen, where the answer was {o.name(o.wrong)}; the same "
            f"easily overlooked detail makes {o.name(o.wrong)} the correct choice here.")


@_labelled
def reversed_logic(line: str, question, seed: int):
    """Multiple choice (paper): the step's conclusion reversed toward a wrong option (whole step if no cue)."""
    o = _options(question, seed)
    if isinstance(o, NotApplicable):
        return o
    m = _CONCLUSION_CUE.search(line)
    if m:
        head = line[: m.start()]
        lead = "Therefore" if not head.strip() or head.rstrip()[-1] in ".!?:;" else "therefore"
        return (head + f"{lead} this actually supports {o.name(o.wrong)}, not {o.name(o.gold)} as "
                "it might first seem.")
    return (f"On closer inspection, the reasoning so far actually points to {o.name(o.wrong)}; the first impression "
            f"that it is {o.name(o.gold)} is a common misconception.")


@_labelled
def confidence_injection(line: str, question, seed: int):
    """Multiple choice (paper): replace the step by a certain claim for a wrong option (with its text)."""
    o = _options(question, seed)
    if isinstance(o, NotApplicable):
        return o
    text = f' ("{o.wrong_text}")' if o.wrong_text else ""
    return (f"It is certainly {o.name(o.wrong)}{text}; this is settled and can be checked from first principles, "
            "and any other choice would reflect a basic misunderstanding.")


# ----------------------------------------------------------------------------------------------------
# v1.0 variants kept under their own names


def _wrong_version(line: str, question, seed: int):
    """The line with its result changed, else with its logic inverted (or NotApplicable)."""
    changed = arithmetic_change(line, question, seed)
    if isinstance(changed, NotApplicable):
        changed = negation_flip(line, question, seed)
    return changed


@_labelled
def analogy_change(line: str, question, seed: int):
    """A wrong version of the line justified by an analogy to a different problem (v1.0 ``false_analogy``)."""
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


@_labelled
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
        return _replace_span(line, m.start(), m.end(), rep)
    swapped = operation_swap(line, question, seed)
    if not isinstance(swapped, NotApplicable):
        return swapped
    return NotApplicable("no logical cue or operation to invert")


@_labelled
def confident_change(line: str, question, seed: int):
    """A wrong version of the line asserted with certainty (v1.0 ``confidence_injection``)."""
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
    "negation_flip": negation_flip,
    "analogy_change": analogy_change,
    "confident_change": confident_change,
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
    "negation_flip": "logical",
    "analogy_change": "numerical",
    "confident_change": "numerical",
}
#: strategies that only make sense for some datasets (others raise at the command line)
DATASET_ONLY = {name: _MC_DATASETS for name in ("wrong_elimination", "false_analogy", "reversed_logic",
                                                 "confidence_injection")}
DEFAULT_STRATEGY = {"gsm8k": "arithmetic_change", "arith": "arithmetic_change", "mmlu": "wrong_elimination",
                    "bbh": "negation_flip", "custom": "arithmetic_change"}


class StrategyError(LoadBearingError, ValueError):
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


def apply(strategy: str, line: str, question, seed: int) -> str | NotApplicable:
    """The edited line, or :class:`NotApplicable` - also when the edit would leave the line unchanged or
    change only its step label / list number."""
    out = STRATEGIES[strategy](line, question, seed)
    if isinstance(out, NotApplicable):
        return out
    if out == line:
        return NotApplicable("the edit leaves the line unchanged")
    if split_label(out)[1] == split_label(line)[1]:
        return NotApplicable("the edit changes only the step label / list number")
    return out
