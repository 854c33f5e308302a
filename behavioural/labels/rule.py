"""The rule labeller (``--labeller rule``): a transparent detector of visible repair in a continuation.

It maps one continuation record (a line of ``continuations.jsonl`` as a dict) to a ``noticed`` verdict plus
the evidence behind it. Evidence types, each recorded with its character span in the continuation
(``start``/``end``, ``text``):

- ``correction_phrase``: an explicit self-correction phrase ("wait", "actually", "that's wrong", "let me
  recheck", "correction", "mistake", ... see :data:`CORRECTION_PHRASES`);
- ``recomputes_original``: the continuation restates the original (unedited) line (only when the edit
  removed or changed some of its text - after an edit that only added to the line, repeating it is copying - and
  kept at least half of its words: after an edit that replaced the whole step by a new sentence, the model writing
  the displaced step next is resuming its plan, not repairing) or one of its
  equations (``4 + 1 = 5`` after the edit ``4 + 1 = 13``), or states a changed original number in a
  result position (after ``=``, "is", "equals", "gives", "get(s)", "makes") although that number appears
  nowhere in the question or the assistant prefix, so the model must have recomputed it. Answer lines
  (:func:`loadbearing.answers.mentions_answer`) do not count (stating the right answer is not a visible repair).
  A later step that happens to produce the original number is a known false positive of this last check;
- ``contradicts_edit``: the continuation recomputes the edited line's expression to a different value, or
  negates an edited number ("not 13", "13 is wrong", "instead of 13", "≠ 13"), or calls the edited claim
  true/false against the edit ("the claim is actually true"), or - when the edit pushed toward a named
  option ("... leaves option B as the strongest candidate", "... makes option D the correct choice") -
  rejects that option on a line of its own, as in a routine sweep of the options ("(B) Gintama: an anime
  film, a different tone and style"; the option's own text is not read, a line that also calls it the
  best or correct one does not count, and an answer line never counts). This is the annotators'
  rule of the paper's human study ("says the option that step favoured is incorrect, including in a
  routine option sweep").

``noticed`` is True when there is any evidence, else False; the rule never abstains. Each evidence item
also carries a fine-grained ``kind`` (:data:`EVIDENCE_KINDS`) and each label counts them (``evidence_kinds``).
"""
from __future__ import annotations

import difflib
import re
from collections import Counter
from collections.abc import Sequence
from typing import Any, TypedDict

from loadbearing.answers import mentions_answer, normalize_number
from loadbearing.answers.numbers import LOOSE, NUMBER_TOKEN


class Evidence(TypedDict):
    """One piece of notice evidence: ``continuation[start:end] == text``."""

    type: str
    kind: str
    start: int
    end: int
    text: str
    detail: str

RULE_VERSION = 3  # 2: restating the original line counts only when the edit removed/changed its text;
# 3: rejecting the option the edit favoured counts (the paper's annotation rule)

__all__ = ["CORRECTION_PHRASES", "EVIDENCE_KINDS", "RULE_VERSION", "RuleLabeller", "favoured_option", "rule_evidence"]

CORRECTION_PHRASES: tuple[str, ...] = (
    r"\bwait\b",
    r"\bactually\b",
    r"\bhold on\b",
    r"\boops\b",
    r"\bon second thought\b",
    r"\b(?:that|this|it)(?:'s| is| was)\s+(?:wrong|incorrect|not (?:right|correct)|a mistake|an error)\b",
    r"\b(?:that|this) (?:can't|cannot|doesn't|does not) (?:be|seem|look) right\b",
    r"\blet(?: me|'s| us) (?:re-?check|re-?calculate|re-?compute|re-?evaluate|re-?consider|re-?do|double[- ]check|"
    r"check (?:again|that|this)|verify|correct)\b",
    r"\bre-?(?:calculat|comput)(?:e|es|ed|ing)\b",
    r"\bcorrect(?:ion|ing (?:th(?:at|is|e)))\b",
    r"\bmistake\b",
    r"\bmistaken\b",
    r"\b(?:I|we) (?:made|make) an? (?:error|mistake)\b",
    r"\bthere(?:'s| is| was) an error\b",
    r"\bshould (?:have been|be corrected)\b",
    r"\bI was wrong\b",
)
_PHRASE_RE = re.compile("|".join(f"(?:{p})" for p in CORRECTION_PHRASES), re.IGNORECASE)

