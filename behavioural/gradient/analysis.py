"""The gradient's numbers: per-cell table, clustered logistic regression, deviance partition (both orders),
within-dataset slopes, position test, type-by-difficulty tables, uptake, cross-model comparison, and the
A/B/C taxonomy (the paper's Table 4) when labels exist.

Everything takes the flat rows of :mod:`behavioural.gradient.rows` and returns JSON-ready dicts. Any
analysis that the data cannot support returns ``{"status": "skipped", "message": ...}`` naming why (one
level, no variation, perfect separation, one question), never an exception.

This module holds the tables (per cell, type by difficulty, uptake, taxonomy) and the difficulty axis; the
fitted models are in :mod:`behavioural.gradient.regression` and the rates in :mod:`behavioural.gradient.rates`
(both re-exported here).
"""
from __future__ import annotations

from collections import defaultdict
from collections.abc import Sequence
from typing import Any, cast

from behavioural.gradient.rates import POSITIONS, crate, distinct_generations, pooled, propagation, scored, wrate
from behavioural.gradient.regression import (
    cross_model,
    deviance_partition,
    logistic_curve,
    position_test,
    regression,
    within_dataset,
)
from behavioural.gradient.rows import DATASET_ORDER, GradientError, Loaded, by_key, level_order
from behavioural.gradient.uptake import uptake
from loadbearing.results.check import RateJSON
from loadbearing.stats.design import position_sort_key

__all__ = ["POSITIONS", "cell_table", "crate", "cross_model", "deviance_partition", "difficulty_axis",
           "logistic_curve", "position_test", "regression", "taxonomy", "type_by_difficulty", "uptake_table",
           "within_dataset", "wrate"]


# ---------------------------------------------------------------------------------------------- the table
def cell_table(data: Loaded, *, seed: int = 0) -> list[dict]:
    """One entry per (model, task-or-level): baseline accuracy (paper's definition) and coverage,
    propagation, control error and perturbed coverage with question-clustered intervals, n questions, n
    distinct generations."""
    ext = {}
    for info in data.runs:
        for cell, v in info.external_accuracy.items():
            ext[(info.model, cell)] = v
    bl = by_key(data.baselines, "model", "cell")
    pert = by_key(data.rows, "model", "cell")
    ctrl = by_key(data.controls, "model", "cell")
    eligible_only = {info.model for info in data.runs if info.baselines_eligible_only}
    keys = list(set(bl) | set(pert))
    levels = level_order([k[1] for k in keys])
    ds = {k: (bl.get(k) or pert[k])[0]["dataset"] for k in keys}
    keys.sort(key=lambda k: (k[0], DATASET_ORDER.get(ds[k], 9), ds[k], levels[k[1]]))
    out = []
    for key in keys:
        model, cell = key
        b = bl.get(key, [])
        p = pert.get(key, [])
        c = ctrl.get(key, [])
        dataset = (b or p)[0]["dataset"]
        n_b = len(b)
        n_correct = sum(x["correct"] is True for x in b)
        n_parsed = sum(x["parsed"] for x in b)
        acc: RateJSON | None = None
        acc_parsed: RateJSON | None = None
        cov: RateJSON | None = None
        acc_source = "baselines"
        if model in eligible_only or not b:
            e = ext.get(key)
            if e is not None:
                v = float(e["rate"] if isinstance(e, dict) else e)
                acc = cast(RateJSON, {"k": None, "n": None, "rate": v, "lo": None, "hi": None,  # published: no counts
                                      "method": "published", "n_questions": None, "n_generations": None})
                acc_source = (e.get("source") if isinstance(e, dict) else None) or "published"
            else:
                acc_source = "unknown (imported rows hold only eligible baselines)"
        else:
            acc = wrate(n_correct, n_b, len({x["qkey"] for x in b}))
            acc_parsed = wrate(n_correct, n_parsed)
            cov = wrate(n_parsed, n_b)
        scored_first = [r for r in p if r["first"]]
        out.append({
            "model": model, "cell": cell, "dataset": dataset, "level_index": levels[cell],
            "baseline_accuracy": acc, "baseline_accuracy_parseable": acc_parsed, "baseline_coverage": cov,
            "baseline_accuracy_source": acc_source,
            "baselines": n_b, "eligible": sum(bool(x["eligible"]) for x in b),
            "propagation": pooled(p, seed=seed),
            "control_error": pooled(c, seed=seed),
            "perturbed_coverage": crate([r["label"] is not None for r in scored_first],
                                        [r["qkey"] for r in scored_first], [r["gen"] for r in scored_first]),
            "n_questions": len({r["qkey"] for r in p}),
            "n_generations": len({r["gen"] for r in p}),
            "n_shared_generations": len({r["gen"] for r in p if r["shared"]}),
        })
    return out


