"""Question-grouped, cross-validated linear probes over every cached layer, with the controls that give
their accuracy a meaning.

    python -m probes.train runs/demo/activations.h5 --target propagation --layers all --probe both --folds 5

Reads an activation store (``python -m activations.cache``) and writes a new directory (default
``<store dir>/probes/``; never overwritten; written to a temporary directory and renamed) with:

* ``results.json`` - per probe and layer: held-out accuracy (question-clustered bootstrap interval, Wilson
  over rows for reference), balanced accuracy, AUC; the metadata-only baseline (strategy, position, line,
  task/level; same folds) and the probe's gain over it with a paired question-bootstrap interval; the
  shuffled-label control (100 question-level permutations by default) with a permutation p-value; the
  majority baseline; the nested-CV headline (layer chosen on inner folds of each outer training split)
  with its gain over the metadata baseline and a p-value; accuracy inside each strategy x position cell;
  leave-one-strategy-out transfer and train-on-one transfer; class balance; settings; provenance.
* ``accuracy_vs_layer.png`` and ``directions.h5`` (:mod:`probes.directions`).

Every fitted step is refitted inside each training fold; outer folds are ``StratifiedGroupKFold`` by
question (the store's ``question_key``, else ``question_id``). ``--solver torch`` (default) fits all
logistic probes of a layer in batched solves (:mod:`probes.solver`) that reach scikit-learn's optimum;
``--solver sklearn`` is the reference implementation.

Library use: ``train(ProbeConfig(store=...)) -> Path``; ``is_complete(out_dir)``; ``format_summary(results)``.
"""
from __future__ import annotations

import argparse
import json
import math
import os
import shutil
import sys
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from probes.data import ProbeData, ProbeError, check_folds, load_probe_data, store_dir
from probes.estimators import DEFAULT_CS
from probes.summary import format_summary, print_summary

SCHEMA_VERSION = 2
PROBES = ("logistic", "mass_mean")
TRANSFER_BY = ("strategy", "edit_position")
SOLVERS = ("torch", "sklearn")
RESULTS = "results.json"

__all__ = ["ProbeConfig", "train", "train_stage", "train_probes", "is_complete", "format_summary", "main"]


@dataclass
class ProbeConfig:
    """Everything ``python -m probes.train`` accepts; :meth:`validate` refuses bad values before any work."""

    store: str
    output: str | None = None
    target: str = "propagation"
    layers: str = "all"
    position: str = "prefix_last"
    probe: str = "both"
    folds: int = 5
    inner_folds: int = 3
    group: str = "question"
    seed: int = 0
    conditions: str = "perturbed"
    cs: tuple[float, ...] = DEFAULT_CS
    pca: int | None = None
    n_directions: int = 8
    permutations: int = 100
    bootstrap: int = 1000
    transfer_layer: int | None = None
    transfer: bool = True
    directions: bool = True
    #: fraction of questions held out of the direction fit, so steering can test on unseen questions
    steer_holdout: float = 0.0
    allow_incomplete: bool = False
    allow_leaky: bool = False
    quiet: bool = False
    solver: str = "torch"
    device: str = "auto"
    command: str = field(default="", repr=False)

    def validate(self) -> None:
        """One-line :class:`ProbeError` for any bad value (checks that need the store run in :func:`train`)."""
        cs = tuple(self.cs)
        if not cs or any(not isinstance(c, (int, float)) or not math.isfinite(c) or c <= 0 for c in cs):
            raise ProbeError(f"--cs {','.join(str(c) for c in cs) or '(empty)'}: every C must be a finite number > 0, "
                             f"e.g. --cs 0.01,1,100")
        checks = [
            (self.folds < 2, f"--folds must be at least 2, got {self.folds}"),
            (self.inner_folds < 2, f"--inner-folds must be at least 2, got {self.inner_folds}"),
            (self.pca is not None and self.pca <= 0, f"--pca must be a positive number of components, got {self.pca}"),
            (self.n_directions < 1, f"--n-directions must be at least 1, got {self.n_directions}"),
            (not (math.isfinite(self.steer_holdout) and 0 <= self.steer_holdout < 1),
             f"--steer-holdout must be a fraction in [0, 1), got {self.steer_holdout}"),
            (self.permutations < 0, f"--permutations must be 0 or more, got {self.permutations}"),
            (self.bootstrap < 0, f"--bootstrap must be 0 (off) or more, got {self.bootstrap}"),
            (self.target not in ("propagation", "three_class"),
             f"unknown --target {self.target!r}; choose propagation or three_class"),
            (self.probe not in (*PROBES, "both"), f"unknown --probe {self.probe!r}; choose logistic, mass_mean or both"),
            (self.group not in ("question", "none"), f"unknown --group {self.group!r}; choose question or none"),
            (self.conditions not in ("perturbed", "all"),
             f"unknown --conditions {self.conditions!r}; choose perturbed or all"),
            (self.solver not in SOLVERS, f"unknown --solver {self.solver!r}; choose torch or sklearn"),
            (self.solver == "torch" and self.pca is not None,
             "--pca needs --solver sklearn (the torch solver fits standardised raw features)"),
        ]
        for bad, msg in checks:
            if bad:
                raise ProbeError(msg)
        if self.solver == "torch":
            from probes.solver import resolve_device

            try:
                resolve_device(self.device)
            except ValueError as e:
                raise ProbeError(str(e)) from None

    @property
    def probes(self) -> tuple[str, ...]:
        return PROBES if self.probe == "both" else (self.probe,)

    def out_dir(self) -> Path:
        return Path(self.output) if self.output else store_dir(self.store) / "probes"