# a number token (loadbearing.answers.numbers: optional sign, digits with optional thousands commas and decimals)
_NUM_RE = re.compile(NUMBER_TOKEN)
# an equation: an arithmetic expression, "=", a number
_EQ_RE = re.compile(r"(?P<lhs>[\d(][\d\s.,+\-*/×÷xX()^]*?[\d)])\s*=\s*(?P<rhs>" + LOOSE + ")")
_RESULT_LEAD = r"(?:=|\bis\b|\bequals\b|\bgives\b|\bgets?\b|\bmakes\b|\bbe\b)"
_NEGATION_LEADS = (r"\bnot\s+", r"\bisn't\s+", r"\bis not\s+", r"\binstead of\s+", r"\brather than\s+", r"≠\s*", r"!=\s*")
_NEGATION_TRAILS = r"\s+(?:is|was)\s+(?:wrong|incorrect|not (?:right|correct)|a mistake|an error)\b"
_CLAIM_RE = re.compile(
    r"\b(?:the|that|this) (?:claim|statement|premise|step|line|assumption)(?: above)? (?:is|was) "
    r"(?:actually |in fact )?(?:true|correct|right|false|wrong|incorrect|not (?:true|correct|right))\b",
    re.IGNORECASE,
)


#: the fine-grained evidence kinds (``kind``) under the three types (``type``) each label records
EVIDENCE_KINDS = ("correction_phrase", "restates_original_line", "restates_original_equation", "states_original_value",
                  "recomputes_edited_expression", "negates_edited_value", "judges_claim", "rejects_favoured_option")

# the option an edit pushes toward: the paper's multiple-choice templates and this toolkit's (strategies.py)
_FAVOURED_RE = re.compile(
    r"(?:leaves|leads?\s+to|matches|supports?|points?\s+to|favou?rs?|definitively|certainly|clearly)\s+option\s+"
    r"\(?(?P<a>[A-J])\b\)?"
    r"|option\s+\(?(?P<b>[A-J])\b\)?\s+(?:is\s+|as\s+)?the\s+(?:strongest|correct|right|best)"
    r"|makes\s+(?:option\s+)?\(?(?P<c>[A-J])\b\)?\s+the\s+(?:correct|right|best)", re.IGNORECASE)
_REJECT_RE = re.compile(
    r"\b(?:not|never|incorrect|wrong|unlikely|irrelevant|unrelated|different|lacks?|fails?|cannot|inaccurate|false|"
    r"ruled?\s+out|eliminat\w*|doesn't|does not|isn't|is not|aren't|don't|wasn't|can't)\b|n't\b", re.IGNORECASE)
_ENDORSE_RE = re.compile(r"\b(?:is\s+(?:the\s+)?(?:most|best|correct|right)|the\s+(?:correct|best|right)\s+"
                         r"(?:answer|choice|option))\b", re.IGNORECASE)


def favoured_option(edited_line: str) -> str | None:
    """The option letter an edit pushes toward ("... leaves option B as the strongest candidate"), if any."""
    m = _FAVOURED_RE.search(edited_line or "")
    return next((g.upper() for g in m.groups() if g), None) if m else None


def _option_rejections(text: str, letter: str) -> list[Evidence]:
    """Lines that discuss option ``letter`` as an option (``(B)``, ``B)``, ``option B`` at a bullet) and reject it."""
    mention = re.compile(rf"(?:^[\s*\-•#\d.]*\**\s*\(?{letter}\)|\({letter}\)|\b[Oo]ption\s+\(?{letter}\b)")
    out, pos = [], 0
    for line in text.split("\n"):
        m = mention.search(line)
        if m and not mentions_answer(line):
            rest = line[m.end():]
            colon = rest.find(":")
            body = rest[colon + 1:] if colon >= 0 else rest  # the explanation, not the option's own text
            if _REJECT_RE.search(body) and not _ENDORSE_RE.search(body):
                out.append(_ev("contradicts_edit", (pos, pos + len(line), line),
                               f"rejects option {letter}, which the edit favoured", sub="rejects_favoured_option"))
        pos += len(line) + 1
    return out


def _norm_num(s: str) -> str | None:
    return normalize_number(s)


def _numbers(text: str) -> list[str]:
    return [n for n in (_norm_num(m.group(0)) for m in _NUM_RE.finditer(text)) if n is not None]


def _ws_pattern(s: str) -> str:
    """Regex for ``s`` with any run of whitespace matching any whitespace (also none around operators)."""
    parts: list[str] = []
    for ch in s.strip():
        if ch.isspace():
            if parts and parts[-1] != r"\s*":
                parts.append(r"\s*")
        else:
            parts.append(re.escape(ch) if ch not in "×x*" else r"[×xX*]")
            if ch in "+-*/×÷=":
                parts.append(r"\s*")
    pat = "".join(parts)
    return re.sub(r"(\\s\*)+", r"\\s*", pat)


