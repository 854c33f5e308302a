"""python -m study.compare RUN_OR_STUDY [RUN_OR_STUDY ...] [--by model|dataset|level|strategy] [--output-dir DIR]

Question-paired comparisons of two or more runs on the questions they share (two models, two prompts, two
protocols, steered against unsteered; issue #36):

    python -m study.compare runs/a runs/b                      # the paired table on stdout
    python -m study.compare runs/paper --by dataset --output-dir runs/paper/compare   # a several-run study

Each argument is a run directory (``manifest.json``), a study directory whose ``study.toml`` lists several
runs (``[[run]]`` tables), that ``study.toml`` itself, or a directory holding runs one or two levels down
(``ROOT/<model>/<dataset>``). Every pair of runs that shares questions (by normalised question text,
:func:`loadbearing.runs.question_key_of`) is compared on:

* ``propagation`` - perturbed continuations with a wrong, parseable answer; rows pair by (question, strategy,
  position), each pair of distinct generations once;
* ``control error`` - unedited controls with a wrong, parseable answer; rows pair by (question, position);
* ``baseline accuracy`` - one greedy baseline per question;
* ``AOC`` - early answering's per-question area over the curve (mean over questions; ``early_answer/``);
* ``probe accuracy`` - the nested cross-validated accuracy of the logistic probe (``probes/results.json``),
  unpaired: that stage keeps no per-question predictions.

Where rows do not pair (two runs with different strategies) the binary measures fall back to per-question
rates (question-weighted). The statistics (interval, exact test, MDD) are :mod:`study.compare.stats`; Holm's
adjustment runs across every test in the output. ``--by`` splits each comparison by the runs' model or dataset
(a run is compared only with runs of the same value) or the rows' difficulty level or strategy. Runs that
share no question with any other run are refused with one ``error:`` line. ``--output-dir`` also writes
``compare.md`` (with the models x datasets table of the runs), ``compare.json`` and ``compare.png``.
"""
from __future__ import annotations

import argparse
from collections import defaultdict
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from loadbearing.cli import UsageError, run_cli
from loadbearing.commands import prog
from loadbearing.files import read_jsonl
from loadbearing.runs import MANIFEST, RECORDS, Run, question_key_of
from loadbearing.stage.parser import config_from_parsed, option, parser_from_config
from loadbearing.stats import clustered_rate, wilson_rate
from study.compare.render import render, write
from study.compare.stats import holm, paired_binary, paired_continuous, unpaired_rates

MEASURES = ("propagation", "control error", "baseline accuracy", "AOC", "probe accuracy")
BY = ("model", "dataset", "level", "strategy")
ALL = "all"


@dataclass(frozen=True)
class Unit:
    """One scored row of a run: its pairing key, question, value, the generation behind it and its groups."""

    key: tuple
    question: str
    value: float
    gen: str
    level: str | None = None
    strategy: str | None = None


@dataclass
class RunData:
    """What the comparison reads from one run directory."""

    name: str
    path: Path
    model: str
    dataset: str
    units: dict[str, list[Unit]] = field(default_factory=dict)
    probe: dict[str, Any] | None = None

    @property
    def questions(self) -> set[str]:
        return {u.question for us in self.units.values() for u in us}


# ------------------------------------------------------------------------------------------------ reading
def run_dirs(spec: str) -> list[Path]:
    """The run directories an argument names (module docstring); a UsageError when it names none."""
    p = Path(spec)
    if p.is_file() and p.suffix == ".toml":
        return _from_toml(p)
    if not p.is_dir():
        raise UsageError(f"{spec!r}: no such run or study directory; pass a run directory (with {MANIFEST}), a "
                         "study directory or its study.toml")
    if (p / MANIFEST).is_file():
        return [p]
    if (p / "study.toml").is_file():
        found = _from_toml(p / "study.toml")
        if found:
            return found
    found = sorted({m.parent for pat in (f"*/{MANIFEST}", f"*/*/{MANIFEST}") for m in p.glob(pat)})
    if not found:
        raise UsageError(f"{spec!r} holds no run ({MANIFEST} not found in it or one or two levels down); pass a run "
                         "directory written by python -m study or python -m behavioural.run")
    return found


def _from_toml(path: Path) -> list[Path]:
    from study.files import _toml  # deferred: keeps steering (and 11 more modules) out of `python -m study.compare`'s start-up

    try:
        data = _toml().loads(path.read_text(encoding="utf-8"))
    except Exception as e:  # noqa: BLE001 - a broken file is one line
        raise UsageError(f"{path}: not a readable study file ({e}); pass the run directories instead") from None
    runs = data.get("run") if isinstance(data.get("run"), list) else [data]
    out = []
    for r in runs:
        d = r.get("output_dir") if isinstance(r, dict) else None
        if isinstance(d, str):
            q = Path(d) if Path(d).is_absolute() or Path(d).is_dir() else path.parent / d
            if (q / MANIFEST).is_file():
                out.append(q)
    return out


