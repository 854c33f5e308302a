"""What ``docs/results.md`` shows, taken from a demo run directory: the numbers, and only those.

    from study.docs.extract import extract, compare
    numbers = extract("runs/study-20261202")          # {source: {key: value}}: docs/results/demo.json
    compare(numbers, json.loads(Path("docs/results/demo.json").read_text()))   # [] when a fresh demo agrees

Each source is one file a stage writes (``SOURCES``: its path in the run directory and the top-level keys the
page reads). A source that the run has not written (an optional stage) is absent, and the page leaves its
section out. Run-specific values that a rerun cannot reproduce (paths, timestamps, timings) are dropped here,
so a fresh demo of the same code gives the same file.
"""
from __future__ import annotations

import json
import math
from collections.abc import Callable
from pathlib import Path
from typing import Any

from loadbearing.errors import LoadBearingError
from loadbearing.runs import SUMMARY
from study.report.causal import side_by_side
from study.report.verdicts import read_verdicts


class DocsError(LoadBearingError, ValueError):
    """A run directory that cannot be rendered, or docs that disagree with their numbers."""


#: source -> (path inside the run directory, the top-level keys kept; None keeps every key)
SOURCES: dict[str, tuple[str, tuple[str, ...] | None]] = {
    "study": ("study.json", ("settings",)),
    "behaviour": (SUMMARY, ("questions", "distinct_questions", "baseline_accuracy", "baseline_accuracy_parseable",
                            "baseline_coverage", "eligible", "eligible_questions", "ineligible_reasons", "continuations",
                            "generations", "collapsed_positions", "overall", "by", "baseline_by_level")),
    "labels": (f"labels/rule/{SUMMARY}", ("final_labeller", "perturbed")),
    "gradient": ("gradient/gradient.json", ("difficulty_test",)),
    "probes": ("probes/results.json", ("headline", "metadata_baseline", "data", "transfer")),
    "steering": (f"steering/{SUMMARY}", ("verdict_code", "sesoi", "n_c_cases", "n_c_questions", "n_generations",
                                         "n_random_directions", "strongest", "uninformative", "settings", "split",
                                         "power", "multiple_comparisons")),
    "early_answer": (f"early_answer/{SUMMARY}", ("definition", "steps", "aoc", "by", "adding_mistakes",
                                                 "decision_point", "no_chain_accuracy", "full_chain_accuracy",
                                                 "n_questions")),
    "filler": (f"filler/{SUMMARY}", ("fillers", "fractions", "sweep", "full_accuracy", "mean_chain_tokens",
                                     "n_questions")),
    "paraphrase": (f"paraphrase/{SUMMARY}", None),
    "resample": (f"resample/{SUMMARY}", None),
}

#: keys dropped from a source kept whole (examples of text, the stage's own settings echo)
DROP = {"paraphrase": ("examples", "settings", "summary_options", "shard"),
        "resample": ("settings", "summary_options", "shard")}

#: sources a demo run must have (the default stages of ``python -m study``; the gradient needs 2 levels, so a
#: one-level study has none and the page leaves out its difficulty test)
REQUIRED = ("study", "behaviour", "labels", "probes", "steering")

#: keys dropped at any depth: where the run was written, and when
VOLATILE = frozenset({"run_dir", "output_dir", "path", "created", "updated", "started", "finished", "seconds",
                      "elapsed_s", "timestamp", "timing", "git", "host", "pid"})


def _clean(v: Any, run: str = "\0") -> Any:
    """``v`` without its volatile keys, non-finite floats as None, and the run's own path written ``DIR``."""
    if isinstance(v, dict):
        return {k: _clean(x, run) for k, x in v.items() if k not in VOLATILE}
    if isinstance(v, list):
        return [_clean(x, run) for x in v]
    if isinstance(v, str):
        return v.replace(run, "DIR")
    if isinstance(v, float) and not math.isfinite(v):
        return None
    return v


def _transfer(t: dict) -> dict[str, Any]:
    """Leave-one-strategy-out accuracies per probe (the page's transfer row), not the per-fold detail (a value
    already reduced is kept: every reduction here is idempotent)."""
    return {probe: v if isinstance(v, list) else
            [{"held_out": e.get("held_out"), "transfer": (e.get("transfer") or {}).get("accuracy"),
              "in_distribution": (e.get("in_distribution") or {}).get("accuracy")}
             for e in (v.get("leave_one_strategy_out") or [])]
            for probe, v in t.items() if isinstance(v, (dict, list))}


