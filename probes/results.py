"""``probes/results.json`` as one tidy DataFrame: one row per (probe, layer, metric) with its estimate and interval.

    import probes
    df = probes.read_results("runs/demo/probes")        # or the run directory itself
    df.query("scope == 'layer' and metric == 'accuracy'").pivot(index="layer", columns="probe", values="estimate")
    df.query("scope == 'nested'")                       # the headline: layer chosen inside each outer fold

Columns: ``probe`` (``logistic``, ``mass_mean``, and the two baselines ``majority`` and ``metadata``), ``layer``
(nullable int: the hidden-states layer; ``<NA>`` for a nested or baseline row), ``metric``, ``estimate``, ``lo``,
``hi`` (the interval the stage leads with: question-clustered Korn-Graubard for accuracy, the cluster CI for balanced
accuracy, the paired question bootstrap for the gain over the metadata baseline, the permutation null interval
for ``control_accuracy``; NaN where there is none), ``n_questions``, then ``scope``, ``split``, ``k``, ``n`` and
``method``.

``scope``: ``layer`` (each layer's grouped-CV score), ``nested`` (the headline: the layer picked on inner folds,
``layer`` <NA>), ``selected_optimistic`` (the best layer's own CV score: optimistic, not a result), ``baseline``
(majority class; metadata-only probe), ``transfer`` (train on some strategies, test on others; ``split`` says
which, e.g. ``held_out=arithmetic`` or ``train_on=arithmetic:others``).

Metrics: ``accuracy``, ``balanced_accuracy``, ``auc``, ``gain_over_metadata`` (probe minus metadata-only
accuracy on the same rows), ``control_accuracy`` (mean accuracy under question-level label permutations),
``control_p_value``, ``selectivity``, and for transfer ``transfer_minus_in_distribution``. A metric present in
the file with no value (e.g. AUC with one class) is a row with NaN; an absent one has no row.
"""
from __future__ import annotations

import json
import math
import os
from pathlib import Path
from typing import TYPE_CHECKING, Any

from probes.config import RESULTS
from probes.data import ProbeError

if TYPE_CHECKING:
    import pandas as pd

COLUMNS = ("probe", "layer", "metric", "estimate", "lo", "hi", "n_questions", "scope", "split", "k", "n", "method")
LAYER_METRICS = ("accuracy", "balanced_accuracy", "auc", "gain_over_metadata", "control_accuracy", "control_p_value",
                 "selectivity")


def results_path(path: str | os.PathLike[str]) -> Path:
    """``results.json`` of a probes output directory, a run directory (``RUN/probes``) or the file itself."""
    p = Path(path)
    for cand in (p, p / RESULTS, p / "probes" / RESULTS):
        if cand.is_file():
            return cand
    raise ProbeError(f"no probe results at {str(p)!r}: expected {RESULTS} there or in its probes/ directory; "
                     "train them with python -m probes.train RUN_DIR/activations.h5")


def _num(x: Any) -> float:
    if isinstance(x, bool) or not isinstance(x, (int, float)):
        return math.nan
    return float(x)


def _interval(d: dict[str, Any]) -> tuple[float, float]:
    ci = d.get("cluster_ci") or d.get("null_interval") or [None, None]
    lo, hi = d.get("lo", ci[0]), d.get("hi", ci[1])
    return _num(lo), _num(hi)


def _metric(name: str, v: Any) -> dict[str, Any]:
    """One row's numbers from a results.json value: a Rate dict, a {value, lo, hi} dict, or a bare number."""
    if not isinstance(v, dict):
        return {"metric": name, "estimate": _num(v), "lo": math.nan, "hi": math.nan}
    est = v.get("rate", v.get("value"))
    lo, hi = _interval(v)
    row = {"metric": name, "estimate": _num(est), "lo": lo, "hi": hi, "method": v.get("method")}
    for key in ("k", "n", "n_questions"):
        if isinstance(v.get(key), int):
            row[key] = v[key]
    if "n" not in row and isinstance(v.get("n_rows"), int):
        row["n"] = v["n_rows"]
    return row


