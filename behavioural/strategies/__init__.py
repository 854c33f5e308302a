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

Modules: :mod:`~behavioural.strategies.edit` (the step label, the seeded draw, :class:`NotApplicable`),
:mod:`~behavioural.strategies.numeric` (number edits), :mod:`~behavioural.strategies.text` (word edits),
:mod:`~behavioural.strategies.choice` (multiple-choice edits); this module holds the registry, the
families, :func:`parse_strategies` and :func:`apply`.
"""
from __future__ import annotations

from collections.abc import Callable

from behavioural.strategies.choice import (
    MC_DATASETS,
    confidence_injection,
    false_analogy,
    reversed_logic,
    wrong_elimination,
)
from behavioural.strategies.edit import NotApplicable, split_label
from behavioural.strategies.numeric import arithmetic, arithmetic_change, operation_swap, premise_contradiction
from behavioural.strategies.text import analogy_change, confident_change, contradiction, negation_flip
from loadbearing.errors import LoadBearingError

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
DATASET_ONLY = {name: MC_DATASETS for name in ("wrong_elimination", "false_analogy", "reversed_logic",
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


__all__ = ["STRATEGIES", "FAMILIES", "DATASET_ONLY", "DEFAULT_STRATEGY", "NotApplicable", "StrategyError",
           "apply", "parse_strategies", "split_label", *STRATEGIES]