# ------------------------------------------------------------------------------------------ helpers
def _jsonable(o: Any) -> Any:
    if isinstance(o, dict):
        return {str(k): _jsonable(v) for k, v in o.items()}
    if isinstance(o, (list, tuple)):
        return [_jsonable(v) for v in o]
    if isinstance(o, np.ndarray):
        return [_jsonable(v) for v in o.tolist()]
    if isinstance(o, np.generic):
        o = o.item()
    if isinstance(o, float) and not np.isfinite(o):
        return None
    return o


def _store_provenance(store: Any) -> dict:
    p = Path(store.path)
    st = p.stat()
    return {"path": str(p.resolve()), "size_bytes": st.st_size, "mtime": st.st_mtime, "n_rows": store.n_rows,
            "attrs": _jsonable(store.attrs)}


class _Backend:
    """The solver behind every fit of a layer: batched torch (default) or the scikit-learn reference."""

    def __init__(self, solver: str = "torch", device: str = "cpu", pca: int | None = None, inner_folds: int = 3,
                 Cs: tuple[float, ...] = DEFAULT_CS, seed: int = 0):
        self.solver, self.pca, self.inner_folds, self.Cs, self.seed = solver, pca, inner_folds, tuple(Cs), seed
        if solver == "torch":
            from probes.solver import resolve_device

            self.device = str(resolve_device(device))
        else:
            self.device = "cpu"

    def cv(self, kind: str, X: np.ndarray, y: np.ndarray, groups: np.ndarray, fold_ids: np.ndarray) -> dict:
        if self.solver == "torch" and not (kind == "logistic" and len(np.unique(y)) > 2 and _lacks_class(y, fold_ids)):
            from probes.fast import cv_predict

            return cv_predict(kind, X, y, groups, fold_ids, Cs=self.Cs, inner_folds=self.inner_folds, seed=self.seed,
                              device=self.device)
        from probes.cv import cross_val_predict_grouped

        return cross_val_predict_grouped(kind, X, y, groups, fold_ids, seed=self.seed, pca=self.pca,
                                         inner_folds=self.inner_folds, Cs=self.Cs)

    def permutations(self, kind: str, X: np.ndarray, Yp: np.ndarray, fold_ids: np.ndarray,
                     C_per_fold: list[float | None]) -> np.ndarray:
        if self.solver == "torch":
            from probes.fast import permutation_correct

            try:
                return permutation_correct(kind, X, Yp, fold_ids, C_per_fold, device=self.device)
            except ValueError:
                pass
        from probes.controls import permutation_correct_sklearn

        return permutation_correct_sklearn(kind, X, Yp, fold_ids, C_per_fold, pca=self.pca, seed=self.seed)

    def fit_predict(self, kind: str, X: np.ndarray, y: np.ndarray, groups: np.ndarray
                    ) -> Any:
        """A ``fit_predict(train_masks, test_masks)`` for :func:`probes.validity.transfer`."""

        def run(trains: list[np.ndarray], tests: list[np.ndarray]) -> list[np.ndarray | None]:
            out: list[np.ndarray | None] = [None] * len(trains)
            live = [i for i, tr in enumerate(trains) if len(np.unique(y[tr])) >= 2 and tests[i].any()]
            if not live:
                return out
            if self.solver == "torch" and not (len(np.unique(y)) > 2 and
                                               any(len(np.unique(y[trains[i]])) < len(np.unique(y)) for i in live)):
                if kind == "logistic":
                    from probes.fast import _predict, logistic_fits

                    fits = logistic_fits(X, y, groups, [trains[i] for i in live], Cs=self.Cs,
                                         inner_folds=self.inner_folds, seed=self.seed, device=self.device)
                    for i, fit in zip(live, fits):
                        if fit is not None:
                            out[i] = _predict(X[tests[i]] @ fit["coef"].T + fit["intercept"])
                    return out
                from probes.fast import _mm_predict, mass_mean_fits

                res = mass_mean_fits(X, np.broadcast_to(y, (len(live), len(y))), np.stack([trains[i] for i in live]))
                for i, r in zip(live, res):
                    if r is not None:
                        out[i] = _mm_predict(X[tests[i]], *r)[0]
                return out
            from probes.cv import pipeline_for

            for i in live:
                tr = trains[i]
                pipe = pipeline_for(kind, int(tr.sum()), X.shape[1], pca=self.pca, seed=self.seed,
                                    inner_folds=self.inner_folds, Cs=self.Cs)
                pipe.fit(X[tr], y[tr], probe__groups=groups[tr])
                out[i] = pipe.predict(X[tests[i]])
            return out

        return run


