"""python -m steering.sweep RUN_DIR --directions RUN_DIR/probes [--layers 6] [--k 1,2,4,8] [--alphas 0.25,0.5,1]

Steering sweep: re-generate every type-C perturbed continuation of a run (and, with ``--cases all``, a sample
of non-C ones for side effects) from its exact ``input_text`` while adding the probe directions to the
residual stream, for each (layer, k, alpha, basis), next to norm-matched random-direction controls (several
seeds; random orthonormal bases of the same k, combined with the same dose) and an unsteered alpha-0 rerun
(which checks that the C cases reproduce). Every generation is scored with the foundation's strict parser and
appended (flushed) to ``OUTPUT/generations.jsonl``; ``--resume`` skips the (setting, case) pairs already there.

Alphas are given relative to the layer's mean residual-stream norm (the ``resid_norm`` attribute written by
the probes stage, else measured on the cases' inputs): ``--alphas 1`` adds a vector as long as the average
residual. The k-direction vector is dose-matched (rescaled to the norm of one direction; see
:mod:`steering.hooks`).

Outputs (``OUTPUT`` defaults to ``RUN_DIR/steering``): ``config.json`` (grid, provenance), ``generations.jsonl``,
``summary.json`` (per setting: fraction of C cases moved to correct and of non-C broken, Wilson intervals;
difference from the matched random control with a question-clustered bootstrap CI and an exact sign test
(McNemar's exact test when there is one control seed), Holm and BH adjusted across the grid; strongest
setting flagged; one-line verdict), ``sweep.png`` and a printed table. No C cases: ``status =
"insufficient_data"`` (exit 0). Bad input (wrong direction width, unknown layer, k above the stored basis,
existing output without ``--resume``) exits 2 with a one-line error and writes nothing.
"""
from __future__ import annotations

import argparse
import hashlib
import inspect
import json
import sys
from collections import defaultdict
from dataclasses import asdict, dataclass
from pathlib import Path
from types import SimpleNamespace
from typing import Callable, Sequence

import numpy as np

SCHEMA_VERSION = 1
DEFAULT_KS = (1, 2, 4, 8)
DEFAULT_ALPHAS = (0.25, 0.5, 1.0)
CONTROLS = ("random", "none")


def build_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="python -m steering.sweep", description=__doc__.split("\n\n")[1],
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("run_dir", help="run directory written by python -m behavioural.run (continuations.jsonl, manifest.json)")
    p.add_argument("--directions", required=True,
                   help="probes output directory holding directions.h5 (or the .h5 file itself)")
    p.add_argument("--layers", default=None,
                   help="comma-separated hidden_states layers to steer (default: the file's selected_layer attribute, "
                        "else the middle of its layers)")
    p.add_argument("--k", default=None, help="comma-separated numbers of directions (default 1,2,4,8, capped at the stored basis)")
    p.add_argument("--alphas", default=",".join(str(a) for a in DEFAULT_ALPHAS),
                   help="comma-separated steering strengths, relative to the layer's mean residual norm (default %(default)s)")
    p.add_argument("--controls", default="random,none",
                   help="comma-separated controls: random (norm-matched random orthonormal bases), none (alpha-0 rerun)")
    p.add_argument("--random-seeds", type=int, default=3, help="random-direction seeds per setting (default %(default)s)")
    p.add_argument("--cases", choices=("C", "all"), default="C",
                   help="C: type-C perturbed continuations only; all: also a sample of non-C ones (side effects)")
    p.add_argument("--max-cases", type=int, default=None, help="use at most N C cases (first N in file order)")
    p.add_argument("--n-non-c", type=int, default=None,
                   help="with --cases all: number of non-C cases to sample (default: as many as C cases)")
    p.add_argument("--max-new-tokens", type=int, default=128, help="generation budget per continuation (default %(default)s)")
    p.add_argument("--batch-size", type=int, default=8, help="rows per batched generate (default %(default)s)")
    p.add_argument("--positions", choices=("continuation", "generated", "all"), default="continuation",
                   help="which positions are steered (see steering.hooks; default %(default)s)")
    p.add_argument("--dose", choices=("matched", "sum"), default="matched",
                   help="matched: k-direction vector rescaled to one direction's norm; sum: the paper's plain sum")
    p.add_argument("--model", default=None, help="model name/path overriding the run manifest's model")
    p.add_argument("--output", default=None, help="output directory (default RUN_DIR/steering); must not exist unless --resume")
    p.add_argument("--resume", action="store_true", help="continue an existing output directory, skipping finished generations")
    p.add_argument("--n-boot", type=int, default=2000, help="bootstrap resamples for the clustered CIs (default %(default)s)")
    p.add_argument("--no-progress", action="store_true", help="hide progress bars")
    return p


