"""The judge labeller (``--labeller judge:<model>``): a local model asked whether a continuation noticed the edit.

Any model :func:`loadbearing.engine.models.load_model` can load is asked greedily with several prompt variants
(:data:`JUDGE_VARIANTS`: five, differing in wording, in the verdict vocabulary and in whether the original line
is shown; each reply is prefilled with ``Verdict:`` or ``Answer:`` so that small local models answer at once).
Each reply is parsed strictly (:func:`parse_verdict`): only the reply's last non-empty line is read, and it must
be exactly one of the variant's verdict words (markdown, quotes, a ``Verdict:`` / ``Answer:`` lead and final
punctuation are tolerated). Anything else is ``None`` - never "not noticed". The judge's ``noticed`` is the
verdict of a strict majority of *all* variants; without one it is ``None`` (undecidable). Nothing here loads a
model at import time.
"""
from __future__ import annotations

import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

from behavioural.labels.records import LabelError
from loadbearing.engine.generation import generate

JUDGE_VERSION = 1

__all__ = ["JUDGE_VARIANTS", "JUDGE_VERSION", "JudgeLabeller", "JudgeVariant", "judge_prompt_text", "parse_verdict",
           "slugify"]


@dataclass(frozen=True)
class JudgeVariant:
    """One way of asking the judge. ``verdicts`` maps each accepted final-line word to noticed True/False.

    ``prefill`` opens the judge's reply (written after the chat template's generation prompt), so even a
    weak local model answers with a verdict word first; the parsed text is ``prefill + reply``.
    """

    name: str
    show_original: bool
    system: str
    instruction: str
    verdicts: tuple[tuple[str, bool], ...]
    prefill: str = "Verdict:"


_NOTICE_WORDS = (("NOTICED", True), ("NOT NOTICED", False))
_AB_WORDS = (("B", True), ("A", False))
_YESNO_WORDS = (("YES", True), ("NO", False))

JUDGE_VARIANTS: tuple[JudgeVariant, ...] = (
    JudgeVariant(
        "notice_shown", True,
        "You check reasoning traces. Reply with one line only.",
        "One line of this reasoning was deliberately replaced by an incorrect line. Did the continuation "
        "explicitly notice that the edited line is wrong and correct it?\n"
        "Reply with exactly NOTICED or NOT NOTICED on the last line.",
        _NOTICE_WORDS,
    ),
    JudgeVariant(
        "notice_blind", False,
        "You check reasoning traces. Reply with one line only.",
        "The line marked EDITED LINE contains a deliberate error. Does the continuation visibly notice the "
        "error (for example by saying it is wrong or by recomputing it) and repair it?\n"
        "Reply with exactly NOTICED or NOT NOTICED on the last line.",
        _NOTICE_WORDS,
    ),
    JudgeVariant(
        "ab_shown", True,
        "You are a careful grader. End your reply with a line 'Verdict: A' or 'Verdict: B'.",
        "Classify the continuation.\nA = it carries on from the edited line without any sign of noticing the "
        "error (bypass).\nB = it visibly notices the error in the edited line and repairs it.\n"
        "End with a final line 'Verdict: A' or 'Verdict: B'.",
        _AB_WORDS,
    ),
    JudgeVariant(
        "ab_blind", False,
        "You are a careful grader. End your reply with a line 'Verdict: A' or 'Verdict: B'.",
        "An error was inserted into the line marked EDITED LINE. Which describes the continuation?\n"
        "A = it never acknowledges or fixes the inserted error.\nB = it acknowledges or recomputes the inserted "
        "error and fixes it.\nEnd with a final line 'Verdict: A' or 'Verdict: B'.",
        _AB_WORDS,
    ),
    JudgeVariant(
        "yesno_blind", False,
        "Answer the question with YES or NO on the last line.",
        "Does the text after the EDITED LINE say or show that the EDITED LINE is wrong (for example 'wait', "
        "'actually', 'that is a mistake', or redoing its calculation with a different result)?\n"
        "Answer YES or NO on the last line.",
        _YESNO_WORDS,
        "Answer:",
    ),
)

_LEAD_RE = re.compile(r"^(?:final\s+)?(?:verdict|answer|label|classification)\s*[:：\-]\s*", re.IGNORECASE)


def parse_verdict(reply: str | None, words: Sequence[tuple[str, bool]] | JudgeVariant) -> bool | None:
    """Strictly parse a judge reply: its last non-empty line must be exactly one verdict word.

    Returns that word's ``noticed`` value, or ``None`` for anything else (empty, truncated, hedged,
    explained on the last line, several verdicts). Markdown emphasis, quotes, backticks, a
    ``Verdict:``/``Answer:`` lead, brackets around a letter and final ``.``/``!`` are tolerated.
    """
    if isinstance(words, JudgeVariant):
        words = words.verdicts
    if not reply or not reply.strip():
        return None
    line = [ln for ln in reply.strip().splitlines() if ln.strip()][-1].strip()
    line = re.sub(r"[*_`\"'“”‘’#]", "", line).strip()
    line = _LEAD_RE.sub("", line).strip()
    line = line.rstrip(".!").strip()
    if re.fullmatch(r"\(\s*[A-Za-z]\s*\)|\[\s*[A-Za-z]\s*\]", line):
        line = line.strip("()[] ")
    line = re.sub(r"\s+", " ", line).upper()
    for word, val in words:
        if line == word.upper():
            return val
    return None


