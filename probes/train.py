"""Question-grouped, cross-validated linear probes over every cached layer.

    python -m probes.train runs/demo/activations.h5 --target propagation --layers all --probe both --folds 5

Reads an activation store (``python -m activations.cache``), and writes a new directory (default
``<store dir>/probes/``; never overwritten) with:

* ``results.json`` - per probe and layer: held-out accuracy and balanced accuracy (Wilson intervals over
  rows, plus a question-clustered bootstrap interval), AUC (two classes), the shuffled-label control and
  selectivity (accuracy - control accuracy); the majority-class baseline; the nested-CV headline (layer
  chosen on inner folds of each outer training split, scored on the outer fold) and, labelled as such, the
  best layer's own (optimistic) score; transfer checks across strategies and edit positions; class balance;
  settings; the store's provenance.
* ``accuracy_vs_layer.png`` - accuracy vs layer with intervals, control, majority baseline and headline.
* ``directions.h5`` - per layer steering directions in raw residual coordinates, fitted on all labelled rows
  (see :mod:`probes.directions`; read them with :func:`probes.load_directions`).

Every fitted step (StandardScaler, optional PCA, probe) is refitted inside each training fold; outer folds
are ``StratifiedGroupKFold`` by question id; the probes' inner CV (logistic C, inner score for layer
selection) is grouped by question inside the training split too.
"""
from __future__ import annotations

import argparse
import json
import os
import shutil
import sys
import time
from pathlib import Path

import numpy as np

from probes.data import ProbeError, check_folds, load_probe_data, store_dir
from probes.estimators import DEFAULT_CS

SCHEMA_VERSION = 1
PROBES = ("logistic", "mass_mean")
TRANSFER_BY = ("strategy", "edit_position")


def build_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="python -m probes.train", description=__doc__.split("\n\n")[0],
                                formatter_class=argparse.ArgumentDefaultsHelpFormatter)
    p.add_argument("store", help="activation store (.h5) written by python -m activations.cache")
    p.add_argument("--target", choices=("propagation", "three_class"), default="propagation",
                   help="propagation: C vs non-C (y=1 for C, from 'label'); three_class: A/B/C (from 'label3')")
    p.add_argument("--layers", default="all", help="'all', a comma list '0,4,8' or ranges '4-8' of stored layers")
    p.add_argument("--position", default="prefix_last", help="which stored token position's hidden states to use")
    p.add_argument("--probe", choices=("logistic", "mass_mean", "both"), default="both", help="probe type(s)")
    p.add_argument("--folds", type=int, default=5, help="outer cross-validation folds (grouped by --group)")
    p.add_argument("--inner-folds", type=int, default=3,
                   help="grouped inner folds inside each training split (logistic C; layer-selection score)")
    p.add_argument("--group", choices=("question", "none"), default="question",
                   help="CV grouping; 'none' (rows split independently) is an optimistic diagnostic only")
    p.add_argument("--seed", type=int, default=0, help="fold assignment, control permutation, PCA seed")
    p.add_argument("--conditions", choices=("perturbed", "all"), default="perturbed",
                   help="which continuations to probe: perturbed only, or perturbed + unedited controls")
    p.add_argument("--cs", default=",".join(f"{c:g}" for c in DEFAULT_CS),
                   help="logistic C grid (comma list) searched by the inner grouped CV")
    p.add_argument("--pca", type=int, default=None, help="optional PCA components (fitted inside each fold)")
    p.add_argument("--n-directions", type=int, default=8, help="rows of the exported orthonormal steering basis")
    p.add_argument("--control-repeats", type=int, default=1, help="shuffled-label control repetitions")
    p.add_argument("--bootstrap", type=int, default=1000, help="question-cluster bootstrap resamples (0 = off)")
    p.add_argument("--transfer-layer", type=int, default=None,
                   help="layer for the transfer checks (default: the layer nested CV chose most often)")
    p.add_argument("--no-transfer", action="store_true", help="skip the transfer checks")
    p.add_argument("--no-directions", action="store_true", help="skip directions.h5")
    p.add_argument("--output", default=None, help="new output directory (must not exist); default <store dir>/probes")
    p.add_argument("--allow-incomplete", action="store_true", help="read a store whose caching did not finish")
    p.add_argument("--allow-leaky", action="store_true",
                   help="accept a store marked leaky (features from tokens after the edit): results are not valid")
    p.add_argument("--quiet", action="store_true", help="no per-layer progress lines")
    return p