class SweepError(RuntimeError):
    """Bad sweep input; the message names the problem and the fix."""


# ------------------------------------------------------------------------------------------------ directions


@dataclass
class DirectionSet:
    path: str
    layers: list[int]
    bases: dict  # layer -> np.ndarray [kmax, d_model]
    resid_norm: dict  # layer -> float | None
    selected_layer: int | None
    sha256: str


def directions_file(path: str | Path) -> Path:
    p = Path(path)
    f = p / "directions.h5" if p.is_dir() else p
    if not f.is_file():
        raise SweepError(f"no directions file at {str(f)!r}; run python -m probes.train first or pass --directions PROBES_DIR")
    return f


def read_directions(path: str | Path) -> DirectionSet:
    """Read ``directions.h5`` (group ``/layer_{L}`` with dataset ``basis`` [kmax, d_model], attr ``resid_norm``;
    file attr ``layers``)."""
    import h5py

    f = directions_file(path)
    bases, norms = {}, {}
    with h5py.File(f, "r") as h:
        kind = h.attrs.get("kind")
        if kind is not None and str(kind) != "probe_directions":
            raise SweepError(f"{f} is not a probe directions file (kind={kind!r}); pass the probes output directory")
        layers = [int(x) for x in np.atleast_1d(h.attrs.get("layers", []))]
        if not layers:
            layers = sorted(int(k.split("_", 1)[1]) for k in h.keys() if k.startswith("layer_"))
        for L in layers:
            g = h.get(f"layer_{L}")
            if g is None or "basis" not in g:
                raise SweepError(f"{f}: layer {L} is listed but /layer_{L}/basis is missing")
            bases[L] = np.asarray(g["basis"][...], dtype=np.float32)
            rn = g.attrs.get("resid_norm")
            norms[L] = float(rn) if rn is not None else None
        sel = h.attrs.get("selected_layer")
    digest = hashlib.sha256(f.read_bytes()).hexdigest()
    return DirectionSet(str(f), layers, bases, norms, int(sel) if sel is not None else None, digest)


def random_basis(k: int, d: int, seed: int) -> np.ndarray:
    """A random orthonormal basis [k, d] (QR of a Gaussian matrix), reproducible from ``seed``."""
    rng = np.random.default_rng(seed)
    q, r = np.linalg.qr(rng.standard_normal((d, k)))
    q = q * np.sign(np.diag(r))[None, :]
    return q.T.astype(np.float32)


# ------------------------------------------------------------------------------------------------ grid


@dataclass(frozen=True)
class Setting:
    key: str
    basis: str  # probe | random | none
    layer: int | None
    k: int
    alpha_rel: float
    alpha: float  # absolute (residual units)
    seed: int | None = None


def make_grid(layers, ks, alphas, controls, seeds: int, resid_norm: dict) -> list[Setting]:
    grid = []
    if "none" in controls:
        grid.append(Setting("none|alpha0", "none", None, 0, 0.0, 0.0))
    for L in layers:
        for k in ks:
            for a in alphas:
                aa = float(a) * float(resid_norm[L])
                grid.append(Setting(f"L{L}|k{k}|a{a:g}|probe", "probe", L, k, float(a), aa))
                if "random" in controls:
                    for s in range(seeds):
                        grid.append(Setting(f"L{L}|k{k}|a{a:g}|random{s}", "random", L, k, float(a), aa, s))
    return grid


def setting_vector(s: Setting, dirs: DirectionSet, dose: str, d: int) -> np.ndarray:
    from steering.hooks import combine_directions

    if s.basis == "none":
        return np.zeros(d, dtype=np.float32)
    if s.basis == "probe":
        basis = dirs.bases[s.layer][: s.k]
    else:
        basis = random_basis(s.k, d, seed=1_000_003 * (s.seed + 1) + 1009 * s.layer + s.k)
        # norm-matched: same row norms as the probe basis (unit rows for orthonormal probes)
        basis = basis * np.linalg.norm(dirs.bases[s.layer][: s.k], axis=1)[:, None]
    return combine_directions(basis, dose).numpy()


