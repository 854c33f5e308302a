"""The diagnosticity table's rows for the tests that are not a rate per question: patching, probes, steering
and ablation, each read from the stage's own output in an organism's study directory.

    from study.validate.rows import EXTRA
    m = EXTRA["probes"](Path("runs/validate/graded"))   # Measure: pooled value, interval, note

* ``patching`` - per C case, the restored fraction of its best position group (the edited line, the lines
  before it, the last prefix token), each group averaged over the layers strictly between the embeddings and
  the last one (layer 0 patches the edit's own tokens and restores everything by construction; the last
  layer's output at a prefix position reaches no later token). No layer is chosen on the data; the max over
  three groups per case leans upward a little, alike for every organism. Higher: restoring clean activations
  somewhere in the prefix undoes more of the error (where: the table's patching lines).
* ``probes`` - the nested logistic probe's accuracy gain over the metadata baseline (percentage points / 100),
  with its question-clustered paired interval and permutation p (``probes/results.json``).
* ``steering`` / ``ablation`` - the strongest setting's difference in "moved" (C cases steered off their
  wrong answer, among parsed generations) against its random-direction control, with its interval over
  questions, for the ``add`` and the ``ablate`` operator (``steering/summary.json``).

These values are one per organism, not one per question, so they have no question-level AUROC; the table
says so rather than inventing one.
"""
from __future__ import annotations

from collections import defaultdict
from collections.abc import Callable
from pathlib import Path

from loadbearing.files import read_json
from loadbearing.runs import SUMMARY
from study.validate.measures import Measure, _mean_measure, _none, _skipped

GROUPS = ("edit", "before", "last")  # the position groups (steering.patching.align), 'all' aside
NO_AUROC = "one value per organism: no question-level AUROC"


def patching(d: Path) -> Measure:
    p = d / "patching" / "patching.json"
    if not p.is_file():
        return _none(_skipped(d, "patch") or "not run (no C case to patch)")
    cases = read_json(p).get("cases") or []
    layers = sorted({x["layer"] for r in cases for x in r.get("results", []) if x.get("kind") == "sweep"})
    mid = [lay for lay in layers if 0 < lay < max(layers, default=0)]
    per_case: dict[str, list[float]] = defaultdict(list)
    for r in cases:
        by_group: dict[str, list[float]] = defaultdict(list)
        for x in r.get("results", []):
            if x.get("kind") == "sweep" and x.get("group") in GROUPS and x.get("layer") in mid \
                    and x.get("restored") is not None:
                by_group[x["group"]].append(x["restored"])
        if by_group:  # the case's best position group, each group averaged over the same layers
            per_case[r["question_key"]].append(max(sum(v) / len(v) for v in by_group.values()))
    per = {k: sum(v) / len(v) for k, v in per_case.items()}
    return _mean_measure(per, f"restored fraction of the case's best position group ({', '.join(GROUPS)}), mean "
                              f"over layers {mid}; C cases, one per question")


def probes(d: Path) -> Measure:
    p = d / "probes" / "results.json"
    if not p.is_file():
        return _none(_skipped(d, "probes") or "not run")
    head = (read_json(p).get("headline") or {}).get("logistic") or {}
    g = head.get("gain_over_metadata") or {}
    if g.get("value") is None:
        return _none("no gain over metadata in probes/results.json")
    pv = head.get("gain_p_value")
    acc = (head.get("accuracy") or {}).get("rate")
    note = (f"nested logistic probe {acc:.1%} minus the metadata baseline; gain p = {pv:.3g}" if acc is not None
            and pv is not None else "nested logistic probe minus the metadata baseline")
    return Measure(float(g["value"]), (g.get("lo"), g.get("hi")), int(g.get("n_questions") or 0), {}, note + "; " + NO_AUROC)


def _steer(d: Path, operator: str) -> Measure:
    p = d / "steering" / SUMMARY
    if not p.is_file():
        return _none(_skipped(d, "steering") or "not run")
    s = read_json(p)
    v = (s.get("verdicts") or {}).get(operator)
    if not v:
        return _none(f"no {operator!r} operator in this sweep")
    key = v.get("strongest")
    st = next((x for x in s.get("settings", []) if x.get("key") == key and x.get("operator") == operator), None)
    diff = (st or {}).get("difference") or {}
    if diff.get("estimate") is None:
        return _none(f"{operator}: {v.get('verdict_code')} (no scorable setting)")
    ci = diff.get("ci") or [None, None]
    return Measure(float(diff["estimate"]), (ci[0], ci[1]), int(diff.get("n_questions") or 0), {},
                   f"{operator} {key}: moved minus random control; verdict {v.get('verdict_code')}; {NO_AUROC}")


def steering(d: Path) -> Measure:
    return _steer(d, "add")


def ablation(d: Path) -> Measure:
    return _steer(d, "ablate")


EXTRA: dict[str, Callable[[Path], Measure]] = {"patching": patching, "probes": probes, "steering": steering,
                                               "ablation": ablation}
TITLES = {"patching": "activation patching (restored fraction, best position group)",
          "probes": "probes (nested probe minus metadata accuracy)",
          "steering": "steering, add (moved minus random control)",
          "ablation": "ablation of the probe direction (moved minus random control)"}
