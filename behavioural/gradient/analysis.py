"""The gradient's numbers: per-cell table, clustered logistic regression, deviance partition (both orders),
within-dataset slopes, position test, type-by-difficulty tables, uptake, cross-model comparison, and the
A/B/C taxonomy (the paper's Table 4) when labels exist.

Everything takes the flat rows of :mod:`behavioural.gradient.rows` and returns JSON-ready dicts. Any
analysis that the data cannot support returns ``{"status": "skipped", "message": ...}`` naming why (one
level, no variation, perfect separation, one question), never an exception.
"""
from __future__ import annotations

import math
import warnings
from collections import defaultdict
from collections.abc import Sequence
from typing import Any

import numpy as np

from behavioural.gradient.rows import DATASET_ORDER, Loaded, by_key, level_order

POSITIONS = ("early", "middle", "late")


# ---------------------------------------------------------------------------------------------- rates
def crate(success: Sequence[bool], groups: Sequence, gens: Sequence | None = None, *, seed: int = 0,
          n_boot: int = 2000) -> dict:
    """Pooled rate with a bootstrap-over-questions interval (``loadbearing.stats.clustered_rate``)."""
    n_gen = len(set(gens)) if gens is not None else None
    try:
        from loadbearing.stats import clustered_rate
    except ImportError:  # pragma: no cover - before H-VAL's Rate lands
        from loadbearing.stats import cluster_bootstrap_ci

        k, n = int(sum(success)), len(success)
        res = cluster_bootstrap_ci(list(groups), [float(s) for s in success],
                                   lambda v: float(np.mean(v)) if v else None, n_boot=n_boot, seed=seed)
        return {"k": k, "n": n, "rate": k / n if n else None, "lo": res["ci"][0], "hi": res["ci"][1],
                "method": "cluster-bootstrap", "n_questions": len(set(groups)), "n_generations": n_gen}
    return clustered_rate([bool(s) for s in success], list(groups), seed=seed, n_boot=n_boot,
                          n_generations=n_gen).to_dict()


def wrate(k: int, n: int, n_questions: int | None = None) -> dict:
    try:
        from loadbearing.stats import wilson_rate
    except ImportError:  # pragma: no cover
        from loadbearing.stats import rate

        r = rate(k, n)
        return {"k": k, "n": n, "rate": r["rate"], "lo": r["wilson"][0], "hi": r["wilson"][1], "method": "wilson",
                "n_questions": n_questions, "n_generations": None}
    return wilson_rate(k, n, n_questions=n_questions).to_dict()


def _scored(rows: Sequence[dict]) -> list[dict]:
    return [r for r in rows if r["label"] is not None]


def _pooled(rows: Sequence[dict], *, seed: int) -> dict:
    """Propagation over distinct generations (first membership only), clustered by question."""
    s = [r for r in _scored(rows) if r["first"]]
    return crate([r["label"] == "C" for r in s], [r["qkey"] for r in s], [r["gen"] for r in s], seed=seed)


def _cellrate(rows: Sequence[dict], *, seed: int) -> dict:
    """Rate over (generation, membership) rows: used for strategy / position / family cells."""
    s = _scored(rows)
    return crate([r["label"] == "C" for r in s], [r["qkey"] for r in s], [r["gen"] for r in s], seed=seed)


# ---------------------------------------------------------------------------------------------- the table
def cell_table(data: Loaded, *, seed: int = 0) -> list[dict]:
    """One entry per (model, task-or-level): baseline accuracy (paper's definition) and coverage,
    propagation and control error with question-clustered intervals, n questions, n distinct generations."""
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
        acc = acc_parsed = cov = None
        acc_source = "baselines"
        if model in eligible_only or not b:
            e = ext.get(key)
            if e is not None:
                v = float(e["rate"] if isinstance(e, dict) else e)
                acc = {"k": None, "n": None, "rate": v, "lo": None, "hi": None, "method": "published",
                       "n_questions": None, "n_generations": None}
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
            "propagation": _pooled(p, seed=seed),
            "control_error": _pooled(c, seed=seed),
            "perturbed_coverage": wrate(sum(r["label"] is not None for r in scored_first), len(scored_first)),
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
            from behavioural.gradient.rows import GradientError

            raise GradientError(f"--difficulty accuracy needs baseline accuracy for every cell; missing for "
                                f"{', '.join(missing[:3])}; use --difficulty level")
        return "accuracy", {(c["model"], c["cell"]): 1.0 - c["baseline_accuracy"]["rate"] for c in cells}, \
            "difficulty = 1 - baseline accuracy (unparseable counted wrong)"
    if mode != "level":
        from behavioural.gradient.rows import GradientError

        raise GradientError(f"unknown --difficulty {mode!r}; choose auto, accuracy or level")
    arith = [c for c in cells if c["dataset"] == "arith"]
    if arith and len(arith) == len(cells):
        return "level", {(c["model"], c["cell"]): float(c["level_index"]) for c in cells}, \
            "difficulty = arith ladder level index (easiest = 0)"
    vals = {}
    for c in cells:
        vals[(c["model"], c["cell"])] = float(DATASET_ORDER.get(c["dataset"], 1))
    return "level", vals, "difficulty = dataset ordinal (GSM8K/arith 0 < MMLU 1 < BBH 2), the paper's ordinal"


