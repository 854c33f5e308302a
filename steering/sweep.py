"""python -m steering.sweep RUN_DIR --directions RUN_DIR/probes [--layers 6] [--k 1,2,4,8] [--alphas 0.25,0.5,1]

Steering sweep: re-generate a seeded, question-stratified sample of the run's type-C perturbed continuations
(and, with ``--cases all``, of non-C ones, for side effects) from their exact ``input_text`` while adding the
probe directions to the residual stream, for each (layer, k, alpha), next to norm-matched random-direction
controls (several seeds: random orthonormal bases of the same k, combined with the same dose) and an
unsteered alpha-0 rerun (which checks that the C cases reproduce). Steered cases come from questions the
directions were not fitted on (the split the probes record in ``directions.h5``, or ``--exclude-questions
FILE``). Generation runs on the shared-prefix fast path with one vector and alpha per row
(:mod:`steering.generate`); every generation is scored with the foundation's strict parser and appended
(flushed) to ``OUTPUT/generations.jsonl``; ``--resume`` skips the (setting, case) pairs already there.

Alphas are relative to the layer's mean residual-stream norm (the ``resid_norm`` the probes wrote, else
measured on the cases' inputs): ``--alphas 1`` adds a vector as long as the average residual. The k-direction
vector is dose-matched (rescaled to the norm of one direction; see :mod:`steering.hooks`).

Outputs (``OUTPUT`` defaults to ``RUN_DIR/steering``): ``config.json`` (settings, the case sample, the
question split, provenance), ``generations.jsonl``, ``summary.json`` (see :mod:`steering.analysis`: per
setting moved-of-all with coverage, the question-level difference from the matched control with its
interval and permutation test, Holm/BH across the grid, the strongest setting, a verdict that is one of
effect / null / inconclusive, the minimum detectable effect and the sample a null would need),
``sweep.png`` and a printed table. No C case to steer: ``status = "insufficient_data"`` (exit 0). Bad input
exits 2 with a one-line error, before any model is loaded where it can be, and writes nothing.

Modules: :mod:`steering.config` (settings), :mod:`steering.cases` (the sample), :mod:`steering.grid`
(settings grid and vectors), :mod:`steering.generate` (steered fast path), :mod:`steering.analysis`
(statistics and text), :mod:`steering.plot` (figure); this module runs them.
"""
from __future__ import annotations

import argparse
import json
import sys
from collections import defaultdict
from collections.abc import Callable
from dataclasses import asdict
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import numpy as np

from steering.analysis import format_summary, format_table, summarize_records
from steering.cases import case_dict, read_question_list, select_cases
from steering.config import (
    CASE_KINDS,
    DEFAULT_ALPHAS,
    DEFAULT_SESOI,
    DOSES,
    POSITIONS,
    SCHEMA_VERSION,
    SweepConfig,
    SweepError,
    parse_list,
)
from steering.grid import Directions, Setting, load_directions, make_grid, setting_vector

CONFIG_FILE = "config.json"
GENERATIONS = "generations.jsonl"
SUMMARY = "summary.json"
PLOT = "sweep.png"


# ------------------------------------------------------------------------------------------------ CLI


