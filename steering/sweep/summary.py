"""python -m steering.sweep RUN_DIR --directions RUN_DIR/probes  (this module: ``summary.json``)

:func:`summarize` computes a sweep's ``summary.json`` (and ``sweep.png``) from its ``config.json`` and
``generations.jsonl`` alone, so a finished or interrupted sweep can be re-summarised without a model; the
statistics are :func:`steering.sweep.analysis.summarize_records`'s. :func:`insufficient_data_summary` is the
summary of a sweep with no C case to steer; :func:`is_complete` says whether an output directory holds a
finished sweep.
"""
from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

from loadbearing.files import read_json, read_jsonl, write_json
from steering.sweep.analysis import summarize_records
from steering.sweep.cases import CaseSample
from steering.sweep.config import CONFIG_FILE, DEFAULT_SESOI, GENERATIONS, PLOT, SCHEMA_VERSION, SUMMARY
from steering.sweep.grid import Setting
from steering.sweep.plot import plot_sweep


def summarize(out_dir: str | Path, *, config: dict[str, Any] | None = None) -> dict[str, Any]:
    """Compute ``summary.json`` (and ``sweep.png``) from ``config.json`` and ``generations.jsonl``."""
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
        caution = (" [caution: the directions were fitted on steered questions; not a held-out test]"
                   if split.get("disjoint") is False else
                   " [caution: unknown whether the directions were fitted on the steered questions]")
        summary["verdict"] += caution
        for v in (summary.get("verdicts") or {}).values():
            v["verdict"] += caution
    summary.update({
        "cases": config.get("case_sample"),
        "split": config.get("split"),
        "positions": config.get("positions"),
        "dose": config.get("dose"),
        "resid_norm": config.get("resid_norm"),
        "controls_note": config.get("controls_note"),
    })
    write_json(out_dir / SUMMARY, summary)
    try:
        plot_sweep(summary, out_dir / PLOT)
        summary["plot"] = PLOT
        write_json(out_dir / SUMMARY, summary)
    except Exception as e:  # plotting must never lose the numbers
        print(f"warning: could not draw {PLOT} ({type(e).__name__}: {e})", file=sys.stderr)
    return summary


def insufficient_data_summary(run_path: str | Path, sample: CaseSample, split: dict[str, Any],
                              sesoi: float) -> dict[str, Any]:
    """The summary of a sweep that has no type-C case left to steer (``status = "insufficient_data"``)."""
    why = (f"no type-C perturbed continuation of {str(run_path)!r} is left to steer "
           f"({sample.stats['n_perturbed']} perturbed records, {sample.stats['n_excluded_fit_questions']} "
           "excluded as fitting questions")
    if sample.stats["n_excluded_fit_questions"]:
        why += ("; fit the directions on a subset of questions (e.g. python -m activations.cache --shard 0/2, "
                "then probes on that store) so that others stay held out")
    why += ")"
    return {"schema_version": SCHEMA_VERSION, "status": "insufficient_data",
            "verdict_code": "insufficient_data", "verdict": f"insufficient_data: {why}; nothing to steer",
            "n_c_cases": 0, "n_c_questions": 0, "n_non_c_cases": 0, "n_generations": 0,
            "cases": sample.stats, "split": split, "settings": [], "sesoi": sesoi}


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


__all__ = ["insufficient_data_summary", "is_complete", "summarize"]