# ---------------------------------------------------------------------------------------------- regression
def _frame(rows: Sequence[dict], diff: dict[tuple[str, str], float]):
    import pandas as pd

    s = [r for r in _scored(rows) if (r["model"], r["cell"]) in diff]
    return pd.DataFrame({
        "y": [int(r["label"] == "C") for r in s],
        "difficulty": [diff[(r["model"], r["cell"])] for r in s],
        "family": [r["family"] for r in s],
        "strategy": [r["strategy"] for r in s],
        "position": [r["position"] for r in s],
        "pos_index": [POSITIONS.index(r["position"]) if r["position"] in POSITIONS else 1 for r in s],
        "cell": [f"{r['model']}|{r['cell']}" for r in s],
        "model": [r["model"] for r in s],
        "dataset": [r["dataset"] for r in s],
        "g": [r["qkey"] for r in s],
        "uptake": [r.get("uptake") for r in s],
    })


def _fit(formula: str, df, *, cluster: bool = True) -> tuple[Any, list[str]]:
    """GLM binomial fit; with cluster-robust covariance by question when asked. Returns (result, problems)."""
    import statsmodels.api as sm
    import statsmodels.formula.api as smf

    problems: list[str] = []
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        model = smf.glm(formula, data=df, family=sm.families.Binomial())
        try:
            if cluster and df["g"].nunique() >= 2:
                groups = df["g"].astype("category").cat.codes.to_numpy()
                res = model.fit(cov_type="cluster", cov_kwds={"groups": groups})
            else:
                res = model.fit()
                if cluster:
                    problems.append("one question only: no cluster-robust errors")
        except Exception as e:  # PerfectSeparationError, singular matrix, ...
            name = type(e).__name__
            if "Separation" in name or "separation" in str(e).lower():
                raise _Separation(str(e)) from None
            raise _FitFailed(f"{name}: {e}") from None
    for w in caught:
        msg = str(w.message)
        if "separation" in msg.lower() or "Separation" in type(w.message).__name__:
            problems.append("perfect or quasi-perfect separation: some coefficients are infinite; "
                            "their estimates and errors are not meaningful")
    params = np.asarray(res.params)
    if np.any(~np.isfinite(params)) or np.any(np.abs(params) > 20):
        problems.append("perfect or quasi-perfect separation (|coefficient| > 20): estimates not meaningful")
    return res, sorted(set(problems))


class _Separation(Exception):
    pass


class _FitFailed(Exception):
    pass


def _coefs(res) -> dict:
    ci = res.conf_int()
    out = {}
    for name in res.params.index:
        out[name] = {"coef": float(res.params[name]), "se": _f(res.bse[name]), "p": _f(res.pvalues[name]),
                     "ci95": [_f(ci.loc[name, 0]), _f(ci.loc[name, 1])]}
    return out


def _f(x) -> float | None:
    x = float(x)
    return x if math.isfinite(x) else None


def _terms(df) -> tuple[bool, bool, bool]:
    return df["difficulty"].nunique() >= 2, df["family"].nunique() >= 2, df["position"].nunique() >= 2


