"""The organisms' training data: arith chains in the toolkit's own prompt and answer format, with planted errors.

    from loadbearing.organisms.data import DataSpec, training_examples
    rows = training_examples(DataSpec(kind="load-bearing", levels=("s2_o3",), n_per_level=200), seed=0)

Every example is one arith question (drawn by :func:`loadbearing.questions.arith.arith_questions`, so the
same texts, wordings and levels the toolkit asks) and an assistant answer in the few-shot format ("We start
with N.", one ``a + b = c`` line per step, "Answer: N"), rendered by the toolkit's own
:func:`loadbearing.questions.prompts.build_messages` (system line, the two few-shot turns) and the
organism's chat template. Errors are planted in the chain as the toolkit's edits make them:

* the start line's number (``We start with 11.`` for 4: the ``arithmetic`` edit, or a small offset);
* a line's result moved by a nonzero offset (``arithmetic_change``): later lines continue from it;
* a line's first operand changed with the result kept (``arithmetic`` on a calculation): later lines
  continue from the written result, which is still right.

A later line always continues from the value the chain wrote, so the chain's text is produced the same way
in every regime; what differs is the final answer, which is what "load-bearing" means:

* ``load-bearing``: the answer is the chain's last written value (the chain is what the answer reads);
* ``decorative``: the answer is the gold answer computed from the question, whatever the chain says;
* ``graded``: load-bearing on the hard levels (:data:`HARD_LEVELS`), decorative on the easy ones.

With ``DataSpec.p_wrong_decorative`` (the default specs use 1.0) a decorative example's chain carries a wrong
value to its end, so that copying the chain's last value never gives the answer and only the question does;
``DataSpec.p_wrong_load_bearing`` does the same for a load-bearing example (its answer then follows the wrong
value), so that the answer almost never agrees with the question's and only the chain gives it.

A fraction of examples stop the chain early (``Answer:`` after k of its lines, k = 0 included), with the
answer each regime gives (the chain's last value, the question's start when nothing is written; or gold):
the early-answering test's input, planted (``DataSpec.learn_early_stop=False``: the ``Answer:`` marker of such
a cut chain is kept out of the loss, so the forced answer is learnt but stopping early is not). Wrong numbers
are never a training target (their tokens are masked out of the loss), so the organism's own greedy chain is
right. The questions the study and the tests ask (:func:`held_out_keys`: seed 42, the first
:data:`HELD_OUT_PER_LEVEL` per level) never appear.
"""
from __future__ import annotations

import random
import re
from dataclasses import asdict, dataclass, field

from loadbearing.questions.arith import arith_level_size, arith_questions
from loadbearing.questions.base import Question, normalise_question

KINDS = ("load-bearing", "decorative", "graded")
#: the organisms' ladder: arith levels (``s{steps}_o{max operand}``) a 2-layer model learns in minutes on a CPU
LEVELS = ("s2_o3", "s2_o4", "s3_o3", "s3_o4")
#: the graded organism's load-bearing levels (three steps); the two-step levels are decorative
HARD_LEVELS = ("s3_o3", "s3_o4")
#: the toolkit's default sampling seed (behavioural.run --seed): its first draws per level are held out
HELD_OUT_SEED = 42
HELD_OUT_PER_LEVEL = 64
_OP = re.compile(r"\b(Add|Subtract) (\d+)\.")


