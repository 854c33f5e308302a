"""The probe study on loaded data: per-layer grouped CV of each probe with its controls, the metadata-only
baseline, nested layer selection (the headline), within-cell accuracy, transfer, and the steering directions.

    from probes.data import load_probe_data
    from probes.experiment import train_probes
    results, directions = train_probes(load_probe_data(store), probes=("logistic",), folds=5)

:func:`train_probes` works on a :class:`probes.data.ProbeData` and returns plain JSON-ready results; the stage
(:mod:`probes.stage`) reads the store and publishes the output directory.
"""
from __future__ import annotations

import hashlib
import time
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from probes.baseline import design_cells, study_baselines
from probes.config import ALL_PROBES, PROBES, SCHEMA_VERSION, TRANSFER_BY
from probes.controls import (
    CONTROL_METHOD,
    control_cs,
    fold_accuracy,
    gain_null,
    layer_control,
    max_over_layers_null,
    nested_null,
    null_summary,
    permutation_p,
    question_permutations,
)
from probes.data import ProbeData, ProbeError, check_folds
from probes.fit.backend import Backend
from probes.fit.cv import majority_baseline, nested_selection, outer_folds, score_predictions
from probes.fit.direction_fit import fit_directions
from probes.fit.estimators import DEFAULT_CS
from probes.fit.mlp_cv import MLPBackend
from probes.paper_table import paper_section
from probes.sections import data_section, directions_section, headline, jsonable
from probes.steer_layer import layer_score, steer_folds
from probes.validity import paired_gain, summarise_transfer, within_cell
from probes.validity import transfer as transfer_fn


def steer_split(groups: np.ndarray, fraction: float, seed: int) -> dict[str, Any] | None:
    """A seeded split of the questions: ``held_out`` (about ``fraction`` of them, for steering) and ``fit``
    (the rest, for fitting the directions). Deterministic in the question keys and the seed."""
    if not fraction:
        return None
    qs = sorted({str(g) for g in groups}, key=lambda k: hashlib.sha256(f"{seed}:{k}".encode()).hexdigest())
    n_out = min(len(qs) - 1, max(1, round(fraction * len(qs))))
    return {"held_out": sorted(qs[:n_out]), "fit": sorted(qs[n_out:]), "key": "question_key", "fraction": fraction}


@dataclass
class _Study:
    """The fixed inputs every step of one study shares."""

    data: ProbeData
    probes: tuple[str, ...]
    folds: int
    be: Backend
    groups: np.ndarray  # CV groups (--group)
    qgroups: np.ndarray  # question codes: bootstraps and permutations
    fold_ids: np.ndarray
    Yp: np.ndarray  # [P, n] permuted labels
    boot: dict[str, int]
    meta: dict[str, Any]  # the metadata-only baseline's held-out predictions
    meta_correct: np.ndarray
    splits: Any = None  # inner splits of every permuted label vector (probes.fit.permuted.inner_masks)
    meta_perm_correct: np.ndarray | None = None  # [P, F] the metadata baseline refitted on each permutation
    steer_fold_ids: np.ndarray | None = None  # folds over the direction-fitting questions (probes.steer_layer)
    steer_scores: dict = field(default_factory=dict)  # layer -> C-vs-non-C accuracy over the fit questions

    @property
    def sizes(self) -> np.ndarray:
        return np.bincount(self.fold_ids, minlength=self.folds)

    @property
    def y(self) -> np.ndarray:
        return self.data.y

    @property
    def names(self) -> list[str]:
        return self.data.class_names

    def gain(self, pred: np.ndarray) -> dict[str, Any]:
        """The paired question-bootstrap gain of ``pred`` over the metadata baseline on rows both score."""
        ok = pred >= 0
        return paired_gain(pred == self.y, self.meta_correct, self.qgroups, scored=ok & (self.meta["pred"] >= 0),
                           **self.boot)


