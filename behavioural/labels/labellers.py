"""Notice labellers: did a continuation visibly notice (and repair) the injected error?

Two labellers, both mapping one continuation record (a line of ``continuations.jsonl`` as a dict) to a
``noticed`` verdict (True / False / None = undecidable) plus the evidence behind it:

* :class:`RuleLabeller` (``rule``, :mod:`behavioural.labels.rule`) - a transparent detector of correction
  phrases, restated original lines or values, and contradictions of the edit, each with its character span;
* :class:`JudgeLabeller` (``judge:<model>``, :mod:`behavioural.labels.judge`) - a local model asked greedily
  with several prompt variants, each reply parsed strictly, ``noticed`` by a strict majority of all variants.

:func:`kappa` and :func:`variant_agreement` (:mod:`behavioural.labels.agreement`) report agreement between
variants, labellers and annotators. :func:`make_labeller` builds a labeller from its CLI spec. Nothing here
loads a model at import time.
"""
from __future__ import annotations

from behavioural.labels.agreement import kappa, variant_agreement
from behavioural.labels.judge import (
    JUDGE_VARIANTS,
    JUDGE_VERSION,
    JudgeLabeller,
    JudgeVariant,
    judge_prompt_text,
    parse_verdict,
    slugify,
)
from behavioural.labels.records import LabelError
from behavioural.labels.rule import CORRECTION_PHRASES, EVIDENCE_KINDS, RULE_VERSION, RuleLabeller, favoured_option, rule_evidence

__all__ = [
    "CORRECTION_PHRASES",
    "EVIDENCE_KINDS",
    "JUDGE_VARIANTS",
    "JUDGE_VERSION",
    "JudgeLabeller",
    "JudgeVariant",
    "RULE_VERSION",
    "RuleLabeller",
    "favoured_option",
    "judge_prompt_text",
    "kappa",
    "make_labeller",
    "parse_verdict",
    "rule_evidence",
    "slugify",
    "variant_agreement",
]


def make_labeller(spec: str, *, device: str | None = None, dtype: str | None = None, quantize: str | None = None,
                  **judge_kw) -> RuleLabeller | JudgeLabeller:
    """Build a labeller from a CLI spec: ``rule`` or ``judge:<model>`` (loads the model)."""
    if spec == "rule":
        return RuleLabeller()
    if spec.startswith("judge:") and len(spec) > len("judge:"):
        from loadbearing.engine.models import load_model  # deferred: tests monkeypatch loadbearing.engine.models.load_model

        name = spec[len("judge:"):]
        return JudgeLabeller(load_model(name, device=device, dtype=dtype, quantize=quantize), name, **judge_kw)
    raise LabelError(f"unknown labeller {spec!r}; use 'rule' or 'judge:<model>' (e.g. judge:smollm2-135m-instruct)")