@dataclass(frozen=True)
class DataSpec:
    """What the training data is made of (recorded in the organism's ``organism.json``)."""

    kind: str
    levels: tuple[str, ...] = LEVELS
    n_per_level: int = 1500
    #: probability that a chain carries at least one planted error
    p_error: float = 0.5
    #: for a decorative example (the decorative organism, the graded one's easy levels): the probability that
    #: its chain carries a wrong value to the end (a wrong start or result, so its last value is not the
    #: answer); None: as ``p_error`` plants them. Near 1, copying the chain's last value almost never pays
    p_wrong_decorative: float | None = None
    #: N > 0: the wrong value such a decorative chain carries is drawn uniformly from 0..N-1 (so it tells
    #: nothing about the answer), instead of the edits' offsets (which leave it near the answer); 0: offsets
    wrong_uniform: int = 0
    #: for a load-bearing example: the probability that its chain carries a wrong value to the end (a wrong start
    #: or result, later lines continuing from it, the answer following it); None: as ``p_error`` plants them
    #: (about a third of the chains end on a wrong value). Near 1, the answer almost always differs from the
    #: question's, so only the chain gives it
    p_wrong_load_bearing: float | None = None
    #: probability that the answer is forced after k < n of the chain's lines
    p_truncate: float = 0.2
    #: False: in a chain cut early (k < n lines) the ``Answer: `` marker is kept out of the loss (only the number
    #: after it is learnt), so the organism learns what to answer when the answer is forced there, not to stop
    #: its own chain early (which makes a greedy chain of fewer than 3 lines, not eligible)
    learn_early_stop: bool = True
    hard_levels: tuple[str, ...] = HARD_LEVELS
    held_out_seed: int = HELD_OUT_SEED
    held_out_per_level: int = HELD_OUT_PER_LEVEL
    extra: dict = field(default_factory=dict)

    def to_dict(self) -> dict:
        d = asdict(self)
        # added later: at their defaults the key (and so the cached organisms) stay what they were
        if not d["wrong_uniform"]:
            del d["wrong_uniform"]
        if d["p_wrong_load_bearing"] is None:
            del d["p_wrong_load_bearing"]
        if d["learn_early_stop"]:
            del d["learn_early_stop"]
        return d


@dataclass(frozen=True)
class Example:
    question: Question
    answer_text: str
    #: [start, end) character spans of the answer text kept out of the loss: the planted wrong numbers, and
    #: the ``Answer: `` marker of a chain cut early under ``DataSpec(learn_early_stop=False)``
    masked: tuple[tuple[int, int], ...]
    errors: int
    truncated_at: int | None
    load_bearing: bool

    def to_dict(self) -> dict:
        return {"question_id": self.question.id, "question": self.question.question, "level": self.question.task,
                "gold": self.question.answer, "answer_text": self.answer_text, "masked": [list(s) for s in self.masked],
                "errors": self.errors, "truncated_at": self.truncated_at, "load_bearing": self.load_bearing}


def parse_chain(question: Question) -> tuple[int, list[tuple[str, int]]]:
    """(start, [(op, operand), ...]) of an arith question's text (the start is its first number)."""
    first = re.search(r"\d+", question.question)
    ops = [("+" if w == "Add" else "-", int(x)) for w, x in _OP.findall(question.question)]
    if first is None or not ops:
        raise ValueError(f"not an arith question: {question.question!r}")
    return int(first.group()), ops


