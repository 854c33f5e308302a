"""Token alignment between the edited and the clean prefix, and the answer-line tokens scored after them.

The edited and the clean (control) prefix are the same text except for the edited line, so their tokens are
split into three regions by the edited line's character span (``Continuation.edit_span``):

* *before*: the leading tokens that end at or before the line's start (identical in both runs);
* *line*: the tokens that overlap the edited line (``n_line_edited`` vs ``n_line_clean`` tokens);
* *after*: the trailing tokens that start at or after the line's end (the newline after the edit; identical).

Aligned positions (edited position -> clean position):

* before: the same index;
* after: right-aligned (edited ``n_edited - k`` <-> clean ``n_clean - k``);
* line: when both lines have the same token length (rule ``"equal-length"``) every token, index by index;
  otherwise (rule ``"shorter-from-start"``) only the first ``min(n_line_edited, n_line_clean)`` tokens, index
  by index from the line's start; the longer line's remaining tokens have no clean counterpart and are never
  patched. The rule and the lengths are recorded per case.

Position groups (edited positions): ``before``, ``edit`` (the aligned part of the edited line), ``last`` (the
last prefix token: the newline after the edit) and ``all`` (every aligned position).

Tokenisation: each prefix is tokenised ONCE with ``add_special_tokens=False`` (the call of
:func:`loadbearing.engine.generation.encode`; the chat template already wrote the special tokens), here with
``return_offsets_mapping=True`` to find the line's tokens.
"""
from __future__ import annotations

from collections.abc import Sequence
from dataclasses import asdict, dataclass
from typing import Any

from steering.errors import PatchingError

#: the forced answer-line prefix: every prompt asks the model to "End with a line 'Answer: X'"
#: (loadbearing.questions.prompts.FORMAT_INSTRUCTIONS); the answer string follows after one space
ANSWER_PREFIX = "Answer:"
GROUPS = ("edit", "before", "last", "all")
RULES = ("equal-length", "shorter-from-start")


@dataclass(frozen=True)
class Alignment:
    n_edited: int  # tokens in the edited prefix
    n_clean: int  # tokens in the clean prefix
    n_before: int  # shared tokens before the edited line
    n_line_edited: int
    n_line_clean: int
    n_after: int  # shared tokens after the edited line (right-aligned)
    rule: str  # "equal-length" | "shorter-from-start"

    @property
    def n_line_patched(self) -> int:
        return min(self.n_line_edited, self.n_line_clean)

    def pairs(self) -> list[tuple[int, int]]:
        """Every aligned (edited position, clean position), in edited order."""
        out = [(i, i) for i in range(self.n_before)]
        out += [(self.n_before + i, self.n_before + i) for i in range(self.n_line_patched)]
        out += [(self.n_edited - k, self.n_clean - k) for k in range(self.n_after, 0, -1)]
        if self.n_after == 0:  # no token after the line: the last prefix token is the line's own last token
            last = (self.n_edited - 1, self.n_clean - 1)
            if last not in out:
                out.append(last)
        return out

    def clean_of(self) -> dict[int, int]:
        return dict(self.pairs())

    def groups(self) -> dict[str, list[int]]:
        """Edited positions of each group (see the module docstring)."""
        line = [self.n_before + i for i in range(self.n_line_patched)]
        return {"edit": line, "before": list(range(self.n_before)), "last": [self.n_edited - 1],
                "all": [e for e, _ in self.pairs()]}

    def to_dict(self) -> dict[str, Any]:
        return asdict(self) | {"n_line_patched": self.n_line_patched}


def _regions(offsets: list[tuple[int, int]], span: tuple[int, int]) -> tuple[int, int]:
    """(n_before, n_after): leading tokens ending at/before ``span[0]``, trailing ones starting at/after ``span[1]``."""
    start, end = span
    n_before = 0
    while n_before < len(offsets) and offsets[n_before][1] <= start:
        n_before += 1
    n_after = 0
    while n_after < len(offsets) - n_before and offsets[len(offsets) - 1 - n_after][0] >= end:
        n_after += 1
    return n_before, n_after