def difficulty_axis(cells: list[dict], mode: str = "auto") -> tuple[str, dict[tuple[str, str], float], str]:
    """(axis name, (model, cell) -> difficulty value, description). Higher = harder.

    ``accuracy``: 1 - the cell's baseline accuracy (paper's definition); ``level``: ordinal of the arith level
    (ladder order) or of the dataset (GSM8K < MMLU < BBH, the paper's ordinal). ``auto``: accuracy when every
    cell has it, else level.
    """
    have_acc = all(c["baseline_accuracy"] and c["baseline_accuracy"]["rate"] is not None for c in cells)
    if mode == "auto":
        mode = "accuracy" if have_acc and cells else "level"
    if mode == "accuracy":
        if not have_acc:
            missing = [f"{c['model']}/{c['cell']}" for c in cells if not (c["baseline_accuracy"] or {}).get("rate")]
            raise GradientError(f"--difficulty accuracy needs baseline accuracy for every cell; missing for "
                                f"{', '.join(missing[:3])}; use --difficulty level")
        return "accuracy", {(c["model"], c["cell"]): 1.0 - c["baseline_accuracy"]["rate"] for c in cells}, \
            "difficulty = 1 - baseline accuracy (unparseable counted wrong)"
    if mode != "level":
        raise GradientError(f"unknown --difficulty {mode!r}; choose auto, accuracy or level")
    arith = [c for c in cells if c["dataset"] == "arith"]
    if arith and len(arith) == len(cells):
        return "level", {(c["model"], c["cell"]): float(c["level_index"]) for c in cells}, \
            "difficulty = arith ladder level index (easiest = 0)"
    vals = {}
    for c in cells:
        vals[(c["model"], c["cell"])] = float(DATASET_ORDER.get(c["dataset"], 1))
    return "level", vals, "difficulty = dataset ordinal (GSM8K/arith 0 < MMLU 1 < BBH 2), the paper's ordinal"


# ---------------------------------------------------------------------------------------------- tables
def type_by_difficulty(rows: Sequence[dict], cells: list[dict], *, seed: int = 0) -> dict:
    """Rate per (family, task-or-level) and per (strategy, task-or-level), for each model; lists the cells
    that exist and the ones that do not (runs with different strategy sets)."""
    rows_scored = scored(rows)
    out: dict[str, Any] = {}
    order = [(c["model"], c["cell"]) for c in cells]
    for kind in ("family", "strategy"):
        table: dict[str, dict[str, dict[str, Any]]] = {}
        present, missing = [], []
        for model in sorted({m for m, _ in order}):
            mcells = [c for m, c in order if m == model]
            types = sorted({r[kind] for r in rows if r["model"] == model})
            table[model] = {}
            for t in types:
                table[model][t] = {}
                for cell in mcells:
                    rs = [r for r in rows_scored if r["model"] == model and r["cell"] == cell and r[kind] == t]
                    if rs:
                        table[model][t][cell] = propagation(rs, seed=seed)
                        present.append(f"{model}|{t}|{cell}")
                    else:
                        table[model][t][cell] = None
                        missing.append(f"{model}|{t}|{cell}")
        out[kind] = {"table": table, "present": present, "missing": missing}
    return out


def uptake_table(rows: Sequence[dict], *, seed: int = 0) -> dict:
    """Propagation conditional on uptake (per family and overall), one generation counted once."""
    first = [r for r in scored(rows) if r["first"]]
    for r in first:
        r["uptake"], r["uptake_evidence"] = uptake(r["original_line"], r["edited_line"], r["continuation"])
    out: dict[str, Any] = {}
    for fam in ["all"] + sorted({r["family"] for r in first}):
        rs = [r for r in first if fam == "all" or r["family"] == fam]
        det = [r for r in rs if r["uptake"] is not None]
        entry = {"uptake_rate": crate([r["uptake"] for r in det], [r["qkey"] for r in det], [r["gen"] for r in det], seed=seed),
                 "undetermined": len(rs) - len(det)}
        for name, val in (("taken_up", True), ("not_taken_up", False), ("undetermined", None)):
            sub = [r for r in rs if r["uptake"] is val]
            entry[f"propagation_if_{name}"] = propagation(sub, seed=seed)
        out[fam] = entry
    return out


def taxonomy(rows: Sequence[dict]) -> dict:
    """A/B/C counts and shares by position, strategy and dataset (the paper's Table 4) from the labelling:
    perturbed generations only (a control row, whose edit was not made, is never counted, even if passed);
    each distinct generation once per group, and ``n`` the distinct generations (the verdict's denominator)."""
    lab = [r for r in rows if r.get("abc") in ("A", "B", "C") and r.get("condition", "perturbed") == "perturbed"]
    # each distinct generation once in a group and once in the total (the verdict's and section 1's count)
    pooled_n = len(distinct_generations(lab))
    n_controls = sum(r.get("condition") == "control" for r in rows)
    if not lab:
        return {"status": "skipped", "message": "no A/B/C labelling in these runs (run python -m behavioural.label)"}
    out: dict[str, Any] = {"status": "ok", "n": pooled_n, "n_rows": len(lab), "condition": "perturbed",
                           "controls_excluded": n_controls, "counting": "each distinct generation once per group"}
    for key in ("position", "strategy", "dataset"):
        groups: dict[str, dict[str, int]] = defaultdict(lambda: {"A": 0, "B": 0, "C": 0})
        members: dict[str, list[dict]] = defaultdict(list)
        for r in lab:
            members[str(r[key])].append(r)
        for g, rs in members.items():
            for r in distinct_generations(rs):
                groups[g][r["abc"]] += 1
        order = sorted(groups, key=position_sort_key) if key == "position" else sorted(groups)
        out[key] = {g: {lbl: {"count": n, "share": n / sum(groups[g].values())} for lbl, n in groups[g].items()}
                    for g in order}
    return out
