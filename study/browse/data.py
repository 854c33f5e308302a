"""The data the trace browser embeds (:mod:`study.browse`): every run's baselines, continuations, labels and
steered generations as compact columnar JSON with one string table.

    from study.browse.data import collect
    data = collect(["runs/study"])   # {"v", "meta", "S", "c", "Q", "steer", "causal"}

Repeated strings (labels, strategies, lines, answers) are stored once in ``S`` and referred to by index; the
continuations (``c``), questions (``Q``) and steered generations (``steer``) are columns of equal length;
``steer["counts"]`` is each probe setting's moved-of-all C cases and the random controls' (pooled by basis),
counted from the same generations as the sweep's ``moved_of_all``, so the page's numbers are the report's.
``causal`` is each question's early-answering curve, resamples and paraphrase, and each patched C case's
patching row (:mod:`study.browse.causal`; None when the runs have none): the page embeds it in a block of its
own and parses it only when a question's panel is first shown.
"""
from __future__ import annotations

import json
import os
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from loadbearing.errors import LoadBearingError
from loadbearing.files import read_jsonl
from loadbearing.runs import GENERATIONS, LABELS_FILE, SUMMARY, Run
from study.browse.causal import CausalData

SCHEMA_VERSION = 1


class BrowseError(LoadBearingError, ValueError):
    """A user mistake (bad arguments); the message names the problem and the fix."""


class _Strings:
    """One string table: every repeated string is stored once and referred to by index."""

    def __init__(self) -> None:
        self.table: list[str] = []
        self.index: dict[str, int] = {}

    def __call__(self, s: Any) -> int | None:
        if s is None:
            return None
        s = str(s)
        i = self.index.get(s)
        if i is None:
            i = self.index[s] = len(self.table)
            self.table.append(s)
        return i


def _tri(v: Any) -> int | None:
    return None if v is None else (1 if v else 0)


def _model_name(run: Run) -> str:
    return str(run.model_spec.get("name") or "?")


def _label_records(run: Run, name: str | None) -> tuple[str | None, dict[str, dict[str, Any]]]:
    d = run.labelling_dir(name)
    if d is None:
        return None, {}
    out: dict[str, dict] = {}
    for r in read_jsonl(d / LABELS_FILE):
        if isinstance(r, dict) and "id" in r:
            out[str(r["id"])] = r
    return d.name, out


def _evidence(lrec: dict | None) -> tuple[list | None, list | None]:
    """(rule evidence spans [[start, end, type, detail]], judge [[labeller, variant, noticed, reply]])."""
    if not lrec:
        return None, None
    spans, judge = [], []
    for lname, res in (lrec.get("labellers") or {}).items():
        if not isinstance(res, dict):
            continue
        for e in res.get("evidence") or []:
            try:
                spans.append([int(e["start"]), int(e["end"]), str(e.get("type", "")), str(e.get("detail", ""))])
            except (KeyError, TypeError, ValueError):
                continue
        for vname, v in (res.get("variants") or {}).items():
            if isinstance(v, dict):
                judge.append([lname, vname, v.get("noticed"), str(v.get("reply", ""))[:2000]])
    return spans or None, judge or None


def _steering(run: Run, path: str | os.PathLike[str] | None = None) -> list[dict[str, Any]]:
    p = Path(path) if path is not None else run.path / "steering" / GENERATIONS
    if path is not None and not p.is_file():
        raise BrowseError(f"--steering {str(p)!r} not found; pass the generations.jsonl written by python -m steering.sweep")
    return [r for r in read_jsonl(p) if isinstance(r, dict)] if p.is_file() else []


#: what one steered generation did to its case (the marks the page shows; "changed" = changed, still wrong)
EFFECTS = ("moved", "changed", "broken", "same", "unparsed")
#: the bases that are controls, not the probe's directions (steering.sweep.grid: random, random_cov; none = alpha 0)
CONTROL_BASES = ("random", "random_cov", "none")


def _effect(r: dict, unsteered_answer: Any = None) -> str:
    """moved (a C case now correct) | changed (a C case whose answer changed but is still wrong) | broken (a
    non-C case now wrong) | same | unparsed. ``unsteered_answer``: the case's own parsed answer."""
    ok = r.get("correct")
    if ok is None:
        return "unparsed"
    if r.get("case_label", "C") == "C":
        if ok or r.get("moved") is True:
            return "moved"
        changed = unsteered_answer is not None and str(r.get("parsed_answer")) != str(unsteered_answer)
        return "changed" if changed else "same"
    return "broken" if not ok else "same"