def _jsonable(o):
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


def _store_provenance(store) -> dict:
    p = Path(store.path)
    st = p.stat()
    return {"path": str(p.resolve()), "size_bytes": st.st_size, "mtime": st.st_mtime, "n_rows": store.n_rows,
            "attrs": _jsonable(store.attrs)}


def _layer_entry(L, real_scores, ctrl_scores, real_run, ctrl_accs, seconds) -> dict:
    acc = real_scores["accuracy"]["rate"]
    cacc = float(np.mean(ctrl_accs)) if ctrl_accs else None
    bal, cbal = real_scores["balanced_accuracy"]["value"], ctrl_scores["balanced_accuracy"]["value"]
    return {
        "layer": int(L),
        **real_scores,
        "control": {**ctrl_scores, "accuracy_per_repeat": ctrl_accs},
        "selectivity": (acc - cacc) if acc is not None and cacc is not None else None,
        # permutation p-value of the accuracy against the control repeats (coarse with few repeats)
        "control_p_value": ((1 + sum(c >= acc for c in ctrl_accs if c is not None)) / (1 + len(ctrl_accs))
                            if acc is not None and ctrl_accs else None),
        "selectivity_balanced": (bal - cbal) if bal is not None and cbal is not None else None,
        "inner_score_per_fold": real_run["inner_score"],
        "C_per_fold": real_run["C"],
        "n_convergence_warnings": real_run["n_convergence_warnings"],
        "skipped_folds": real_run["skipped_folds"],
        "seconds": seconds,
    }