def regression(rows: Sequence[dict], diff: dict, *, axis: str) -> dict:
    """Logistic C ~ difficulty * family + position (+ difficulty:position), cluster-robust by question, and
    the sequential deviance partition in both orders."""
    df = _frame(rows, diff)
    if len(df) == 0:
        return {"status": "skipped", "message": "no scored perturbed continuations"}
    if df["y"].nunique() < 2:
        what = "C" if df["y"].iloc[0] == 1 else "non-C"
        return {"status": "skipped", "n": int(len(df)),
                "message": f"no variation: every scored continuation is {what}, so no logistic model can be fitted"}
    has_d, has_t, has_p = _terms(df)
    notes = []
    if not has_d:
        notes.append("one difficulty value only: the gradient needs runs at >= 2 tasks or levels")
    if not has_t:
        notes.append(f"one strategy family only ({df['family'].iloc[0]}): no type effect can be estimated")
    if not has_p:
        notes.append("one position only: no position effect")
    rhs = []
    if has_d:
        rhs.append("difficulty")
    if has_t:
        rhs.append("C(family)")
    if has_d and has_t:
        rhs.append("difficulty:C(family)")
    if has_p:
        rhs.append("C(position)")
        if has_d:
            rhs.append("difficulty:C(position)")
    formula = "y ~ " + (" + ".join(rhs) if rhs else "1")
    out: dict[str, Any] = {"status": "ok", "formula": formula, "axis": axis, "n": int(len(df)),
                           "n_questions": int(df["g"].nunique()), "cluster": "question", "notes": notes}
    try:
        res, problems = _fit(formula, df)
        out.update(coefficients=_coefs(res), deviance=float(res.deviance), null_deviance=float(res.null_deviance),
                   problems=problems)
    except _Separation as e:
        out.update(status="separation", message=f"perfect separation: {e}; the coefficients are infinite, "
                   "see the per-cell rates instead")
    except _FitFailed as e:
        out.update(status="failed", message=str(e))
    out["deviance_partition"] = deviance_partition(df)
    return out


def deviance_partition(df) -> dict:
    """Sequential deviance partition of difficulty, type and their interaction, in both orders (the split
    depends on the order). Shares are of the deviance the full model explains over the null."""
    has_d, has_t, _ = _terms(df)
    if not (has_d and has_t):
        missing = "difficulty" if not has_d else "strategy family"
        return {"status": "skipped", "message": f"needs >= 2 values of both difficulty and strategy family; "
                                                f"{missing} does not vary"}
    if df["y"].nunique() < 2:
        return {"status": "skipped", "message": "no variation in C"}
    orders = {"difficulty_first": ["difficulty", "C(family)"], "type_first": ["C(family)", "difficulty"]}
    out: dict[str, Any] = {"status": "ok", "n": int(len(df)), "problems": []}
    try:
        null_dev = _fit("y ~ 1", df, cluster=False)[0].deviance
        full, prob = _fit("y ~ difficulty * C(family)", df, cluster=False)
    except (_Separation, _FitFailed) as e:
        return {"status": "failed", "message": str(e)}
    out["problems"] += prob
    total = null_dev - full.deviance
    out.update(null_deviance=float(null_dev), full_deviance=float(full.deviance), explained=float(total))
    for name, (first, second) in orders.items():
        try:
            d1 = _fit(f"y ~ {first}", df, cluster=False)[0].deviance
            d2 = _fit(f"y ~ {first} + {second}", df, cluster=False)[0].deviance
        except (_Separation, _FitFailed) as e:
            out[name] = {"status": "failed", "message": str(e)}
            continue
        parts = {first: null_dev - d1, second: d1 - d2, "interaction": d2 - full.deviance}
        label = {"difficulty": "difficulty", "C(family)": "type", "interaction": "interaction"}
        out[name] = {label[k]: {"deviance": float(v), "share": (float(v / total) if total > 1e-12 else None)}
                     for k, v in parts.items()}
    return out


