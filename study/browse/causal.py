"""The causal tests' per-question data for the trace browser (:mod:`study.browse.data`): what each question's
"Causal tests" panel shows beside its edits.

    from study.browse.causal import CausalData
    cd = CausalData()
    cd.add_run(Run("runs/study"), qindex, rows)      # question id -> Q row, continuation id -> C row
    cd.to_dict()                                     # {"stages", "ea", "rs", "pp", "pt", "fl", "st", "sm"} or None

Read from the run's own files, one entry per question (keyed by its row in the browser's question table):

* ``ea`` (``early_answer/summary.json`` ``questions``): the cuts ``k``, the forced answer after each, whether it
  is the full chain's (1/0/null: unparsed), the AOC, the chain length, the decision point ``dp`` and the NLDD
  share ``nldd``;
* ``rs`` (``resample/summary.json`` ``questions`` and ``resample/records.jsonl``): per step its rollouts, how
  many differ in meaning, the counterfactual importance with its interval, the rank and a few rollouts
  (different ones first, :data:`ROLLOUTS_SHOWN` at most, each text cut at :data:`TEXT_CHARS` characters);
* ``pp`` (``paraphrase/records.jsonl``): the original prefix, the paraphrase, the continuation from it and its
  answer against the unparaphrased reference;
* ``pt`` (``patching/patching.json`` ``cases``; keyed by the case's row in the continuation table): the
  restored fraction of each (layer, position group) for that C case;
* ``fl`` (``filler/records.jsonl``): per condition of the filler sweep its fraction, filler tokens, forced answer
  and whether it is right;
* ``st``: the step-level measures the agreement table ranks (:func:`behavioural.causal.agreement.step_values`,
  read from the stages' summaries): per step propagation of the edited line, ``|cf importance|`` (resampling),
  the receiver-head score and the suppression effect, and each measure's top step;
* ``sm`` (one entry per run, by its index): the stage summaries the report prints - early answering's AOC and
  NLDD share (overall and by level), the filler sweep, the paraphrase retention curve and mean gap, the top
  receiver heads, the suppression settings and the agreement pairs (the report's bootstrap settings).

The browser parses this block only when a question's panel is first shown, so it does not slow the page.
"""
from __future__ import annotations

import json
from collections import defaultdict
from collections.abc import Mapping
from typing import Any

from loadbearing.files import read_jsonl
from loadbearing.runs import RECORDS, Run
from study.browse.stages import filler_rows, run_summaries, step_measures

#: rollouts shown per step (the rest are in resample/records.jsonl)
ROLLOUTS_SHOWN = 3
#: a rollout's or a continuation's text is cut at this many characters in the browser
TEXT_CHARS = 1500


def _cut(text: Any) -> str | None:
    if text is None:
        return None
    t = str(text)
    return t if len(t) <= TEXT_CHARS else t[:TEXT_CHARS] + f"\u2026 [{len(t) - TEXT_CHARS} more characters in the records]"


def _summary(run: Run, name: str) -> dict[str, Any] | None:
    from study.report.causal import stage_summary  # deferred: study.report.causal loads numpy

    return stage_summary(run.path, name)


def _r(x: Any, digits: int = 4) -> Any:
    return round(float(x), digits) if isinstance(x, (int, float)) and not isinstance(x, bool) else x