def _direction_rows(data: ProbeData, directions: bool, steer_holdout: float, seed: int
                    ) -> tuple[dict[str, Any] | None, np.ndarray]:
    """The question split for the directions and the rows they are fitted on (refuses a one-class fit set)."""
    qkeys = np.asarray(data.questions).astype(str)  # the question keys themselves (qgroups are their codes)
    split = steer_split(qkeys, steer_holdout, seed) if directions else None
    fit_rows = (~np.isin(qkeys, split["held_out"])) if split else np.ones(len(qkeys), dtype=bool)
    if directions and not np.any(data.y_c[fit_rows] == 1) or directions and not np.any(data.y_c[fit_rows] == 0):
        raise ProbeError(f"the direction-fitting questions (after --steer-holdout {steer_holdout}) hold only one class; "
                         "lower --steer-holdout or label more questions")
    return split, fit_rows


def _control(S: _Study, pk: str, X: np.ndarray, run: dict, real: dict
             ) -> tuple[tuple[np.ndarray, np.ndarray | None], dict[str, Any]]:
    """The shuffled-label control of one probe at one layer: ``((correct [P, F], inner [P, F] or None), summary)``."""
    pc, inner = layer_control(S.be, pk, X, S.Yp, S.groups, S.fold_ids, S.splits,
                              run.get("C_per_fold", [None] * S.folds))
    accs = fold_accuracy(pc, S.sizes) if len(pc) else np.zeros(0)
    ctrl = {"accuracy": null_summary(accs), "n_permutations": int(len(accs)),
            **({"Cs": control_cs(S.be.Cs, run.get("C_per_fold", []))} if pk == "logistic" else {}),
            "accuracy_per_permutation": accs, "p_value": permutation_p(real["accuracy"]["rate"], accs),
            "method": CONTROL_METHOD if inner is not None else
            "the probe's own refits of the first permutations (its hyperparameters fixed at the real labels' choice)"}
    return (pc, inner), ctrl


def _layer_entry(L: int, real: dict, run: dict, ctrl: dict, gain: dict, seconds: float) -> dict[str, Any]:
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


def _probe_layer(S: _Study, pk: str, L: int, X: np.ndarray, tl: dict[str, float]
                 ) -> tuple[dict[str, Any], dict[str, Any], tuple[np.ndarray, np.ndarray | None]]:
    """CV, control and gain of probe ``pk`` at layer ``L``: ``(CV run, layer entry, permutation counts)``."""
    t1 = time.perf_counter()
    run = S.be.cv(pk, X, S.y, S.groups, S.fold_ids)
    real = score_predictions(S.y, run["pred"], S.names, groups=S.qgroups, decision=run["decision"], **S.boot)
    tl[f"{pk}_cv_s"] = time.perf_counter() - t1
    t2 = time.perf_counter()
    pc, ctrl = _control(S, pk, X, run, real)
    tl[f"{pk}_control_s"] = time.perf_counter() - t2
    entry = _layer_entry(L, real, run, ctrl, S.gain(run["pred"]), time.perf_counter() - t1)
    return run, entry, pc


def _layer_message(rows_out: dict[str, list]) -> str:
    def one(pk: str, e: dict) -> str:
        c = e["control"]
        p = c["p_value"] if c["p_value"] is not None else float("nan")
        return f"{pk} {e['accuracy']['rate']:.3f} (ctrl {c['accuracy']['rate'] or 0:.3f}, p {p:.3f})"
    return "  ".join(one(pk, e[-1]) for pk, e in rows_out.items())


