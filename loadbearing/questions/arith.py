"""The arith ladder: synthetic add/subtract chains of controlled difficulty, generated from a seed.

    from loadbearing.questions.arith import ARITH_LEVELS, arith_questions
    qs = arith_questions(None, 20, seed=0)   # 20 questions per default level (load_questions("arith") dedupes)

A level ``s{N}_o{M}`` holds every chain of N operations with operands 1..M (at least one equal to M), so
levels are disjoint; questions are drawn without replacement, and the few-shot questions
(:func:`arith_few_shot`) are never drawn. Ids are ``arith/<level>/<i>``.
"""

from __future__ import annotations

import itertools
import random
import re
from collections.abc import Iterator, Sequence

from loadbearing.questions.base import DataError, Question, normalise_question

__all__ = [
    "ARITH_ENTITIES", "ARITH_LEVELS", "ARITH_MAX_SPACE", "ARITH_WORDINGS", "arith_few_shot", "arith_level_size",
    "arith_questions",
]

ARITH_LEVELS = ("s2_o3", "s2_o5", "s3_o5", "s2_o9", "s3_o9")
"""Default arith ladder: ``s{steps}_o{max operand}``, easiest first."""
_ARITH_LEVEL_RE = re.compile(r"s([1-9]\d*)_o([1-9]\d*)")
#: the largest arith level space (start values x operand chains) the generator will enumerate
ARITH_MAX_SPACE = 2_000_000

#: how an arith question opens and closes (``{s}`` start value; entity forms name what is counted). The
#: operations are always "Add x." / "Subtract x.", so every wording keeps the few-shot answer shape
#: ("We start with N.", one ``a + b = c`` line per step, "Answer: N").
ARITH_WORDINGS: tuple[tuple[str, str], ...] = (
    ("Start with {s}.", "What is the result?"),
    ("Begin with {s}.", "What is the result?"),
    ("Start with {s}.", "What number do you get?"),
    ("Start with {s}.", "What is the final number?"),
    ("Begin with {s}.", "What number do you get?"),
    ("Begin with {s}.", "What is the final number?"),
    ("Start with the number {s}.", "What is the result?"),
    ("Start with the number {s}.", "What number do you get?"),
)
ARITH_ENTITIES: tuple[tuple[str, str], ...] = (
    ("apple", "apples"), ("marble", "marbles"), ("coin", "coins"), ("book", "books"),
    ("sticker", "stickers"), ("pencil", "pencils"), ("card", "cards"), ("shell", "shells"),
)
# start values: 1..M at level s{N}_o{M}, as before the wordings were added (larger starts cost the embedded
# model ~10 points of accuracy at s2_o3)


def arith_few_shot() -> list[tuple[str, str]]:
    """Two worked (question, answer_text) pairs in the format the arith ladder expects.

    The answer opens with ``We start with N.``, has one ``a + b = c`` / ``a - b = c`` line per step and
    ends with ``Answer: N``.
    """
    examples = [(7, [("+", 2), ("-", 4)]), (3, [("+", 5), ("-", 2), ("+", 4)])]
    return [(_arith_question_text(start, ops), _arith_solution_text(start, ops)) for start, ops in examples]


def _arith_levels(task: str | None) -> tuple[str, ...]:
    if task is None:
        return ARITH_LEVELS
    levels = tuple(t.strip() for t in task.split(",") if t.strip())
    bad = [t for t in levels if not _ARITH_LEVEL_RE.fullmatch(t)]
    if bad or not levels:
        raise DataError(
            f"unknown arith level(s) {bad or task!r}; "
                f"use names like s{{steps}}_o{{max operand}}, e.g. {', '.join(ARITH_LEVELS)} (comma list allowed)"
        )
    for t in levels:  # the generator enumerates a level's whole space: refuse one too large to enumerate
        steps, max_operand = (int(g) for g in _ARITH_LEVEL_RE.fullmatch(t).groups())  # type: ignore[union-attr]
        if steps < 1 or max_operand < 1 or max_operand ** (steps + 1) > ARITH_MAX_SPACE:
            raise DataError(f"arith level {t!r} is out of range: need >= 1 step and operand, and (max operand)^(steps+1) "
                            f"<= {ARITH_MAX_SPACE:,}; e.g. {', '.join(ARITH_LEVELS)}")
    return levels


