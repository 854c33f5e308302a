"""python -m steering.sweep RUN_DIR --directions RUN_DIR/probes  (this module: running a sweep)

:func:`run_sweep` runs (or resumes) one sweep: it plans it (:mod:`steering.sweep.plan`: grid, case sample, question
split, scale; every check that needs no model comes before the model is loaded), then, under the output
directory's lock, generates every (setting, case) pair not yet in ``generations.jsonl``
(:func:`generate_all`, one layer at a time, records flushed per chunk) and summarises
(:func:`steering.sweep.summary.summarize`). :func:`score` scores a steered generation with the one scorer,
:func:`loadbearing.answers.score`.
"""
from __future__ import annotations

import contextlib
import shutil
from collections import defaultdict
from collections.abc import Callable, Iterator
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import numpy as np

from loadbearing import answers
from loadbearing.engine.oom import for_generate_fn
from loadbearing.files import JsonlWriter, read_json, read_jsonl, write_json
from loadbearing.locks import output_lock
from loadbearing.runs import Run
from probes.directions import Directions
from steering.ablation import generate_ablated
from steering.generate import generate_steered
from steering.hooks import d_model, n_layers
from steering.sweep.analysis import format_summary
from steering.sweep.cases import case_dict, select_cases
from steering.sweep.config import CONFIG_FILE, GENERATIONS, SCHEMA_VERSION, SUMMARY, SweepConfig, SweepError
from steering.sweep.controls import RANDOM_KINDS, control_basis, control_vector, covariance_rows, direction_seed, scope_id
from steering.sweep.grid import Setting, make_grid, setting_basis, setting_vector, sweep_directions
from steering.sweep.plan import (
    check_directions_model,
    check_resume,
    check_resume_settings,
    check_width,
    grid_axes,
    question_split,
    residual_norms,
    sweep_record,
)
from steering.sweep.summary import insufficient_data_summary, summarize

# ------------------------------------------------------------------------------------------------ records


def score(text: str, case: dict[str, Any], questions: dict[str, str] | None = None) -> tuple[str | None, bool | None]:
    """(parsed answer, correct) of a steered generation, through the one scorer in loadbearing.answers."""
    q = SimpleNamespace(dataset=case["dataset"], task=case.get("task"), answer=case["gold"],
                        question=(questions or {}).get(case["question_id"], ""), choices=None)
    s = answers.score(text, q)
    return s.parsed, s.correct


def generation_record(s: Setting, case: dict[str, Any], g: Any, questions: dict[str, str],
                      seed: int = 0, random_scope: str = "case") -> dict[str, Any]:
    """One line of ``generations.jsonl``: the setting, the case, the generation and its score (a random
    control's record names the seed of its own direction), and, from the fast path, ``steer_audit`` (what the
    hooks touched: :mod:`steering.audit`)."""
    pred, ok = score(g.text, case, questions)
    return {
        "schema_version": SCHEMA_VERSION,
        "setting": s.key,
        "operator": s.operator,
        "basis": s.basis,
        "directions": s.directions,
        "layer": s.layer,
        "k": s.k,
        "alpha_rel": s.alpha_rel,
        "alpha": s.alpha,
        "seed": s.seed,
        "direction_seed": direction_seed(seed, scope_id(case["id"], random_scope), s) if s.basis in RANDOM_KINDS
        else None,
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
        **({"steer_audit": g.audit} if getattr(g, "audit", None) is not None else {}),
    }