def _nested(S: _Study, pk: str, per_layer: dict, rows: list[dict], perm: list[tuple[np.ndarray, Any]]) -> dict[str, Any]:
    """The headline of probe ``pk``: nested layer selection, its control and the gain's p-value (the same
    selection on every permutation's inner scores, against the metadata baseline refitted on it), within-cell
    accuracy, best layer."""
    data, y, qgroups = S.data, S.y, S.qgroups
    nest = nested_selection(per_layer, data.layers, y, S.fold_ids)
    nscore = score_predictions(y, nest["pred"], S.names, groups=qgroups, decision=nest["decision"], **S.boot)
    best = max(rows, key=lambda e: (e["accuracy"]["rate"] or 0.0))
    counts = {str(L): nest["chosen_layers"].count(L) for L in sorted(set(nest["chosen_layers"]))}
    ok = nest["pred"] >= 0
    nested_gain = S.gain(nest["pred"])
    exact = bool(perm) and all(i is not None for _, i in perm) and len(perm[0][0]) > 0
    null, gnull = np.zeros(0), np.zeros(0)
    if exact:
        nc = nested_null(np.stack([c for c, _ in perm]), np.stack([i for _, i in perm]))  # [P, F]
        null = fold_accuracy(nc, S.sizes)
        if S.meta_perm_correct is not None:
            gnull = gain_null(nc, S.meta_perm_correct[: len(nc)], S.sizes)
    elif perm and len(perm[0][0]):
        null = max_over_layers_null(np.stack([c for c, _ in perm]), int(ok.sum()))
    lv = next((c for c in ("difficulty", "level") if c in data.meta.columns), None)
    cells = within_cell(y, nest["pred"], S.fold_ids, data.meta["strategy"], data.meta["edit_position"], qgroups,
                        level=None if lv is None else data.meta[lv])
    return {
        "layers": rows,
        "nested": {
            **nscore,
            "gain_over_metadata": nested_gain,
            "control_p_value": permutation_p(nscore["accuracy"]["rate"], null),
            "control_p_value_method": ("the same nested layer selection on each permutation's inner scores" if exact
                                       else "against the per-permutation accuracy of the best layer on each held-out "
                                            "fold (an upper bound on any layer-selection rule): conservative"),
            "gain_p_value": permutation_p(nested_gain["value"], gnull),
            "gain_p_value_method": "nested probe minus the metadata baseline, both refitted on each permutation; "
                                   "one-sided (gain >= real)",
            "null_gain_mean": float(np.nanmean(gnull)) if len(gnull) else None,
            "chosen_layers_per_fold": nest["chosen_layers"],
            "chosen_layer_counts": counts,
            "fallback_folds": nest["fallback_folds"],
            "method": "per outer fold, the layer with the best inner grouped-CV score on that fold's training "
                      "split; its predictions on the held-out fold are pooled",
        },
        "within_cell": jsonable({k: v for k, v in cells.items() if k != "cell_majority_pred"}),
        "selected_optimistic": {
            "layer": best["layer"],
            "accuracy": best["accuracy"],
            "balanced_accuracy": best["balanced_accuracy"]["value"],
            "note": "the best layer's own CV score (layer picked by the same held-out data): optimistic, "
                    "not the headline",
        },
    }


def _transfer(S: _Study, probes_out: dict, per_layer: dict, transfer_layer: int | None,
              timing: dict[str, Any]) -> dict[str, dict[str, Any]]:
    """Transfer at one layer per probe: leave-one-strategy-out, and train-on-one by strategy / edit position."""
    data, y = S.data, S.y
    out: dict[str, dict[str, Any]] = {}
    avail_by = [b for b in TRANSFER_BY if len(set(("" if v is None else str(v)) for v in data.meta[b])) >= 2]
    for pk in S.probes:
        if transfer_layer is not None:
            if transfer_layer not in data.layers:
                raise ProbeError(f"--transfer-layer {transfer_layer} is not among the probed layers {data.layers}")
            TL, why = int(transfer_layer), "--transfer-layer"
        else:
            ch = probes_out[pk]["nested"]["chosen_layers_per_fold"]
            TL = max(sorted(set(ch)), key=ch.count)
            why = "the layer nested CV chose most often"
        if not avail_by:
            out[pk] = {"layer": TL, "skipped": "fewer than two strategies and edit positions"}
            continue
        t0 = time.perf_counter()
        X = data.X(TL)
        fp = S.be.fit_predict(pk, X, y, S.groups)
        ref = per_layer[pk][TL]["pred"]
        out[pk] = {"layer": TL, "layer_choice": why, "by": {}}
        if "strategy" in avail_by:
            strat = data.meta["strategy"].to_numpy()
            loso = transfer_fn(y, S.fold_ids, strat, fp, mode="leave_one_out")
            out[pk]["leave_one_strategy_out"] = summarise_transfer(loso, y, S.qgroups, strat, S.names,
                                                                   "leave_one_out", S.boot, ref)
        for b in avail_by:
            vals = data.meta[b].to_numpy()
            res = transfer_fn(y, S.fold_ids, vals, fp, mode="train_on_one")
            out[pk]["by"][b] = summarise_transfer(res, y, S.qgroups, vals, S.names, "train_on_one", S.boot, None)
        timing[f"transfer_{pk}_s"] = time.perf_counter() - t0
        del X
    return out


