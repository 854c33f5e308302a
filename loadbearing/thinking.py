"""The think block of a reasoning model's sequence (R1-distill's ``<think> ... </think>``): which positions are in it.

    from loadbearing.thinking import ThinkTags, PhaseScan, think_span
    tags = ThinkTags.of(tokenizer)              # "<think>" / "</think>" as token-id sequences of this tokenizer
    scan = PhaseScan(tags)
    scan.feed(0, prompt_ids)                    # [bool] per position: True = inside the think block
    scan.feed(len(prompt_ids), [next_id])       # incremental; feeding from an earlier position re-reads from there
    think_span(text, offsets)                   # (start, end) token span of the think block's text in an input

The rule (one statement, for steering and for the activation cache): after reading tokens ``0..i``, a think
block is *open* when the last tag read is an opener. Position ``i`` is then in the think block: its residual
predicts a token of the thinking. The opener's own position is in it (it predicts the first thought); the
closer's position is not (it predicts the first token of the answer). The tags come from the sequence itself,
so a block that the chat template opened (R1-distill's generation prompt ends in ``<think>\\n``) counts the same
as one the model opened.

Token-level matching (:class:`PhaseScan`, used while generating) needs each tag to tokenise the same in context
as alone, which holds when the tags are added tokens (R1-distill, Qwen3). The activation cache places its spans
from the text through the tokenizer's offset mapping (:func:`think_span`), which needs no such assumption.
"""
from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

OPEN_TAG = "<think>"
CLOSE_TAG = "</think>"


class ThinkError(ValueError):
    """A think-block request this tokenizer or input cannot serve; the message names the fix."""


@dataclass(frozen=True)
class ThinkTags:
    """The opening and closing tags as token-id sequences."""

    open: tuple[int, ...]
    close: tuple[int, ...]

    @classmethod
    def of(cls, tokenizer, open_tag: str = OPEN_TAG, close_tag: str = CLOSE_TAG) -> ThinkTags:
        if tokenizer is None:
            raise ThinkError("think/answer positions need the model's tokenizer (to find the think tags); pass a "
                             "LoadedModel (load_model(...)) or tokenizer=")
        o = tuple(tokenizer(open_tag, add_special_tokens=False)["input_ids"])
        c = tuple(tokenizer(close_tag, add_special_tokens=False)["input_ids"])
        if not o or not c or o == c:
            raise ThinkError(f"the tokenizer cannot encode the think tags {open_tag!r} / {close_tag!r}; use a "
                             "reasoning model's tokenizer")
        return cls(o, c)


def _ends(ids: list[int], tag: tuple[int, ...]) -> bool:
    n = len(tag)
    return len(ids) >= n and tuple(ids[-n:]) == tag


class PhaseScan:
    """Incremental phase of one row's positions (see the module docstring for the rule)."""

    def __init__(self, tags: ThinkTags) -> None:
        self.tags = tags
        self.ids: list[int] = []
        self.open: list[bool] = []  # open[i]: a think block is open after reading token i

    def feed(self, start: int, tokens: Sequence[int]) -> list[bool]:
        """Read ``tokens`` at positions ``start, start+1, ...`` (forgetting whatever was read at or after
        ``start``: a re-fed sequence, or rejected draft tokens); returns their phases (True = think)."""
        if start > len(self.ids):
            raise ThinkError(f"tokens fed at position {start} but only {len(self.ids)} were read before")
        del self.ids[start:]
        del self.open[start:]
        for t in tokens:
            self.ids.append(int(t))
            prev = self.open[-1] if self.open else False
            self.open.append(True if _ends(self.ids, self.tags.open) else
                             False if _ends(self.ids, self.tags.close) else prev)
        return self.open[start:]

    def is_open(self) -> bool:
        """Whether the last position read is in the think block."""
        return bool(self.open and self.open[-1])


def think_phases(ids: Sequence[int], tags: ThinkTags) -> list[bool]:
    """The phase of every position of ``ids`` (True = in the think block)."""
    return PhaseScan(tags).feed(0, ids)


def think_span(text: str, offsets: Sequence[tuple[int, int]], open_tag: str = OPEN_TAG,
               close_tag: str = CLOSE_TAG) -> tuple[int, int] | None:
    """The ``[start, end)`` token span of the text inside the last think block of ``text`` (after its opener,
    before its closer or to the end when it is still open), by the tokenizer's character ``offsets``; None when
    ``text`` has no opener, or the block holds no token."""
    a = text.rfind(open_tag)
    if a < 0:
        return None
    a += len(open_tag)
    b = text.find(close_tag, a)
    b = len(text) if b < 0 else b
    toks = [i for i, (s, e) in enumerate(offsets) if e > s and s >= a and e <= b]
    if not toks:
        return None
    return toks[0], toks[-1] + 1


__all__ = ["CLOSE_TAG", "OPEN_TAG", "PhaseScan", "ThinkError", "ThinkTags", "think_phases", "think_span"]
