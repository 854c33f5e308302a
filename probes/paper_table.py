"""The probe results in the layout of the paper's Tables 5-7 (Jia & Mu), from the run's own held-out predictions.

    python -m probes.train runs/demo/activations.h5 --probe logistic,mlp --paper-table
    # -> runs/demo/probes/paper_table.csv and paper_table.md

One row per task, layer and probe, with the released file's columns first, exactly as its header reads
(r2m-ai/load-bearing-cot ``figures/table5_7_probe_with_ci.csv``: ``task,layer,probe,acc_mean,acc_std,acc_ci,
f1_mean,f1_std,per_fold_acc,n``; :data:`PAPER_COLUMNS`): ``task`` ("3-class (A/B/C)", "Binary bypass", "Binary
faithful"), ``layer``, ``probe`` ("linear" is the logistic probe, "mlp", "mass_mean"), ``acc_mean`` and
``acc_std`` (numpy, ddof 0) of the outer folds' accuracies, ``acc_ci`` (the paper's "68.8% +/- 2.6%" string: a
spread of fold scores, not an interval), ``f1_mean`` and ``f1_std`` of each fold's macro F1 (the paper's
``cross_val_score(..., scoring="f1_macro")``, ``scripts/10b_retrain_probes.py``), ``per_fold_acc``
(comma-separated, fold 0 first) and ``n`` (rows), numbers to 3 decimals as released; then the toolkit's:
``target``, ``toolkit_probe``, ``n_questions``, ``n_folds`` (scored folds) and ``best_layer`` ("yes" on the layer
with the highest mean for its task and probe: the paper's pick).

The study's own target reuses the study's folds and predictions (every probe on the same folds); each other
task is cross-validated here on its own rows, question-grouped, with the same seed and fold count. A task
whose class is missing (no B from the rule labeller) or that cannot fill its folds is skipped with one line.
"""
from __future__ import annotations

import csv
import io
from pathlib import Path
from typing import Any

import numpy as np

from loadbearing.files import atomic_write_text
from loadbearing.stats import format_rate
from loadbearing.tables import render_table
from probes.data import CLASSES, ProbeData, ProbeError, absent_classes, check_folds, load_probe_data

PAPER_TASKS = {"three_class": "3-class (A/B/C)", "bypass": "Binary bypass", "propagation": "Binary faithful"}
PAPER_PROBE = {"logistic": "linear", "mass_mean": "mass_mean", "mlp": "mlp"}
#: the released table's header, in its order (figures/table5_7_probe_with_ci.csv, line 1)
PAPER_COLUMNS = ("task", "layer", "probe", "acc_mean", "acc_std", "acc_ci", "f1_mean", "f1_std", "per_fold_acc", "n")
COLUMNS = PAPER_COLUMNS + ("target", "toolkit_probe", "n_questions", "n_folds", "best_layer")
CSV_FILE, MD_FILE = "paper_table.csv", "paper_table.md"
ESTIMANDS = (
    "Two estimands. paper_table.csv is the paper's: for each task, probe and layer, the mean and standard deviation "
    "over the outer question-grouped folds of each fold's accuracy (and the mean macro-F1); the paper then reports "
    "the best layer's row, a layer picked with the same held-out folds, which is optimistic. The toolkit's headline "
    "(results.json 'headline') is the nested-CV accuracy: in each outer fold the layer is chosen by inner CV on "
    "that fold's training split, and the held-out predictions are pooled over folds, with a question-clustered "
    "Korn-Graubard interval. The paper's +/- is a spread of fold scores, not an interval.")


def pm(mean: float | None, std: float | None) -> str:
    """The paper's cell: ``"68.8% +/- 2.6%"``; ``"n/a"`` without a mean."""
    if mean is None or std is None:
        return "n/a"
    return f"{100 * mean:.1f}% +/- {100 * std:.1f}%"