def build_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="python -m steering.sweep", description=__doc__.split("\n\n")[1],
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("run_dir", help="run directory written by python -m behavioural.run")
    p.add_argument("--directions", required=True,
                   help="probes output directory holding directions.h5 (or the .h5 file itself)")
    p.add_argument("--layers", default=None,
                   help="comma-separated hidden_states layers to steer (default: the file's selected_layer, else the "
                        "middle of its layers)")
    p.add_argument("--k", default=None, help="comma-separated numbers of directions (default 1,2,4,8, capped at the basis)")
    p.add_argument("--alphas", default=",".join(str(a) for a in DEFAULT_ALPHAS),
                   help="comma-separated steering strengths, relative to the layer's mean residual norm (default %(default)s)")
    p.add_argument("--controls", default="random,none",
                   help="comma-separated controls: random (norm-matched random orthonormal bases), none (alpha-0 rerun)")
    p.add_argument("--random-seeds", type=int, default=3, help="random-direction seeds per setting (default %(default)s)")
    p.add_argument("--cases", choices=CASE_KINDS, default="C",
                   help="C: type-C perturbed continuations only; all: also a sample of non-C ones (side effects)")
    p.add_argument("--max-cases", type=int, default=None,
                   help="steer at most N C cases (a seeded sample, round-robin over questions; default: all)")
    p.add_argument("--per-question", type=int, default=2, help="at most N C cases per question (default %(default)s)")
    p.add_argument("--n-non-c", type=int, default=None,
                   help="with --cases all: number of non-C cases to sample (default: as many as C cases)")
    p.add_argument("--seed", type=int, default=0, help="case-sampling seed (default %(default)s)")
    p.add_argument("--exclude-questions", default=None, metavar="FILE",
                   help="question keys or ids (one per line, or a JSON list) the directions were fitted on: never "
                        "steered (directions.h5's own recorded split is always applied)")
    p.add_argument("--allow-overlap", action="store_true",
                   help="also steer questions the directions were fitted on (recorded; not a held-out test)")
    p.add_argument("--sesoi", type=float, default=100 * DEFAULT_SESOI,
                   help="smallest effect of interest in percentage points: a null verdict must exclude it (default %(default)g)")
    p.add_argument("--max-new-tokens", type=int, default=128, help="generation budget per continuation (default %(default)s)")
    p.add_argument("--batch-size", type=int, default=32, help="rows per steered batch (default %(default)s)")
    p.add_argument("--positions", choices=POSITIONS, default="continuation",
                   help="which positions are steered (see steering.hooks; default %(default)s)")
    p.add_argument("--dose", choices=DOSES, default="matched",
                   help="matched: k-direction vector rescaled to one direction's norm; sum: the paper's plain sum")
    p.add_argument("--model", default=None,
                   help="model overriding the run manifest's (refused when it names another model, unless --allow-other-model)")
    p.add_argument("--device", default=None, help="device for the run's model (default: loadbearing.engine.models' choice)")
    p.add_argument("--allow-other-model", action="store_true", help="steer with a model other than the run's")
    p.add_argument("--allow-incomplete", action="store_true", help="steer a run whose manifest is not complete")
    p.add_argument("--output", default=None, help="output directory (default RUN_DIR/steering); must not exist unless --resume")
    p.add_argument("--resume", action="store_true", help="continue an existing output directory, skipping finished generations")
    p.add_argument("--no-progress", action="store_true", help="hide progress bars")
    return p


def config_from_args(args: argparse.Namespace) -> SweepConfig:
    import math

    if not math.isfinite(args.sesoi):
        raise SweepError(f"--sesoi must be a finite number of percentage points, got {args.sesoi}")
    return SweepConfig(
        run_dir=args.run_dir, directions=args.directions, output=args.output, model=args.model,
        layers=parse_list(args.layers, int, "layers"), ks=parse_list(args.k, int, "k"),
        alphas=parse_list(args.alphas, float, "alphas") or [], controls=parse_list(args.controls, str, "controls") or [],
        random_seeds=args.random_seeds, cases=args.cases, max_cases=args.max_cases, per_question=args.per_question,
        n_non_c=args.n_non_c, seed=args.seed, exclude_questions=args.exclude_questions,
        allow_overlap=args.allow_overlap, sesoi=args.sesoi / 100.0,
        max_new_tokens=args.max_new_tokens, batch_size=args.batch_size, positions=args.positions, dose=args.dose,
        device=args.device, resume=args.resume, allow_incomplete=args.allow_incomplete, allow_other_model=args.allow_other_model,
        progress=not args.no_progress,
    ).validate()


# ------------------------------------------------------------------------------------------------ checks