def train_probes(data, *, probes=PROBES, folds: int = 5, inner_folds: int = 3, group: str = "question", seed: int = 0,
                 pca: int | None = None, n_directions: int = 8, control_repeats: int = 1, n_boot: int = 1000,
                 transfer: bool = True, transfer_layer: int | None = None, directions: bool = True,
                 Cs=DEFAULT_CS, log=None) -> tuple[dict, dict]:
    """Run the whole probe study on a :class:`probes.data.ProbeData`. Returns ``(results, directions)`` where
    ``directions`` maps layer -> :func:`probes.directions.fit_directions` result (empty if disabled)."""
    from probes.cv import (cross_val_predict_grouped, majority_baseline, nested_selection, outer_folds,
                           permute_by_group, score_predictions, transfer_check)
    from probes.direction_fit import fit_directions

    log = log or (lambda *_: None)
    for pk in probes:
        if pk not in PROBES:
            raise ProbeError(f"unknown probe {pk!r}; choose from {PROBES}")
    y, names = data.y, data.class_names
    groups = data.groups(group)
    qgroups = data.groups("question")
    check_folds(y, groups, folds, names)
    fold_ids = outer_folds(y, groups, folds, seed)
    rng = np.random.default_rng(seed + 1)
    y_perms = [permute_by_group(y, groups, rng) for _ in range(max(1, int(control_repeats)))]
    pipe_kw = {"pca": pca, "inner_folds": inner_folds, "Cs": tuple(Cs)}
    boot = {"n_boot": n_boot, "seed": seed}
    per_layer = {pk: {} for pk in probes}
    rows_out = {pk: [] for pk in probes}
    dirs = {}
    timing = {"layers": {}}
    t_all = time.perf_counter()
    for L in data.layers:
        t0 = time.perf_counter()
        X = data.X(L)  # [n, d_model]
        t_read = time.perf_counter() - t0
        for pk in probes:
            t1 = time.perf_counter()
            run = cross_val_predict_grouped(pk, X, y, groups, fold_ids, seed=seed, **pipe_kw)
            per_layer[pk][L] = {k: run[k] for k in ("pred", "decision", "inner_score")}
            real = score_predictions(y, run["pred"], names, groups=qgroups, decision=run["decision"], **boot)
            ctrl_accs, ctrl0 = [], None
            for r, yp in enumerate(y_perms):
                cr = cross_val_predict_grouped(pk, X, yp, groups, fold_ids, seed=seed, **pipe_kw)
                cs = score_predictions(yp, cr["pred"], names, groups=qgroups, decision=cr["decision"], **boot)
                ctrl_accs.append(cs["accuracy"]["rate"])
                if r == 0:
                    ctrl0 = cs
            rows_out[pk].append(_layer_entry(L, real, ctrl0, run, ctrl_accs, time.perf_counter() - t1))
        if directions:
            t2 = time.perf_counter()
            dirs[L] = fit_directions(X, data.y_c, qgroups, n_directions=n_directions, pca=pca, seed=seed,
                                     inner_folds=inner_folds, Cs=Cs)
            timing["layers"].setdefault(str(L), {})["directions_s"] = time.perf_counter() - t2
        timing["layers"].setdefault(str(L), {}).update({"read_s": t_read, "total_s": time.perf_counter() - t0})
        msg = "  ".join(f"{pk} {e[-1]['accuracy']['rate']:.3f} (ctrl {e[-1]['control']['accuracy']['rate']:.3f})"
                        for pk, e in rows_out.items())
        log(f"layer {L:>3}: {msg}  [{time.perf_counter() - t0:.1f}s]")
        del X

    maj = majority_baseline(y, fold_ids, names)
    probes_out = {}
    for pk in probes:
        nest = nested_selection(per_layer[pk], data.layers, y, fold_ids)
        nscore = score_predictions(y, nest["pred"], names, groups=qgroups, decision=nest["decision"], **boot)
        best = max(rows_out[pk], key=lambda e: (e["accuracy"]["rate"] or 0.0))
        counts = {str(L): nest["chosen_layers"].count(L) for L in sorted(set(nest["chosen_layers"]))}
        probes_out[pk] = {
            "layers": rows_out[pk],
            "nested": {
                **nscore,
                "chosen_layers_per_fold": nest["chosen_layers"],
                "chosen_layer_counts": counts,
                "fallback_folds": nest["fallback_folds"],
                "method": "per outer fold, the layer with the best inner grouped-CV score on that fold's training "
                          "split; its predictions on the held-out fold are pooled",
            },
            "selected_optimistic": {
                "layer": best["layer"],
                "accuracy": best["accuracy"],
                "balanced_accuracy": best["balanced_accuracy"]["value"],
                "note": "the best layer's own CV score (layer picked by the same held-out data): optimistic, "
                        "not the headline",
            },
        }
    # transfer checks at one layer per probe
    transfer_out = {}
    if transfer:
        avail_by = [b for b in TRANSFER_BY
                    if len(set(("" if v is None else str(v)) for v in data.meta[b])) >= 2]
        for pk in probes:
            if transfer_layer is not None:
                if transfer_layer not in data.layers:
                    raise ProbeError(f"--transfer-layer {transfer_layer} is not among the probed layers {data.layers}")
                TL = int(transfer_layer)
                why = "--transfer-layer"
            else:
                ch = probes_out[pk]["nested"]["chosen_layers_per_fold"]
                TL = max(sorted(set(ch)), key=ch.count)
                why = "the layer nested CV chose most often"
            if not avail_by:
                transfer_out[pk] = {"layer": TL, "skipped": "fewer than two strategies and edit positions"}
                continue
            X = data.X(TL)
            transfer_out[pk] = {"layer": TL, "layer_choice": why, "by": {}}
            for b in avail_by:
                transfer_out[pk]["by"][b] = transfer_check(pk, X, y, groups, fold_ids, data.meta[b].to_numpy(),
                                                           names, seed=seed, n_boot=n_boot, **pipe_kw)
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
                     "chosen_layer_counts": probes_out[pk]["nested"]["chosen_layer_counts"]} for pk in probes}
    timing["total_s"] = time.perf_counter() - t_all
    results = {
        "schema_version": SCHEMA_VERSION,
        "kind": "probes",
        "headline": headline,
        "headline_note": "nested cross-validation: layer selected on inner folds of each outer training split, "
                         "scored on the held-out outer fold",
        "data": {"n_rows": data.n, "n_questions": int(len(np.unique(qgroups))), "class_names": names,
                 "class_counts": cc, "per_fold_class_counts": fold_counts, "breakdown": breakdown,
                 "notes": data.notes},
        "majority_baseline": maj,
        "intervals_note": "wilson/exact treat rows as independent; cluster_ci is a percentile bootstrap over "
                          "questions (rows of one question are correlated): prefer cluster_ci",
        "probes": probes_out,
        "transfer": transfer_out,
        "directions": ({"file": "directions.h5", "layers": sorted(dirs), "fitted_on": "all labelled rows (no "
                        "held-out split): for steering, not scored", "target": "C vs non-C"} if dirs else None),
        "timing": timing,
    }
    return _jsonable(results), dirs