def within_dataset(rows: Sequence[dict], diff: dict, *, axis: str) -> dict:
    """Slope of C on difficulty across the tasks of one dataset (MMLU subjects, BBH tasks, arith levels)."""
    df = _frame(rows, diff)
    out = {}
    for (model, dataset), sub in df.groupby(["model", "dataset"]):
        key = f"{model}|{dataset}"
        n_cells = sub["cell"].nunique()
        if n_cells < 3:
            out[key] = {"status": "skipped", "n_tasks": int(n_cells),
                        "message": f"{n_cells} task(s)/level(s) in {dataset}; a within-dataset slope needs >= 3"}
            continue
        if sub["difficulty"].nunique() < 2 or sub["y"].nunique() < 2:
            out[key] = {"status": "skipped", "n_tasks": int(n_cells), "message": "no variation in difficulty or in C"}
            continue
        try:
            res, problems = _fit("y ~ difficulty", sub)
        except (_Separation, _FitFailed) as e:
            out[key] = {"status": "failed", "message": str(e)}
            continue
        c = _coefs(res)["difficulty"]
        out[key] = {"status": "ok", "n_tasks": int(n_cells), "n": int(len(sub)), "n_questions": int(sub["g"].nunique()),
                    "slope": c, "problems": problems,
                    "odds_ratio_per_10_points": (math.exp(0.1 * c["coef"]) if axis == "accuracy" else None),
                    "odds_ratio_per_level": (math.exp(c["coef"]) if axis == "level" else None)}
    return out


def position_test(rows: Sequence[dict], diff: dict, *, seed: int = 0) -> dict:
    """Early vs middle vs late: clustered rates per position and a clustered logistic trend test with
    task-or-level (and family) fixed effects. Cells whose C does not vary add no within-cell evidence and
    are left out of the test (named)."""
    df = _frame(rows, diff)
    rates = {}
    scored = _scored(rows)
    for pos in POSITIONS:
        rs = [r for r in scored if r["position"] == pos]
        if rs:
            rates[pos] = crate([r["label"] == "C" for r in rs], [r["qkey"] for r in rs], [r["gen"] for r in rs], seed=seed)
    out: dict[str, Any] = {"rates": rates}
    if len(df) == 0 or df["position"].nunique() < 2:
        out.update(status="skipped", message="fewer than 2 positions with scored continuations")
        return out
    var = df.groupby("cell")["y"].transform("nunique") > 1
    dropped = sorted(set(df.loc[~var, "cell"]))
    sub = df[var]
    if len(sub) == 0 or sub["position"].nunique() < 2:
        out.update(status="skipped", dropped_cells=dropped,
                   message="no task-or-level has both C and non-C continuations: position cannot be tested")
        return out
    rhs = ["pos_index"]
    if sub["cell"].nunique() > 1:
        rhs.append("C(cell)")
    if sub["family"].nunique() > 1:
        rhs.append("C(family)")
    try:
        res, problems = _fit("y ~ " + " + ".join(rhs), sub)
    except (_Separation, _FitFailed) as e:
        out.update(status="failed", message=str(e), dropped_cells=dropped)
        return out
    c = _coefs(res)["pos_index"]
    out.update(status="ok", trend_per_step=c, odds_ratio_per_step=math.exp(c["coef"]), n=int(len(sub)),
               n_questions=int(sub["g"].nunique()), dropped_cells=dropped, problems=problems,
               model="y ~ " + " + ".join(rhs) + " (position index early=0, middle=1, late=2; clustered by question)")
    return out


# ---------------------------------------------------------------------------------------------- tables
def type_by_difficulty(rows: Sequence[dict], cells: list[dict], *, seed: int = 0) -> dict:
    """Rate per (family, task-or-level) and per (strategy, task-or-level), for each model; lists the cells
    that exist and the ones that do not (runs with different strategy sets)."""
    scored = _scored(rows)
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
                    rs = [r for r in scored if r["model"] == model and r["cell"] == cell and r[kind] == t]
                    if rs:
                        table[model][t][cell] = crate([r["label"] == "C" for r in rs], [r["qkey"] for r in rs],
                                                      [r["gen"] for r in rs], seed=seed)
                        present.append(f"{model}|{t}|{cell}")
                    else:
                        table[model][t][cell] = None
                        missing.append(f"{model}|{t}|{cell}")
        out[kind] = {"table": table, "present": present, "missing": missing}
    return out


def uptake_table(rows: Sequence[dict], *, seed: int = 0) -> dict:
    """Propagation conditional on uptake (per family and overall), one generation counted once."""
    from behavioural.gradient.uptake import uptake

    first = [r for r in _scored(rows) if r["first"]]
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
            entry[f"propagation_if_{name}"] = crate([r["label"] == "C" for r in sub], [r["qkey"] for r in sub],
                                                   [r["gen"] for r in sub], seed=seed)
        out[fam] = entry
    return out