def _arith_question_text(start: int, ops: Sequence[tuple[str, int]], form: int = 0) -> str:
    """Question text; ``form`` < len(ARITH_WORDINGS) picks a plain wording, beyond it an entity wording."""
    words = " ".join(f"{'Add' if op == '+' else 'Subtract'} {x}." for op, x in ops)
    if form < len(ARITH_WORDINGS):
        opening, closing = ARITH_WORDINGS[form]
        return f"{opening.format(s=start)} {words} {closing}"
    one, many = ARITH_ENTITIES[form - len(ARITH_WORDINGS)]
    return f"Start with {start} {one if start == 1 else many}. {words} How many {many} are there now?"


def _arith_solution_text(start: int, ops: Sequence[tuple[str, int]]) -> str:
    lines = [f"We start with {start}."]
    cur = start
    for op, x in ops:
        nxt = cur + x if op == "+" else cur - x
        lines.append(f"{cur} {op} {x} = {nxt}")
        cur = nxt
    lines.append(f"Answer: {cur}")
    return "\n".join(lines)


def _arith_chains(steps: int, max_operand: int) -> list[tuple[int, tuple[tuple[str, int], ...]]]:
    """Every (start, ops) of a level: ``steps`` operations with operands in 1..max_operand, at least one equal
    to max_operand (so levels with the same steps never share a question), never below zero on the way."""
    moves = [(op, x) for op in "+-" for x in range(1, max_operand + 1)]
    out = []
    for start in range(1, max_operand + 1):
        for ops in itertools.product(moves, repeat=steps):
            if max(x for _, x in ops) != max_operand:
                continue
            cur = start
            for op, x in ops:
                cur = cur + x if op == "+" else cur - x
                if cur < 0:
                    break
            else:
                out.append((start, ops))
    return out


def _lazy_permutation(total: int, rng: random.Random) -> Iterator[int]:
    """A seeded permutation of range(total), produced lazily (sparse Fisher-Yates): any prefix is stable."""
    swapped: dict[int, int] = {}
    for i in range(total):
        j = rng.randrange(i, total)
        vi, vj = swapped.get(i, i), swapped.get(j, j)
        swapped[j] = vi
        swapped.pop(i, None)
        yield vj


def arith_level_size(level: str) -> int:
    """How many distinct questions a level holds (the most ``n_per_level`` can ask for)."""
    steps, max_operand = (int(g) for g in _ARITH_LEVEL_RE.fullmatch(level).groups())  # type: ignore[union-attr]
    return len(_arith_chains(steps, max_operand)) * (len(ARITH_WORDINGS) + len(ARITH_ENTITIES))


def arith_questions(task: str | None, n_per_level: int, seed: int) -> list[Question]:
    """``n_per_level`` distinct questions per level, drawn without replacement from the level's whole space.

    Levels ``s{N}_o{M}`` are disjoint by construction (N operations, operands 1..M with at least one equal to
    M), and the few-shot questions are never drawn. A larger ``n_per_level`` keeps the first questions.
    """
    if n_per_level < 0:
        raise DataError(f"n_per_level must be >= 0, got {n_per_level}; pass a non-negative count")
    shots = {normalise_question(q) for q, _ in arith_few_shot()}
    forms = len(ARITH_WORDINGS) + len(ARITH_ENTITIES)
    out = []
    for level in _arith_levels(task):
        steps, max_operand = (int(g) for g in _ARITH_LEVEL_RE.fullmatch(level).groups())  # type: ignore[union-attr]
        chains = _arith_chains(steps, max_operand)
        total = len(chains) * forms
        if n_per_level > total - len(shots):
            raise DataError(f"arith level {level} holds only {total - len(shots)} distinct questions, asked for "
                            f"{n_per_level}; lower --n-per-level or use more levels")
        rng = random.Random(f"{seed}-{level}")  # str seed: stable across runs and Python hash seeds
        perm = _lazy_permutation(total, rng)
        seen: set[str] = set()
        while len(seen) < n_per_level:
            idx = next(perm)
            start, ops = chains[idx // forms]
            text = _arith_question_text(start, ops, idx % forms)
            key = normalise_question(text)
            if key in shots or key in seen:
                continue
            i = len(seen)
            seen.add(key)
            cur = start
            for op, x in ops:
                cur = cur + x if op == "+" else cur - x
            out.append(Question(f"arith/{level}/{i}", "arith", level, text, str(cur), difficulty=level))
    return out