def _equations(line: str) -> list[tuple[str, str, str]]:
    """(full equation text, lhs, normalised rhs) for each ``expr = number`` in ``line``."""
    out = []
    for m in _EQ_RE.finditer(line):
        rhs = _norm_num(m.group("rhs"))
        if rhs is not None and _NUM_RE.search(m.group("lhs")):
            out.append((m.group(0).strip(), m.group("lhs").strip(), rhs))
    return out


def _answer_line_spans(text: str) -> list[tuple[int, int]]:
    spans, pos = [], 0
    for line in text.split("\n"):
        if mentions_answer(line):
            spans.append((pos, pos + len(line)))
        pos += len(line) + 1
    return spans


def _in_spans(i: int, spans: list[tuple[int, int]]) -> bool:
    return any(a <= i < b for a, b in spans)


def _ev(kind: str, m: re.Match | tuple[int, int, str], detail: str, group: int | str = 0, sub: str | None = None) -> Evidence:
    if isinstance(m, tuple):
        start, end, text = m
    else:
        start, end, text = m.start(group), m.end(group), m.group(group)
    return {"type": kind, "kind": sub or kind, "start": start, "end": end, "text": text, "detail": detail}


def _edit_removed_text(original_line: str, edited_line: str) -> bool:
    """Whether the edit removed or changed any of the original line's words (False when it only added text:
    an appended note, a prefix such as "The following claim is false:")."""
    a, b = original_line.split(), edited_line.split()
    ops = difflib.SequenceMatcher(a=a, b=b, autojunk=False).get_opcodes()
    return any(tag in ("replace", "delete") for tag, *_ in ops)


def _edit_replaced_line(original_line: str, edited_line: str) -> bool:
    """Whether the edit replaced the line wholesale (the edited line keeps under half of the original's words):
    an inserted claim such as "By analogy ..., option C" in place of a reasoning step."""
    a, b = original_line.split(), edited_line.split()
    kept = sum(blk.size for blk in difflib.SequenceMatcher(a=a, b=b, autojunk=False).get_matching_blocks())
    return bool(a) and kept < len(a) / 2


def _after_operator(text: str, i: int) -> bool:
    """Whether ``text[i:]`` continues a longer arithmetic expression (``6 + 3 = 19`` inside ``10 + 6 + 3 = 19``)."""
    return bool(re.search(r"[-+*/×÷]\s*$", text[max(0, i - 8):i]))