def _find_key(obj: Any, key: str) -> list[Any]:
    if isinstance(obj, dict):
        out = [obj[key]] if key in obj and isinstance(obj[key], str) else []
        for v in obj.values():
            out += _find_key(v, key)
        return out
    if isinstance(obj, list):
        return [x for v in obj for x in _find_key(v, key)]
    return []


def _check_directions_model(dirs: Directions, run) -> None:
    """Refuse directions whose activation store names other weights than the run's (when both say)."""
    store = dirs.attrs.get("store")
    if isinstance(store, (bytes, str)):
        try:
            store = json.loads(store)
        except ValueError:
            return
    want = run.weights_hash
    if not want or not isinstance(store, dict):
        return
    have = {h for h in _find_key(store, "weights_hash") if h}
    if have and want not in have:
        raise SweepError(f"directions {dirs.path} were computed from another model's activations (weights "
                         f"{sorted(have)[0][:16]}...) than run {str(run.path)!r} ({want[:16]}...); pass the probes "
                         "directory of this run")


def _store_questions(dirs: Directions) -> tuple[set[str] | None, str, int]:
    """Question keys and ids of the activation store the directions were fitted from (the probes fit the
    directions on its labelled rows), or None when the file names no readable store."""
    store = dirs.attrs.get("store")
    if isinstance(store, (bytes, str)):
        try:
            store = json.loads(store)
        except ValueError:
            return None, "", 0
    path = store.get("path") if isinstance(store, dict) else None
    if not path or not Path(path).is_file():
        return None, "", 0
    try:
        from activations.store import open_store

        with open_store(path, allow_incomplete=True) as st:
            rows = st.rows
            qkeys = {str(x) for x in rows["question_key"] if x}
            keys = qkeys | {str(x) for x in rows["question_id"] if x}
    except Exception:  # a damaged or moved store: the split is unknown, said so in the output
        return None, "", 0
    return keys, str(path), len(qkeys)


def _split(dirs: Directions, config: SweepConfig) -> tuple[dict[str, Any], set[str], set[str] | None]:
    """(record for config.json, question keys/ids to exclude, keys/ids to keep or None).

    The fitting questions come from, in order: the split ``directions.h5`` records (``fit_question_keys`` /
    ``held_out_question_keys``...), else the questions of the activation store the directions name (the
    probes fit them on its labelled rows), plus ``--exclude-questions``. ``allow_overlap`` steers them anyway
    (recorded as ``disjoint: false``).
    """
    fit = dirs.fit_split() or {}
    exclude = set(fit.get("fit", []))
    include = set(fit["held_out"]) if "held_out" in fit else None
    sources = ["directions.h5"] if fit else []
    n_fit = len(exclude)
    if not fit:
        keys, store_path, n_fit = _store_questions(dirs)
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
        "note": ("steered questions are disjoint from the directions' fitting questions" if known and not
                 config.allow_overlap else
                 "--allow-overlap: steered questions INCLUDE questions the directions were fitted on; the verdict "
                 "is not a held-out test" if known else
                 "directions.h5 records no fitting split and names no readable activation store, and no "
                 "--exclude-questions was given: steered questions may overlap the questions the directions "
                 "were fitted on"),
    }
    if config.allow_overlap:
        return rec, set(), None
    return rec, exclude, include


def _check_width(dirs: Directions, layers: list[int], width: int, nl: int) -> None:
    for L in layers:
        if not 0 <= L <= nl:
            raise SweepError(f"unknown layer {L}: the model has hidden_states layers 0..{nl}")
        if dirs.bases[L].shape[1] != width:
            raise SweepError(f"directions for layer {L} have width {dirs.bases[L].shape[-1]} but the model's d_model is "
                             f"{width}: they were computed for another model ({dirs.path})")


# ------------------------------------------------------------------------------------------------ records