def _scores(entry: dict[str, Any], names: tuple[str, ...], **where: Any) -> list[dict[str, Any]]:
    """Rows for the metrics of ``names`` present in ``entry`` (``control_accuracy`` from ``control.accuracy``)."""
    out = []
    n_q = (entry.get("accuracy") or {}).get("n_questions") if isinstance(entry.get("accuracy"), dict) else None
    for name in names:
        if name == "control_accuracy":
            ctl = entry.get("control")
            if not isinstance(ctl, dict) or "accuracy" not in ctl:
                continue
            row = _metric(name, ctl["accuracy"])
            row["method"] = ctl.get("method")
        elif name in entry:
            row = _metric(name, entry[name])
        else:
            continue
        if row.get("n_questions") is None and n_q is not None:
            row["n_questions"] = n_q
        out.append({**where, **row})
    return out


def tidy_rows(results: dict[str, Any]) -> list[dict[str, Any]]:
    """The rows of :func:`read_results` from a parsed ``results.json`` (a dict)."""
    rows: list[dict[str, Any]] = []
    for pk, p in (results.get("probes") or {}).items():
        for e in p.get("layers") or []:
            rows += _scores(e, LAYER_METRICS, probe=pk, layer=e.get("layer"), scope="layer")
        if isinstance(p.get("nested"), dict):
            rows += _scores(p["nested"], LAYER_METRICS, probe=pk, layer=None, scope="nested")
        sel = p.get("selected_optimistic")
        if isinstance(sel, dict):
            rows += _scores(sel, ("accuracy", "balanced_accuracy"), probe=pk, layer=sel.get("layer"),
                            scope="selected_optimistic")
    for pk, key in (("majority", "majority_baseline"), ("metadata", "metadata_baseline")):
        if isinstance(results.get(key), dict):
            rows += _scores(results[key], ("accuracy", "balanced_accuracy"), probe=pk, layer=None, scope="baseline")
    for pk, t in (results.get("transfer") or {}).items():
        layer = t.get("layer")
        for e in t.get("leave_one_strategy_out") or []:
            split = f"held_out={e.get('held_out')}"
            for part, prefix in (("transfer", "transfer_"), ("in_distribution", "in_distribution_")):
                if isinstance(e.get(part), dict):
                    rows += [{**r, "metric": prefix + r["metric"]} for r in
                             _scores(e[part], ("accuracy", "balanced_accuracy"), probe=pk, layer=layer,
                                     scope="transfer", split=split)]
            rows += _scores(e, ("transfer_minus_in_distribution",), probe=pk, layer=layer, scope="transfer",
                            split=split)
        for by, entries in (t.get("by") or {}).items():
            for e in entries:
                for part in ("others", "within"):
                    if isinstance(e.get(part), dict):
                        rows += _scores(e[part], ("accuracy", "balanced_accuracy"), probe=pk, layer=layer,
                                        scope="transfer", split=f"train_on={e.get('train_on')}:{part}"
                                        + ("" if by == "strategy" else f" ({by})"))
    n_q = (results.get("data") or {}).get("n_questions")
    if isinstance(n_q, int):  # the majority baseline's rows: every question of the study
        for r in rows:
            r.setdefault("n_questions", n_q)
    return rows


def read_results(path: str | os.PathLike[str]) -> pd.DataFrame:
    """The probe study's scores as a tidy DataFrame (see the module docstring for rows and columns).

    ``path``: the probes output directory, the run directory holding it, or ``results.json`` itself.
    ``df.attrs`` keeps ``headline_note``, ``intervals_note``, ``data`` (class counts) and ``settings``.

    >>> df = read_results("runs/demo/probes")                                         # doctest: +SKIP
    >>> df.query("scope == 'nested' and metric == 'accuracy'")[["probe", "estimate", "lo", "hi", "n_questions"]]  # doctest: +SKIP
    """
    import pandas as pd  # deferred: pandas is heavy to import

    f = results_path(path)
    try:
        results = json.loads(f.read_text(encoding="utf-8"))
    except ValueError as e:
        raise ProbeError(f"{f}: not valid JSON ({e}); re-run python -m probes.train") from None
    if not isinstance(results, dict) or results.get("kind", "probes") != "probes":
        raise ProbeError(f"{f} is not a probes results file; pass the directory written by python -m probes.train")
    df = pd.DataFrame(tidy_rows(results), columns=list(COLUMNS))
    df["layer"] = df["layer"].astype("Int64")
    for col in ("n_questions", "k", "n"):
        df[col] = df[col].astype("Int64")
    for col in ("estimate", "lo", "hi"):
        df[col] = df[col].astype(float)
    df.attrs.update({k: results.get(k) for k in ("headline_note", "intervals_note", "data", "settings")})
    df.attrs["path"] = str(f)
    return df


__all__ = ["read_results", "tidy_rows", "results_path", "COLUMNS"]