def align_tokens(edited_ids: list[int], edited_offsets: list[tuple[int, int]], edited_span: tuple[int, int],
                 clean_ids: list[int], clean_offsets: list[tuple[int, int]], clean_span: tuple[int, int]) -> Alignment:
    """Align two tokenised prefixes that differ only inside their edited line (see the module docstring).

    Raises :class:`PatchingError` when the tokens outside the line differ (a token merged across the line's
    boundary) or a line has no token.
    """
    nb_e, na_e = _regions(edited_offsets, edited_span)
    nb_c, na_c = _regions(clean_offsets, clean_span)
    if nb_e != nb_c or edited_ids[:nb_e] != clean_ids[:nb_c]:
        raise PatchingError("the edited and clean prefixes differ before the edited line; they are not one cut")
    if na_e != na_c or (na_e and edited_ids[-na_e:] != clean_ids[-na_c:]):
        raise PatchingError("the edited and clean prefixes differ after the edited line; they are not one cut")
    le, lc = len(edited_ids) - nb_e - na_e, len(clean_ids) - nb_c - na_c
    if le < 1 or lc < 1:
        raise PatchingError("the edited line has no token in one of the prefixes; check the records' edit_span")
    return Alignment(len(edited_ids), len(clean_ids), nb_e, le, lc, na_e, "equal-length" if le == lc else
                     "shorter-from-start")


def tokenize(tokenizer, text: str) -> tuple[list[int], list[tuple[int, int]]]:
    """Token ids and character offsets of a full model input, tokenised once without special tokens."""
    enc = tokenizer(text, add_special_tokens=False, return_offsets_mapping=True)
    return list(enc["input_ids"]), [tuple(o) for o in enc["offset_mapping"]]


def align_texts(tokenizer, edited_text: str, edited_span: Sequence[int], clean_text: str,
                clean_span: Sequence[int]) -> tuple[list[int], list[int], Alignment]:
    """Tokenise both prefixes once and align them: ``(edited_ids, clean_ids, alignment)``."""
    if edited_text[:edited_span[0]] != clean_text[:clean_span[0]] or \
            edited_text[edited_span[1]:] != clean_text[clean_span[1]:]:
        raise PatchingError("the edited and clean texts differ outside the edited line; they are not one cut")
    e_ids, e_off = tokenize(tokenizer, edited_text)
    c_ids, c_off = tokenize(tokenizer, clean_text)
    es, cs = (int(edited_span[0]), int(edited_span[1])), (int(clean_span[0]), int(clean_span[1]))
    return e_ids, c_ids, align_tokens(e_ids, e_off, es, c_ids, c_off, cs)


def answer_tokens(tokenizer, answer: str) -> tuple[list[int], list[int]]:
    """``(head, answer_ids)``: the tokens of ``"Answer:"`` and of the answer string after it.

    The answer line ``"Answer: <answer>"`` is tokenised on its own and split after the head's tokens (so the
    answer's tokens are the ones the model writes after ``Answer:``, e.g. ``"Ġ", "1", "2"`` for 12); when the
    head does not tokenise as a prefix of the line, the answer is ``" <answer>"`` tokenised alone.
    """
    head = list(tokenizer(ANSWER_PREFIX, add_special_tokens=False)["input_ids"])
    line = list(tokenizer(f"{ANSWER_PREFIX} {answer}", add_special_tokens=False)["input_ids"])
    ans = line[len(head):] if line[:len(head)] == head else list(tokenizer(f" {answer}",
                                                                           add_special_tokens=False)["input_ids"])
    if not ans:
        raise PatchingError(f"answer {answer!r} has no tokens; it cannot be scored")
    return head, ans


__all__ = ["ANSWER_PREFIX", "GROUPS", "RULES", "Alignment", "align_texts", "align_tokens", "answer_tokens", "tokenize"]