def _settings(settings: list) -> list[dict[str, Any]]:
    """Each steering setting's name and dose (its counts and tests are in the verdict line)."""
    keep = ("key", "operator", "layer", "k", "alpha_rel", "setting_verdict", "strongest", "uninformative")
    return [{k: d.get(k) for k in keep} for d in settings if isinstance(d, dict)]


#: source -> key -> a reduction of that key's value to what the page shows
def _label_counts(p: dict) -> dict[str, Any]:
    """The perturbed continuations' A / B / C counts and B among correct (not the per-group breakdown)."""
    return {k: p.get(k) for k in ("n", "counts", "n_labelled", "B_among_correct_labelled")}


REDUCE: dict[tuple[str, str], Callable[[Any], Any]] = {
    ("probes", "transfer"): _transfer, ("steering", "settings"): _settings, ("labels", "perturbed"): _label_counts}


def _read(path: Path) -> Any:
    try:
        return json.loads(path.read_text(encoding="utf-8"))
    except json.JSONDecodeError as e:
        raise DocsError(f"{path} is not valid JSON ({e.msg} at line {e.lineno}): rerun the stage that writes it") from None


def _verdicts(run: Path) -> list[dict[str, Any]]:
    """The report's three verdict lines (:func:`study.report.verdicts.read_verdicts`)."""
    return [_clean({"key": v.key, "question": v.question, "answer": v.answer, "detail": v.detail,
                    "n_questions": v.n_questions, "command": v.command, "source": v.source}, str(run))
            for v in read_verdicts(run)]


def extract(run_dir: str | Path) -> dict[str, Any]:
    """The numbers ``docs/results.md`` shows, from a finished demo run directory ``run_dir``."""
    run = Path(run_dir)
    if not run.is_dir():
        raise DocsError(f"{run} is not a directory: give the run directory `make demo` wrote (runs/study-<time>)")
    missing = [f"{SOURCES[s][0]}" for s in REQUIRED if not (run / SOURCES[s][0]).is_file()]
    if missing:
        raise DocsError(f"{run} lacks {', '.join(missing)}: give a finished demo run (python -m study --resume {run} "
                        "finishes one)")
    out: dict[str, Any] = {}
    for name, (rel, keys) in SOURCES.items():
        p = run / rel
        if not p.is_file():
            continue
        data = _read(p)
        if not isinstance(data, dict):
            raise DocsError(f"{p} holds {type(data).__name__}, not an object: rerun the stage that writes it")
        kept = ({k: v for k, v in data.items() if k not in DROP.get(name, ())} if keys is None
                else {k: data[k] for k in keys if k in data})
        out[name] = _clean({k: REDUCE.get((name, k), lambda v: v)(v) for k, v in kept.items()}, str(run))
    out["verdicts"] = _verdicts(run)
    table = side_by_side(run)  # the report's "Causal tests side by side" numbers; None when no causal stage ran
    if table is not None:
        out["side_by_side"] = _clean(table, str(run))
    return out


def compare(fresh: dict[str, Any], stored: dict[str, Any], *, tol: float = 0.0) -> list[str]:
    """Where ``fresh`` (a new demo's :func:`extract`) and ``stored`` (``docs/results/demo.json``) differ, one
    line per differing key path; [] when they agree."""
    diffs: list[str] = []

    def walk(a: Any, b: Any, path: str) -> None:
        if isinstance(a, dict) and isinstance(b, dict):
            for k in sorted(set(a) | set(b), key=str):
                if k not in a or k not in b:
                    diffs.append(f"{path}.{k}: {'only in the stored docs' if k in b else 'only in the fresh run'}")
                else:
                    walk(a[k], b[k], f"{path}.{k}")
        elif isinstance(a, list) and isinstance(b, list) and len(a) == len(b):
            for i, (x, y) in enumerate(zip(a, b)):
                walk(x, y, f"{path}[{i}]")
        elif isinstance(a, (int, float)) and isinstance(b, (int, float)) and not isinstance(a, bool) and tol:
            if not math.isclose(a, b, rel_tol=tol, abs_tol=tol):
                diffs.append(f"{path}: fresh {a!r}, stored {b!r}")
        elif a != b:
            diffs.append(f"{path}: fresh {_short(a)}, stored {_short(b)}")

    for src in sorted(set(fresh) | set(stored)):
        walk(fresh.get(src), stored.get(src), src)
    return diffs


def _short(v: Any) -> str:
    s = json.dumps(v)
    return s if len(s) <= 80 else s[:77] + "..."


__all__ = ["REQUIRED", "SOURCES", "DocsError", "compare", "extract"]