def fold_scores(y: np.ndarray, pred: np.ndarray, fold_ids: np.ndarray) -> tuple[list[float | None], list[float | None]]:
    """Per outer fold: accuracy and macro F1 over its scored rows (``pred >= 0``); None for a fold with none."""
    from sklearn.metrics import f1_score  # deferred: sklearn is heavy to import

    accs: list[float | None] = []
    f1s: list[float | None] = []
    for k in range(int(fold_ids.max()) + 1):
        m = (fold_ids == k) & (pred >= 0)
        if not m.any():
            accs.append(None)
            f1s.append(None)
            continue
        accs.append(float(np.mean(pred[m] == y[m])))
        f1s.append(float(f1_score(y[m], pred[m], average="macro")))
    return accs, f1s


def layer_row(task: str, target: str, layer: int, probe: str, y: np.ndarray, pred: np.ndarray, fold_ids: np.ndarray,
              questions: np.ndarray) -> dict[str, Any]:
    """One row of the table (see the module docstring) from held-out predictions ``pred`` (-1 = unscored)."""
    y, pred = np.asarray(y), np.asarray(pred)
    accs, f1s = fold_scores(y, pred, fold_ids)
    a = np.array([v for v in accs if v is not None], dtype=float)
    f = np.array([v for v in f1s if v is not None], dtype=float)
    mean = float(a.mean()) if len(a) else None
    std = float(a.std()) if len(a) else None
    return {"task": task, "layer": int(layer), "probe": PAPER_PROBE.get(probe, probe), "acc_mean": mean,
            "acc_std": std, "acc_ci": pm(mean, std), "f1_mean": float(f.mean()) if len(f) else None,
            "f1_std": float(f.std()) if len(f) else None,
            "per_fold_acc": accs, "n": int(len(y)), "target": target, "toolkit_probe": probe,
            "n_questions": int(len(np.unique(np.asarray(questions).astype(str)))), "n_folds": int(len(a)),
            "best_layer": ""}


def _mark_best(rows: list[dict[str, Any]]) -> None:
    for key in {(r["task"], r["probe"]) for r in rows}:
        sub = [r for r in rows if (r["task"], r["probe"]) == key and r["acc_mean"] is not None]
        if sub:
            max(sub, key=lambda r: (r["acc_mean"], -r["layer"]))["best_layer"] = "yes"


def _other_task(target: str, data: ProbeData, *, be: Any, probes: tuple[str, ...], folds: int, group: str,
                seed: int) -> tuple[ProbeData, np.ndarray, dict[str, dict[int, np.ndarray]]]:
    """Load ``target``'s rows from the study's store and cross-validate every probe at every layer."""
    from probes.fit.cv import outer_folds  # deferred: probes.fit.cv loads sklearn

    d = load_probe_data(data.store, target=target, conditions=data.conditions, layers=data.layers,
                        position=data.position)
    if absent_classes(d):
        return d, np.zeros(0, dtype=np.int64), {}
    groups = d.groups(group)
    check_folds(d.y, groups, folds, d.class_names)
    fold_ids = outer_folds(d.y, groups, folds, seed)
    preds: dict[str, dict[int, np.ndarray]] = {pk: {} for pk in probes}
    for L in d.layers:
        X = d.X(L)  # [n, d_model]
        for pk in probes:
            preds[pk][L] = be.cv(pk, X, d.y, groups, fold_ids)["pred"]
        del X
    return d, fold_ids, preds


def paper_section(data: ProbeData, per_layer: dict[str, dict[int, dict]], fold_ids: np.ndarray, *, be: Any,
                  probes: tuple[str, ...], folds: int, group: str = "question", seed: int = 0,
                  log: Any = None) -> dict[str, Any]:
    """The ``paper_table`` section of results.json: rows for the paper's three tasks (the study's own target
    from ``per_layer`` / ``fold_ids``; the others cross-validated here), the tasks skipped and why, the note."""
    log = log or (lambda *_: None)
    rows: list[dict[str, Any]] = []
    skipped: dict[str, str] = {}
    for target, task in PAPER_TASKS.items():
        try:
            if target == data.target:
                d, fids = data, fold_ids
                preds = {pk: {L: per_layer[pk][L]["pred"] for L in data.layers} for pk in probes}
            else:
                d, fids, preds = _other_task(target, data, be=be, probes=probes, folds=folds, group=group, seed=seed)
        except ProbeError as e:
            skipped[task] = str(e)
            log(f"paper table: skipping {task!r} (--target {target}): {e}")
            continue
        missing = absent_classes(d)
        if missing:
            skipped[task] = (f"no {', '.join(missing)} among the {d.n} labelled rows (classes "
                             f"{'/'.join(CLASSES[target])} needed)")
            log(f"paper table: skipping {task!r} (--target {target}): {skipped[task]}")
            continue
        for pk in probes:
            for L in d.layers:
                rows.append(layer_row(task, target, L, pk, d.y, preds[pk][L], fids, d.questions))
    _mark_best(rows)
    return {"columns": list(COLUMNS), "rows": rows, "skipped": skipped, "note": ESTIMANDS,
            "study_target": data.target, "folds": int(folds), "seed": int(seed)}