def generate_all(config: SweepConfig, lm: Any, grid: list[Setting], cases: list[dict], dirs: Directions, width: int,
                 layers: list[int], done: set, gen_path: Path, questions: dict[str, str], echo: Callable[[str], None],
                 generate_fn: Callable[..., list] | None, cov: dict[int, np.ndarray] | None = None,
                 ablate_fn: Callable[..., list] | None = None) -> dict[str, Any]:
    """Generate every (setting, case) pair not in ``done``, one layer at a time, flushing records per chunk;
    a random setting's vector is drawn per case (:func:`steering.sweep.controls.control_vector`); the ablate settings
    of a layer run after its additive ones, through ``ablate_fn`` (default
    :func:`steering.ablation.generate_ablated`), a random one's basis drawn per case. A chunk out of
    accelerator memory is generated again at half the batch size; returns the batch sizes used
    (:meth:`loadbearing.engine.oom.BatchSize.record`)."""
    if generate_fn is None:
        generate_fn = generate_steered
    if ablate_fn is None:
        ablate_fn = generate_ablated
    sizer = for_generate_fn(generate_fn, config.batch_size, what="steered generation")
    by_layer: dict[tuple[int, bool], list] = defaultdict(list)  # (layer, ablate?) -> jobs
    for s in grid:
        for case in cases:
            if (s.key, case["id"]) not in done:
                by_layer[(s.layer if s.layer is not None else layers[0], s.operator == "ablate")].append((s, case))
    n_jobs = sum(len(v) for v in by_layer.values())
    n_c = sum(1 for c in cases if c["label"] == "C")
    echo(f"steering sweep: {n_c} C cases from {len({c['question_key'] for c in cases if c['label'] == 'C'})} "
         f"questions + {len(cases) - n_c} non-C x {len(grid)} settings; {n_jobs} generations to run "
         f"({len(done)} already done) -> {gen_path.parent}")
    vec_cache: dict[str, np.ndarray] = {}
    chunk = max(config.batch_size * 4, 1)
    with JsonlWriter(gen_path) as writer:
        for L, ablating in sorted(by_layer):
            jobs = sorted(by_layer[(L, ablating)], key=lambda j: (j[1]["input_text"], j[1]["id"], j[0].key))
            for c0 in range(0, len(jobs), chunk):
                part = jobs[c0 : c0 + chunk]
                if ablating:
                    outs = sizer.call(ablate_fn, lm, [c["input_text"] for _, c in part],
                                      [_ablate_basis(s, case, dirs, width, config.seed, cov, vec_cache,
                                                     config.random_scope) for s, case in part],
                                      layers=[L], positions=config.positions, max_new_tokens=config.max_new_tokens,
                                      progress=config.progress, desc=f"ablate L{L} {c0 + len(part)}/{len(jobs)}")
                    for (s, case), g in zip(part, outs):
                        writer.write(generation_record(s, case, g, questions, config.seed, config.random_scope))
                    continue
                rows = []
                for s, case in part:
                    if s.basis in RANDOM_KINDS:
                        rows.append(control_vector(s, scope_id(case["id"], config.random_scope), dirs, config.dose,
                                                   width, config.seed, cov))
                        continue
                    if s.key not in vec_cache:
                        vec_cache[s.key] = setting_vector(s, dirs, config.dose, width)
                    rows.append(vec_cache[s.key])
                vecs = np.stack(rows)  # [n, d_model]
                alph = np.array([s.alpha for s, _ in part], dtype=np.float32)  # [n]
                outs = sizer.call(generate_fn, lm, [c["input_text"] for _, c in part], vecs, alph, layers=[L],
                                  positions=config.positions, max_new_tokens=config.max_new_tokens,
                                  progress=config.progress, desc=f"steer L{L} {c0 + len(part)}/{len(jobs)}")
                for (s, case), g in zip(part, outs):
                    writer.write(generation_record(s, case, g, questions, config.seed, config.random_scope))
    return sizer.record()


def _ablate_basis(s: Setting, case: dict[str, Any], dirs: Directions, width: int, seed: int,
                  cov: dict[int, np.ndarray] | None, cache: dict[str, np.ndarray],
                  random_scope: str = "case") -> np.ndarray:
    """The orthonormal basis [k, d_model] an ablate setting projects out for ``case`` (a random one's per case,
    or per sweep with ``random_scope="sweep"``)."""
    if s.basis in RANDOM_KINDS:
        return control_basis(s, scope_id(case["id"], random_scope), width, seed, cov)
    if s.key not in cache:
        cache[s.key] = setting_basis(s, dirs)
    return cache[s.key]


# ------------------------------------------------------------------------------------------------ the sweep


def _previous_config(config: SweepConfig) -> dict[str, Any] | None:
    """The ``config.json`` of the output being resumed (None for a new output); refuses an output directory
    that exists without ``--resume`` or is not a sweep's."""
    out_dir = config.out_dir
    if out_dir.exists() and not config.resume:
        raise SweepError(f"output directory {str(out_dir)!r} already exists; pass --resume to continue it or choose "
                         "another --output-dir")
    if config.resume and out_dir.exists() and not (out_dir / CONFIG_FILE).is_file():
        raise SweepError(f"{str(out_dir)!r} exists but holds no {CONFIG_FILE}: not a steering sweep output; choose "
                         "another --output-dir")
    if config.resume and (out_dir / CONFIG_FILE).is_file():
        try:
            return read_json(out_dir / CONFIG_FILE)
        except ValueError:
            raise SweepError(f"{str(out_dir / CONFIG_FILE)!r} is not valid JSON; use a new --output-dir") from None
    return None


def _check_model_name(config: SweepConfig, run: Run) -> None:
    mspec = run.model_spec
    if config.model and mspec.get("name") and config.model != mspec["name"] and not config.allow_other_model:
        raise SweepError(f"run {str(run.path)!r} was generated with model {mspec['name']!r}, not {config.model!r}; "
                         "omit --model to steer the run's own model, or pass --allow-other-model")


@contextlib.contextmanager
def _locked_output(out_dir: Path) -> Iterator[None]:
    """Create ``out_dir`` (removed again when its lock cannot be taken) and hold its writer's lock."""
    created = not out_dir.exists()
    out_dir.mkdir(parents=True, exist_ok=True)
    try:
        lock = output_lock(out_dir, command="python -m steering.sweep")
        lock.__enter__()
    except BaseException:
        if created:
            shutil.rmtree(out_dir, ignore_errors=True)
        raise
    try:
        yield
    finally:
        lock.__exit__(None, None, None)


