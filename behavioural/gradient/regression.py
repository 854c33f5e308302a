"""The gradient's models: a logistic regression of C clustered by question, the sequential deviance
partition in both orders, within-dataset slopes, the position trend test, the cross-model comparison and the
fitted curve of the figure.

    from behavioural.gradient.regression import regression
    regression(data.rows, diff, axis="accuracy")   # {"status": "ok", "formula": "y ~ difficulty + ...", ...}

Each takes the flat rows of :mod:`behavioural.gradient.rows` (where positions that share one generation are
already one position, ``middle=late``) and returns a JSON-ready dict; what the data cannot support is
``{"status": "skipped" | "separation" | "failed", "message": ...}``, never an exception. Every fit goes
through :func:`_fit`, which reduces its design matrix to full column rank first
(:func:`loadbearing.stats.design.full_rank`) and returns the notes naming each column merged or dropped; the
dicts carry them as ``design_notes``.
"""
from __future__ import annotations

import math
import warnings
from collections.abc import Sequence
from typing import Any

import numpy as np

from behavioural.gradient.rates import propagation, scored
from loadbearing.stats import paired_difference_ci
from loadbearing.stats.design import full_rank, position_index, position_parts, position_sort_key


def _frame(rows: Sequence[dict], diff: dict[tuple[str, str], float]):
    import pandas as pd  # deferred: pandas is heavy to import

    s = [r for r in scored(rows) if (r["model"], r["cell"]) in diff]
    return pd.DataFrame({
        "y": [int(r["label"] == "C") for r in s],
        "difficulty": [diff[(r["model"], r["cell"])] for r in s],
        "family": [r["family"] for r in s],
        "edit_type": [r.get("edit_type", "numerical" if r["family"] == "numerical" else "text") for r in s],
        "w": [float(r.get("weight", 1.0)) for r in s],
        "strategy": [r["strategy"] for r in s],
        "position": [r["position"] for r in s],
        "pos_index": [np.nan if position_index(r["position"]) is None else position_index(r["position"]) for r in s],
        "cell": [f"{r['model']}|{r['cell']}" for r in s],
        "model": [r["model"] for r in s],
        "dataset": [r["dataset"] for r in s],
        "g": [r["qkey"] for r in s],
        "uptake": [r.get("uptake") for r in s],
    })


def _fit(formula: str, df, *, cluster: bool = True) -> tuple[Any, list[str], list[str]]:
    """GLM binomial fit on the formula's design reduced to full column rank (a duplicate column merged into
    the earlier one, a dependent one dropped: :func:`loadbearing.stats.design.full_rank`); with cluster-robust
    covariance by question when asked. Returns (result, problems, design notes)."""
    import pandas as pd  # deferred: pandas is heavy to import
    import statsmodels.api as sm  # deferred: statsmodels is heavy to import
    import statsmodels.formula.api as smf  # deferred: statsmodels is heavy to import

    problems: list[str] = []
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        # one row per generation and strategy: a generation shared by k memberships weighs its share of them
        model = smf.glm(formula, data=df, family=sm.families.Binomial(),
                        freq_weights=df["w"].to_numpy() if "w" in df else None)
        X, notes = full_rank(pd.DataFrame(model.exog, columns=model.exog_names))
        if notes:
            model = sm.GLM(model.endog, X, family=sm.families.Binomial(), freq_weights=model.freq_weights)
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
    return res, sorted(set(problems)), notes


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
    merged = sorted({p for p in df["position"] if len(position_parts(p)) > 1}, key=position_sort_key)
    if merged:
        levels = sorted(set(df["position"]), key=position_sort_key)
        notes.append(f"position levels {', '.join(levels)}: {', '.join(merged)} is one generation that edits the "
                     "same line at both positions, merged into one level before fitting (coded as two it would give "
                     "two identical coefficients)")
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
        res, problems, design = _fit(formula, df)
        out.update(coefficients=_coefs(res), deviance=float(res.deviance), null_deviance=float(res.null_deviance),
                   problems=problems, design_notes=design)
    except _Separation as e:
        out.update(status="separation", message=f"perfect separation: {e}; the coefficients are infinite, "
                   "see the per-cell rates instead")
    except _FitFailed as e:
        out.update(status="failed", message=str(e))
    out["deviance_partition"] = deviance_partition(df)
    out["edit_type_model"] = _edit_type_model(df, has_d, has_p)
    out["deviance_partition_edit_type"] = deviance_partition(df, "edit_type")
    out["difficulty_note"] = ("difficulty varies only between cells: its p-value here treats rows as the evidence "
                              "and is anti-conservative; the inference on difficulty is difficulty_test "
                              "(cell-level meta-regression)")
    return out


