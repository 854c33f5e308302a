"""A steering sweep in the layout of the paper's Table 7 (Jia & Mu; r2m-ai/load-bearing-cot,
``figures/table7_intervention.csv``: ``Direction,Alpha,Error_Rate,N,Correct,Avg_Response_Length``).

    python -m steering.sweep RUN_DIR --directions RUN_DIR/probes --design paper   # writes both beside summary.json
    python -c "from steering.paper.table7 import write_table7; write_table7('RUN_DIR/steering-paper')"  # any sweep

Computed from the sweep's own ``config.json`` (its settings) and ``generations.jsonl`` alone: one row per
direction x alpha, where a direction is a basis at a k (``M2 k=2``, ``probe k=4``, the toolkit's ``basis k=1``)
or the random directions at that k (``random k=2``: every random generation of every case, each its own
direction), and alpha 0 is the sweep's unsteered rerun (the same row under every direction, as in the paper).
The paper's six columns come first, computed as its ``single_direction.py`` does: ``Error_Rate = 1 -
Correct / N`` over every steered case (C and non-C alike; an answer that does not parse is not correct),
``Avg_Response_Length`` the mean length in characters of the stripped generation. Then the toolkit's:
``Basis``, ``K``, ``Alpha_Rel`` (alpha / the layer's mean residual norm) and ``Resid_Norm``, the error rate's
question-clustered 95% interval (``Error_Rate_Lo``/``Error_Rate_Hi``, :func:`loadbearing.stats.clustered_rate`),
``N_Questions``, ``N_C`` (type-C cases among the N rows) and ``Unparsed``. The table describes; the test of a
setting against its random controls is the sweep's ``summary.json``.
"""
from __future__ import annotations

import csv
import io
from collections import defaultdict
from pathlib import Path
from typing import Any

from loadbearing.files import atomic_write_text, read_json, read_jsonl
from loadbearing.runs import question_key_of
from loadbearing.stats import clustered_rate
from loadbearing.tables import render_table
from steering.sweep.config import CONFIG_FILE, GENERATIONS

CSV_FILE, MD_FILE = "table7.csv", "table7.md"
PAPER_COLUMNS = ("Direction", "Alpha", "Error_Rate", "N", "Correct", "Avg_Response_Length")
COLUMNS = PAPER_COLUMNS + ("Basis", "K", "Alpha_Rel", "Resid_Norm", "Error_Rate_Lo", "Error_Rate_Hi", "N_Questions",
                           "N_C", "Unparsed")
#: the paper's names of the bases (probes.directions.BASES); the random controls keep their kind
BASIS_NAMES = {"m2": "M2", "probe_pc": "probe", "basis": "basis"}
RANDOM = ("random", "random_cov")


def _label(s: dict[str, Any]) -> str:
    if s["basis"] == "probe":
        return BASIS_NAMES.get(s.get("directions") or "basis", str(s.get("directions")))
    return str(s["basis"])


def _row(label: str, k: int, alpha: float, alpha_rel: float, norm: float | None, recs: list[dict[str, Any]]
         ) -> dict[str, Any]:
    n = len(recs)
    correct = sum(1 for r in recs if r.get("correct") is True)
    err = clustered_rate([r.get("correct") is not True for r in recs], [question_key_of(r) for r in recs])
    return {"Direction": f"{label} k={k}", "Alpha": float(alpha), "Error_Rate": (n - correct) / n if n else None,
            "N": n, "Correct": correct,
            "Avg_Response_Length": sum(len(str(r.get("text") or "").strip()) for r in recs) / n if n else None,
            "Basis": label, "K": int(k), "Alpha_Rel": float(alpha_rel), "Resid_Norm": norm,
            "Error_Rate_Lo": err.lo, "Error_Rate_Hi": err.hi, "N_Questions": err.n_questions,
            "N_C": sum(1 for r in recs if r.get("case_label") == "C"),
            "Unparsed": sum(1 for r in recs if r.get("correct") is None)}