def _lacks_class(y: np.ndarray, fold_ids: np.ndarray) -> bool:
    K = len(np.unique(y))
    return any(len(np.unique(y[fold_ids != k])) < K for k in range(int(fold_ids.max()) + 1))


def _layer_entry(L: int, real: dict, run: dict, ctrl: dict, gain: dict, seconds: float) -> dict:
    return {
        "layer": int(L),
        **real,
        "control": ctrl,
        "selectivity": ((real["accuracy"]["rate"] - ctrl["accuracy"]["rate"])
                        if real["accuracy"]["rate"] is not None and ctrl["accuracy"]["rate"] is not None else None),
        "control_p_value": ctrl.get("p_value"),
        "gain_over_metadata": gain,
        "inner_score_per_fold": run["inner_score"],
        "C_per_fold": run.get("C_per_fold", run["C"]),
        "n_convergence_warnings": run["n_convergence_warnings"],
        "skipped_folds": run["skipped_folds"],
        "seconds": seconds,
    }


def _summarise_transfer(res: list[dict], y: np.ndarray, groups: np.ndarray, values: np.ndarray, names: list[str],
                        mode: str, boot: dict, ref_pred: np.ndarray | None) -> list[dict]:
    from probes.cv import score_predictions
    from probes.validity import _as_str, paired_gain

    vals = np.array([_as_str(v) for v in values], dtype=object)
    out = []
    for r in res:
        v, pred = r["value"], r["pred"]
        if mode == "leave_one_out":
            m = vals == v
            e = {"held_out": v, "skipped_folds": r["skipped_folds"], "n_train_rows_per_fold": r["n_train_rows_per_fold"],
                 "transfer": score_predictions(y[m], pred[m], names, groups=groups[m], **boot)}
            if ref_pred is not None:
                e["in_distribution"] = score_predictions(y[m], ref_pred[m], names, groups=groups[m], **boot)
                ok = (pred[m] >= 0) & (ref_pred[m] >= 0)
                e["transfer_minus_in_distribution"] = paired_gain(pred[m] == y[m], ref_pred[m] == y[m], groups[m],
                                                                  scored=ok, **boot)
            out.append(e)
        else:
            other = vals != v
            e = {"train_on": v, "skipped_folds": r["skipped_folds"], "n_train_rows_per_fold": r["n_train_rows_per_fold"],
                 "others": score_predictions(y[other], pred[other], names, groups=groups[other], **boot),
                 "within": score_predictions(y[~other], pred[~other], names, groups=groups[~other], **boot),
                 "per_value": {w: score_predictions(y[vals == w], pred[vals == w], names)["accuracy"]
                               for w in sorted(set(vals)) if w != v}}
            out.append(e)
    return out


def steer_split(groups: np.ndarray, fraction: float, seed: int) -> dict[str, Any] | None:
    """A seeded split of the questions: ``held_out`` (about ``fraction`` of them, for steering) and ``fit``
    (the rest, for fitting the directions). Deterministic in the question keys and the seed."""
    if not fraction:
        return None
    import hashlib

    qs = sorted({str(g) for g in groups}, key=lambda k: hashlib.sha256(f"{seed}:{k}".encode()).hexdigest())
    n_out = min(len(qs) - 1, max(1, round(fraction * len(qs))))
    return {"held_out": sorted(qs[:n_out]), "fit": sorted(qs[n_out:]), "key": "question_key", "fraction": fraction}


