"""The rules that fill a study's unset settings from its model and dataset, and the one block that prints them.

    from study.settings import resolve, settings_block
    config, rules = resolve(StudyConfig(output_dir="runs/x", model="gemma-2-9b-it", dataset="bbh"))
    print(settings_block(config, rules))      # every setting, with the rule that filled each unset one

Budgets follow the model: the embedded SmolLM2-135M keeps its small CPU budgets (96 new tokens, 64 when
steering); any other model gets the paper's (4,096 each) unless the user sets them. Tasks and strategies
follow the dataset (the arith ladder keeps its three demo levels and edits; the benchmarks take every task and the
paper's strategies). Few-shot: the benchmark's own exemplars for the embedded model (it needs them), the
dataset's default for any other model. Resolving a resolved config changes nothing.
"""
from __future__ import annotations

import dataclasses

from study.config import StudyConfig

EMBEDDED = "smollm2-135m-instruct"
#: the generation budgets: (behaviour, steering)
EMBEDDED_BUDGET = (96, 64)
PAPER_BUDGET = (4096, 4096)
#: the arith demo: three levels of different difficulty for the embedded model (baseline accuracy about 41-45%,
#: 38-41% and 20%: three cells for the difficulty test and the within-dataset slope), three edits that give both
#: outcomes. 53 per level: 159 questions, every one sampled under the study's max_examples of 160, about 55
#: eligible (correct with >= 3 lines): make demo stays within 10 minutes on 2 CPU cores. No level the
#: model answers gives distinct middle and late edits (it writes 3 or 4 reasoning lines even at s3/s4, where
#: min(n - 2, floor(n f)) puts both on one line); the fits merge them into one position, middle=late.
ARITH_TASK = "s2_o3,s2_o5,s2_o9"
ARITH_STRATEGY = "arithmetic,arithmetic_change,contradiction"
ARITH_PER_LEVEL = 53
#: the paper's edits per dataset (numerical + text on GSM8K; the four multiple-choice edits on MMLU; both on
#: BBH, where a multiple-choice edit is recorded as not applicable on a task without options)
MC = "wrong_elimination,false_analogy,reversed_logic,confidence_injection"
PAPER_STRATEGY = {"gsm8k": "arithmetic,contradiction", "mmlu": MC, "bbh": f"arithmetic,contradiction,{MC}",
                  "arith": ARITH_STRATEGY}
#: datasets with benchmark exemplars in loadbearing.questions.exemplars (arith's are on by default anyway)
EXEMPLAR_DATASETS = ("gsm8k", "mmlu", "bbh")


def is_embedded(model: str) -> bool:
    return model == EMBEDDED


def resolve(c: StudyConfig) -> tuple[StudyConfig, dict[str, str]]:
    """(the config with every None that has a rule filled, {setting: the rule that filled it})."""
    rules: dict[str, str] = {}
    fill: dict[str, object] = {}
    emb = is_embedded(c.model)
    budget, who = (EMBEDDED_BUDGET, "embedded model: CPU budget") if emb else (PAPER_BUDGET, "not the embedded "
                                                                                  "model: the paper's budget")
    if c.max_new_tokens is None:
        fill["max_new_tokens"], rules["max_new_tokens"] = budget[0], who
    if c.steer_max_new_tokens is None:
        fill["steer_max_new_tokens"], rules["steer_max_new_tokens"] = budget[1], who
    if c.dataset == "arith":
        if c.task is None:
            fill["task"], rules["task"] = ARITH_TASK, "arith: the demo's three levels"
        if c.n_per_level is None:
            fill["n_per_level"], rules["n_per_level"] = ARITH_PER_LEVEL, "arith: every question of a level sampled"
    elif c.task is None and c.dataset in ("mmlu", "bbh"):
        rules["task"] = f"{c.dataset}: every {'subject' if c.dataset == 'mmlu' else 'task'} (none given)"
    if c.dataset != "arith" and c.n_per_level is not None:
        fill["n_per_level"], rules["n_per_level"] = None, f"{c.dataset}: not arith, unused"
    if c.strategy is None and c.dataset in PAPER_STRATEGY:
        why = "arith: the demo's three edits" if c.dataset == "arith" else f"{c.dataset}: the paper's edits"
        fill["strategy"], rules["strategy"] = PAPER_STRATEGY[c.dataset], why
    if c.few_shot is None:
        if emb and c.dataset in EXEMPLAR_DATASETS:
            fill["few_shot"], rules["few_shot"] = True, f"embedded model: {c.dataset}'s own exemplars"
        else:
            rules["few_shot"] = "the dataset's default (on for arith only)"
    return dataclasses.replace(c, **fill), rules  # type: ignore[arg-type]


def settings_block(c: StudyConfig, rules: dict[str, str], *, title: str = "study settings") -> str:
    """Every setting in one block, one per line: ``name = value   (rule)`` for the ones a rule filled."""
    d = c.to_dict()
    width = max(len(k) for k in d)
    lines = [f"---- {title} " + "-" * max(4, 60 - len(title))]
    for k, v in d.items():
        shown = "(all)" if v is None and k == "stages" else "-" if v is None else v
        lines.append(f"  {k:<{width}} = {shown}" + (f"   ({rules[k]})" if k in rules else ""))
    lines.append("-" * 66)
    return "\n".join(lines)


__all__ = ["EMBEDDED", "EMBEDDED_BUDGET", "PAPER_BUDGET", "PAPER_STRATEGY", "is_embedded", "resolve",
           "settings_block"]
