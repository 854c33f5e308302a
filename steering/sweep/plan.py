"""python -m steering.sweep RUN_DIR --directions RUN_DIR/probes  (this module: what a sweep will steer)

Everything the sweep decides before it generates, each step checked with a one-line
:class:`~steering.sweep.config.SweepError`, and in the order that lets bad input fail before any model is loaded:

* :func:`grid_axes`: the layers (default: the directions' selected layer, else the middle one), the numbers
  of directions k (default steering.sweep.config.DEFAULT_KS, those within the stored basis) and the alphas;
* :func:`question_split`: which questions the directions were fitted on (never steered) or held out for;
* :func:`check_directions_model` / :func:`check_width`: the directions belong to the run's model;
* :func:`residual_norms`: the scale the relative alphas multiply (the probes' ``resid_norm``, else measured);
* :func:`sweep_record`: ``config.json``'s content; :func:`check_resume`: an output being resumed was made with
  the same settings.
"""
from __future__ import annotations

from dataclasses import asdict
from pathlib import Path
from typing import Any

from loadbearing.runs import DIRECTIONS, Run
from probes.directions import Directions
from steering.norms import mean_resid_norm
from steering.sweep.cases import CaseSample, read_question_list
from steering.sweep.config import DEFAULT_KS, SCHEMA_VERSION, SweepConfig, SweepError
from steering.sweep.grid import Setting

# ------------------------------------------------------------------------------------------------ directions


def check_directions_model(dirs: Directions, run: Run) -> None:
    """Refuse directions whose activation store names other weights than the run's (when both say)."""
    want = run.weights_hash
    if not want:
        return
    have = dirs.provenance.weights_hashes()
    if have and want not in have:
        raise SweepError(f"directions {dirs.path} were computed from another model's activations (weights "
                         f"{sorted(have)[0][:16]}...) than run {str(run.path)!r} ({want[:16]}...); pass the probes "
                         "directory of this run")