def _cell(v: Any) -> str:
    if v is None:
        return ""
    if isinstance(v, float):
        return f"{v:.3f}"
    if isinstance(v, list):
        return ",".join("" if x is None else f"{x:.3f}" for x in v)
    return str(v)


def to_csv(section: dict[str, Any]) -> str:
    buf = io.StringIO()
    w = csv.writer(buf, lineterminator="\n")
    w.writerow(COLUMNS)
    for r in section["rows"]:
        w.writerow([_cell(r[c]) for c in COLUMNS])
    return buf.getvalue()


def to_markdown(section: dict[str, Any], headline: dict[str, Any] | None = None) -> str:
    """The companion note: which estimand is which, the best layer per task and probe, the toolkit's nested
    headline beside it, the skipped tasks, and every row."""
    rows = section["rows"]
    out = ["# Probe accuracy in the paper's layout (its Tables 5-7)", "", section["note"], ""]
    best = [r for r in rows if r["best_layer"] == "yes"]
    if best:
        out += ["## The paper's estimand: best layer per task and probe (mean +/- std over the outer folds)", "",
                render_table(["task", "probe", "layer", "accuracy", "F1", "n"],
                             [[r["task"], r["probe"], str(r["layer"]), r["acc_ci"], _cell(r["f1_mean"]), str(r["n"])]
                              for r in best], style="md"), ""]
    if headline:
        task = PAPER_TASKS.get(section.get("study_target", ""), section.get("study_target", ""))
        out += [f"## The toolkit's estimand: nested-CV headline ({task}, --target {section.get('study_target')})", "",
                render_table(["probe", "accuracy (question-clustered 95% CI)", "layers chosen per fold", "shuffled-label p"],
                             [[PAPER_PROBE.get(pk, pk), format_rate(h["accuracy"], style="text") if h.get("accuracy")
                               else "n/a", str(h.get("chosen_layer_counts")),
                               "n/a" if h.get("control_p_value") is None else f"{h['control_p_value']:.3f}"]
                              for pk, h in headline.items()], style="md"), ""]
    for task, why in section.get("skipped", {}).items():
        out.append(f"- skipped {task}: {why}")
    if section.get("skipped"):
        out.append("")
    out += ["## Every layer", "", render_table(list(PAPER_COLUMNS), [[_cell(r[c]) for c in PAPER_COLUMNS] for r in rows],
                                               style="md"), ""]
    return "\n".join(out)


def write_paper_table(out_dir: str | Path, results: dict[str, Any]) -> list[Path]:
    """``paper_table.csv`` and ``paper_table.md`` from ``results["paper_table"]`` into ``out_dir``."""
    section = results["paper_table"]
    d = Path(out_dir)
    atomic_write_text(d / CSV_FILE, to_csv(section))
    atomic_write_text(d / MD_FILE, to_markdown(section, results.get("headline")))
    return [d / CSV_FILE, d / MD_FILE]


__all__ = ["paper_section", "write_paper_table", "layer_row", "fold_scores", "pm", "to_csv", "to_markdown",
           "PAPER_TASKS", "PAPER_PROBE", "PAPER_COLUMNS", "COLUMNS", "CSV_FILE", "MD_FILE", "ESTIMANDS"]