def _edit_type_model(df, has_d: bool, has_p: bool) -> dict:
    """The same model with the paper's two-way edit type (numerical / text) in place of the three families."""
    if df["edit_type"].nunique() < 2:
        return {"status": "skipped", "message": f"one edit type only ({df['edit_type'].iloc[0]})"}
    rhs = (["difficulty"] if has_d else []) + ["C(edit_type)"] + (["difficulty:C(edit_type)"] if has_d else [])
    rhs += ["C(position)"] if has_p else []
    formula = "y ~ " + " + ".join(rhs)
    try:
        res, problems, design = _fit(formula, df)
    except (_Separation, _FitFailed) as e:
        return {"status": "failed", "formula": formula, "message": str(e)}
    return {"status": "ok", "formula": formula, "coefficients": _coefs(res), "problems": problems,
            "design_notes": design}


def deviance_partition(df, type_col: str = "family") -> dict:
    """Sequential deviance partition of difficulty, type (``type_col``: the 3 families, or ``edit_type``:
    numerical / text as the paper codes it) and their interaction, in both orders (the split depends on the
    order). Shares are of the deviance the full model explains over the null."""
    has_d = df["difficulty"].nunique() >= 2
    has_t = df[type_col].nunique() >= 2
    if not (has_d and has_t):
        missing = "difficulty" if not has_d else "strategy family"
        return {"status": "skipped", "message": f"needs >= 2 values of both difficulty and strategy family; "
                                                f"{missing} does not vary"}
    if df["y"].nunique() < 2:
        return {"status": "skipped", "message": "no variation in C"}
    T = f"C({type_col})"
    orders = {"difficulty_first": ["difficulty", T], "type_first": [T, "difficulty"]}
    out: dict[str, Any] = {"status": "ok", "n": int(len(df)), "type": type_col, "problems": [], "design_notes": []}
    try:
        null_dev = _fit("y ~ 1", df, cluster=False)[0].deviance
        full, prob, design = _fit(f"y ~ difficulty * {T}", df, cluster=False)
    except (_Separation, _FitFailed) as e:
        return {"status": "failed", "message": str(e)}
    out["problems"] += prob
    out["design_notes"] += design
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
        label = {"difficulty": "difficulty", T: "type", "interaction": "interaction"}
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
            res, problems, _design = _fit("y ~ difficulty", sub)  # one column beside the intercept: never reduced
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
    are left out of the test (named). A merged position (``middle=late``: one generation at both) is one
    level, and its trend index is the mean of its parts (1.5)."""
    df = _frame(rows, diff)
    rates = {}
    rows_scored = scored(rows)
    for pos in sorted({r["position"] for r in rows_scored if position_index(r["position"]) is not None},
                      key=position_sort_key):
        rates[pos] = propagation([r for r in rows_scored if r["position"] == pos], seed=seed)
    out: dict[str, Any] = {"rates": rates}
    if len(df) == 0 or df["position"].nunique() < 2:
        out.update(status="skipped", message="fewer than 2 positions with scored continuations")
        return out
    n_unknown = int(df["pos_index"].isna().sum())
    out["n_unknown_position"] = n_unknown  # rows whose position is not early/middle/late: left out of the trend
    df = df[df["pos_index"].notna()]
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
        res, problems, design = _fit("y ~ " + " + ".join(rhs), sub)
    except (_Separation, _FitFailed) as e:
        out.update(status="failed", message=str(e), dropped_cells=dropped)
        return out
    coefs = _coefs(res)
    if "pos_index" not in coefs:
        out.update(status="skipped", dropped_cells=dropped, design_notes=design,
                   message="the position index is not identified beside the cell and family effects")
        return out
    c = coefs["pos_index"]
    index = {p: position_index(p) for p in sorted(set(sub["position"]), key=position_sort_key)}
    merged = [f"{p}={i:g}" for p, i in index.items() if len(position_parts(p)) > 1]
    out.update(status="ok", trend_per_step=c, odds_ratio_per_step=math.exp(c["coef"]), n=int(len(sub)),
               n_questions=int(sub["g"].nunique()), dropped_cells=dropped, problems=problems, design_notes=design,
               position_index=index,
               model="y ~ " + " + ".join(rhs) + " (position index early=0, middle=1, late=2"
                     + (f"; merged {', '.join(merged)}: one generation at both, the mean of its indices" if merged
                        else "") + "; clustered by question)")
    return out


def cross_model(rows: Sequence[dict], diff: dict, *, seed: int = 0) -> dict:
    """Models side by side on the shared eligible question set, with paired question-clustered differences
    (pairs matched on question, strategy and position), and the model x difficulty interaction."""
    models = sorted({r["model"] for r in rows})
    if len(models) < 2:
        return {"status": "skipped", "message": f"one model only ({models[0] if models else 'none'}); "
                                                "cross-model comparison needs runs of >= 2 models"}
    rows_scored = scored(rows)
    keys_by_model = {m: {r["qkey"] for r in rows_scored if r["model"] == m} for m in models}
    shared = set.intersection(*keys_by_model.values())
    out: dict[str, Any] = {"status": "ok", "models": models, "n_shared_questions": len(shared),
                           "questions_per_model": {m: len(k) for m, k in keys_by_model.items()}, "rates": {}, "pairs": {}}
    if not shared:
        out.update(status="skipped", message="no question is eligible (scored) for every model: nothing to pair")
        return out
    cellmap: dict[str, dict[tuple, float]] = {}
    cell_of: dict[str, str] = {}
    for m in models:
        rs = [r for r in rows_scored if r["model"] == m and r["qkey"] in shared]
        out["rates"][m] = propagation(rs, seed=seed)
        # matched per protocol position: one model's middle=late generation pairs with the other's middle and late
        cellmap[m] = {(r["qkey"], r["strategy"], p): float(r["label"] == "C") for r in rs
                      for p in (r.get("positions") or position_parts(r["position"]))}
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
            res, problems, design = _fit("y ~ difficulty * C(model)", df)
            coefs = _coefs(res)
            out["model_x_difficulty"] = {"coefficients": {k: v for k, v in coefs.items() if ":" in k},
                                         "problems": problems, "design_notes": design,
                                         "note": "a negative interaction means a flatter gradient than the baseline model"}
        except (_Separation, _FitFailed) as e:
            out["model_x_difficulty"] = {"status": "failed", "message": str(e)}
    return out


def logistic_curve(rows: Sequence[dict], diff: dict, model: str) -> dict | None:
    """Row-level logistic fit of C on difficulty for one model (for the figure's fitted curve)."""
    df = _frame([r for r in rows if r["model"] == model], diff)
    if len(df) == 0 or df["difficulty"].nunique() < 2 or df["y"].nunique() < 2:
        return None
    try:
        res, problems, _design = _fit("y ~ difficulty", df)
    except (_Separation, _FitFailed):
        return None
    return {"intercept": float(res.params["Intercept"]), "slope": float(res.params["difficulty"]), "problems": problems}