# ------------------------------------------------------------------------------------------ the study
def train_probes(data: ProbeData, *, probes: tuple[str, ...] = PROBES, folds: int = 5, inner_folds: int = 3,
                 group: str = "question", seed: int = 0, pca: int | None = None, n_directions: int = 8,
                 permutations: int = 100, n_boot: int = 1000, transfer: bool = True,
                 transfer_layer: int | None = None, directions: bool = True, Cs: tuple[float, ...] = DEFAULT_CS,
                 solver: str = "torch", device: str = "cpu", log: Any = None,
                 control_repeats: int | None = None, steer_holdout: float = 0.0) -> tuple[dict, dict]:
    """Run the whole probe study on a :class:`probes.data.ProbeData`. Returns ``(results, directions)`` where
    ``directions`` maps layer -> :func:`probes.direction_fit.fit_directions` result (empty if disabled).
    ``control_repeats`` is the old name of ``permutations``. ``steer_holdout`` > 0 fits the directions on the
    questions outside a seeded held-out fraction (:func:`steer_split`), recorded for the steering stage; the
    cross-validated scores always use every question."""
    from probes.controls import CONTROL_METHOD, max_over_layers_null, null_summary, permutation_p, question_permutations
    from probes.cv import majority_baseline, nested_selection, outer_folds, score_predictions
    from probes.direction_fit import fit_directions
    from probes.validity import metadata_baseline, paired_gain, within_cell
    from probes.validity import transfer as transfer_fn

    if control_repeats is not None:
        permutations = int(control_repeats)
    log = log or (lambda *_: None)
    for pk in probes:
        if pk not in PROBES:
            raise ProbeError(f"unknown probe {pk!r}; choose from {PROBES}")
    be = _Backend(solver, device, pca, inner_folds, tuple(Cs), seed)
    y, names = data.y, data.class_names
    groups = data.groups(group)
    qgroups = data.groups("question")
    qkeys = np.asarray(data.questions).astype(str)  # the question keys themselves (qgroups are their codes)
    split = steer_split(qkeys, steer_holdout, seed) if directions else None
    fit_rows = (~np.isin(qkeys, split["held_out"])) if split else np.ones(len(qkeys), dtype=bool)
    if directions and not np.any(data.y_c[fit_rows] == 1) or directions and not np.any(data.y_c[fit_rows] == 0):
        raise ProbeError(f"the direction-fitting questions (after --steer-holdout {steer_holdout}) hold only one class; "
                         "lower --steer-holdout or label more questions")
    check_folds(y, groups, folds, names)
    fold_ids = outer_folds(y, groups, folds, seed)
    Yp = question_permutations(y, qgroups, permutations, seed + 1)
    boot = {"n_boot": n_boot, "seed": seed}
    # metadata-only baseline, once (it sees no activations): same folds, same grouped inner CV for its C
    t0 = time.perf_counter()
    meta = metadata_baseline(data.meta, y, groups, fold_ids, Cs=Cs, inner_folds=inner_folds, seed=seed)
    meta_scores = score_predictions(y, meta["pred"], names, groups=qgroups, **boot)
    meta_correct = meta["pred"] == y
    per_layer: dict[str, dict] = {pk: {} for pk in probes}
    rows_out: dict[str, list] = {pk: [] for pk in probes}
    perm_correct: dict[str, list] = {pk: [] for pk in probes}
    dirs: dict[int, dict] = {}
    timing: dict[str, Any] = {"metadata_baseline_s": time.perf_counter() - t0, "layers": {}}
    t_all = time.perf_counter()
    for L in data.layers:
        t0 = time.perf_counter()
        X = data.X(L)  # [n, d_model]
        tl: dict[str, float] = {"read_s": time.perf_counter() - t0}
        for pk in probes:
            t1 = time.perf_counter()
            run = be.cv(pk, X, y, groups, fold_ids)
            per_layer[pk][L] = {k: run[k] for k in ("pred", "decision", "inner_score")}
            real = score_predictions(y, run["pred"], names, groups=qgroups, decision=run["decision"], **boot)
            tl[f"{pk}_cv_s"] = time.perf_counter() - t1
            t2 = time.perf_counter()
            ok = run["pred"] >= 0
            if len(Yp):
                pc = be.permutations(pk, X, Yp, fold_ids, run.get("C_per_fold", [None] * folds))
                sizes = np.bincount(fold_ids, minlength=folds)
                n_sc = ((pc >= 0) * sizes[None, :]).sum(1)
                accs = np.where(n_sc > 0, np.where(pc < 0, 0, pc).sum(1) / np.maximum(n_sc, 1), np.nan)
            else:
                pc = np.zeros((0, folds), dtype=np.int64)
                accs = np.zeros(0)
            perm_correct[pk].append(pc)
            ctrl = {"accuracy": null_summary(accs), "n_permutations": int(len(accs)),
                    "accuracy_per_permutation": accs, "p_value": permutation_p(real["accuracy"]["rate"], accs),
                    "method": CONTROL_METHOD}
            tl[f"{pk}_control_s"] = time.perf_counter() - t2
            gain = paired_gain(run["pred"] == y, meta_correct, qgroups, scored=ok & (meta["pred"] >= 0), **boot)
            rows_out[pk].append(_layer_entry(L, real, run, ctrl, gain, time.perf_counter() - t1))
        if directions:
            t2 = time.perf_counter()
            dirs[L] = fit_directions(X[fit_rows], data.y_c[fit_rows], qgroups[fit_rows], n_directions=n_directions,
                                     pca=pca, seed=seed, inner_folds=inner_folds, Cs=Cs, solver=solver,
                                     device=be.device)
            tl["directions_s"] = time.perf_counter() - t2
        tl["total_s"] = time.perf_counter() - t0
        timing["layers"][str(L)] = tl
        msg = "  ".join(f"{pk} {e[-1]['accuracy']['rate']:.3f} (ctrl {e[-1]['control']['accuracy']['rate'] or 0:.3f}, "
                        f"p {e[-1]['control']['p_value'] if e[-1]['control']['p_value'] is not None else float('nan'):.3f})"
                        for pk, e in rows_out.items())
        log(f"layer {L:>3}: {msg}  [{tl['total_s']:.1f}s]")
        del X

    maj = majority_baseline(y, fold_ids, names)
    probes_out: dict[str, dict[str, Any]] = {}
    nested_preds: dict[str, np.ndarray] = {}
    for pk in probes:
        nest = nested_selection(per_layer[pk], data.layers, y, fold_ids)
        nested_preds[pk] = nest["pred"]
        nscore = score_predictions(y, nest["pred"], names, groups=qgroups, decision=nest["decision"], **boot)
        best = max(rows_out[pk], key=lambda e: (e["accuracy"]["rate"] or 0.0))
        counts = {str(L): nest["chosen_layers"].count(L) for L in sorted(set(nest["chosen_layers"]))}
        ok = nest["pred"] >= 0
        nested_gain = paired_gain(nest["pred"] == y, meta_correct, qgroups, scored=ok & (meta["pred"] >= 0), **boot)
        pcs = np.stack(perm_correct[pk]) if perm_correct[pk] and len(Yp) else None
        null = max_over_layers_null(pcs, int(ok.sum())) if pcs is not None else np.zeros(0)
        probes_out[pk] = {
            "layers": rows_out[pk],
            "nested": {
                **nscore,
                "gain_over_metadata": nested_gain,
                "control_p_value": permutation_p(nscore["accuracy"]["rate"], null),
                "control_p_value_method": "against the per-permutation accuracy of the best layer on each held-out "
                                          "fold (an upper bound on any layer-selection rule): conservative",
                "chosen_layers_per_fold": nest["chosen_layers"],
                "chosen_layer_counts": counts,
                "fallback_folds": nest["fallback_folds"],
                "method": "per outer fold, the layer with the best inner grouped-CV score on that fold's training "
                          "split; its predictions on the held-out fold are pooled",
            },
            "within_cell": _jsonable({k: v for k, v in within_cell(
                y, nest["pred"], fold_ids, data.meta["strategy"], data.meta["edit_position"], qgroups).items()
                if k != "cell_majority_pred"}),
            "selected_optimistic": {
                "layer": best["layer"],
                "accuracy": best["accuracy"],
                "balanced_accuracy": best["balanced_accuracy"]["value"],
                "note": "the best layer's own CV score (layer picked by the same held-out data): optimistic, "
                        "not the headline",
            },
        }
    # transfer at one layer per probe: leave-one-strategy-out, and train-on-one by strategy / edit position
    transfer_out: dict[str, dict[str, Any]] = {}
    if transfer:
        avail_by = [b for b in TRANSFER_BY if len(set(("" if v is None else str(v)) for v in data.meta[b])) >= 2]
        for pk in probes:
            if transfer_layer is not None:
                if transfer_layer not in data.layers:
                    raise ProbeError(f"--transfer-layer {transfer_layer} is not among the probed layers {data.layers}")
                TL, why = int(transfer_layer), "--transfer-layer"
            else:
                ch = probes_out[pk]["nested"]["chosen_layers_per_fold"]
                TL = max(sorted(set(ch)), key=ch.count)
                why = "the layer nested CV chose most often"
            if not avail_by:
                transfer_out[pk] = {"layer": TL, "skipped": "fewer than two strategies and edit positions"}
                continue
            t0 = time.perf_counter()
            X = data.X(TL)
            fp = be.fit_predict(pk, X, y, groups)
            ref = per_layer[pk][TL]["pred"]
            transfer_out[pk] = {"layer": TL, "layer_choice": why, "by": {}}
            if "strategy" in avail_by:
                loso = transfer_fn(y, fold_ids, data.meta["strategy"].to_numpy(), fp, mode="leave_one_out")
                transfer_out[pk]["leave_one_strategy_out"] = _summarise_transfer(
                    loso, y, qgroups, data.meta["strategy"].to_numpy(), names, "leave_one_out", boot, ref)
            for b in avail_by:
                res = transfer_fn(y, fold_ids, data.meta[b].to_numpy(), fp, mode="train_on_one")
                transfer_out[pk]["by"][b] = _summarise_transfer(res, y, qgroups, data.meta[b].to_numpy(), names,
                                                                "train_on_one", boot, None)
            timing[f"transfer_{pk}_s"] = time.perf_counter() - t0
            del X
    cc = data.class_counts()
    fold_counts = [{names[i]: int(np.sum((fold_ids == k) & (y == i))) for i in range(len(names))}
                   for k in range(folds)]
    breakdown = {}
    for b in TRANSFER_BY + ("dataset", "task", "condition"):
        vals = [("(none)" if v is None else str(v)) for v in data.meta[b]]
        breakdown[b] = {v: {names[i]: int(sum(1 for a, yy in zip(vals, y) if a == v and yy == i))
                            for i in range(len(names))} for v in sorted(set(vals))}
    headline = {pk: {"accuracy": probes_out[pk]["nested"]["accuracy"],
                     "balanced_accuracy": probes_out[pk]["nested"]["balanced_accuracy"]["value"],
                     "gain_over_metadata": probes_out[pk]["nested"]["gain_over_metadata"],
                     "control_p_value": probes_out[pk]["nested"]["control_p_value"],
                     "chosen_layer_counts": probes_out[pk]["nested"]["chosen_layer_counts"]} for pk in probes}
    timing["total_s"] = time.perf_counter() - t_all
    results = {
        "schema_version": SCHEMA_VERSION,
        "kind": "probes",
        "headline": headline,
        "headline_note": "nested cross-validation (layer selected on inner folds of each outer training split, "
                         "scored on the held-out fold); read it as the gain over the metadata-only baseline",
        "data": {"n_rows": data.n, "n_questions": int(len(np.unique(qgroups))), "group_key": data.group_key,
                 "class_names": names, "class_counts": cc, "per_fold_class_counts": fold_counts,
                 "breakdown": breakdown, "notes": data.notes},
        "majority_baseline": maj,
        "metadata_baseline": {**meta_scores, "features": meta["features"], "C_per_fold": meta["C_per_fold"],
                              "note": meta["note"],
                              "method": "one-hot metadata (no activations) -> LogisticProbe, same outer folds, "
                                        "C by the same grouped inner CV"},
        "control_method": CONTROL_METHOD,
        "intervals_note": "accuracy lo/hi (method cluster-bootstrap) resample questions; wilson/exact treat rows as "
                          "independent (too narrow when a question has several rows)",
        "probes": probes_out,
        "transfer": transfer_out,
        "directions": ({"file": "directions.h5", "layers": sorted(dirs), "target": "C vs non-C",
                        "fitted_on": ("labelled rows of the questions outside the held-out fraction "
                                      f"{steer_holdout}: for steering on the held-out questions, not scored") if split
                        else "all labelled rows (no held-out split): for steering, not scored",
                        "question_split": split} if dirs else None),
        "solver": {"name": solver, "device": be.device},
        "timing": timing,
    }
    return _jsonable(results), dirs