def _rate_of(label: str | None) -> float | None:
    return None if label is None else float(label == "C")


def read_run(path: Path, name: str) -> RunData:
    """Every measure's units of one run (module docstring)."""
    run = Run(path)
    if not run.complete:
        raise UsageError(f"run {str(path)!r} has status {run.status!r}: it has not finished; finish it with "
                         f"python -m study --resume {path} before comparing it")
    recs = run.continuations()
    bases = run.baselines()
    datasets = sorted({b.dataset for b in bases}) or ["?"]
    data = RunData(name, path, str(run.model_spec.get("name") or "unknown"), ",".join(datasets))
    prop, ctl = [], []
    for c in recs:
        v = _rate_of(c.label)
        if v is None:
            continue
        q, level = question_key_of(c), c.difficulty or c.task
        if c.condition == "perturbed":
            prop += [Unit((q, s, p), q, v, c.id, level, s) for s, p in c.cells()]
        else:
            ctl += [Unit((q, p), q, v, c.id, level) for p in sorted({p for _, p in c.cells()})]
    data.units["propagation"], data.units["control error"] = prop, ctl
    data.units["baseline accuracy"] = [Unit((question_key_of(b),), question_key_of(b), float(b.correct), b.question_id,
                                            b.difficulty or b.task) for b in bases if b.correct is not None]
    data.units["AOC"] = _aoc_units(path)
    data.probe = _probe(path)
    return data


def _aoc_units(path: Path) -> list[Unit]:
    # deferred: keeps behavioural (and 5 more modules) out of `python -m study.compare`'s start-up
    from behavioural.causal.early_answer import question_curves

    f = path / "early_answer" / RECORDS
    if not f.is_file():
        return []
    return [Unit((c["question_key"],), c["question_key"], float(c["aoc"]), c["question_id"], c.get("difficulty")
                 or c.get("task")) for c in question_curves(read_jsonl(f)) if c.get("aoc") is not None]


def _probe(path: Path) -> dict[str, Any] | None:
    if not (path / "probes" / "results.json").is_file():
        return None
    from probes.results import read_results  # deferred: probes.results loads sklearn

    df = read_results(path / "probes")
    row = df.query("scope == 'nested' and metric == 'accuracy' and probe == 'logistic'")
    if row.empty:
        return None
    r = row.iloc[0]
    import pandas as pd  # deferred: pandas is heavy to import

    def val(x: Any) -> float | None:
        return None if pd.isna(x) else float(x)

    return {"estimate": val(r.estimate), "lo": val(r.lo), "hi": val(r.hi),
            "n_questions": None if pd.isna(r.n_questions) else int(r.n_questions)}


def load(specs: Sequence[str]) -> list[RunData]:
    paths: list[Path] = []
    for s in specs:
        paths += [p for p in run_dirs(s) if p.resolve() not in {q.resolve() for q in paths}]
    if len(paths) < 2:
        raise UsageError(f"found {len(paths)} run in {' '.join(specs)}; compare needs two or more runs")
    names = _names(paths)
    return [read_run(p, n) for p, n in zip(paths, names)]


def _names(paths: list[Path]) -> list[str]:
    """Short unique names: the last path parts that tell the runs apart."""
    parts = [p.resolve().parts for p in paths]
    for k in range(1, max(len(x) for x in parts) + 1):
        names = ["/".join(x[-k:]) for x in parts]
        if len(set(names)) == len(names):
            return names
    return [str(p) for p in paths]


# ------------------------------------------------------------------------------------------------ comparing
def _group(u: Unit, run: RunData, by: str | None) -> str:
    if by is None:
        return ALL
    v = {"model": run.model, "dataset": run.dataset, "level": u.level, "strategy": u.strategy}[by]
    return ALL if v is None else str(v)


def compare_pair(a: RunData, b: RunData, measure: str, by: str | None, *, seed: int = 0) -> list[dict[str, Any]]:
    """The comparisons of ``a`` against ``b`` on one measure, one per group (``--by``)."""
    if measure == "probe accuracy":  # one number per run: split only by the runs' own model or dataset
        grp_a = _group(Unit((), "", 0.0, ""), a, by if by in ("model", "dataset") else None)
        grp_b = _group(Unit((), "", 0.0, ""), b, by if by in ("model", "dataset") else None)
        if a.probe is None or b.probe is None or grp_a != grp_b:
            return []
        return [{"measure": measure, "group": grp_a, "a": a.name, "b": b.name, **unpaired_rates(a.probe, b.probe)}]
    ga: dict[str, dict[tuple, Unit]] = defaultdict(dict)
    gb: dict[str, dict[tuple, Unit]] = defaultdict(dict)
    for run, g in ((a, ga), (b, gb)):
        for u in run.units.get(measure, []):
            g[_group(u, run, by)].setdefault(u.key, u)
    out = []
    for grp in sorted(set(ga) & set(gb)):
        ua, ub = ga[grp], gb[grp]
        shared = sorted(set(ua) & set(ub))
        if measure == "AOC":
            res = paired_continuous([(k[0], ua[k].value, ub[k].value) for k in shared], seed=seed) if shared else None
        elif shared:
            seen, rows = set(), []
            for k in shared:
                pair = (ua[k].gen, ub[k].gen)
                if pair not in seen:
                    seen.add(pair)
                    rows.append((ua[k].question, ua[k].value, ub[k].value))
            res = paired_binary(rows, seed=seed)
        else:  # rows do not pair (different strategies, positions): per-question rates
            qa, qb = _per_question(ua.values()), _per_question(ub.values())
            qs = sorted(set(qa) & set(qb))
            res = paired_continuous([(q, qa[q], qb[q]) for q in qs], seed=seed) if qs else None
        if res is not None and res["n_questions"]:
            out.append({"measure": measure, "group": grp, "a": a.name, "b": b.name, **res})
    return out