def judge_prompt_text(variant: JudgeVariant, question: str, c: dict, max_chars: int = 4000) -> str:
    """The user message for one continuation under one variant."""
    prefix_lines = (c.get("prefix_text") or "").rstrip("\n").split("\n")
    before = "\n".join(prefix_lines[:-1]).strip()
    cont = c.get("continuation") or ""
    if len(cont) > max_chars:
        cont = cont[:max_chars] + "\n[... truncated]"
    parts = [f"Question:\n{question.strip()}", "", "Reasoning so far:", before or "(nothing)",
             f"EDITED LINE: {(c.get('edited_line') or '').strip()}"]
    if variant.show_original:
        parts.append(f"(Before the edit, this line read: {(c.get('original_line') or '').strip()})")
    parts += ["", "Continuation written after the edited line:", cont.strip() or "(empty)", "", variant.instruction]
    return "\n".join(parts)


def slugify(name: str) -> str:
    base = name.rstrip("/").split("/")[-1] if ("/" in name) else name
    base = re.sub(r"\.gguf$", "", base, flags=re.IGNORECASE)
    return re.sub(r"[^a-z0-9.]+", "-", base.lower()).strip("-") or "model"


class JudgeLabeller:
    """A local LLM judge (``--labeller judge:<model>``) asked with every variant, greedily.

    ``lm`` is a :class:`loadbearing.engine.models.LoadedModel`; ``model_name`` is what the user asked for (it names
    the labeller). Only continuations with a correct answer are judged by default (A/B splits non-C);
    the others get ``{"noticed": None, "skipped": ...}``.
    """

    def __init__(self, lm, model_name: str | None = None, *, variants: Sequence[JudgeVariant] = JUDGE_VARIANTS,
                 max_new_tokens: int = 16, batch_size: int = 8, judge_all: bool = False, max_chars: int = 4000,
                 generate_fn: Callable | None = None):
        if len(variants) < 1:
            raise LabelError("a judge needs at least one prompt variant")
        self.lm = lm
        self.model_name = str(model_name or getattr(lm, "name", "model"))
        self.name = f"judge:{self.model_name}"
        self.slug = f"judge-{slugify(self.model_name)}"
        self.variants = tuple(variants)
        self.max_new_tokens = max_new_tokens
        self.batch_size = batch_size
        self.judge_all = judge_all
        self.max_chars = max_chars
        self._generate = generate_fn

    def settings(self) -> dict[str, Any]:
        prov = self.lm.provenance() if hasattr(self.lm, "provenance") else {"name": self.model_name}
        return {
            "name": self.name, "kind": "judge", "version": JUDGE_VERSION, "model": prov,
            "decoding": "greedy", "max_new_tokens": self.max_new_tokens, "batch_size": self.batch_size,
            "judged": "all continuations" if self.judge_all else "continuations with a correct answer",
            "max_continuation_chars": self.max_chars,
            "aggregation": "noticed = the verdict of a strict majority of all variants; otherwise null",
            "parsing": "the last non-empty line of prefill + reply must be exactly one verdict word (a 'Verdict:'/"
                       "'Answer:' lead allowed); anything else is null",
            "variants": [{"name": v.name, "show_original": v.show_original, "system": v.system,
                          "instruction": v.instruction, "prefill": v.prefill,
                          "verdicts": [list(w) for w in v.verdicts]} for v in self.variants],
        }

    def _texts(self, variant: JudgeVariant, question: str, c: dict) -> str:
        msgs = [{"role": "system", "content": variant.system},
                {"role": "user", "content": judge_prompt_text(variant, question, c, self.max_chars)}]
        return self.lm.tokenizer.apply_chat_template(msgs, tokenize=False, add_generation_prompt=True) + variant.prefill

    def label(self, conts: Sequence[dict], questions: dict[str, str] | None = None, *,
              progress: bool = True) -> list[dict[str, Any]]:
        questions = questions or {}
        todo = [i for i, c in enumerate(conts) if self.judge_all or c.get("correct") is True]
        texts, where = [], []
        for i in todo:
            q = questions.get(str(conts[i].get("question_id")), "")
            for v in self.variants:
                texts.append(self._texts(v, q, conts[i]))
                where.append((i, v))
        gen: Callable[..., Any] = self._generate if self._generate is not None else generate
        outs = gen(self.lm, texts, max_new_tokens=self.max_new_tokens, batch_size=self.batch_size,
                   stop_at_answer=False, progress=progress, desc=f"judge {self.model_name}") if texts else []
        per: dict[int, dict] = {i: {} for i in todo}
        for (i, v), g in zip(where, outs):
            per[i][v.name] = {"reply": g.text, "noticed": parse_verdict(v.prefill + g.text, v),
                              "finish_reason": g.finish_reason}
        results: list[dict[str, Any]] = []
        for i in range(len(conts)):
            if i not in per:
                results.append({"noticed": None, "skipped": "answer not correct: A/B is not needed", "variants": {}})
                continue
            votes = [per[i][v.name]["noticed"] for v in self.variants]
            yes, no = votes.count(True), votes.count(False)
            need = len(votes) / 2
            noticed = True if yes > need else False if no > need else None
            results.append({"noticed": noticed, "votes": {"noticed": yes, "not_noticed": no, "null": votes.count(None)},
                            "variants": per[i]})
        return results