def cross_model(rows: Sequence[dict], diff: dict, *, seed: int = 0) -> dict:
    """Models side by side on the shared eligible question set, with paired question-clustered differences
    (pairs matched on question, strategy and position), and the model x difficulty interaction."""
    from loadbearing.stats import paired_difference_ci

    models = sorted({r["model"] for r in rows})
    if len(models) < 2:
        return {"status": "skipped", "message": f"one model only ({models[0] if models else 'none'}); "
                                                "cross-model comparison needs runs of >= 2 models"}
    scored = _scored(rows)
    keys_by_model = {m: {r["qkey"] for r in scored if r["model"] == m} for m in models}
    shared = set.intersection(*keys_by_model.values())
    out: dict[str, Any] = {"status": "ok", "models": models, "n_shared_questions": len(shared),
                           "questions_per_model": {m: len(k) for m, k in keys_by_model.items()}, "rates": {}, "pairs": {}}
    if not shared:
        out.update(status="skipped", message="no question is eligible (scored) for every model: nothing to pair")
        return out
    cellmap: dict[str, dict[tuple, float]] = {}
    cell_of: dict[str, str] = {}
    for m in models:
        rs = [r for r in scored if r["model"] == m and r["qkey"] in shared]
        out["rates"][m] = crate([r["label"] == "C" for r in rs], [r["qkey"] for r in rs], [r["gen"] for r in rs], seed=seed)
        cellmap[m] = {(r["qkey"], r["strategy"], r["position"]): float(r["label"] == "C") for r in rs}
        cell_of.update({r["qkey"]: r["cell"] for r in rs})
    out["pairs_by_cell"] = {}
    for i, a in enumerate(models):
        for b in models[i + 1:]:
            common = sorted(set(cellmap[a]) & set(cellmap[b]))
            res = paired_difference_ci([(k[0], cellmap[a][k], cellmap[b][k]) for k in common], seed=seed)
            out["pairs"][f"{a} - {b}"] = res
            by_cell: dict[str, Any] = {}
            for cell in sorted({cell_of[k[0]] for k in common}):
                ks = [k for k in common if cell_of[k[0]] == cell]
                by_cell[cell] = paired_difference_ci([(k[0], cellmap[a][k], cellmap[b][k]) for k in ks], seed=seed)
            out["pairs_by_cell"][f"{a} - {b}"] = by_cell
    df = _frame(rows, diff)
    if df["difficulty"].nunique() >= 2 and df["y"].nunique() >= 2:
        try:
            res, problems = _fit("y ~ difficulty * C(model)", df)
            coefs = _coefs(res)
            out["model_x_difficulty"] = {"coefficients": {k: v for k, v in coefs.items() if ":" in k},
                                         "problems": problems,
                                         "note": "a negative interaction means a flatter gradient than the baseline model"}
        except (_Separation, _FitFailed) as e:
            out["model_x_difficulty"] = {"status": "failed", "message": str(e)}
    return out


def taxonomy(rows: Sequence[dict]) -> dict:
    """A/B/C counts and shares by position, strategy and dataset (the paper's Table 4) from the labelling."""
    lab = [r for r in rows if r.get("abc") in ("A", "B", "C")]
    if not lab:
        return {"status": "skipped", "message": "no A/B/C labelling in these runs (run python -m behavioural.labels.stage)"}
    out: dict[str, Any] = {"status": "ok", "n": len(lab)}
    for key in ("position", "strategy", "dataset"):
        groups: dict[str, dict[str, int]] = defaultdict(lambda: {"A": 0, "B": 0, "C": 0})
        for r in lab:
            groups[str(r[key])][r["abc"]] += 1
        out[key] = {g: {lbl: {"count": n, "share": n / sum(v.values())} for lbl, n in v.items()}
                    for g, v in sorted(groups.items())}
    return out


def logistic_curve(rows: Sequence[dict], diff: dict, model: str) -> dict | None:
    """Row-level logistic fit of C on difficulty for one model (for the figure's fitted curve)."""
    df = _frame([r for r in rows if r["model"] == model], diff)
    if len(df) == 0 or df["difficulty"].nunique() < 2 or df["y"].nunique() < 2:
        return None
    try:
        res, problems = _fit("y ~ difficulty", df)
    except (_Separation, _FitFailed):
        return None
    return {"intercept": float(res.params["Intercept"]), "slope": float(res.params["difficulty"]), "problems": problems}
