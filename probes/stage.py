"""The probes stage as a library call: read an activation store, run :func:`probes.experiment.train_probes`,
and publish a new output directory (``results.json``, ``accuracy_vs_layer.png``, ``directions.h5``).

    from probes.stage import train
    from probes.config import ProbeConfig
    out = train(ProbeConfig(store="runs/demo/activations.h5"))     # -> runs/demo/probes/

The directory is built under a hidden temporary name beside its destination and published in one rename
(:func:`loadbearing.files.publish_dir`); an existing output is never overwritten. One writer per output
(:func:`loadbearing.locks.output_lock`).
"""
from __future__ import annotations

import json
import os
import shutil
from dataclasses import asdict
from pathlib import Path
from typing import Any

import numpy as np

from loadbearing.files import RunDirError, publish_dir, write_json
from loadbearing.locks import output_lock
from loadbearing.provenance import git_info, now, package_versions
from loadbearing.runs import DIRECTIONS
from probes.config import RESULTS, ProbeConfig
from probes.data import POST_OUTCOME_TARGETS, ProbeData, ProbeError, check_folds, is_post_outcome_read, load_probe_data
from probes.directions import write_directions
from probes.experiment import jsonable, train_probes
from probes.paper_table import write_paper_table
from probes.plot import plot_accuracy_vs_layer
from probes.summary import print_summary


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
    return not r.get("directions") or (d / r["directions"].get("file", DIRECTIONS)).is_file()


def train(config: ProbeConfig) -> Path:
    """Run the probes stage for ``config``; returns the new output directory (written atomically)."""
    config.validate()
    out = config.out_dir()
    if out.exists():
        raise ProbeError(f"output directory {out} already exists (nothing was overwritten); pass --output-dir NEW_DIR "
                         f"or move the old one away")
    out.parent.mkdir(parents=True, exist_ok=True)
    with output_lock(out, config.command or None):  # one writer per output; a second gets a one-line error
        return _train_unlocked(config, out)


train_stage = train  # the name study/stages/core.py looks for


def store_provenance(store: Any) -> dict[str, Any]:
    """Path, size, mtime, rows and attributes of the activation store the probes read."""
    p = Path(store.path)
    st = p.stat()
    return {"path": str(p.resolve()), "size_bytes": st.st_size, "mtime": st.st_mtime, "n_rows": store.n_rows,
            "attrs": jsonable(store.attrs)}


def _check_data(config: ProbeConfig, store: Any, data: ProbeData) -> None:
    """Refusals that need the loaded data, before any fit."""
    groups = data.groups(config.group)
    check_folds(data.y, groups, config.folds, data.class_names)  # fail before any work
    if config.pca is not None:
        n_train_min = int(data.n * (config.folds - 1) / config.folds)
        if config.pca > min(n_train_min, store.d_model):
            raise ProbeError(f"--pca {config.pca} exceeds the rows of a training fold (~{n_train_min}) or d_model "
                             f"({store.d_model}); use --pca {min(n_train_min, store.d_model)} or fewer")
    if config.transfer_layer is not None and config.transfer_layer not in data.layers:
        raise ProbeError(f"--transfer-layer {config.transfer_layer} is not among the probed layers {data.layers}")