def steering_counts(gens: Sequence[dict], strongest: str | None = None) -> list[dict[str, Any]]:
    """Per setting, its C cases moved of all its C cases (the sweep's ``moved_of_all``: correct now, unparsed and
    wrong count as not moved), the probe's settings first, then the controls pooled by basis; ``strongest``
    marks the setting the report leads with."""
    per: dict[str, dict[str, Any]] = {}
    for r in gens:
        if r.get("case_label", "C") != "C" or r.get("basis") == "none":
            continue
        basis = str(r.get("basis"))
        name = str(r.get("setting")) if basis not in CONTROL_BASES else basis
        d = per.setdefault(name, {"setting": name, "basis": basis, "k": 0, "n": 0, "cases": set(),
                                  "strongest": name == strongest})
        d["n"] += 1
        d["k"] += r.get("correct") is True
        d["cases"].add(str(r.get("case_id")))
    rows = sorted(per.values(), key=lambda d: (d["basis"] in CONTROL_BASES, d["setting"]))
    return [dict({k: v for k, v in d.items() if k != "cases"}, n_cases=len(d["cases"])) for d in rows]


def _strongest(run: Run) -> str | None:
    p = run.path / "steering" / SUMMARY
    try:
        sets = json.loads(p.read_text(encoding="utf-8")).get("settings") or []
    except (OSError, ValueError, AttributeError):
        return None
    return next((str(d.get("key")) for d in sets if isinstance(d, dict) and d.get("strongest")), None)


def _audit(a: Any) -> list | None:
    """A record's ``steer_audit`` (:mod:`steering.audit`) as the page reads it: ``[text_spans, positions,
    n_positions, prompt_tokens, hook_fires_per_token, kv_cache]`` (None without one)."""
    if not isinstance(a, dict):
        return None
    return [a.get("text_spans"), a.get("positions"), a.get("n_positions"), a.get("prompt_tokens"),
            a.get("hook_fires_per_token"), a.get("kv_cache")]


