"""The final-answer line and the stop rule of generation: the ONLY place that knows what one looks like.

A final-answer line is anchored at a line start (``Answer: X``, ``Final answer: X``, ``#### X``, a lone
``\\boxed{X}``) and its answer is definitive; a phrase in mid-sentence never is one. Generation stops at the
end of the turn or once :func:`has_final_answer_line` holds. See docs/protocol.md.
"""

from __future__ import annotations

import re

from loadbearing.answers.statements import HASH_ANSWER_RE, HEDGED_RE, LEAD_JUNK, NEGATED_RE, NEGATION_TAIL_RE, cut_sentence

__all__ = ["STOP_RULE", "final_answer_line", "has_final_answer_line", "mentions_answer", "split_so_the_answer",
           "starts_with_answer_label"]

#: recorded in every run manifest (beside the parser's version), so runs stopped by different rules are never pooled
STOP_RULE = "eos or a complete line-anchored final-answer line (Answer:, Final answer:, ####, lone \\boxed{}) v1.1"

_FINAL_LINE_RE = re.compile(
    r"^[ \t>*_`\-]*(?:(?:the|my|our)[ \t]+)?(?:final[ \t]+|correct[ \t]+|best[ \t]+)?answer[ \t*_`]*[:：]"
    r"(?P<rest>.*)$"
    r"|^[ \t]*\#\#\#\#[ \t]*(?P<hash>.*)$"
    r"|^[ \t]*\$*[ \t]*\\boxed[ \t]*\{(?P<boxed>.*)\}[ \t]*\$*[ \t.]*$",
    re.I,
)


def final_answer_line(line: str) -> bool | None:
    """Whether ``line`` is a complete, definitive final-answer line anchored at its start.

    True for ``Answer: 12``, ``**Final answer:** (B)``, ``#### 12``, a lone ``\\boxed{12}``; None for a bare
    marker line (``**The Correct Answer:**``: the answer follows on the next line); False for anything else,
    including a phrase in mid-sentence (``Let's check whether the answer is 12.``) and a negated, hedged or
    conditional answer line (``Answer: not 5``, ``Answer: probably 12``).
    """
    m = _FINAL_LINE_RE.match(line)
    if not m:
        return False
    rest = next(g for g in (m.group("rest"), m.group("hash"), m.group("boxed")) if g is not None)
    if m.group("hash") is not None and not HASH_ANSWER_RE.match(rest):
        return False  # "#### Step 2" is a heading
    body = cut_sentence(rest.strip(LEAD_JUNK + " "))
    if not body.strip(LEAD_JUNK + " ."):
        return None if m.group("rest") is not None else False
    if NEGATED_RE.match(body) and not NEGATION_TAIL_RE.search(body):
        return False
    return not HEDGED_RE.search(body)


def has_final_answer_line(text: str) -> bool:
    """The stop rule: True once ``text`` holds a complete (newline-terminated) final-answer line.

    Only :func:`final_answer_line` lines count (or a bare marker line followed by a complete non-blank
    line); text inside a ``<think>`` block that is still open never counts. Generation otherwise runs to
    the end of the turn.
    """
    if "\n" not in text:
        return False
    if "</think>" in text:
        text = text.rsplit("</think>", 1)[1]
    if "<think>" in text:
        return False
    pending = False  # a bare marker line waits for the next non-blank line
    for line in text[: text.rfind("\n")].split("\n"):
        if pending:
            if line.strip():
                return True
            continue
        verdict = final_answer_line(line)
        if verdict:
            return True
        pending = verdict is None
    return False


# ----------------------------------------------------------------------------------------------------
# looser answer-line tests (kept exactly as the rule labeller and the paper importer have always used them)

_ANSWER_MENTION_RE = re.compile(r"answer|####|\\boxed", re.IGNORECASE)
_ANSWER_LABEL_RE = re.compile(r"^\s*\**\s*(final\s+answer|answer)\s*\**\s*:", re.I)


def mentions_answer(line: str) -> bool:
    """Whether ``line`` mentions an answer marker anywhere ("answer", ``####``, ``\\boxed``): a loose superset
    of :func:`final_answer_line`, used to keep answer lines out of the rule labeller's evidence."""
    return bool(_ANSWER_MENTION_RE.search(line))


def starts_with_answer_label(line: str) -> bool:
    """Whether ``line`` opens with an ``Answer:`` / ``Final answer:`` label (markdown bold allowed): the paper's
    rule for the answer line of a released baseline chain of thought."""
    return bool(_ANSWER_LABEL_RE.match(line))


_SO_THE_ANSWER_RE = re.compile(r"^(.*?)\s*So the answer is\s+(.+?)\.?\s*$", re.S)


def split_so_the_answer(text: str) -> tuple[str, str] | None:
    """Split an official BBH chain-of-thought exemplar answer ("... So the answer is X.") into (reasoning, X)."""
    m = _SO_THE_ANSWER_RE.match(text)
    return (m.group(1), m.group(2).strip()) if m else None