def table7_rows(config: dict[str, Any], recs: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The rows (dicts keyed by :data:`COLUMNS`) of a sweep from its ``config.json`` content and its generation
    records: per direction (the bases in the sweep's order, then the random kinds) and k, every alpha ascending,
    alpha 0 from the unsteered rerun. Additive settings only (an ablate setting has no alpha)."""
    keep = set(config.get("case_ids") or [r["case_id"] for r in recs])
    by_setting: dict[str, list[dict[str, Any]]] = defaultdict(list)
    for r in recs:
        if r["case_id"] in keep:
            by_setting[r["setting"]].append(r)
    norms = {str(k): v for k, v in (config.get("resid_norm") or {}).items()}
    groups: dict[tuple[str, int], dict[float, list[dict[str, Any]]]] = {}
    rel: dict[tuple[str, int, float], float] = {}
    layer_of: dict[tuple[str, int], Any] = {}
    for s in config["settings"]:
        if s["basis"] == "none" or s.get("operator", "add") != "add" or s.get("alpha") is None:
            continue
        key = (_label(s), int(s["k"]))
        a = float(s["alpha"])
        groups.setdefault(key, {}).setdefault(a, []).extend(by_setting.get(s["key"], []))
        rel[(key[0], key[1], a)] = float(s["alpha_rel"])
        layer_of[key] = s["layer"]
    baseline = by_setting.get("none|alpha0")
    labels = list(dict.fromkeys(g[0] for g in groups))  # the sweep's order of the bases, then the random kinds
    labels = [lb for lb in labels if lb not in RANDOM] + [lb for lb in RANDOM if lb in labels]
    order = [(lb, k) for lb in labels for k in sorted(k for g, k in groups if g == lb)]
    rows = []
    for key in order:
        norm = norms.get(str(layer_of[key]))
        cells = dict(groups[key])
        if baseline:
            cells.setdefault(0.0, baseline)
        for a in sorted(cells):
            rows.append(_row(key[0], key[1], a, rel.get((key[0], key[1], a), 0.0), norm, cells[a]))
    return rows


def read_sweep(out_dir: str | Path) -> tuple[dict[str, Any], list[dict[str, Any]]]:
    """``config.json`` and the records of ``generations.jsonl`` of a sweep's output directory."""
    d = Path(out_dir)
    return read_json(d / CONFIG_FILE), read_jsonl(d / GENERATIONS)


def _fmt(c: str, v: Any) -> str:
    if v is None:
        return ""
    if c in ("Error_Rate", "Error_Rate_Lo", "Error_Rate_Hi"):
        return f"{v:.3f}"
    if c == "Avg_Response_Length":
        return f"{v:.0f}"
    if c == "Alpha":
        return f"{v:.1f}" if round(v, 1) == v else f"{v:g}"  # the paper's -10.0, -0.5, 0.0
    if c == "Alpha_Rel":
        return f"{v:.4g}"
    if c == "Resid_Norm":
        return f"{v:.2f}"
    return str(v)


def to_csv(rows: list[dict[str, Any]]) -> str:
    buf = io.StringIO()
    w = csv.writer(buf, lineterminator="\n")
    w.writerow(COLUMNS)
    for r in rows:
        w.writerow([_fmt(c, r[c]) for c in COLUMNS])
    return buf.getvalue()


def to_markdown(rows: list[dict[str, Any]], config: dict[str, Any], notes: list[str] | tuple[str, ...] = (),
                style: str = "md") -> str:
    """The companion note: the sweep's layer, residual norm and case mix, what was adapted, and every row
    (``style="text"``: the same as plain text)."""
    n_c, n_non = config.get("n_c_cases", 0), config.get("n_non_c_cases", 0)
    out = [("# " if style == "md" else "") + "Steering in the paper's Table 7 layout", "",
           f"Steered {n_c} type-C cases and {n_non} non-C cases (their exact model inputs, questions the directions "
           f"were not fitted on: {(config.get('split') or {}).get('note', 'see config.json')}); dose "
           f"{config.get('dose')!r}, {config.get('max_new_tokens')} new tokens at most. Error_Rate = 1 - Correct / N "
           "over every steered case, as in the paper (an unparsed answer is not correct; Unparsed counts them); the "
           "interval is question-clustered (Korn-Graubard). Descriptive: the tests against the random controls are "
           "in summary.json.", ""]
    for L, v in sorted((config.get("resid_norm") or {}).items(), key=lambda t: int(t[0])):
        src = (config.get("resid_norm_source") or {}).get(L, "")
        alphas = [abs(float(s["alpha"])) for s in config.get("settings", []) if s.get("alpha")]
        top = max(alphas, default=None)
        out.append(f"- layer {L}: mean residual norm {v:.2f} ({src})"
                   + (f"; the largest |alpha| ({top:g}) is {top / v:.3f} x the norm" if top and v else ""))
    out += [f"- adapted: {n}" for n in notes]
    shown = PAPER_COLUMNS + ("Error_Rate_Lo", "Error_Rate_Hi", "N_Questions", "Unparsed")
    out += ["", render_table(list(shown), [[_fmt(c, r[c]) for c in shown] for r in rows], style=style), ""]
    return "\n".join(out)


def render(out_dir: str | Path, style: str = "md", notes: list[str] | tuple[str, ...] = ()) -> str:
    """The Table 7 note of a sweep's output directory, recomputed from its files, as markdown or text."""
    config, recs = read_sweep(out_dir)
    return to_markdown(table7_rows(config, recs), config, notes, style=style)


def write_table7(out_dir: str | Path, notes: list[str] | tuple[str, ...] = ()) -> list[Path]:
    """``table7.csv`` and ``table7.md`` into a sweep's output directory, from its own files."""
    d = Path(out_dir)
    config, recs = read_sweep(d)
    rows = table7_rows(config, recs)
    atomic_write_text(d / CSV_FILE, to_csv(rows))
    atomic_write_text(d / MD_FILE, to_markdown(rows, config, notes))
    return [d / CSV_FILE, d / MD_FILE]


__all__ = ["BASIS_NAMES", "COLUMNS", "CSV_FILE", "MD_FILE", "PAPER_COLUMNS", "read_sweep", "render", "table7_rows", "to_csv",
           "to_markdown", "write_table7"]