def _per_question(units: Any) -> dict[str, float]:
    by: dict[str, list[float]] = defaultdict(list)
    for u in units:
        by[u.question].append(u.value)
    return {q: sum(v) / len(v) for q, v in by.items()}


def run_summary(r: RunData) -> dict[str, Any]:
    """One run's own rates (the models x datasets table): propagation and control error over distinct
    generations with the question-clustered interval, baseline accuracy with Wilson (one row per question)."""
    out: dict[str, Any] = {"name": r.name, "path": str(r.path), "model": r.model, "dataset": r.dataset,
                           "n_questions": len(r.questions)}
    for m in ("propagation", "control error"):
        gens = {u.gen: u for u in r.units[m]}  # a generation filling several cells counts once
        out[m] = clustered_rate([bool(u.value) for u in gens.values()], [u.question for u in gens.values()],
                                n_generations=len(gens)).to_dict()
    b = r.units["baseline accuracy"]
    out["baseline accuracy"] = wilson_rate(int(sum(u.value for u in b)), len(b), n_questions=len(b)).to_dict()
    out["probe accuracy"] = r.probe
    return out


def compare(runs: list[RunData], by: str | None = None, *, seed: int = 0) -> dict[str, Any]:
    """Every pair of runs sharing questions, every measure, Holm across all the tests."""
    pairs = [(a, b) for i, a in enumerate(runs) for b in runs[i + 1:] if a.questions & b.questions]
    alone = [r.name for r in runs if not any(r in p for p in pairs)]
    if alone:
        raise UsageError(f"run {alone[0]} shares no question with the other runs ({len(runs[0].questions)} and more "
                         "questions, none in common); compare runs made on the same questions (same --dataset, "
                         "--task, --max-examples and --seed)")
    rows = [r for a, b in pairs for m in MEASURES for r in compare_pair(a, b, m, by, seed=seed)]
    for r, p in zip(rows, holm([r["p_value"] for r in rows])):
        r["p_holm"] = p
    return {"by": by, "runs": [run_summary(r) for r in runs],
            "shared_questions": {f"{a.name} vs {b.name}": len(a.questions & b.questions) for a, b in pairs},
            "comparisons": rows, "family": f"Holm over {sum(r['p_value'] is not None for r in rows)} tests"}


# ------------------------------------------------------------------------------------------------ CLI
@dataclass(frozen=True)
class CompareConfig:
    """What ``python -m study.compare`` accepts (its parser is built from these fields)."""

    runs: tuple[str, ...] = option(positional=True, nargs="+", metavar="RUN_OR_STUDY", parse=tuple, group="inputs",
                                   help="run directories, study directories or study.toml")
    by: str | None = option(None, choices=BY, group="comparison", help="split each comparison by this (default: no "
                            "split)")
    seed: int = option(0, type=int, group="comparison", help="seed of the Monte Carlo sign flips beyond 16 questions")
    output_dir: str | None = option(None, deprecated=("--output",), metavar="DIR", group="output",
                                    help="also write compare.md, compare.json and compare.png here (default: print "
                                         "only)")


def build_parser() -> argparse.ArgumentParser:
    """The command's parser, built from :class:`CompareConfig`."""
    return parser_from_config(CompareConfig, prog=prog("study.compare"), groups=("inputs", "comparison", "output"),
                              description="Question-paired comparisons of two or more runs on the questions they share.")


def main(argv: Sequence[str] | None = None) -> int:
    args: CompareConfig = config_from_parsed(CompareConfig, build_parser().parse_args(argv))

    def body() -> int:
        res = compare(load(args.runs), args.by, seed=args.seed)
        print(render(res, full=False))
        if args.output_dir:
            print(f"wrote {write(res, Path(args.output_dir))}")
        return 0

    return run_cli(body)


if __name__ == "__main__":
    raise SystemExit(main())


__all__ = ["BY", "MEASURES", "RunData", "Unit", "build_parser", "compare", "compare_pair", "load", "main", "read_run",
           "run_dirs"]