# ------------------------------------------------------------------------------------------ the stage
def is_complete(out_dir: str | os.PathLike) -> bool:
    """True when ``out_dir`` holds a finished probes output (results.json readable, directions.h5 present
    when results list directions)."""
    d = Path(out_dir)
    try:
        r = json.loads((d / RESULTS).read_text())
    except (OSError, ValueError):
        return False
    if r.get("kind") != "probes":
        return False
    return not r.get("directions") or (d / r["directions"].get("file", "directions.h5")).is_file()


def train(config: ProbeConfig) -> Path:
    """Run the probes stage for ``config``; returns the new output directory (written atomically)."""
    from loadbearing.locks import output_lock

    config.validate()
    out = config.out_dir()
    if out.exists():
        raise ProbeError(f"output directory {out} already exists (nothing was overwritten); pass --output NEW_DIR "
                         f"or move the old one away")
    out.parent.mkdir(parents=True, exist_ok=True)
    with output_lock(out, config.command or None):  # one writer per output; a second gets a one-line error
        return _train_unlocked(config, out)


def _train_unlocked(config: ProbeConfig, out: Path) -> Path:
    from activations.store import StoreError, open_store

    store_path = Path(config.store)
    try:
        store_cm = open_store(store_path, allow_incomplete=config.allow_incomplete)
    except OSError as e:
        raise ProbeError(f"cannot read {store_path} as an activation store ({str(e).splitlines()[0]}); re-create it "
                         f"with: python -m activations.cache RUN_DIR") from None
    with store_cm as store:
        if store.leaky and not config.allow_leaky:
            raise ProbeError(f"{store_path} is marked leaky (its features include tokens written after the edit, "
                             f"which carry the outcome); re-cache at pre-outcome positions, or --allow-leaky to "
                             f"run anyway (results invalid)")
        data = load_probe_data(store, target=config.target, conditions=config.conditions, layers=config.layers,
                               position=config.position)
        groups = data.groups(config.group)
        check_folds(data.y, groups, config.folds, data.class_names)  # fail before any work
        if config.pca is not None:
            n_train_min = int(data.n * (config.folds - 1) / config.folds)
            if config.pca > min(n_train_min, store.d_model):
                raise ProbeError(f"--pca {config.pca} exceeds the rows of a training fold (~{n_train_min}) or d_model "
                                 f"({store.d_model}); use --pca {min(n_train_min, store.d_model)} or fewer")
        if config.transfer_layer is not None and config.transfer_layer not in data.layers:
            raise ProbeError(f"--transfer-layer {config.transfer_layer} is not among the probed layers {data.layers}")
        log = (lambda *_: None) if config.quiet else (lambda m: print(m, flush=True))
        log(f"{store_path}: {data.n} labelled rows, {len(np.unique(data.questions.astype(str)))} questions "
            f"(grouped by {data.group_key}), classes {data.class_counts()}, layers {data.layers[0]}..{data.layers[-1]} "
            f"({len(data.layers)}), solver {config.solver}")
        try:
            results, dirs = train_probes(
                data, probes=config.probes, folds=config.folds, inner_folds=config.inner_folds, group=config.group,
                seed=config.seed, pca=config.pca, n_directions=config.n_directions, permutations=config.permutations,
                n_boot=config.bootstrap, transfer=config.transfer, transfer_layer=config.transfer_layer,
                directions=config.directions, Cs=tuple(config.cs), solver=config.solver, device=config.device, log=log,
                steer_holdout=config.steer_holdout)
        except StoreError:
            raise
        prov = _store_provenance(store)
    from loadbearing.files import write_json
    from loadbearing.provenance import git_info, now, package_versions

    settings = {**asdict(config), "cs": list(config.cs), "store": str(store_path.resolve()),
                "probes": list(config.probes), "created": now(),
                "command": config.command or "python -m probes.train " + str(config.store)}
    results = {**results, "settings": settings, "store": prov, "versions": package_versions(), "git": git_info()}
    tmp = out.parent / f".{out.name}.partial-{os.getpid()}"
    out.parent.mkdir(parents=True, exist_ok=True)
    tmp.mkdir()
    try:
        from probes.directions import write_directions
        from probes.plot import plot_accuracy_vs_layer

        write_json(tmp / RESULTS, results)
        plot_accuracy_vs_layer(results, tmp / "accuracy_vs_layer.png")
        if dirs:
            pk = "logistic" if "logistic" in results["probes"] else next(iter(results["probes"]))
            ch = [c for c in results["probes"][pk]["nested"]["chosen_layers_per_fold"] if c in dirs]
            sel = max(sorted(set(ch)), key=ch.count) if ch else None
            write_directions(tmp / "directions.h5", dirs, target=config.target, position=config.position,
                             store=prov, n_directions=config.n_directions, selected_layer=sel,
                             selected_layer_method=f"modal nested-CV layer choice of the {pk} probe over the outer folds",
                             question_split=(results.get("directions") or {}).get("question_split"))
        if out.exists():
            raise ProbeError(f"output directory {out} appeared while probing (nothing was overwritten); "
                             f"pass --output NEW_DIR")
        os.rename(tmp, out)
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        raise
    if not config.quiet:
        print_summary(results, out)
    return out