def grid_axes(config: SweepConfig, dirs: Directions) -> tuple[list[int], list[int], list[float]]:
    """``(layers, ks, alphas)`` of the grid, checked against the stored directions."""
    layers = config.layers
    if layers is None:
        layers = [dirs.selected_layer] if dirs.selected_layer is not None else [dirs.layers[len(dirs.layers) // 2]]
    layers = [int(x) for x in layers]
    for L in layers:
        if L not in dirs.bases:
            raise SweepError(f"unknown layer {L}: {dirs.path} has directions for layers {dirs.layers}")
    kmax = min(dirs.bases[L].shape[0] for L in layers)
    ks = [int(k) for k in config.ks] if config.ks is not None else ([k for k in DEFAULT_KS if k <= kmax] or [kmax])
    if any(k < 1 or k > kmax for k in ks):
        raise SweepError(f"k must be between 1 and {kmax} (the stored basis size), got {ks}")
    return layers, ks, [float(a) for a in config.alphas]


def check_width(dirs: Directions, layers: list[int], width: int, nl: int) -> None:
    """Refuse layers the model lacks and directions of another width than the model's d_model."""
    for L in layers:
        if not 0 <= L <= nl:
            raise SweepError(f"unknown layer {L}: the model has hidden_states layers 0..{nl}")
        if dirs.bases[L].shape[1] != width:
            raise SweepError(f"directions for layer {L} have width {dirs.bases[L].shape[-1]} but the model's d_model is "
                             f"{width}: they were computed for another model ({dirs.path})")


# ------------------------------------------------------------------------------------------------ questions


def store_questions(dirs: Directions) -> tuple[set[str] | None, str, int]:
    """Question keys and ids of the activation store the directions were fitted from (the probes fit the
    directions on its labelled rows), or None when the file names no readable store."""
    path = dirs.provenance.path
    if path is None:
        return None, "", 0
    try:
        with dirs.provenance.open() as st:
            rows = st.rows
            qkeys = {str(x) for x in rows["question_key"] if x}
            keys = qkeys | {str(x) for x in rows["question_id"] if x}
    except Exception:  # a damaged or moved store: the split is unknown, said so in the output
        return None, "", 0
    return keys, str(path), len(qkeys)


def _split_note(known: bool, allow_overlap: bool) -> str:
    if known and not allow_overlap:
        return "steered questions are disjoint from the directions' fitting questions"
    if known:
        return ("--allow-overlap: steered questions INCLUDE questions the directions were fitted on; the verdict "
                "is not a held-out test")
    return ("directions.h5 records no fitting split and names no readable activation store, and no "
            "--exclude-questions was given: steered questions may overlap the questions the directions "
            "were fitted on")


def question_split(dirs: Directions, config: SweepConfig) -> tuple[dict[str, Any], set[str], set[str] | None]:
    """(record for config.json, question keys/ids to exclude, keys/ids to keep or None).

    The fitting questions come from, in order: the split ``directions.h5`` records (its ``question_split``:
    ``fit`` and ``held_out``), else the questions of the activation store the directions name (the probes
    fit them on its labelled rows), plus ``--exclude-questions``. ``allow_overlap`` steers them anyway
    (recorded as ``disjoint: false``).
    """
    fit = dirs.fit_split() or {}
    exclude = set(fit.get("fit", []))
    include = set(fit["held_out"]) if "held_out" in fit else None
    sources = [DIRECTIONS] if fit else []
    n_fit = len(exclude)
    if not fit:
        keys, store_path, n_fit = store_questions(dirs)
        if keys is not None:
            exclude |= keys
            sources.append(f"questions of the activation store the directions were fitted on ({store_path})")
    if config.exclude_questions:
        listed = read_question_list(config.exclude_questions)
        n_fit += len(listed - exclude)
        exclude |= listed
        sources.append(f"--exclude-questions {config.exclude_questions}")
    known = bool(exclude) or include is not None
    rec = {
        "source": " + ".join(sources) if sources else "none",
        "n_fit_questions": n_fit if exclude else None,
        "n_held_out_questions": len(include) if include is not None else None,
        "disjoint": (False if config.allow_overlap else True) if known else None,
        "note": _split_note(known, config.allow_overlap),
    }
    if config.allow_overlap:
        return rec, set(), None
    return rec, exclude, include


# ------------------------------------------------------------------------------------------------ scale


def residual_norms(lm: Any, dirs: Directions, layers: list[int], cases: list[dict[str, Any]],
                   batch_size: int) -> tuple[dict[int, float], dict[int, str]]:
    """Per layer, the residual norm the relative alphas multiply and where it came from: the ``resid_norm``
    the probes wrote, else measured at the last token of up to 32 case inputs (NaN when there is none)."""
    resid_norm: dict[int, float] = {}
    norm_source: dict[int, str] = {}
    for L in layers:
        rn = dirs.resid_norm.get(L)
        if rn:
            resid_norm[L], norm_source[L] = float(rn), DIRECTIONS
        elif cases:
            resid_norm[L] = mean_resid_norm(lm, [c["input_text"] for c in cases[:32]], L, batch_size=batch_size)
            norm_source[L] = "measured at the last token of up to 32 case inputs"
        else:
            resid_norm[L], norm_source[L] = float("nan"), "none"
    return resid_norm, norm_source


# ------------------------------------------------------------------------------------------------ config.json


def sweep_record(config: SweepConfig, run: Run, dirs: Directions, model_info: dict[str, Any], axes: tuple,
                 sample: CaseSample, split: dict[str, Any], norms: tuple[dict[int, float], dict[int, str]],
                 grid: list[Setting], controls_note: str = "") -> dict[str, Any]:
    """The content of ``config.json`` (``status: "running"`` until the sweep finishes)."""
    layers, ks, alphas = axes
    resid_norm, norm_source = norms
    return {
        "schema_version": SCHEMA_VERSION,
        "status": "running",
        "config": {k: v for k, v in config.to_dict().items() if k not in ("progress",)},
        "run_dir": str(run.path),
        "directions": dirs.path,
        "directions_sha256": dirs.sha256,
        "model": model_info,
        "max_new_tokens": config.max_new_tokens,
        "positions": config.positions,
        "dose": config.dose,
        "seed": config.seed,
        "per_question": config.per_question,
        "layers": layers,
        "ks": ks,
        "alphas": alphas,
        "controls": list(config.controls),
        "operators": list(config.operators),
        "random_seeds": config.random_seeds,
        "random_directions": ("per case: each random generation draws its own direction (steering.sweep.controls)"
                              if config.random_scope == "case" else
                              "per sweep: random setting j is one direction for every case (steering.sweep.controls)"),
        "controls_note": controls_note,
        "cases": config.cases,
        "sesoi": config.sesoi,
        "level": config.level,
        "case_sample": sample.stats,
        "case_ids": [c["id"] for c in sample.all],
        "split": split,
        "n_c_cases": len(sample.c),
        "n_non_c_cases": len(sample.non_c),
        "resid_norm": {str(L): resid_norm[L] for L in layers},
        "resid_norm_source": {str(L): norm_source[L] for L in layers},
        "settings": [asdict(s) for s in grid],
    }


def check_resume_settings(old: dict[str, Any] | None, config: SweepConfig, dirs: Directions) -> None:
    """Refuse to resume an output made with other directions or generation settings (no model needed)."""
    if old is None:
        return
    if old.get("schema_version") != SCHEMA_VERSION:
        raise SweepError(f"cannot resume {str(config.out_dir)!r}: it was written by schema {old.get('schema_version')} "
                         f"(random directions shared across cases), this sweep writes schema {SCHEMA_VERSION}; use a new "
                         "--output-dir")
    for key, new in (("directions_sha256", dirs.sha256), ("max_new_tokens", config.max_new_tokens),
                     ("positions", config.positions), ("dose", config.dose), ("seed", config.seed),
                     ("per_question", config.per_question)):
        if key in old and old[key] != new:
            raise SweepError(f"cannot resume {str(config.out_dir)!r}: {key} was {old[key]!r}, now {new!r}; use a new "
                             "--output-dir")


def check_resume(old: dict[str, Any] | None, cfg: dict[str, Any], out_dir: Path) -> None:
    """Refuse to resume an output whose alpha scale (residual norms) or model differ from this sweep's."""
    if old is None:
        return
    for L, v in (old.get("resid_norm") or {}).items():
        new_v = cfg["resid_norm"].get(L)
        if new_v is not None and v is not None and abs(new_v - v) > 1e-6 * max(abs(v), 1.0):
            raise SweepError(f"cannot resume {str(out_dir)!r}: layer {L}'s residual norm (alpha scale) was {v:.6g}, "
                             f"now {new_v:.6g}; use a new --output-dir")
    if (old.get("model") or {}).get("name") != cfg["model"].get("name"):
        raise SweepError(f"cannot resume {str(out_dir)!r}: it was made with model {(old.get('model') or {}).get('name')!r}")


__all__ = ["check_directions_model", "check_resume", "check_resume_settings", "check_width",
           "grid_axes", "question_split", "residual_norms", "store_questions", "sweep_record"]