def score(text: str, case: dict[str, Any], questions: dict[str, str] | None = None) -> tuple[str | None, bool | None]:
    """(parsed answer, correct) of a steered generation, through the one scorer in loadbearing.answers."""
    from loadbearing import answers

    q = SimpleNamespace(dataset=case["dataset"], task=case.get("task"), answer=case["gold"],
                        question=(questions or {}).get(case["question_id"], ""), choices=None)
    if hasattr(answers, "score"):
        s = answers.score(text, q)
        return s.parsed, s.correct
    pred = answers.extract_answer(text, case["dataset"], case.get("task"))
    return pred, answers.is_correct(pred, q)


def _record(s: Setting, case: dict[str, Any], g: Any, questions: dict[str, str]) -> dict[str, Any]:
    pred, ok = score(g.text, case, questions)
    return {
        "schema_version": SCHEMA_VERSION,
        "setting": s.key,
        "basis": s.basis,
        "layer": s.layer,
        "k": s.k,
        "alpha_rel": s.alpha_rel,
        "alpha": s.alpha,
        "seed": s.seed,
        "case_id": case["id"],
        "question_id": case["question_id"],
        "question_key": case["question_key"],
        "case_label": case["label"],
        "strategy": case.get("strategy"),
        "position": case.get("position"),
        "text": g.text,
        "parsed_answer": pred,
        "gold": case["gold"],
        "correct": ok,
        "finish_reason": g.finish_reason,
        "new_tokens": g.new_tokens,
    }


# ------------------------------------------------------------------------------------------------ library


def _lock(out_dir: Path):
    try:
        from loadbearing.locks import output_lock
    except ImportError:  # pragma: no cover
        import contextlib

        return contextlib.nullcontext()
    return output_lock(out_dir, command="python -m steering.sweep")