train_stage = train  # the name study/stages.py looks for


# ------------------------------------------------------------------------------------------ CLI
def build_parser() -> argparse.ArgumentParser:
    d = ProbeConfig(store="")
    p = argparse.ArgumentParser(prog="python -m probes.train", description=__doc__.split("\n\n")[0],
                                formatter_class=argparse.ArgumentDefaultsHelpFormatter)
    p.add_argument("store", help="activation store (.h5) written by python -m activations.cache")
    p.add_argument("--target", choices=("propagation", "three_class"), default=d.target,
                   help="propagation: C vs non-C (y=1 for C, from 'label'); three_class: A/B/C (from 'label3')")
    p.add_argument("--layers", default=d.layers, help="'all', a comma list '0,4,8' or ranges '4-8' of stored layers")
    p.add_argument("--position", default=d.position, help="which stored token position's hidden states to use")
    p.add_argument("--probe", choices=("logistic", "mass_mean", "both"), default=d.probe, help="probe type(s)")
    p.add_argument("--folds", type=int, default=d.folds, help="outer cross-validation folds (grouped by --group)")
    p.add_argument("--inner-folds", type=int, default=d.inner_folds,
                   help="grouped inner folds inside each training split (logistic C; layer-selection score)")
    p.add_argument("--group", choices=("question", "none"), default=d.group,
                   help="CV grouping; 'none' (rows split independently) is an optimistic diagnostic only")
    p.add_argument("--seed", type=int, default=d.seed, help="fold assignment, control permutations, PCA seed")
    p.add_argument("--conditions", choices=("perturbed", "all"), default=d.conditions,
                   help="which continuations to probe: perturbed only, or perturbed + unedited controls")
    p.add_argument("--cs", default=",".join(f"{c:g}" for c in DEFAULT_CS),
                   help="logistic C grid (comma list of numbers > 0) searched by the inner grouped CV")
    p.add_argument("--pca", type=int, default=None, help="optional PCA components, fitted inside each fold "
                   "(needs --solver sklearn)")
    p.add_argument("--n-directions", type=int, default=d.n_directions, help="rows of the exported steering basis")
    p.add_argument("--permutations", "--control-repeats", dest="permutations", type=int, default=d.permutations,
                   help="question-level label permutations of the shuffled-label control (0 = off)")
    p.add_argument("--bootstrap", type=int, default=d.bootstrap, help="question-cluster bootstrap resamples (0 = off)")
    p.add_argument("--transfer-layer", type=int, default=None,
                   help="layer for the transfer checks (default: the layer nested CV chose most often)")
    p.add_argument("--no-transfer", action="store_true", help="skip the transfer checks")
    p.add_argument("--no-directions", action="store_true", help="skip directions.h5")
    p.add_argument("--steer-holdout", type=float, default=d.steer_holdout,
                   help="fraction of questions (seeded) left out of the direction fit and recorded in directions.h5, "
                        "so python -m steering.sweep steers only questions the directions never saw")
    p.add_argument("--solver", choices=SOLVERS, default=d.solver,
                   help="torch: batched solver (same optimum as sklearn's lbfgs); sklearn: the reference")
    p.add_argument("--device", default=d.device, help="torch device: auto, cpu, cuda, cuda:N")
    p.add_argument("--output", default=None, help="new output directory (must not exist); default <store dir>/probes")
    p.add_argument("--allow-incomplete", action="store_true", help="read a store whose caching did not finish")
    p.add_argument("--allow-leaky", action="store_true",
                   help="accept a store marked leaky (features from tokens after the edit): results are not valid")
    p.add_argument("--quiet", action="store_true", help="no per-layer progress lines")
    return p