def _run_on_store(config: ProbeConfig) -> tuple[dict[str, Any], dict[int, dict[str, Any]], dict[str, Any]]:
    """Open the store, run the study: ``(results, directions, store provenance)``."""
    # deferred: keeps activations (and 7 more modules) out of `python -m probes.train`'s start-up
    from activations.store import open_store

    store_path = Path(config.store)
    try:
        store_cm = open_store(store_path, allow_incomplete=config.allow_incomplete)
    except OSError as e:
        raise ProbeError(f"cannot read {store_path} as an activation store ({str(e).splitlines()[0]}); re-create it "
                         f"with: python -m activations.cache RUN_DIR") from None
    with store_cm as store:
        if store.leaky and not config.allow_leaky and config.target not in POST_OUTCOME_TARGETS:  # read at continuation_*
            raise ProbeError(f"{store_path} is marked leaky (its features include tokens written after the edit, "
                             f"which carry the outcome); re-cache at pre-outcome positions, or --allow-leaky to "
                             f"run anyway (results invalid)")
        data = load_probe_data(store, target=config.target, conditions=config.conditions, layers=config.layers,
                               position=config.position)
        _check_data(config, store, data)
        log = (lambda *_: None) if config.quiet else (lambda m: print(m, flush=True))
        log(f"{store_path}: {data.n} labelled rows, {len(np.unique(data.questions.astype(str)))} questions "
            f"(grouped by {data.group_key}), classes {data.class_counts()}, layers {data.layers[0]}..{data.layers[-1]} "
            f"({len(data.layers)}), solver {config.solver}")
        results, dirs = train_probes(
            data, probes=config.probes, folds=config.folds, inner_folds=config.inner_folds, group=config.group,
            seed=config.seed, pca=config.pca, n_directions=config.n_directions, permutations=config.permutations,
            n_boot=config.bootstrap, transfer=config.transfer, transfer_layer=config.transfer_layer,
            directions=config.directions and not is_post_outcome_read(config.target, config.position),
            Cs=tuple(config.cs), solver=config.solver, device=config.device, log=log,
            steer_holdout=config.steer_holdout, mlp=config.mlp_settings(), paper_table=config.paper_table)
        prov = store_provenance(store)
    if is_post_outcome_read(config.target, config.position):
        results["post_outcome"] = {"position": config.position, "note": (
            "read at a continuation position, after the outcome: describes where repair is visible, not a "
            "prediction of it")}
    return results, dirs, prov


def _write_outputs(tmp: Path, config: ProbeConfig, results: dict, dirs: dict, prov: dict) -> None:
    """results.json, the accuracy plot and directions.h5 into the (unpublished) directory ``tmp``."""
    write_json(tmp / RESULTS, results)
    plot_accuracy_vs_layer(results, tmp / "accuracy_vs_layer.png")
    if results.get("paper_table"):
        write_paper_table(tmp, results)
    if dirs:
        pk = "logistic" if "logistic" in results["probes"] else next(iter(results["probes"]))
        ch = [c for c in results["probes"][pk]["nested"]["chosen_layers_per_fold"] if c in dirs]
        sel = max(sorted(set(ch)), key=ch.count) if ch else None
        how = f"modal nested-CV layer choice of the {pk} probe over the outer folds"
        dsec = results.get("directions") or {}
        if dsec.get("selected_layer") in dirs:  # chosen without the held-out steering questions (--steer-holdout)
            sel, how = dsec["selected_layer"], dsec["selected_layer_method"]
        write_directions(tmp / DIRECTIONS, dirs, target=config.target, position=config.position,
                         store=prov, n_directions=config.n_directions, selected_layer=sel,
                         selected_layer_method=how,
                         question_split=(results.get("directions") or {}).get("question_split"))


def _train_unlocked(config: ProbeConfig, out: Path) -> Path:
    results, dirs, prov = _run_on_store(config)
    settings = {**asdict(config), "cs": list(config.cs), "store": str(Path(config.store).resolve()),
                "probes": list(config.probes), "created": now(),
                "command": config.command or "python -m probes.train " + str(config.store)}
    results = {**results, "settings": settings, "store": prov, "versions": package_versions(), "git": git_info()}
    tmp = out.parent / f".{out.name}.partial-{os.getpid()}"
    out.parent.mkdir(parents=True, exist_ok=True)
    tmp.mkdir()
    try:
        _write_outputs(tmp, config, results, dirs, prov)
        try:
            publish_dir(tmp, out)
        except RunDirError:
            raise ProbeError(f"output directory {out} appeared while probing (nothing was overwritten); "
                             f"pass --output-dir NEW_DIR") from None
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        raise
    if not config.quiet:
        print_summary(results, out)
    return out


__all__ = ["train", "train_stage", "is_complete", "store_provenance"]
