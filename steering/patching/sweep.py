"""One case's patching sweep: every layer x position group, plus the random-position and random-layer controls.

Per case (a C prefix and the clean control at the same cut, :mod:`steering.patching.cases`):

1. Align the two prefixes (:mod:`steering.patching.align`) and build, for each run, two scored rows:
   ``prefix + "Answer:" + correct answer`` and ``prefix + "Answer:" + propagated answer``.
2. ONE forward of the clean rows scores the clean run and records every needed layer's residual at the aligned
   clean positions only (:func:`steering.patching.engine.record`); one forward of the edited rows scores the
   edited run.
3. Every patch (layer, positions) becomes two rows of the edited input; all of them run batched
   (:func:`steering.patching.engine.score_rows`).

Metric: ``ld = log P(correct) - log P(propagated)``, each the sum of the answer string's token log-probs
teacher-forced after the answer-line prefix. ``restored = (ld_patched - ld_edited) / (ld_clean - ld_edited)``,
null where ``|ld_clean - ld_edited| < min_gap`` (the case is then excluded from the means, and counted).

The ``before`` group is a built-in null: its tokens are the same in both prefixes and attention is causal, so
its residuals are already the clean run's at every layer and patching them restores 0 (up to float noise);
likewise the random-position controls mostly draw such positions. What moves the answer sits at the edited
line and after it (``edit``, ``last``; ``all`` = their union plus the no-op ``before``).

Controls, per case: *random-position* - for each (layer, group), as many aligned positions drawn at random from
outside the group (null when fewer are left); *random-layer* - for each group, the same positions patched at a
layer drawn uniformly from all the model's hidden-state layers.
"""
from __future__ import annotations

from typing import Any

import numpy as np

from loadbearing.answers import final_answer_line, score
from steering.patching.align import GROUPS, align_texts, answer_tokens
from steering.patching.cases import Case
from steering.patching.engine import Patch, greedy_patched, record, score_rows


def restored(ld: float, ld_edited: float, ld_clean: float, min_gap: float) -> float | None:
    gap = ld_clean - ld_edited
    return None if abs(gap) < min_gap else float((ld - ld_edited) / gap)


def _cut_at_answer(text: str) -> str:
    lines = text.split("\n")
    for i, ln in enumerate(lines):
        if final_answer_line(ln):
            return "\n".join(lines[:i + 1])
    return text


def _eos_ids(lm: Any) -> list[int]:
    ids = {lm.tokenizer.eos_token_id}
    cfg = getattr(getattr(lm.model, "generation_config", None), "eos_token_id", None)
    ids |= set(cfg if isinstance(cfg, (list, tuple)) else [cfg])
    return sorted(int(i) for i in ids if i is not None)


def plan_patches(groups: dict[str, list[int]], aligned: list[int], layers: list[int], n_hidden: int,
                 rng: np.random.Generator) -> list[dict[str, Any]]:
    """The case's patch list: sweep cells, then random-position and random-layer controls (seeded)."""
    plan = [{"kind": "sweep", "layer": lay, "group": g, "positions": groups[g]} for lay in layers for g in GROUPS]
    for lay in layers:
        for g in GROUPS:
            own = set(groups[g])
            pool = [p for p in aligned if p not in own]
            if len(pool) >= len(own):
                pick = sorted(int(x) for x in rng.choice(pool, size=len(own), replace=False))
                plan.append({"kind": "random-position", "layer": lay, "group": g, "positions": pick})
    for g in GROUPS:
        plan.append({"kind": "random-layer", "layer": int(rng.integers(0, n_hidden + 1)), "group": g,
                     "positions": groups[g]})
    return plan