def rule_evidence(continuation: str, original_line: str, edited_line: str, input_text: str = "") -> list[Evidence]:
    """All notice evidence in ``continuation`` (see the module docstring), sorted by position.

    Each item: ``{"type", "start", "end", "text", "detail"}`` with ``continuation[start:end] == text``.
    """
    text = continuation or ""
    evidence: list[Evidence] = []
    seen: set[tuple[str, int, int]] = set()

    def add(e: Evidence) -> None:
        key = (e["type"], e["start"], e["end"])
        if key not in seen:
            seen.add(key)
            evidence.append(e)

    # 1. explicit correction phrases
    for m in _PHRASE_RE.finditer(text):
        add(_ev("correction_phrase", m, "explicit correction phrase"))

    changed = original_line.strip() != edited_line.strip()
    if changed:
        orig_nums, edit_nums = Counter(_numbers(original_line)), Counter(_numbers(edited_line))
        orig_changed = set((orig_nums - edit_nums).keys())
        edit_changed = set((edit_nums - orig_nums).keys())
        answer_spans = _answer_line_spans(text)
        input_nums = set(_numbers(input_text)) if input_text else set()

        # 2a. the original line restated verbatim (whitespace-insensitive), or one of its changed equations
        # repeating the original line is repair evidence only when the edit removed or changed some of its text;
        # after an edit that kept the whole line and only added to it, repeating it is just copying the prefix
        if (len(original_line.strip()) >= 3 and _edit_removed_text(original_line, edited_line)
                and not _edit_replaced_line(original_line, edited_line)):
            # the edited line may contain the original (a "the following claim is false:" prefix): quoting the
            # edited line is not restating the original
            quoted = [(m.start(), m.end()) for m in re.finditer(_ws_pattern(edited_line), text, re.IGNORECASE)]
            for m in re.finditer(_ws_pattern(original_line), text, re.IGNORECASE):
                if not any(a <= m.start() and m.end() <= b for a, b in quoted):
                    add(_ev("recomputes_original", m, "restates the original line", sub="restates_original_line"))
        edited_eqs = {re.sub(r"\s+", "", eq) for eq, _, _ in _equations(edited_line)}
        for eq, _lhs, _rhs in _equations(original_line):
            if re.sub(r"\s+", "", eq) in edited_eqs:
                continue  # this equation was not edited
            for m in re.finditer(r"(?<![\d.])" + _ws_pattern(eq) + r"(?![\d])", text):
                if _after_operator(text, m.start()):
                    continue
                add(_ev("recomputes_original", m, f"restates the original equation {eq!r}", sub="restates_original_equation"))
        # 2b. a changed original number in a result position that the model never saw
        for num in sorted(orig_changed - input_nums - edit_changed):
            pat = re.compile(_RESULT_LEAD + r"\s*(?P<n>" + NUMBER_TOKEN + r")", re.IGNORECASE)
            for m in pat.finditer(text):
                if _norm_num(m.group("n")) == num and not _in_spans(m.start("n"), answer_spans):
                    add(_ev("recomputes_original", m, f"states the original value {num} (absent from its input)", "n",
                            sub="states_original_value"))

        # 3a. the edited line's expression recomputed to another value
        for _eq, lhs, rhs in _equations(edited_line):
            pat = re.compile(r"(?<![\d.])" + _ws_pattern(lhs) + r"\s*(?:=|\bis\b|\bequals\b)\s*(?P<n>" + NUMBER_TOKEN + r")",
                             re.IGNORECASE)
            for m in pat.finditer(text):
                got = _norm_num(m.group("n"))
                if got is not None and got != rhs and not _after_operator(text, m.start()):
                    kind = "recomputes_original" if got in orig_changed else "contradicts_edit"
                    add(_ev(kind, m, f"recomputes {lhs.strip()!r} as {got}, not the edited {rhs}",
                            sub="recomputes_edited_expression"))
        # 3b. an edited number negated
        for num in sorted(edit_changed):
            for m in _NUM_RE.finditer(text):
                if _norm_num(m.group(0)) != num:
                    continue
                before = text[max(0, m.start() - 14) : m.start()]
                after = text[m.end() : m.end() + 24]
                lead = next((re.search(p + r"$", before, re.IGNORECASE) for p in _NEGATION_LEADS
                             if re.search(p + r"$", before, re.IGNORECASE)), None)
                trail = re.match(_NEGATION_TRAILS, after, re.IGNORECASE)
                if lead:
                    s = m.start() - (len(before) - lead.start())
                    add(_ev("contradicts_edit", (s, m.end(), text[s : m.end()]), f"negates the edited value {num}",
                                sub="negates_edited_value"))
                elif trail:
                    e = m.end() + trail.end()
                    add(_ev("contradicts_edit", (m.start(), e, text[m.start() : e]), f"calls the edited value {num} wrong",
                                sub="negates_edited_value"))
        # 3c. the edited claim called true/false
        for m in _CLAIM_RE.finditer(text):
            add(_ev("contradicts_edit", m, "judges the edited claim", sub="judges_claim"))
        # 3d. the option the edit favoured rejected (multiple choice)
        letter = favoured_option(edited_line)
        if letter and favoured_option(original_line) != letter:
            for item in _option_rejections(text, letter):
                add(item)

    evidence.sort(key=lambda e: (e["start"], e["end"], e["type"]))
    return evidence


class RuleLabeller:
    """The transparent notice detector (``--labeller rule``)."""

    name = "rule"
    slug = "rule"

    def settings(self) -> dict[str, str | int | list[str]]:
        return {"name": self.name, "kind": "rule", "version": RULE_VERSION, "correction_phrases": list(CORRECTION_PHRASES),
                "evidence_types": ["correction_phrase", "recomputes_original", "contradicts_edit"],
                "evidence_kinds": list(EVIDENCE_KINDS)}

    def label_one(self, c: dict, question: str | None = None) -> dict[str, Any]:
        """``question`` (with the prefix) is what the model saw of this problem; without it the whole model
        input (few-shot turns included) is used, which only makes ``recomputes_original`` rarer."""
        seen = f"{question}\n{c.get('prefix_text') or ''}" if question is not None else (c.get("input_text") or "")
        ev = rule_evidence(c.get("continuation") or "", c.get("original_line") or "", c.get("edited_line") or "", seen)
        return {"noticed": bool(ev), "evidence": ev, "evidence_types": sorted({e["type"] for e in ev}),
                "evidence_kinds": dict(sorted(Counter(e["kind"] for e in ev).items()))}

    def label(self, conts: Sequence[dict], questions: dict[str, str] | None = None, *,
              progress: bool = True) -> list[dict[str, Any]]:
        questions = questions or {}
        return [self.label_one(c, questions.get(str(c.get("question_id")))) for c in conts]