def _covariance(config: SweepConfig, dirs: Directions, layers: list[int],
                ks: list[int]) -> tuple[dict[int, np.ndarray] | None, str]:
    """The activations behind the covariance-matched controls (k > 1), and a note saying what was drawn."""
    if "random" not in config.controls and "random_cov" not in config.controls:
        return None, ""
    if "random_cov" not in config.controls or max(ks) < 2:
        return None, "random controls: isotropic, a fresh direction per case"
    cov, why = covariance_rows(dirs, layers, max(ks))
    if cov is None:
        return None, (f"random controls: isotropic only, a fresh direction per case (covariance-matched bases for "
                      f"k > 1 unavailable: {why})")
    return cov, f"random controls: isotropic, and for k > 1 covariance-matched ({why}), a fresh direction per case"


def run_sweep(config: SweepConfig, lm: Any = None, *, echo: Callable[[str], None] = print,
              generate_fn: Callable[..., list] | None = None,
              ablate_fn: Callable[..., list] | None = None) -> dict[str, Any]:
    """Run (or resume) a sweep and return the summary dict (also written to ``OUTPUT/summary.json``).

    ``lm`` is an already-loaded :class:`loadbearing.engine.models.LoadedModel` (tests pass tiny models); else the
    run's model is loaded through :meth:`loadbearing.runs.Run.load_model` (weights hash checked).
    ``generate_fn`` defaults to :func:`steering.generate.generate_steered` (same signature), ``ablate_fn`` (the
    ablate settings) to :func:`steering.ablation.generate_ablated`.
    """
    config.validate()
    run = Run(config.run_dir)
    if run.status not in ("complete", "ok", "insufficient_data"):
        run.require_complete(allow_incomplete=config.allow_incomplete)
    out_dir = config.out_dir
    old = _previous_config(config)
    _check_model_name(config, run)
    dirs = sweep_directions(config.directions)
    check_directions_model(dirs, run)
    layers, ks, alphas = grid_axes(config, dirs)

    # the case sample (distinct inputs, fitting questions excluded, stratified over questions)
    split, exclude, include = question_split(dirs, config)
    questions = run.question_texts()
    pert = [case_dict(c, questions) for c in run.continuations("perturbed")]
    sample = select_cases(pert, which=config.cases, max_cases=config.max_cases, per_question=config.per_question,
                          n_non_c=config.n_non_c, seed=config.seed, exclude=exclude, include=include)
    check_resume_settings(old, config, dirs)
    cov, controls_note = _covariance(config, dirs, layers, ks)

    # the model (loaded only now, after every check that does not need it)
    if lm is None:
        lm = run.load_model(config.model if config.allow_other_model else None, device=config.device)
    elif not config.allow_other_model:
        run.check_model(lm)

    width = d_model(lm.model)
    check_width(dirs, layers, width, n_layers(lm.model))
    norms = residual_norms(lm, dirs, layers, sample.all, config.batch_size)
    grid = make_grid(layers, ks, alphas, config.controls, config.random_seeds, norms[0], covariance=set(cov) if cov else False,
                     operators=config.operators, bases=config.bases, raw=config.alpha_units == "raw")
    provenance = getattr(lm, "provenance", None)
    model_info = provenance() if callable(provenance) else {"name": getattr(lm, "name", None)}
    cfg = sweep_record(config, run, dirs, model_info, (layers, ks, alphas), sample, split, norms, grid,
                       controls_note)
    check_resume(old, cfg, out_dir)

    if split["disjoint"] is None:
        echo(f"warning: {split['note']}")
    with _locked_output(out_dir):
        write_json(out_dir / CONFIG_FILE, cfg)
        (out_dir / SUMMARY).unlink(missing_ok=True)  # a summary always describes a finished sweep
        gen_path = out_dir / GENERATIONS
        if not sample.c:
            summary = insufficient_data_summary(run.path, sample, split, config.sesoi)
            write_json(out_dir / SUMMARY, summary)
            write_json(out_dir / CONFIG_FILE, dict(cfg, status="complete"))
            echo(summary["verdict"])
            return summary
        done = {(r["setting"], r["case_id"]) for r in read_jsonl(gen_path, repair=True)}
        batching = generate_all(config, lm, grid, sample.all, dirs, width, layers, done, gen_path, questions, echo,
                                generate_fn, cov, ablate_fn)
        summary = summarize(out_dir, config=cfg)
        backend = getattr(generate_fn, "backend_record", None)  # --backend vllm: the engine and its hooks
        write_json(out_dir / CONFIG_FILE, dict(cfg, status="complete", batching=batching,
                                               **({"backend": backend()} if callable(backend) else {})))
    echo(format_summary(summary))
    return summary


__all__ = ["generate_all", "generation_record", "run_sweep", "score"]
