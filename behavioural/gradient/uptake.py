"""Perturbation uptake: did the continuation reuse what the edit introduced?

    from behavioural.gradient.uptake import uptake
    uptake("4 + 3 = 7", "4 + 3 = 9", "9 + 2 = 11\\nAnswer: 11")   # -> (True, "number 9 reused")

The rule (the paper's check that an error was actually taken up), applied to the reasoning the model wrote
*after* the edited line, with its final-answer lines removed so that reuse is not read off the answer
itself (the lines :func:`loadbearing.answers.final_answer_line` accepts: ``Answer: ...``, ``Final answer:
...``, ``#### ...``, a lone ``\\boxed{...}``; a bare ``Answer:`` marker line takes the next line with it):

1. **numbers**: the numbers of the edited line that the original line lacks (``7 -> 9``: {9}). Uptake if any
   of them appears as a whole number in a later line.
2. **option letters**: otherwise, option letters the edit names that the original line did not
   (``option (B)``, ``(B)``, ``option B``). Uptake if a later line names that option.
3. **claim words**: otherwise, content words of four or more letters that the edit added (stop words removed).
   Uptake if any of them recurs later.
4. nothing new (the edit only removed or reordered text): ``None`` (undetermined).

Returns ``(taken_up: bool | None, evidence: str)``.
"""
from __future__ import annotations

import re

from loadbearing.answers import final_answer_line
from loadbearing.answers.numbers import NUMBER_RE

_OPTION = re.compile(r"(?:\boption\s*\(?([A-J])\)?|\(([A-J])\))")
_WORD = re.compile(r"[A-Za-z]{4,}")
_STOP = frozenset("""
that this with from have were will would should could there their then than when which what where while
into onto over under also only just very more most some such each other these those they them because
about after before being been does doing done step steps first second third next last final answer
following therefore thus hence so""".split())


def _numbers(s: str) -> set[str]:
    out = set()
    for m in NUMBER_RE.finditer(s):
        v = m.group().replace(",", "")
        try:
            f = float(v)
        except ValueError:  # pragma: no cover
            continue
        out.add(str(int(f)) if f.is_integer() else str(f))
    return out


def _options(s: str) -> set[str]:
    return {a or b for a, b in _OPTION.findall(s)}


def _words(s: str) -> set[str]:
    return {w.lower() for w in _WORD.findall(s)} - _STOP


def later_reasoning(continuation: str) -> str:
    """The continuation without its final-answer lines (and the answer a bare marker line announces)."""
    kept, pending = [], False
    for ln in continuation.splitlines():
        if pending:
            pending = not ln.strip()  # the first non-blank line after a bare marker is the answer
            continue
        verdict = final_answer_line(ln)
        if verdict is None:
            pending = True
        elif not verdict:
            kept.append(ln)
    return "\n".join(kept)


def uptake(original_line: str, edited_line: str, continuation: str) -> tuple[bool | None, str]:
    """Whether the continuation reuses the value or claim the edit introduced (see the module docstring)."""
    later = later_reasoning(continuation)
    new_nums = _numbers(edited_line) - _numbers(original_line)
    if new_nums:
        hit = sorted(new_nums & _numbers(later))
        if hit:
            return True, f"number {hit[0]} reused"
        return False, f"new number(s) {', '.join(sorted(new_nums))} not reused"
    new_opts = _options(edited_line) - _options(original_line)
    if new_opts:
        hit = sorted(new_opts & _options(later))
        if hit:
            return True, f"option {hit[0]} named again"
        return False, f"option(s) {', '.join(sorted(new_opts))} not named again"
    new_words = _words(edited_line) - _words(original_line)
    if new_words:
        hit = sorted(new_words & _words(later))
        return (True, f"claim word {hit[0]!r} reused") if hit else (False, "no added claim word reused")
    return None, "the edit introduced nothing new to look for"