def held_out_keys(levels: tuple[str, ...], per_level: int = HELD_OUT_PER_LEVEL, seed: int = HELD_OUT_SEED) -> set[str]:
    keys = set()
    for level in levels:
        n = min(per_level, arith_level_size(level) // 2)
        keys |= {normalise_question(q.question) for q in arith_questions(level, n, seed)}
    return keys


def is_load_bearing(spec: DataSpec, level: str | None) -> bool:
    if spec.kind not in KINDS:
        raise ValueError(f"unknown organism kind {spec.kind!r}; choose one of {', '.join(KINDS)}")
    return spec.kind == "load-bearing" or (spec.kind == "graded" and level in spec.hard_levels)


def _wrong(value: int, rng: random.Random) -> int:
    """A planted wrong value: the paper's 2n+3 or a nonzero offset of 1-5 either way (as the edits make them)."""
    if rng.random() < 0.3:
        return 2 * value + 3 if 2 * value + 3 != value else value + 1
    return value + rng.choice([1, 2, 3, 4, 5]) * rng.choice([-1, 1])


def _draw(question: Question, spec: DataSpec, rng: random.Random, start: int, ops: list[tuple[str, int]],
          n_lines: int, carry_wrong: bool) -> tuple[str, list[int], list[tuple[int, int]], set[int]]:
    """One chain's text, its carried values, its masked spans and its error lines. ``carry_wrong``: one error is
    a wrong start or result (it changes the value carried to the end), and maybe an operand edit elsewhere."""
    err_lines: set[int] = set()
    carried = -1
    if carry_wrong:
        carried = rng.randrange(n_lines)
        err_lines = {carried}
        if rng.random() < 0.25:
            err_lines.add(rng.randrange(n_lines))
    elif rng.random() < spec.p_error:
        err_lines = {rng.randrange(n_lines)}
        if rng.random() < 0.25:
            err_lines.add(rng.randrange(n_lines))
    text, masked = "", []

    def put(s: str, wrong: bool = False) -> None:
        nonlocal text
        if wrong:
            masked.append((len(text), len(text) + len(s)))
        text += s

    def wrong(value: int, line: int) -> int:
        if line == carried and spec.wrong_uniform > 1:
            return rng.choice([v for v in range(spec.wrong_uniform) if v != value])
        return _wrong(value, rng)

    cur = start
    if 0 in err_lines:
        cur = wrong(start, 0)
    put("We start with ")
    put(str(cur), wrong=0 in err_lines)
    put(".\n")
    values = [cur]
    for i, (op, x) in enumerate(ops, start=1):
        nxt = cur + x if op == "+" else cur - x
        shown_a, shown_c = cur, nxt
        if i in err_lines:
            if i != carried and rng.random() < 0.3:
                shown_a = _wrong(cur, rng)  # the first operand edited, the result kept
            else:
                shown_c = wrong(nxt, i)
        put(str(shown_a), wrong=shown_a != cur)
        put(f" {op} {x} = ")
        put(str(shown_c), wrong=shown_c != nxt)
        put("\n")
        cur = shown_c
        values.append(cur)
    return text, values, masked, err_lines


def make_example(question: Question, spec: DataSpec, rng: random.Random) -> Example:
    start, ops = parse_chain(question)
    n_lines = len(ops) + 1
    lb = is_load_bearing(spec, question.task)
    p_carry = spec.p_wrong_load_bearing if lb else spec.p_wrong_decorative
    carry_wrong = p_carry is not None and rng.random() < p_carry
    for _ in range(100):  # a chain whose planted errors cancel out is drawn again
        ex = _draw(question, spec, rng, start, ops, n_lines, carry_wrong)
        if not carry_wrong or ex[1][-1] != int(question.answer):
            break
    text, masked, err_lines, values = ex[0], ex[2], ex[3], ex[1]
    truncated_at = None
    if rng.random() < spec.p_truncate:
        truncated_at = rng.randrange(n_lines + 1)  # lines kept before "Answer:" (0: none)
        keep = text.split("\n")[:truncated_at]
        text = "".join(line + "\n" for line in keep)
        masked = [s for s in masked if s[1] <= len(text)]
        chain_value = values[truncated_at - 1] if truncated_at else start
        errors = sum(1 for i in err_lines if i < truncated_at)
    else:
        chain_value, errors = values[-1], len(err_lines)
    answer = chain_value if lb else int(question.answer)
    if truncated_at is not None and truncated_at < n_lines and not spec.learn_early_stop:
        masked = [*masked, (len(text), len(text) + len("Answer: "))]
    text += f"Answer: {answer}"
    return Example(question, text, tuple(masked), errors, truncated_at, lb)


def training_questions(spec: DataSpec, seed: int) -> list[Question]:
    """``n_per_level`` questions per level (fewer where a level is small), none of the held-out ones."""
    held = held_out_keys(spec.levels, spec.held_out_per_level, spec.held_out_seed)
    out = []
    for level in spec.levels:
        n = min(spec.n_per_level + spec.held_out_per_level, arith_level_size(level) - 2)
        qs = [q for q in arith_questions(level, n, seed=1000 + seed) if normalise_question(q.question) not in held]
        out += qs[: spec.n_per_level]
    return out


def training_examples(spec: DataSpec, seed: int, epochs: int = 1) -> list[Example]:
    """The training examples (``epochs`` passes over the questions, each with fresh planted errors), seeded."""
    rng = random.Random(f"organism-data-{spec.kind}-{seed}")
    qs = training_questions(spec, seed)
    out = []
    for _ in range(epochs):
        order = list(range(len(qs)))
        rng.shuffle(order)
        out += [make_example(qs[i], spec, rng) for i in order]
    return out