def parse_cs(spec: str) -> tuple[float, ...]:
    """``"0.01,1,100"`` -> floats; anything else (empty, nan, inf, <= 0, not a number) -> ProbeError."""
    try:
        cs = tuple(float(x) for x in str(spec).split(",") if x.strip())
    except ValueError:
        cs = ()
    if not cs or any(not math.isfinite(c) or c <= 0 for c in cs):
        raise ProbeError(f"--cs {spec!r}: expected a comma list of finite numbers > 0, e.g. --cs 0.01,1,100")
    return cs


def config_from_args(argv: list[str] | None = None) -> ProbeConfig:
    """Parse CLI arguments into a validated :class:`ProbeConfig` (ProbeError on a bad value)."""
    a = build_parser().parse_args(argv)
    argv = list(argv) if argv is not None else sys.argv[1:]
    cfg = ProbeConfig(store=a.store, output=a.output, target=a.target, layers=a.layers, position=a.position,
                      probe=a.probe, folds=a.folds, inner_folds=a.inner_folds, group=a.group, seed=a.seed,
                      conditions=a.conditions, cs=parse_cs(a.cs), pca=a.pca, n_directions=a.n_directions,
                      permutations=a.permutations, bootstrap=a.bootstrap, transfer_layer=a.transfer_layer,
                      transfer=not a.no_transfer, directions=not a.no_directions, steer_holdout=a.steer_holdout,
                      allow_incomplete=a.allow_incomplete, allow_leaky=a.allow_leaky, quiet=a.quiet,
                      solver=a.solver, device=a.device,
                      command="python -m probes.train " + " ".join(str(x) for x in argv))
    cfg.validate()
    return cfg


def main(argv: list[str] | None = None) -> int:
    from activations.store import StoreError
    from loadbearing.files import RunDirError

    try:
        train(config_from_args(argv))
    except (ProbeError, StoreError, RunDirError) as e:
        print(f"error: {e}", file=sys.stderr)
        return 2
    return 0


if __name__ == "__main__":
    sys.exit(main())