# ------------------------------------------------------------------------------------------------ cases


def select_cases(rows: list[dict], which: str, max_cases: int | None, n_non_c: int | None, seed: int = 0):
    pert = [r for r in rows if r.get("condition") == "perturbed"]
    c = [r for r in pert if r.get("label") == "C"]
    if max_cases is not None:
        c = c[:max_cases]
    non = []
    if which == "all":
        pool = [r for r in pert if r.get("label") == "non-C"]
        n = len(c) if n_non_c is None else n_non_c
        if max_cases is not None:
            n = min(n, max_cases)
        n = min(n, len(pool))
        if n:
            pick = sorted(np.random.default_rng(seed).choice(len(pool), size=n, replace=False).tolist())
            non = [pool[i] for i in pick]
    return c, non


# ------------------------------------------------------------------------------------------------ running


def _default_generate():
    from behavioural.generation import generate

    return generate


def _parse_list(s, typ, name):
    if s is None:
        return None
    try:
        out = [typ(x) for x in str(s).split(",") if x.strip()]
    except ValueError as e:
        raise SweepError(f"--{name} must be a comma-separated list of {typ.__name__}s, got {s!r}") from e
    if not out:
        raise SweepError(f"--{name} is empty")
    return out


def run_sweep(
    run_dir,
    directions,
    *,
    lm=None,
    model: str | None = None,
    layers: Sequence[int] | None = None,
    ks: Sequence[int] | None = None,
    alphas: Sequence[float] = DEFAULT_ALPHAS,
    controls: Sequence[str] = CONTROLS,
    random_seeds: int = 3,
    cases: str = "C",
    max_cases: int | None = None,
    n_non_c: int | None = None,
    max_new_tokens: int = 128,
    batch_size: int = 8,
    positions: str = "continuation",
    dose: str = "matched",
    output=None,
    resume: bool = False,
    n_boot: int = 2000,
    progress: bool = True,
    generate_fn: Callable | None = None,
    chunk: int | None = None,
    echo: Callable[[str], None] = print,
) -> dict:
    """Run (or resume) a sweep and return the summary dict (also written to ``OUTPUT/summary.json``).

    ``lm`` is an already-loaded :class:`behavioural.models.LoadedModel` (tests pass tiny models); else the
    model is ``model`` or the run manifest's. ``generate_fn`` defaults to ``behavioural.generation.generate``.
    """
    from behavioural.rundir import JsonlWriter, read_json, read_jsonl, write_json
    from steering.hooks import d_model as _d_model, mean_resid_norm, n_layers as _n_layers, steer_vectors

    run_dir = Path(run_dir)
    cont_path = run_dir / "continuations.jsonl"
    if not cont_path.is_file():
        raise SweepError(f"{str(cont_path)!r} not found; is {str(run_dir)!r} a run directory written by python -m behavioural.run?")
    bad = set(controls) - set(CONTROLS)
    if bad:
        raise SweepError(f"unknown controls {sorted(bad)}; choose from {', '.join(CONTROLS)}")
    if random_seeds < 1 and "random" in controls:
        raise SweepError("--random-seeds must be >= 1 with the random control")
    out_dir = Path(output) if output is not None else run_dir / "steering"
    if out_dir.exists() and not resume:
        raise SweepError(f"output directory {str(out_dir)!r} already exists; pass --resume to continue it or choose another --output")
    if resume and out_dir.exists() and not (out_dir / "config.json").is_file():
        raise SweepError(f"{str(out_dir)!r} exists but holds no config.json: not a steering sweep output; choose another --output")
    dirs = read_directions(directions)

    # model
    manifest = {}
    if (run_dir / "manifest.json").is_file():
        manifest = read_json(run_dir / "manifest.json")
    if lm is None:
        from behavioural.models import load_model

        mspec = manifest.get("model") or {}
        if isinstance(mspec, str):
            mspec = {"name": mspec}
        name = model or mspec.get("name")
        if not name:
            raise SweepError(f"{run_dir}/manifest.json names no model; pass --model")
        kw = {} if model else {k: mspec.get(k) for k in ("revision", "quantize", "dtype") if mspec.get(k)}
        lm = load_model(name, **kw)
    width, nl = _d_model(lm.model), _n_layers(lm.model)

    # grid validation (before anything is written)
    if layers is None:
        if dirs.selected_layer is not None:
            layers = [dirs.selected_layer]
        elif dirs.layers:
            layers = [dirs.layers[len(dirs.layers) // 2]]
        else:
            raise SweepError(f"{dirs.path} holds no layers")
    layers = [int(x) for x in layers]
    for L in layers:
        if L not in dirs.bases:
            raise SweepError(f"unknown layer {L}: {dirs.path} has directions for layers {dirs.layers}")
        if not 0 <= L <= nl:
            raise SweepError(f"unknown layer {L}: the model has hidden_states layers 0..{nl}")
        if dirs.bases[L].ndim != 2 or dirs.bases[L].shape[1] != width:
            raise SweepError(f"directions for layer {L} have width {dirs.bases[L].shape[-1]} but the model's d_model is "
                             f"{width}: they were computed for another model ({dirs.path})")
    kmax = min(dirs.bases[L].shape[0] for L in layers)
    if ks is None:
        ks = [k for k in DEFAULT_KS if k <= kmax] or [kmax]
    ks = [int(k) for k in ks]
    if any(k < 1 or k > kmax for k in ks):
        raise SweepError(f"k must be between 1 and {kmax} (the stored basis size), got {ks}")
    alphas = [float(a) for a in alphas]

    rows = read_jsonl(cont_path)
    c_cases, non_cases = select_cases(rows, cases, max_cases, n_non_c)
    all_cases = c_cases + non_cases

    resid_norm, norm_source = {}, {}
    for L in layers:
        if dirs.resid_norm.get(L):
            resid_norm[L], norm_source[L] = dirs.resid_norm[L], "directions.h5"
        elif all_cases:
            resid_norm[L] = mean_resid_norm(lm, [r["input_text"] for r in all_cases[:32]], L, batch_size=batch_size)
            norm_source[L] = "measured at the last token of up to 32 case inputs"
        else:
            resid_norm[L], norm_source[L] = float("nan"), "none"
    grid = make_grid(layers, ks, alphas, controls, random_seeds, resid_norm)

    config = {
        "schema_version": SCHEMA_VERSION,
        "run_dir": str(run_dir),
        "directions": dirs.path,
        "directions_sha256": dirs.sha256,
        "model": getattr(lm, "provenance", lambda: {"name": getattr(lm, "name", None)})(),
        "max_new_tokens": max_new_tokens,
        "positions": positions,
        "dose": dose,
        "layers": layers,
        "ks": ks,
        "alphas": alphas,
        "controls": list(controls),
        "random_seeds": random_seeds,
        "cases": cases,
        "n_c_cases": len(c_cases),
        "n_non_c_cases": len(non_cases),
        "resid_norm": {str(L): resid_norm[L] for L in layers},
        "resid_norm_source": {str(L): norm_source[L] for L in layers},
        "settings": [asdict(s) for s in grid],
    }
    if resume and (out_dir / "config.json").is_file():
        old = read_json(out_dir / "config.json")
        for key in ("directions_sha256", "max_new_tokens", "positions", "dose"):
            if old.get(key) != config[key]:
                raise SweepError(f"cannot resume {str(out_dir)!r}: {key} was {old.get(key)!r}, now {config[key]!r}; "
                                 "use a new --output")
        for L, v in (old.get("resid_norm") or {}).items():
            new_v = config["resid_norm"].get(L)
            if new_v is not None and v is not None and abs(new_v - v) > 1e-6 * max(abs(v), 1.0):
                raise SweepError(f"cannot resume {str(out_dir)!r}: layer {L}'s residual norm (alpha scale) was {v:.6g}, "
                                 f"now {new_v:.6g}; use a new --output")
        if (old.get("model") or {}).get("name") != config["model"].get("name"):
            raise SweepError(f"cannot resume {str(out_dir)!r}: it was made with model {old['model'].get('name')!r}")
    out_dir.mkdir(parents=True, exist_ok=True)
    write_json(out_dir / "config.json", config)
    gen_path = out_dir / "generations.jsonl"

    if not c_cases:
        summary = {"schema_version": SCHEMA_VERSION, "status": "insufficient_data",
                   "verdict": "insufficient_data: no type-C perturbed continuations in "
                              f"{cont_path} ({len(rows)} records); nothing to steer",
                   "n_c_cases": 0, "settings": []}
        write_json(out_dir / "summary.json", summary)
        echo(summary["verdict"])
        return summary

    # jobs: (setting, case) pairs not yet done, grouped by layer (one hook point per generate call)
    done = {(r["setting"], r["case_id"]) for r in read_jsonl(gen_path, repair=True)}
    questions = _question_texts(run_dir)
    by_layer: dict = defaultdict(list)
    vec_cache: dict = {}
    for s in grid:
        for case in all_cases:
            if (s.key, case["id"]) in done:
                continue
            L = s.layer if s.layer is not None else layers[0]
            by_layer[L].append((s, case))
    n_jobs = sum(len(v) for v in by_layer.values())
    echo(f"steering sweep: {len(c_cases)} C + {len(non_cases)} non-C cases x {len(grid)} settings; "
         f"{n_jobs} generations to run ({len(done)} already done) -> {out_dir}")
    gen = generate_fn or _default_generate()
    gen_kw = {}
    params = inspect.signature(gen).parameters
    if "dedupe" in params:
        gen_kw["dedupe"] = False  # same text, different steering: never share a generation
    chunk = chunk or max(batch_size * 4, 1)
    with JsonlWriter(gen_path) as writer:
        for L in sorted(by_layer):
            jobs = sorted(by_layer[L], key=lambda j: (j[1]["id"], j[0].key))
            for c0 in range(0, len(jobs), chunk):
                part = jobs[c0 : c0 + chunk]
                vecs = []
                for s, _ in part:
                    if s.key not in vec_cache:
                        vec_cache[s.key] = setting_vector(s, dirs, dose, width)
                    vecs.append(vec_cache[s.key])
                vecs_t = np.stack(vecs)  # [n, d_model]
                alph = np.array([s.alpha for s, _ in part], dtype=np.float32)  # [n]

                def ctx(indices, _v=vecs_t, _a=alph, _L=L):
                    return steer_vectors(lm.model, _v[indices], layers=[_L], alpha=_a[indices], positions=positions)

                outs = gen(lm, [c["input_text"] for _, c in part], max_new_tokens=max_new_tokens,
                           batch_size=batch_size, progress=progress,
                           desc=f"steer L{L} {c0 + len(part)}/{len(jobs)}", batch_context=ctx, **gen_kw)
                for (s, case), g in zip(part, outs):
                    writer.write(_record(s, case, g, questions))
    summary = summarize(out_dir, grid=grid, case_ids={c["id"] for c in all_cases}, n_boot=n_boot, config=config)
    echo(format_table(summary))
    echo(summary["verdict"])
    return summary


def _question_texts(run_dir: Path) -> dict:
    from behavioural.rundir import read_jsonl

    return {r["question_id"]: r.get("question", "") for r in read_jsonl(run_dir / "baselines.jsonl")}


def score(text: str, case: dict, questions: dict | None = None):
    from behavioural.answers import extract_answer, is_correct

    pred = extract_answer(text, case["dataset"], case.get("task"))
    q = SimpleNamespace(dataset=case["dataset"], task=case.get("task"), answer=case["gold"],
                        question=(questions or {}).get(case["question_id"], ""), choices=None)
    return pred, is_correct(pred, q)


def _record(s: Setting, case: dict, g, questions: dict) -> dict:
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


# ------------------------------------------------------------------------------------------------ summary


def _counts(recs, want_correct: bool):
    """(hits, parsed, total): hits = parsed generations whose correctness equals want_correct."""
    parsed = [r for r in recs if r["correct"] is not None]
    return sum(1 for r in parsed if bool(r["correct"]) == want_correct), len(parsed), len(recs)


def _sign_test(diffs) -> float:
    from scipy.stats import binomtest

    pos = sum(1 for d in diffs if d > 0)
    neg = sum(1 for d in diffs if d < 0)
    if pos + neg == 0:
        return 1.0
    return float(binomtest(pos, pos + neg, 0.5, alternative="two-sided").pvalue)


def summarize(out_dir, *, grid: list[Setting] | None = None, case_ids=None, n_boot: int = 2000,
              config: dict | None = None, alpha_level: float = 0.05) -> dict:
    """Compute ``summary.json`` (and ``sweep.png``) from ``generations.jsonl``; see the module docstring."""
    from statsmodels.stats.multitest import multipletests

    from behavioural.rundir import read_json, read_jsonl, write_json
    from behavioural.stats import paired_difference_ci, rate

    out_dir = Path(out_dir)
    config = config or read_json(out_dir / "config.json")
    if grid is None:
        grid = [Setting(**d) for d in config["settings"]]
    recs = read_jsonl(out_dir / "generations.jsonl")
    if case_ids is not None:
        recs = [r for r in recs if r["case_id"] in case_ids]
    by_setting: dict = defaultdict(dict)
    for r in recs:
        by_setting[r["setting"]][r["case_id"]] = r  # last one wins (no duplicates are written)

    def stats_for(key):
        rs = list(by_setting.get(key, {}).values())
        c = [r for r in rs if r["case_label"] == "C"]
        n = [r for r in rs if r["case_label"] == "non-C"]
        mk, mn, mt = _counts(c, True)
        bk, bn, bt = _counts(n, False)
        return {"moved": rate(mk, mn), "moved_of_all": rate(mk, mt), "coverage_c": rate(mn, mt),
                "broken": rate(bk, bn), "coverage_non_c": rate(bn, bt), "n_generations": len(rs)}

    out_settings = []
    baseline = None
    if any(s.basis == "none" for s in grid):
        st = stats_for("none|alpha0")
        c = [r for r in by_setting.get("none|alpha0", {}).values() if r["case_label"] == "C"]
        wk, wn, _ = _counts(c, False)
        nn = [r for r in by_setting.get("none|alpha0", {}).values() if r["case_label"] == "non-C"]
        ok_, on_, _ = _counts(nn, True)
        baseline = dict(st, key="none|alpha0", reproduced_c=rate(wk, wn), reproduced_non_c=rate(ok_, on_))
    probe_settings = [s for s in grid if s.basis == "probe"]
    for s in probe_settings:
        st = stats_for(s.key)
        ctrl_keys = [g.key for g in grid if g.basis == "random" and (g.layer, g.k, g.alpha_rel) == (s.layer, s.k, s.alpha_rel)]
        ctrl_kind = "random" if ctrl_keys else ("none" if baseline else None)
        if not ctrl_keys and baseline:
            ctrl_keys = ["none|alpha0"]
        # pooled control rate (seeds pooled; they share cases, so its interval is optimistic)
        ctrl_recs = [r for k in ctrl_keys for r in by_setting.get(k, {}).values()]
        ck, cn, _ = _counts([r for r in ctrl_recs if r["case_label"] == "C"], True)
        cbk, cbn, _ = _counts([r for r in ctrl_recs if r["case_label"] == "non-C"], False)
        pairs = []
        for cid, r in by_setting.get(s.key, {}).items():
            if r["case_label"] != "C":
                continue
            vals = [by_setting[k][cid]["correct"] for k in ctrl_keys if cid in by_setting.get(k, {})]
            vals = [float(v) for v in vals if v is not None]
            a = None if r["correct"] is None else float(r["correct"])
            pairs.append((r["question_id"], a, float(np.mean(vals)) if vals else None))
        diff = paired_difference_ci(pairs, n_boot=n_boot) if ctrl_kind else None
        p = _sign_test([a - b for _, a, b in pairs if a is not None and b is not None]) if ctrl_kind else None
        out_settings.append(dict(
            key=s.key, layer=s.layer, k=s.k, alpha_rel=s.alpha_rel, alpha=s.alpha, **st,
            control={"kind": ctrl_kind, "keys": ctrl_keys, "moved": rate(ck, cn), "broken": rate(cbk, cbn)},
            difference=diff, p_value=p,
            test="exact sign test on per-case (probe - mean control) differences; McNemar exact with one control",
        ))
    ps = [d["p_value"] for d in out_settings]
    idx = [i for i, p in enumerate(ps) if p is not None]
    for method, name in (("holm", "p_holm"), ("fdr_bh", "p_bh")):
        adj = multipletests([ps[i] for i in idx], method=method)[1] if idx else []
        for d in out_settings:
            d[name] = None
        for i, a in zip(idx, adj):
            out_settings[i][name] = float(a)
    for d in out_settings:
        est = (d["difference"] or {}).get("estimate")
        d["beats_control"] = bool(d["p_holm"] is not None and d["p_holm"] < alpha_level and est is not None and est > 0)
        d["strongest"] = False
    ranked = [d for d in out_settings if d["moved"]["rate"] is not None]
    strongest = None
    if ranked:
        strongest = max(ranked, key=lambda d: (d["moved"]["rate"], -(d["p_value"] if d["p_value"] is not None else 1)))
        strongest["strongest"] = True
    n_c = len({r["case_id"] for r in recs if r["case_label"] == "C"})
    status = "ok" if strongest is not None else "insufficient_data"
    verdict = _verdict(out_settings, strongest, status, alpha_level)
    summary = {
        "schema_version": SCHEMA_VERSION,
        "status": status,
        "verdict": verdict,
        "verdict_code": ("insufficient_data" if status != "ok" else
                         "effect" if any(d["beats_control"] for d in out_settings) else "null"),
        "n_c_cases": n_c,
        "n_non_c_cases": len({r["case_id"] for r in recs if r["case_label"] == "non-C"}),
        "n_generations": len(recs),
        "baseline": baseline,
        "strongest": strongest["key"] if strongest else None,
        "multiple_comparisons": {"method": "holm (verdict) and fdr_bh", "n_tests": len(idx), "level": alpha_level},
        "positions": config.get("positions"),
        "dose": config.get("dose"),
        "resid_norm": config.get("resid_norm"),
        "settings": out_settings,
    }
    write_json(out_dir / "summary.json", summary)
    try:
        plot_sweep(summary, out_dir / "sweep.png")
        summary["plot"] = "sweep.png"
        write_json(out_dir / "summary.json", summary)
    except Exception as e:  # plotting must never lose the numbers
        print(f"warning: could not draw sweep.png ({type(e).__name__}: {e})", file=sys.stderr)
    return summary


def _pct(x):
    return "n/a" if x is None else f"{100 * x:.1f}%"


def _rate_str(r):
    if r["rate"] is None:
        return f"{r['k']}/{r['n']} (n/a)"
    lo, hi = r["wilson"]
    return f"{r['k']}/{r['n']} ({_pct(r['rate'])}, Wilson {_pct(lo)}-{_pct(hi)})"


def _setting_str(d):
    diff = d["difference"] or {}
    est, ci = diff.get("estimate"), diff.get("ci") or [None, None]
    s = f"L{d['layer']} k={d['k']} alpha={d['alpha_rel']:g}x|resid| moved {_rate_str(d['moved'])}"
    if d["control"]["kind"]:
        s += f" vs {d['control']['kind']} control {_rate_str(d['control']['moved'])}"
    if est is not None:
        s += f", difference {100 * est:+.1f} pp (95% clustered bootstrap CI {_pct(ci[0]) if ci[0] is not None else 'n/a'} to " \
             f"{_pct(ci[1]) if ci[1] is not None else 'n/a'})"
    if d["p_holm"] is not None:
        s += f", exact p={d['p_value']:.3g}, Holm p={d['p_holm']:.3g}"
    return s


def _verdict(settings, strongest, status, level) -> str:
    if status != "ok" or strongest is None:
        return ("insufficient_data: no steered generation of a type-C case gave a parseable answer "
                f"({len(settings)} settings); check coverage and max_new_tokens")
    winners = [d for d in settings if d["beats_control"]]
    if not winners:
        return f"null: no setting beats its random control (Holm-adjusted p < {level}); best: {_setting_str(strongest)}"
    best = max(winners, key=lambda d: d["moved"]["rate"])
    return f"effect: {len(winners)}/{len(settings)} settings beat their random control; strongest: {_setting_str(best)}"


def format_table(summary: dict) -> str:
    head = f"{'setting':<26} {'moved C':>22} {'control':>12} {'diff [95% CI]':>26} {'p':>8} {'Holm':>8} {'broken non-C':>14}"
    lines = [head, "-" * len(head)]
    b = summary.get("baseline")
    if b:
        lines.append(f"{'alpha=0 rerun':<26} {_short(b['moved']):>22} {'':>12} {'':>26} {'':>8} {'':>8} {_short(b['broken']):>14}")
    for d in summary["settings"]:
        diff = d["difference"] or {}
        est, ci = diff.get("estimate"), diff.get("ci") or [None, None]
        ds = "n/a" if est is None else f"{100 * est:+.1f} [{_f(ci[0])},{_f(ci[1])}]"
        mark = " *" if d["strongest"] else ""
        lines.append(f"{d['key'] + mark:<26} {_short(d['moved']):>22} {_pct(d['control']['moved']['rate']):>12} {ds:>26} "
                     f"{_f3(d['p_value']):>8} {_f3(d['p_holm']):>8} {_short(d['broken']):>14}")
    lines.append("* strongest setting; moved = parsed steered answers now correct; diff in percentage points vs the "
                 "matched control, CI clustered by question")
    return "\n".join(lines)


def _short(r):
    return f"{r['k']}/{r['n']} {_pct(r['rate'])}" if r["n"] else "0/0"


def _f(x):
    return "n/a" if x is None else f"{100 * x:+.1f}"


def _f3(x):
    return "n/a" if x is None else f"{x:.3g}"


def plot_sweep(summary: dict, path) -> None:
    """Moved fraction vs alpha per k (one panel per layer), Wilson bands, matched control dashed."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    settings = summary["settings"]
    layers = sorted({d["layer"] for d in settings})
    fig, axes = plt.subplots(1, max(len(layers), 1), figsize=(5 * max(len(layers), 1), 4), squeeze=False)
    for ax, L in zip(axes[0], layers):
        ks = sorted({d["k"] for d in settings if d["layer"] == L})
        for i, k in enumerate(ks):
            ds = sorted([d for d in settings if d["layer"] == L and d["k"] == k], key=lambda d: d["alpha_rel"])
            color = f"C{i}"
            for which, style, fill in (("probe", "-o", 0.2), ("control", "--", 0.08)):
                xs, ys, lo, hi = [], [], [], []
                for d in ds:
                    r = d["moved"] if which == "probe" else d["control"]["moved"]
                    if r["rate"] is None:
                        continue
                    xs.append(d["alpha_rel"]); ys.append(r["rate"]); lo.append(r["wilson"][0]); hi.append(r["wilson"][1])
                if xs:
                    label = f"k={k}" if which == "probe" else f"k={k} {ds[0]['control']['kind']} control"
                    ax.plot(xs, ys, style, color=color, label=label)
                    ax.fill_between(xs, lo, hi, color=color, alpha=fill)
        b = summary.get("baseline")
        if b and b["moved"]["rate"] is not None:
            ax.axhline(b["moved"]["rate"], color="gray", lw=1, ls=":", label="alpha=0 rerun")
        ax.set_title(f"layer {L}")
        ax.set_xlabel("alpha (x mean residual norm)")
        ax.set_ylabel("C cases moved to correct")
        ax.set_ylim(-0.02, 1.02)
        if ax.get_legend_handles_labels()[0]:
            ax.legend(fontsize=7)
    import textwrap

    width = max(60, 14 * 5 * max(len(layers), 1))
    fig.suptitle("\n".join(textwrap.wrap(summary["verdict"], width)[:4]), fontsize=7)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)


# ------------------------------------------------------------------------------------------------ CLI


def main(argv=None) -> int:
    args = build_parser().parse_args(argv)
    from behavioural.rundir import RunDirError
    from steering.hooks import SteeringError

    try:
        from behavioural.models import ModelError
    except ImportError:  # pragma: no cover
        ModelError = SweepError  # type: ignore
    try:
        summary = run_sweep(
            args.run_dir, args.directions, model=args.model,
            layers=_parse_list(args.layers, int, "layers"), ks=_parse_list(args.k, int, "k"),
            alphas=_parse_list(args.alphas, float, "alphas"), controls=_parse_list(args.controls, str, "controls"),
            random_seeds=args.random_seeds, cases=args.cases, max_cases=args.max_cases, n_non_c=args.n_non_c,
            max_new_tokens=args.max_new_tokens, batch_size=args.batch_size, positions=args.positions, dose=args.dose,
            output=args.output, resume=args.resume, n_boot=args.n_boot, progress=not args.no_progress,
        )
    except (SweepError, SteeringError, RunDirError, ModelError) as e:
        print(f"error: {e}", file=sys.stderr)
        return 2
    return 0 if summary.get("status") in ("ok", "insufficient_data") else 1


if __name__ == "__main__":
    sys.exit(main())