def _layer_pass(S: _Study, *, directions: bool, fit_rows: np.ndarray, direction_kw: dict[str, Any], log: Any,
                timing: dict[str, Any]
                ) -> tuple[dict[str, dict[int, dict[str, Any]]], dict[str, list[dict[str, Any]]],
                           dict[str, list[tuple[np.ndarray, np.ndarray | None]]], dict[int, dict[str, Any]]]:
    """Every layer once: each probe's CV, control and gain, and the layer's directions.
    Returns ``(per_layer CV runs, layer entries, permutation counts, directions)``, each keyed by probe
    (directions by layer)."""
    data = S.data
    per_layer: dict[str, dict[int, dict[str, Any]]] = {pk: {} for pk in S.probes}
    rows_out: dict[str, list[dict[str, Any]]] = {pk: [] for pk in S.probes}
    perm_correct: dict[str, list[tuple[np.ndarray, np.ndarray | None]]] = {pk: [] for pk in S.probes}
    dirs: dict[int, dict[str, Any]] = {}
    for L in data.layers:
        t0 = time.perf_counter()
        X = data.X(L)  # [n, d_model]
        tl: dict[str, float] = {"read_s": time.perf_counter() - t0}
        for pk in S.probes:
            run, entry, pc = _probe_layer(S, pk, L, X, tl)
            per_layer[pk][L] = {k: run[k] for k in ("pred", "decision", "inner_score")}
            perm_correct[pk].append(pc)
            rows_out[pk].append(entry)
        if directions:
            t2 = time.perf_counter()
            # every row: the layer's own array, so the solver reuses the eigenbasis its CV computed (a copy would
            # recompute it: 15 s a layer at the paper's size)
            Xf = X if fit_rows.all() else X[fit_rows]
            dirs[L] = fit_directions(Xf, data.y_c[fit_rows], S.qgroups[fit_rows], device=S.be.device,
                                     **direction_kw)
            if S.steer_fold_ids is not None:  # the default steering layer, without the held-out questions

                S.steer_scores[L] = layer_score(S.be, X, data.y_c, S.groups, fit_rows, S.steer_fold_ids)
            tl["directions_s"] = time.perf_counter() - t2
        tl["total_s"] = time.perf_counter() - t0
        timing["layers"][str(L)] = tl
        log(f"layer {L:>3}: {_layer_message(rows_out)}  [{tl['total_s']:.1f}s]")
        del X
    return per_layer, rows_out, perm_correct, dirs