def run(args) -> Path:
    """Run the CLI's work for parsed ``args``; returns the output directory."""
    from activations.store import open_store

    store_path = Path(args.store)
    Cs = _parse_cs(args.cs)
    out = Path(args.output) if args.output else store_dir(store_path) / "probes"
    if out.exists():
        raise ProbeError(f"output directory {out} already exists (nothing was overwritten); pass --output NEW_DIR "
                         f"or move the old one away")
    with open_store(store_path, allow_incomplete=args.allow_incomplete) as store:
        if store.leaky and not args.allow_leaky:
            raise ProbeError(f"{store_path} is marked leaky (its features include tokens written after the edit, "
                             f"which carry the outcome); re-cache at pre-outcome positions, or --allow-leaky to "
                             f"run anyway (results invalid)")
        data = load_probe_data(store, target=args.target, conditions=args.conditions, layers=args.layers,
                               position=args.position)
        probes = PROBES if args.probe == "both" else (args.probe,)
        groups = data.groups(args.group)
        check_folds(data.y, groups, args.folds, data.class_names)  # fail before any work
        if args.transfer_layer is not None and args.transfer_layer not in data.layers:
            raise ProbeError(f"--transfer-layer {args.transfer_layer} is not among the probed layers {data.layers}")
        log = (lambda *_: None) if args.quiet else (lambda m: print(m, flush=True))
        log(f"{store_path}: {data.n} labelled rows, {len(np.unique(data.questions.astype(str)))} questions, "
            f"classes {data.class_counts()}, layers {data.layers[0]}..{data.layers[-1]} ({len(data.layers)})")
        results, dirs = train_probes(
            data, probes=probes, folds=args.folds, inner_folds=args.inner_folds, group=args.group, seed=args.seed,
            pca=args.pca, n_directions=args.n_directions, control_repeats=args.control_repeats,
            n_boot=args.bootstrap, transfer=not args.no_transfer, transfer_layer=args.transfer_layer,
            directions=not args.no_directions, Cs=Cs, log=log)
        prov = _store_provenance(store)
    from behavioural.rundir import git_info, now, package_versions

    settings = {k: v for k, v in vars(args).items()}
    argv = settings.pop("_argv", None)
    argv = sys.argv[1:] if argv is None else argv
    settings.update({"store": str(store_path.resolve()), "probes": list(probes), "created": now(),
                     "command": "python -m probes.train " + " ".join(str(a) for a in argv)})
    results = {**results, "settings": settings, "store": prov, "versions": package_versions(), "git": git_info()}
    tmp = out.parent / f".{out.name}.partial-{os.getpid()}"
    out.parent.mkdir(parents=True, exist_ok=True)
    tmp.mkdir()
    try:
        from behavioural.rundir import write_json
        from probes.directions import write_directions
        from probes.plot import plot_accuracy_vs_layer

        write_json(tmp / "results.json", results)
        plot_accuracy_vs_layer(results, tmp / "accuracy_vs_layer.png")
        if dirs:
            pk = "logistic" if "logistic" in results["probes"] else next(iter(results["probes"]))
            ch = [c for c in results["probes"][pk]["nested"]["chosen_layers_per_fold"] if c in dirs]
            sel = max(sorted(set(ch)), key=ch.count) if ch else None
            write_directions(tmp / "directions.h5", dirs, target=args.target, position=args.position,
                             store=prov, n_directions=args.n_directions, selected_layer=sel,
                             selected_layer_method=f"modal nested-CV layer choice of the {pk} probe over the outer folds")
        if out.exists():
            raise ProbeError(f"output directory {out} appeared while probing (nothing was overwritten); "
                             f"pass --output NEW_DIR")
        os.rename(tmp, out)
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        raise
    _print_summary(results, out)
    return out