def patch_case(lm: Any, case: Case, question: Any, *, layers: list[int], n_hidden: int, rng: np.random.Generator,
               batch_size: int = 32, min_gap: float = 0.1, flip: bool = False, flip_tokens: int = 48,
               progress: Any = None) -> dict[str, Any]:
    """Run one case's sweep and controls; returns its output row (see the module docstring)."""
    tok, model = lm.tokenizer, lm.model
    pad_id = tok.pad_token_id if tok.pad_token_id is not None else 0
    e, c = case.edited, case.clean
    e_ids, c_ids, al = align_texts(tok, e.input_text, e.edit_span, c.input_text, c.edit_span)
    head, ans_ok = answer_tokens(tok, str(e.gold))
    _, ans_bad = answer_tokens(tok, str(e.parsed_answer))
    answers = [ans_ok, ans_bad]
    groups = al.groups()
    clean_of = al.clean_of()
    aligned = [p for p, _ in al.pairs()]
    plan = plan_patches(groups, aligned, layers, n_hidden, rng)
    need_layers = sorted({p["layer"] for p in plan})
    clean_pos = sorted(clean_of.values())
    col = {p: i for i, p in enumerate(clean_pos)}

    c_rows = [c_ids + head + a for a in answers]
    with record(model, need_layers, clean_pos) as rec:
        lp_clean = score_rows(model, c_rows, answers, len(c_ids) + len(head) - 1, batch_size=2, pad_id=pad_id)
    e_rows = [e_ids + head + a for a in answers]
    offset = len(e_ids) + len(head) - 1
    lp_edited = score_rows(model, e_rows, answers, offset, batch_size=2, pad_id=pad_id)
    ld_clean, ld_edited = float(lp_clean[0] - lp_clean[1]), float(lp_edited[0] - lp_edited[1])

    patches: list[Patch | None] = []
    for p in plan:
        idx = [col[clean_of[q]] for q in p["positions"]]
        patch = Patch(p["layer"], p["positions"], rec.values[p["layer"]][idx])
        patches += [patch, patch]
    rows = [e_rows[j] for _ in plan for j in (0, 1)]
    row_answers = [answers[j] for _ in plan for j in (0, 1)]
    if progress is not None:  # the bar grows case by case (the controls' count depends on the case)
        progress.total = (progress.total or 0) + len(rows)
        progress.refresh()
    lp = score_rows(model, rows, row_answers, offset, patches=patches, batch_size=batch_size, pad_id=pad_id,
                    progress=progress)
    results = []
    for i, p in enumerate(plan):
        ld = float(lp[2 * i] - lp[2 * i + 1])
        results.append({"kind": p["kind"], "layer": p["layer"], "group": p["group"], "n_positions": len(p["positions"]),
                        "ld": ld, "restored": restored(ld, ld_edited, ld_clean, min_gap)})
    row: dict[str, Any] = {
        "id": e.id, "control_id": c.id, "question_id": e.question_id, "question_key": case.question_key,
        "dataset": e.dataset, "task": e.task, "strategy": e.strategy, "position": e.position,
        "line_index": e.line_index, "gold": e.gold, "propagated": e.parsed_answer, "control_label": c.label,
        "original_line": e.original_line, "edited_line": e.edited_line,
        "alignment": al.to_dict() | {"groups": {g: len(v) for g, v in groups.items()}},
        "answer_tokens": {"head": len(head), "correct": len(ans_ok), "propagated": len(ans_bad)},
        "ld_edited": ld_edited, "ld_clean": ld_clean, "gap": ld_clean - ld_edited,
        "excluded": abs(ld_clean - ld_edited) < min_gap, "results": results,
    }
    if 0 in layers and al.rule == "equal-length":  # layer 0, every prefix position: the clean run exactly
        ld0 = next(r["ld"] for r in results if r["kind"] == "sweep" and r["layer"] == 0 and r["group"] == "all")
        row["check_layer0_all_abs_diff"] = abs(ld0 - ld_clean)
    if flip:
        sweep = [(p, patches[2 * i]) for i, p in enumerate(plan) if p["kind"] == "sweep"]
        outs = greedy_patched(model, e_ids, [None] + [q for _, q in sweep], max_new_tokens=flip_tokens,
                              eos_ids=_eos_ids(lm), pad_id=pad_id, batch_size=batch_size)
        flips = []
        for (p, _), ids in zip([({"layer": None, "group": "none"}, None)] + sweep, outs):
            text = _cut_at_answer(tok.decode(ids, skip_special_tokens=True))
            parsed, correct = score(text, question)
            flips.append({"layer": p["layer"], "group": p["group"], "text": text, "parsed": parsed, "correct": correct})
        row["flips"] = flips
    return row


__all__ = ["patch_case", "plan_patches", "restored"]