class CausalData:
    """The causal panels' data of one or more runs (see the module docstring)."""

    def __init__(self) -> None:
        self.stages: set[str] = set()
        self.ea: dict[str, dict] = {}
        self.rs: dict[str, dict] = {}
        self.pp: dict[str, dict] = {}
        self.pt: dict[str, dict] = {}
        self.fl: dict[str, dict] = {}
        self.st: dict[str, dict] = {}
        self.sm: list[dict] = []

    def add_run(self, run: Run, qindex: Mapping[str, int], rows: Mapping[str, int]) -> None:
        """Add a run's causal stages; ``qindex``: question id -> question row, ``rows``: continuation id -> row."""
        self._early_answer(run, qindex)
        self._resample(run, qindex)
        self._paraphrase(run, qindex)
        self._patching(run, rows)

        self.fl.update(filler_rows(run, qindex))
        self.st.update(step_measures(run, qindex))
        sm = run_summaries(run)
        self.sm.append(sm)
        self.stages.update(sm["stages"])

    def _early_answer(self, run: Run, qindex: Mapping[str, int]) -> None:
        s = _summary(run, "early_answer")
        if s is None:
            return
        self.stages.add("early_answer")
        for q in s.get("questions") or []:
            qi = qindex.get(str(q.get("question_id")))
            if qi is not None:
                self.ea[str(qi)] = {"n": q["n_lines"], "k": q["k"], "a": q["answers"], "s": q["same"],
                                    "aoc": _r(q.get("aoc")), "full": q.get("full_chain_answer"),
                                    "dp": q.get("decision_point"), "nldd": _r(q.get("nldd_share"))}

    def _resample(self, run: Run, qindex: Mapping[str, int]) -> None:
        s = _summary(run, "resample")
        if s is None:
            return
        self.stages.add("resample")
        shown: dict[tuple[str, int], list[dict]] = defaultdict(list)
        for r in read_jsonl(run.path / "resample" / RECORDS):
            if isinstance(r, dict) and r.get("kind") == "rollout":
                shown[(str(r.get("question_id")), int(r.get("k", -1)))].append(r)
        for q in s.get("questions") or []:
            qid = str(q.get("question_id"))
            qi = qindex.get(qid)
            if qi is None:
                continue
            steps = []
            for st in q.get("steps") or []:
                rolls = sorted(shown.get((qid, int(st["step"])), []), key=lambda r: (not r.get("different"), r["rollout"]))
                steps.append({"i": st["step"], "orig": st.get("original"), "n": st.get("n_rollouts"),
                              "nd": st.get("n_different"), "cf": _r(st.get("cf_importance")),
                              "ci": [_r(x) for x in st.get("cf_ci") or [None, None]], "rank": st.get("rank"),
                              "ad": _r(st.get("acc_different")), "an": _r(st.get("acc_next")),
                              "roll": [[r.get("new_step"), 1 if r.get("different") else 0, r.get("parsed_answer"),
                                        None if r.get("correct") is None else int(bool(r["correct"])),
                                        _cut(r.get("generation"))] for r in rolls[:ROLLOUTS_SHOWN]]})
            edited = sorted({e["step"] for e in q.get("edited") or []})
            self.rs[str(qi)] = {"anchor": q.get("anchor"), "edited": edited, "steps": steps,
                                "rollouts": s.get("rollouts_per_prefix")}

    def _paraphrase(self, run: Run, qindex: Mapping[str, int]) -> None:
        s = _summary(run, "paraphrase")
        if s is None:
            return
        self.stages.add("paraphrase")
        recs = [r for r in read_jsonl(run.path / "paraphrase" / RECORDS) if isinstance(r, dict)]
        fr: dict[str, list] = defaultdict(list)  # question row -> [fraction, same answer (1/0/null)] per paraphrase
        for r in sorted(recs, key=lambda r: float(r.get("fraction") or 0)):
            qi = qindex.get(str(r.get("question_id")))
            if qi is not None:
                sa = r.get("same_answer")
                fr[str(qi)].append([r.get("fraction"), None if sa is None else int(bool(sa))])
        for r in sorted(recs, key=lambda r: r.get("fraction") == 0.5):  # one panel: the half-chain rewrite wins
            qi = qindex.get(str(r.get("question_id")))
            if qi is None:
                continue
            self.pp[str(qi)] = {"by": s.get("paraphraser"), "li": r.get("line_index"), "orig": r.get("original_lines"),
                                "para": r.get("paraphrased_lines"), "raw": _cut(r.get("paraphrase_raw")),
                                "status": r.get("status"), "num": r.get("numbers_preserved"),
                                "same_text": r.get("identical"), "cont": _cut(r.get("continuation")),
                                "ans": r.get("parsed_answer"), "ok": r.get("correct"), "ref": r.get("reference_answer"),
                                "src": r.get("reference_source"), "same": r.get("same_answer"), "fr": fr[str(qi)]}

    def _patching(self, run: Run, rows: Mapping[str, int]) -> None:
        p = run.path / "patching" / "patching.json"
        try:
            d = json.loads(p.read_text(encoding="utf-8")) if p.is_file() else None
        except (OSError, ValueError):
            d = None
        if not isinstance(d, dict):
            return
        self.stages.add("patching")
        groups = list((d.get("settings") or {}).get("groups") or [])
        layers = list((d.get("settings") or {}).get("layers") or [])
        for c in d.get("cases") or []:
            row = rows.get(str(c.get("id")))
            if row is None:
                continue
            cell = {(r["layer"], r["group"]): r.get("restored") for r in c.get("results") or []
                    if r.get("kind") == "sweep"}
            ls = layers or sorted({k[0] for k in cell})
            gs = groups or sorted({k[1] for k in cell})
            self.pt[str(row)] = {"layers": ls, "groups": gs, "r": [[_r(cell.get((L, g)), 3) for g in gs] for L in ls],
                                 "gap": _r(c.get("gap"), 3), "excluded": bool(c.get("excluded")),
                                 "propagated": c.get("propagated"), "gold": c.get("gold")}

    def to_dict(self) -> dict[str, Any] | None:
        """The block the page embeds, or None when no run has a causal stage or patching."""
        if not self.stages:
            return None
        return {"stages": sorted(self.stages), "ea": self.ea, "rs": self.rs, "pp": self.pp, "pt": self.pt,
                "fl": self.fl, "st": self.st, "sm": self.sm}


__all__ = ["ROLLOUTS_SHOWN", "TEXT_CHARS", "CausalData"]