def collect(run_dirs: Sequence[str | os.PathLike[str]], *, labelling: str | None = None,
            steering: str | os.PathLike[str] | None = None) -> dict[str, Any]:
    """The browser's data for one or more runs: compact columnar JSON with one string table ``S``.
    ``steering``: a ``generations.jsonl`` (default ``RUN_DIR/steering/generations.jsonl`` of each run, if any)."""
    runs = [Run(p) for p in run_dirs]
    if steering is not None and len(runs) > 1:
        raise BrowseError("--steering names one sweep's generations but several runs were given; browse one run")
    S = _Strings()
    C: dict[str, list] = {k: [] for k in ("id", "run", "q", "cond", "strat", "pos", "mem", "li", "nl", "orig", "edit",
                                         "prefix", "text", "ans", "gold", "ok", "lab", "why", "fin", "ntok", "task",
                                         "lvl", "ds", "ev", "judge")}
    Q: dict[str, list] = {k: [] for k in ("id", "run", "text", "task", "lvl", "ds", "gold", "ans", "ok", "elig", "reason",
                                         "lines", "answer", "key")}
    steer: dict[str, list] = {k: [] for k in ("row", "setting", "basis", "layer", "k", "alpha", "text", "ans", "ok",
                                             "effect")}
    steer_counts: list[dict[str, Any]] = []
    audits: list[list | None] = []  # per steered generation: what its hooks touched (steering.audit), or None
    meta_runs, labellings = [], []
    causal = CausalData()
    multi = len(runs) > 1
    for ri, run in enumerate(runs):
        model = _model_name(run)
        lname, lrecs = _label_records(run, labelling)
        labellings.append(lname)
        meta_runs.append({"path": str(run.path), "model": model, "labelling": lname, "status": run.status})
        qindex: dict[str, int] = {}
        for b in run.baselines():
            d = b.to_dict()
            qindex[d["question_id"]] = len(Q["id"])
            Q["id"].append(d["question_id"])
            Q["run"].append(ri)
            Q["text"].append(d.get("question") or "")
            Q["task"].append(S(d.get("task")))
            Q["lvl"].append(S(d.get("difficulty")))
            Q["ds"].append(S(d.get("dataset")))
            Q["gold"].append(S(d.get("gold")))
            Q["ans"].append(S(d.get("parsed_answer")))
            Q["ok"].append(_tri(d.get("correct")))
            Q["elig"].append(_tri(d.get("eligible")))
            Q["reason"].append(S(d.get("reason")))
            Q["lines"].append([S(x) for x in d.get("lines") or []])
            trace_lines = (d.get("trace") or "").splitlines()
            al = d.get("answer_line")
            Q["answer"].append(S(trace_lines[al]) if isinstance(al, int) and 0 <= al < len(trace_lines) else None)
            Q["key"].append(d.get("question_key"))
        rows: dict[str, int] = {}
        for d in run.continuation_dicts():
            qid = str(d.get("question_id"))
            if qid not in qindex:  # a continuation whose baseline is missing still shows (question text unknown)
                qindex[qid] = len(Q["id"])
                for k, v in (("id", qid), ("run", ri), ("text", ""), ("task", S(d.get("task"))), ("lvl", S(d.get("difficulty"))),
                             ("ds", S(d.get("dataset"))), ("gold", S(d.get("gold"))), ("ans", None), ("ok", None),
                             ("elig", None), ("reason", S("no baseline record")), ("lines", []), ("answer", None),
                             ("key", d.get("question_key"))):
                    Q[k].append(v)
            qi = qindex[qid]
            cid = str(d.get("id"))
            rows[cid] = len(C["id"])
            C["id"].append(f"{ri}:{cid}" if multi else cid)
            C["run"].append(ri)
            C["q"].append(qi)
            C["cond"].append(S(d.get("condition")))
            C["strat"].append(S(d.get("strategy")))
            C["pos"].append(S(d.get("position")))
            mem = d.get("memberships")
            C["mem"].append([[S(m[0]), S(m[1])] for m in mem if isinstance(m, (list, tuple)) and len(m) >= 2]
                            if isinstance(mem, list) and len(mem) > 1 else None)
            li = d.get("line_index")
            C["li"].append(li if isinstance(li, int) else None)
            C["nl"].append(d.get("n_lines"))
            C["orig"].append(S(d.get("original_line")))
            C["edit"].append(S(d.get("edited_line")))
            # the prefix is rebuilt from the baseline's lines when it matches, so it is stored only when it does not
            lines = Q["lines"][qi] or []
            prefix = d.get("prefix_text")
            rebuilt = None
            if isinstance(li, int) and lines and li <= len(lines):
                rebuilt = "\n".join([S.table[x] for x in lines[:li]] + [d.get("edited_line") or ""]) + "\n"
            C["prefix"].append(None if prefix is None or prefix == rebuilt else prefix)
            C["text"].append(d.get("continuation") or "")
            C["ans"].append(S(d.get("parsed_answer")))
            C["gold"].append(S(d.get("gold")))
            C["ok"].append(_tri(d.get("correct")))
            lrec = lrecs.get(cid)
            lab = lrec.get("label") if lrec else d.get("label")
            C["lab"].append(S(lab if lab is not None else "none"))
            C["why"].append(S(lrec.get("reason")) if lrec else None)
            C["fin"].append(S(d.get("finish_reason")))
            C["ntok"].append(d.get("new_tokens"))
            C["task"].append(S(d.get("task")))
            C["lvl"].append(S(d.get("difficulty")))
            C["ds"].append(S(d.get("dataset")))
            ev, judge = _evidence(lrec)
            C["ev"].append([[a, b, S(t), S(x)] for a, b, t, x in ev] if ev else None)
            C["judge"].append([[S(a), S(b), _tri(c), e] for a, b, c, e in judge] if judge else None)
        causal.add_run(run, qindex, rows)
        gens = _steering(run, steering)
        if gens:
            steer_counts += [dict(d, run=ri) for d in steering_counts(gens, _strongest(run))]
        for r in gens:
            row = rows.get(str(r.get("case_id")))
            if row is None:
                continue
            steer["row"].append(row)
            steer["setting"].append(S(r.get("setting")))
            steer["basis"].append(S(r.get("basis")))
            steer["layer"].append(r.get("layer"))
            steer["k"].append(r.get("k"))
            steer["alpha"].append(r.get("alpha_rel"))
            steer["text"].append(r.get("text") or "")
            steer["ans"].append(S(r.get("parsed_answer")))
            steer["ok"].append(_tri(r.get("correct")))
            ans = C["ans"][row]
            steer["effect"].append(S(_effect(r, S.table[ans] if ans is not None else None)))
            audits.append(_audit(r.get("steer_audit")))
    return {
        "v": SCHEMA_VERSION,
        "meta": {"runs": meta_runs, "models": sorted({m["model"] for m in meta_runs}),
                 "labelling": labellings[0] if len(set(labellings)) == 1 else None},
        "S": S.table,
        "c": C,
        "Q": Q,
        "steer": (dict(steer, counts=steer_counts) | ({"audit": audits} if any(a is not None for a in audits) else {}))
        if steer["row"] else None,
        "causal": causal.to_dict(),
    }


__all__ = ["CONTROL_BASES", "EFFECTS", "SCHEMA_VERSION", "BrowseError", "collect", "steering_counts"]