def train_probes(data: ProbeData, *, probes: tuple[str, ...] = PROBES, folds: int = 5, inner_folds: int = 3,
                 group: str = "question", seed: int = 0, pca: int | None = None, n_directions: int = 8,
                 permutations: int = 100, n_boot: int = 1000, transfer: bool = True,
                 transfer_layer: int | None = None, directions: bool = True, Cs: tuple[float, ...] = DEFAULT_CS,
                 solver: str = "torch", device: str = "cpu", log: Any = None,
                 control_repeats: int | None = None, steer_holdout: float = 0.0, mlp: dict[str, Any] | None = None,
                 paper_table: bool = False) -> tuple[dict[str, Any], dict[int, dict[str, Any]]]:
    """Run the whole probe study on a :class:`probes.data.ProbeData`. Returns ``(results, directions)`` where
    ``directions`` maps layer -> :func:`probes.fit.direction_fit.fit_directions` result (empty if disabled).
    ``control_repeats`` is the old name of ``permutations``. ``steer_holdout`` > 0 fits the directions on the
    questions outside a seeded held-out fraction (:func:`steer_split`), recorded for the steering stage; the
    cross-validated scores always use every question."""
    if control_repeats is not None:
        permutations = int(control_repeats)
    log = log or (lambda *_: None)
    for pk in probes:
        if pk not in ALL_PROBES:
            raise ProbeError(f"unknown probe {pk!r}; choose from {ALL_PROBES}")
    be = Backend(solver, device, pca, inner_folds, tuple(Cs), seed)
    mlp_be: Any = None
    if "mlp" in probes:  # the MLP probe (probes.fit.mlp_cv): same folds, baselines and controls; settings in mlp

        be = mlp_be = MLPBackend(be, **(mlp or {}))
        log(mlp_be.describe(permutations))
    y, names = data.y, data.class_names
    groups = data.groups(group)
    qgroups = data.groups("question")
    split, fit_rows = _direction_rows(data, directions, steer_holdout, seed)
    check_folds(y, groups, folds, names)
    fold_ids = outer_folds(y, groups, folds, seed)
    Yp, scheme = question_permutations(y, qgroups, permutations, seed + 1, cells=design_cells(data.meta),
                                       with_info=True)
    boot = {"n_boot": n_boot, "seed": seed}
    # metadata-only baseline (no activations): same folds, candidates chosen by the same grouped inner CV, on
    # the real labels and refitted on every permutation (the gain's null)
    t0 = time.perf_counter()
    meta, meta_perm, splits = study_baselines(data.meta, y, Yp, groups, fold_ids, inner_folds=inner_folds, seed=seed,
                                              Cs=tuple(Cs))
    meta_scores = score_predictions(y, meta["pred"], names, groups=qgroups, **boot)
    S = _Study(data=data, probes=tuple(probes), folds=folds, be=be, groups=groups, qgroups=qgroups,
               fold_ids=fold_ids, Yp=Yp, boot=boot, meta=meta, meta_correct=meta["pred"] == y, splits=splits,
               meta_perm_correct=meta_perm)
    if directions and split:
        S.steer_fold_ids = steer_folds(data.y_c, groups, fit_rows, folds, seed)
    timing: dict[str, Any] = {"metadata_baseline_s": time.perf_counter() - t0, "layers": {}}
    t_all = time.perf_counter()
    direction_kw = {"n_directions": n_directions, "pca": pca, "seed": seed, "inner_folds": inner_folds, "Cs": Cs,
                    "solver": solver}
    per_layer, rows_out, perm_correct, dirs = _layer_pass(S, directions=directions, fit_rows=fit_rows,
                                                          direction_kw=direction_kw, log=log, timing=timing)
    maj = majority_baseline(y, fold_ids, names)
    probes_out = {pk: _nested(S, pk, per_layer[pk], rows_out[pk], perm_correct[pk]) for pk in S.probes}
    transfer_out = _transfer(S, probes_out, per_layer, transfer_layer, timing) if transfer else {}
    data_sec = data_section(data, qgroups, fold_ids, folds)
    head = headline(probes_out)
    timing["total_s"] = time.perf_counter() - t_all
    results = {
        "schema_version": SCHEMA_VERSION,
        "kind": "probes",
        "headline": head,
        "headline_note": "nested cross-validation (layer selected on inner folds of each outer training split, "
                         "scored on the held-out fold); read it as the gain over the metadata-only baseline",
        "data": data_sec,
        "majority_baseline": maj,
        "metadata_baseline": {**meta_scores, **{k: v for k, v in meta.items() if k != "pred"},
                              "method": "per outer fold the better, by inner grouped CV on the training split, of "
                                        "one-hot metadata -> L2 logistic (C by the same inner CV) and a smoothed "
                                        "strategy x position x level lookup table (no activations)"},
        "control_method": CONTROL_METHOD,
        "control_scheme": scheme,
        "intervals_note": "accuracy lo/hi (method korn-graubard) are question-clustered; wilson/exact treat rows as "
                          "independent (too narrow when a question has several rows); gains are question-clustered "
                          "paired intervals",
        "probes": probes_out,
        "transfer": transfer_out,
        "directions": directions_section(dirs, split, steer_holdout, S.steer_scores),
        "solver": {"name": solver, "device": be.device},
        "timing": timing,
    }
    if mlp_be is not None:
        results["mlp"] = mlp_be.settings()
    if paper_table:  # the paper's Tables 5-7 layout (probes.paper_table), from these folds and predictions

        results["paper_table"] = paper_section(data, per_layer, fold_ids, be=be, probes=S.probes, folds=folds,
                                               group=group, seed=seed, log=log)
    return jsonable(results), dirs


__all__ = ["train_probes", "steer_split", "jsonable"]