def run_sweep(config: SweepConfig, lm: Any = None, *, echo: Callable[[str], None] = print,
              generate_fn: Callable[..., list] | None = None) -> dict[str, Any]:
    """Run (or resume) a sweep and return the summary dict (also written to ``OUTPUT/summary.json``).

    ``lm`` is an already-loaded :class:`loadbearing.engine.models.LoadedModel` (tests pass tiny models); else the
    run's model is loaded through :meth:`loadbearing.runs.Run.load_model` (weights hash checked).
    ``generate_fn`` defaults to :func:`steering.generate.generate_steered` (same signature).
    """
    from loadbearing.files import JsonlWriter, read_json, read_jsonl, write_json
    from loadbearing.runs import Run

    config.validate()
    run = Run(config.run_dir)
    if run.status not in ("complete", "ok", "insufficient_data"):
        run.require_complete(allow_incomplete=config.allow_incomplete)
    out_dir = config.out_dir
    if out_dir.exists() and not config.resume:
        raise SweepError(f"output directory {str(out_dir)!r} already exists; pass --resume to continue it or choose "
                         "another --output")
    if config.resume and out_dir.exists() and not (out_dir / CONFIG_FILE).is_file():
        raise SweepError(f"{str(out_dir)!r} exists but holds no {CONFIG_FILE}: not a steering sweep output; choose "
                         "another --output")
    old = None
    if config.resume and (out_dir / CONFIG_FILE).is_file():
        try:
            old = read_json(out_dir / CONFIG_FILE)
        except ValueError:
            raise SweepError(f"{str(out_dir / CONFIG_FILE)!r} is not valid JSON; use a new --output") from None
    mspec = run.model_spec
    if config.model and mspec.get("name") and config.model != mspec["name"] and not config.allow_other_model:
        raise SweepError(f"run {str(run.path)!r} was generated with model {mspec['name']!r}, not {config.model!r}; "
                         "omit --model to steer the run's own model, or pass --allow-other-model")
    dirs = load_directions(config.directions)
    _check_directions_model(dirs, run)

    # grid checks that need no model
    layers = config.layers
    if layers is None:
        layers = [dirs.selected_layer] if dirs.selected_layer is not None else [dirs.layers[len(dirs.layers) // 2]]
    layers = [int(x) for x in layers]
    for L in layers:
        if L not in dirs.bases:
            raise SweepError(f"unknown layer {L}: {dirs.path} has directions for layers {dirs.layers}")
    kmax = min(dirs.bases[L].shape[0] for L in layers)
    ks = [int(k) for k in config.ks] if config.ks is not None else ([k for k in (1, 2, 4, 8) if k <= kmax] or [kmax])
    if any(k < 1 or k > kmax for k in ks):
        raise SweepError(f"k must be between 1 and {kmax} (the stored basis size), got {ks}")
    alphas = [float(a) for a in config.alphas]

    # the case sample (distinct inputs, fitting questions excluded, stratified over questions)
    split, exclude, include = _split(dirs, config)
    questions = run.question_texts()
    pert = [case_dict(c, questions) for c in run.continuations("perturbed")]
    sample = select_cases(pert, which=config.cases, max_cases=config.max_cases, per_question=config.per_question,
                          n_non_c=config.n_non_c, seed=config.seed, exclude=exclude, include=include)
    all_cases = sample.all
    if old is not None:
        for key, new in (("directions_sha256", dirs.sha256), ("max_new_tokens", config.max_new_tokens),
                         ("positions", config.positions), ("dose", config.dose), ("seed", config.seed),
                         ("per_question", config.per_question)):
            if key in old and old[key] != new:
                raise SweepError(f"cannot resume {str(out_dir)!r}: {key} was {old[key]!r}, now {new!r}; use a new --output")

    # the model (loaded only now, after every check that does not need it)
    if lm is None:
        lm = run.load_model(config.model if config.allow_other_model else None, device=config.device)
    elif not config.allow_other_model:
        run.check_model(lm)
    from steering.hooks import d_model, mean_resid_norm, n_layers

    width = d_model(lm.model)
    _check_width(dirs, layers, width, n_layers(lm.model))
    resid_norm: dict[int, float] = {}
    norm_source: dict[int, str] = {}
    for L in layers:
        rn = dirs.resid_norm.get(L)
        if rn:
            resid_norm[L], norm_source[L] = float(rn), "directions.h5"
        elif all_cases:
            resid_norm[L] = mean_resid_norm(lm, [c["input_text"] for c in all_cases[:32]], L,
                                            batch_size=config.batch_size)
            norm_source[L] = "measured at the last token of up to 32 case inputs"
        else:
            resid_norm[L], norm_source[L] = float("nan"), "none"
    grid = make_grid(layers, ks, alphas, config.controls, config.random_seeds, resid_norm)
    provenance = getattr(lm, "provenance", None)
    model_info = provenance() if callable(provenance) else {"name": getattr(lm, "name", None)}
    cfg: dict[str, Any] = {
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
        "random_seeds": config.random_seeds,
        "cases": config.cases,
        "sesoi": config.sesoi,
        "level": config.level,
        "case_sample": sample.stats,
        "case_ids": [c["id"] for c in all_cases],
        "split": split,
        "n_c_cases": len(sample.c),
        "n_non_c_cases": len(sample.non_c),
        "resid_norm": {str(L): resid_norm[L] for L in layers},
        "resid_norm_source": {str(L): norm_source[L] for L in layers},
        "settings": [asdict(s) for s in grid],
    }
    if old is not None:
        for L, v in (old.get("resid_norm") or {}).items():
            new_v = cfg["resid_norm"].get(L)
            if new_v is not None and v is not None and abs(new_v - v) > 1e-6 * max(abs(v), 1.0):
                raise SweepError(f"cannot resume {str(out_dir)!r}: layer {L}'s residual norm (alpha scale) was {v:.6g}, "
                                 f"now {new_v:.6g}; use a new --output")
        if (old.get("model") or {}).get("name") != model_info.get("name"):
            raise SweepError(f"cannot resume {str(out_dir)!r}: it was made with model {(old.get('model') or {}).get('name')!r}")

    if split["disjoint"] is None:
        echo(f"warning: {split['note']}")
    created = not out_dir.exists()
    out_dir.mkdir(parents=True, exist_ok=True)
    try:
        lock = _lock(out_dir)
        lock.__enter__()
    except BaseException:
        if created:
            import shutil

            shutil.rmtree(out_dir, ignore_errors=True)
        raise
    try:
        write_json(out_dir / CONFIG_FILE, cfg)
        (out_dir / SUMMARY).unlink(missing_ok=True)  # a summary always describes a finished sweep
        gen_path = out_dir / GENERATIONS
        if not sample.c:
            why = (f"no type-C perturbed continuation of {str(run.path)!r} is left to steer "
                   f"({sample.stats['n_perturbed']} perturbed records, {sample.stats['n_excluded_fit_questions']} "
                   "excluded as fitting questions")
            if sample.stats["n_excluded_fit_questions"]:
                why += ("; fit the directions on a subset of questions (e.g. python -m activations.cache --shard 0/2, "
                        "then probes on that store) so that others stay held out")
            why += ")"
            summary: dict[str, Any] = {"schema_version": SCHEMA_VERSION, "status": "insufficient_data",
                       "verdict_code": "insufficient_data", "verdict": f"insufficient_data: {why}; nothing to steer",
                       "n_c_cases": 0, "n_c_questions": 0, "n_non_c_cases": 0, "n_generations": 0,
                       "cases": sample.stats, "split": split, "settings": [], "sesoi": config.sesoi}
            write_json(out_dir / SUMMARY, summary)
            write_json(out_dir / CONFIG_FILE, dict(cfg, status="complete"))
            echo(summary["verdict"])
            return summary
        done = {(r["setting"], r["case_id"]) for r in read_jsonl(gen_path, repair=True)}
        _generate(config, lm, grid, all_cases, dirs, width, layers, done, gen_path, questions, echo, generate_fn,
                  JsonlWriter)
        summary = summarize(out_dir, config=cfg)
        write_json(out_dir / CONFIG_FILE, dict(cfg, status="complete"))
    finally:
        lock.__exit__(None, None, None)
    echo(format_summary(summary))
    return summary


def _generate(config: SweepConfig, lm: Any, grid: list[Setting], cases: list[dict], dirs: Directions, width: int,
              layers: list[int], done: set, gen_path: Path, questions: dict[str, str], echo: Callable[[str], None],
              generate_fn: Callable[..., list] | None, writer_cls: Any) -> None:
    """Generate every (setting, case) pair not in ``done``, one layer at a time, flushing records per chunk."""
    if generate_fn is None:
        from steering.generate import generate_steered

        generate_fn = generate_steered
    by_layer: dict[int, list] = defaultdict(list)
    for s in grid:
        for case in cases:
            if (s.key, case["id"]) not in done:
                by_layer[s.layer if s.layer is not None else layers[0]].append((s, case))
    n_jobs = sum(len(v) for v in by_layer.values())
    n_c = sum(1 for c in cases if c["label"] == "C")
    echo(f"steering sweep: {n_c} C cases from {len({c['question_key'] for c in cases if c['label'] == 'C'})} "
         f"questions + {len(cases) - n_c} non-C x {len(grid)} settings; {n_jobs} generations to run "
         f"({len(done)} already done) -> {gen_path.parent}")
    vec_cache: dict[str, np.ndarray] = {}
    chunk = max(config.batch_size * 4, 1)
    with writer_cls(gen_path) as writer:
        for L in sorted(by_layer):
            jobs = sorted(by_layer[L], key=lambda j: (j[1]["input_text"], j[1]["id"], j[0].key))
            for c0 in range(0, len(jobs), chunk):
                part = jobs[c0 : c0 + chunk]
                for s, _ in part:
                    if s.key not in vec_cache:
                        vec_cache[s.key] = setting_vector(s, dirs, config.dose, width)
                vecs = np.stack([vec_cache[s.key] for s, _ in part])  # [n, d_model]
                alph = np.array([s.alpha for s, _ in part], dtype=np.float32)  # [n]
                outs = generate_fn(lm, [c["input_text"] for _, c in part], vecs, alph, layers=[L],
                                   positions=config.positions, max_new_tokens=config.max_new_tokens,
                                   batch_size=config.batch_size, progress=config.progress,
                                   desc=f"steer L{L} {c0 + len(part)}/{len(jobs)}")
                for (s, case), g in zip(part, outs):
                    writer.write(_record(s, case, g, questions))


def summarize(out_dir: str | Path, *, config: dict[str, Any] | None = None) -> dict[str, Any]:
    """Compute ``summary.json`` (and ``sweep.png``) from ``config.json`` and ``generations.jsonl``."""
    from loadbearing.files import read_json, read_jsonl, write_json
    from steering.plot import plot_sweep

    out_dir = Path(out_dir)
    config = config or read_json(out_dir / CONFIG_FILE)
    grid = [Setting(**d) for d in config["settings"]]
    recs = read_jsonl(out_dir / GENERATIONS)
    case_ids = config.get("case_ids")
    if case_ids is not None:
        keep = set(case_ids)
        recs = [r for r in recs if r["case_id"] in keep]
    summary: dict[str, Any] = {"schema_version": SCHEMA_VERSION}
    summary.update(summarize_records(recs, grid, sesoi=config.get("sesoi", DEFAULT_SESOI),
                                     level=config.get("level", 0.05), seed=config.get("seed", 0)))
    split = config.get("split") or {}
    if summary["verdict_code"] != "insufficient_data" and split.get("disjoint") is not True:
        summary["verdict"] += (" [caution: the directions were fitted on steered questions; not a held-out test]"
                               if split.get("disjoint") is False else
                               " [caution: unknown whether the directions were fitted on the steered questions]")
    summary.update({
        "cases": config.get("case_sample"),
        "split": config.get("split"),
        "positions": config.get("positions"),
        "dose": config.get("dose"),
        "resid_norm": config.get("resid_norm"),
    })
    write_json(out_dir / SUMMARY, summary)
    try:
        plot_sweep(summary, out_dir / PLOT)
        summary["plot"] = PLOT
        write_json(out_dir / SUMMARY, summary)
    except Exception as e:  # plotting must never lose the numbers
        print(f"warning: could not draw {PLOT} ({type(e).__name__}: {e})", file=sys.stderr)
    return summary


def is_complete(out_dir: str | Path) -> bool:
    """True when ``out_dir`` holds a finished sweep (config marked complete and a summary with a status)."""
    out_dir = Path(out_dir)
    try:
        cfg = json.loads((out_dir / CONFIG_FILE).read_text(encoding="utf-8"))
        summ = json.loads((out_dir / SUMMARY).read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return False
    if not isinstance(cfg, dict) or not isinstance(summ, dict):
        return False
    return cfg.get("status", "complete") == "complete" and summ.get("status") in ("ok", "insufficient_data")


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    from loadbearing.engine.models import ModelError
    from loadbearing.files import RunDirError
    from steering.hooks import SteeringError

    try:
        from loadbearing.cli import UsageError, check_device
        from loadbearing.files import check_jsonl_tail

        try:
            check_device(args.device)  # before any model is loaded (H-REL battery)
        except UsageError as e:
            raise SweepError(str(e)) from None
        check_jsonl_tail(Path(args.run_dir) / "continuations.jsonl", args.run_dir)
        summary = run_sweep(config_from_args(args))
    except (SweepError, SteeringError, RunDirError, ModelError) as e:
        print(f"error: {str(e).splitlines()[0] if str(e) else type(e).__name__}", file=sys.stderr)
        return 2
    except OSError as e:  # an unwritable or full output location
        print(f"error: {e.strerror or e} ({e.filename or ''}); choose another --output", file=sys.stderr)
        return 2
    return 0 if summary.get("status") in ("ok", "insufficient_data") else 1


__all__ = ["SweepConfig", "SweepError", "build_parser", "config_from_args", "format_summary", "format_table",
           "is_complete", "main", "run_sweep", "score", "summarize"]


if __name__ == "__main__":
    sys.exit(main())