def _parse_cs(spec: str) -> tuple[float, ...]:
    try:
        cs = tuple(float(x) for x in str(spec).split(",") if x.strip())
    except ValueError:
        raise ProbeError(f"--cs {spec!r}: expected a comma list of positive numbers, e.g. 0.01,1,100") from None
    if not cs or min(cs) <= 0:
        raise ProbeError(f"--cs {spec!r}: expected a comma list of positive numbers, e.g. 0.01,1,100")
    return cs


def _fmt(r) -> str:
    if r is None or r.get("rate") is None:
        return "n/a"
    lo, hi = r["wilson"]
    return f"{r['rate']:.3f} [{lo:.3f}, {hi:.3f}]"


def _print_summary(results: dict, out: Path) -> None:
    d = results["data"]
    print(f"\n{d['n_rows']} rows, {d['n_questions']} questions; classes "
          + ", ".join(f"{c}: {v['rows']} rows / {v['questions']} q" for c, v in d["class_counts"].items()))
    print(f"majority baseline {_fmt(results['majority_baseline']['accuracy'])}")
    for pk, res in results["probes"].items():
        print(f"\n{pk}: layer  accuracy [95% Wilson]    balanced  control  selectivity")
        for e in res["layers"]:
            sel = e["selectivity"]
            print(f"  {e['layer']:>5}  {_fmt(e['accuracy']):<24} {e['balanced_accuracy']['value']:.3f}     "
                  f"{e['control']['accuracy']['rate']:.3f}    {sel:+.3f}" if sel is not None else f"  {e['layer']:>5} n/a")
        n = res["nested"]
        print(f"  HEADLINE (nested CV, layers chosen {n['chosen_layer_counts']}): accuracy {_fmt(n['accuracy'])}, "
              f"balanced {n['balanced_accuracy']['value']:.3f}")
        s = res["selected_optimistic"]
        print(f"  selected, optimistic: layer {s['layer']} accuracy {s['accuracy']['rate']:.3f} (not the headline)")
    for pk, t in results.get("transfer", {}).items():
        for b, lst in t.get("by", {}).items():
            parts = [f"{r['train_on']}: others {r['others']['accuracy']['rate'] if r['others']['accuracy']['rate'] is not None else float('nan'):.3f}"
                     f" / within {r['within']['accuracy']['rate'] if r['within']['accuracy']['rate'] is not None else float('nan'):.3f}"
                     for r in lst]
            print(f"transfer {pk} layer {t['layer']} by {b}: " + "; ".join(parts))
    print(f"\nwrote {out}/results.json, accuracy_vs_layer.png" + (", directions.h5" if results.get("directions") else ""))


def main(argv=None) -> int:
    args = build_parser().parse_args(argv)
    args._argv = list(argv) if argv is not None else sys.argv[1:]
    from activations.store import StoreError

    try:
        run(args)
    except (ProbeError, StoreError) as e:
        print(f"error: {e}", file=sys.stderr)
        return 2
    return 0


if __name__ == "__main__":
    sys.exit(main())
