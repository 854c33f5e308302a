"""Resampling importance from the rollouts (:mod:`behavioural.causal.resample`): per step, per question, pooled.

For a chain with steps ``L[0..n-1]`` and step ``i``, with ``R(k)`` the scored rollouts sampled after ``L[:k]``
(thought-anchors' ``chunk_k`` solutions: step k removed and resampled; a rollout is scored when its answer
parses), ``D(i)`` those of ``R(i)`` whose new step ``i`` differs in meaning from ``L[i]`` (similarity <
threshold, 0.8) and ``S(i)`` the rest of ``R(i)``, the definitions are thought-anchors' (interp-reasoning/
thought-anchors ``analyze_rollouts.py``, with its default arguments):

* **counterfactual importance** ``cf = acc(D(i)) - acc(R(i+1))`` (``calculate_counterfactual_importance_accuracy``
  l. 305-386, the diff at l. 383); negative when replacing the step by a different one loses accuracy;
* **resampling importance** ``acc(R(i+1)) - acc(R(i))`` (``calculate_resampling_importance_accuracy``, next minus
  current at l. 533): positive when keeping step i raises accuracy;
* **forced importance** ``facc(i+1) - facc(i)``: accuracy of answers sampled right after ``L[:k]`` + ``Answer:``
  (``calculate_forced_importance_accuracy`` l. 595-626, the diff at l. 622);
* their KLs, over the answer distributions (their ``--use_prob_true`` is ``default=False,
  action='store_false'``, l. 49 of the argument list, so the answer-distribution branch runs), smoothed by
  ``alpha = 1e-9`` over the union of answers (``calculate_kl_divergence`` l. 707-787, ``laplace_smooth=False``):
  ``cf_kl = KL(D(i) || R(i+1) + S(i))`` (the similar resamples pooled into the comparison set,
  ``use_similar_chunks=True``, l. 504), ``resampling_kl = KL(R(i) || R(i+1))`` (l. 539-593) and
  ``forced_kl = KL(F(i) || F(i+1))`` (l. 628-705);
* **the 0/None convention**: where thought-anchors returns ``0.0`` for want of data (an empty ``D(i)`` or
  ``R(i+1)``, an empty answer set, an accuracy with nothing scored), this toolkit returns ``None``: a missing
  estimate is not a zero. :func:`as_thought_anchors` maps a value to theirs (None -> 0.0);
* a descriptive interval for ``cf``: percentile bootstrap over the rollouts of both sets
  (:func:`loadbearing.stats.cluster_bootstrap_ci`, each rollout its own cluster; not calibrated, and none
  when every resample agrees, as with a handful of identical rollouts);
* the **anchor**: the step with the largest ``|cf|`` (ties: the earlier step); each step's rank by ``|cf|``.

Per question, its **resample accuracy** is the accuracy of the rollouts sampled from the question alone
(``R(0)``, unparsed counted as not correct: thought-anchors' problem accuracy, ``misc-experiments/
generate_cots.py`` l. 407-413), which ``--accuracy-band`` filters on (their ``selected_problems.json`` keeps
25-75%, README l. 24): on a question the model always gets right every rollout is correct and every
importance is 0 by construction (the ceiling).

Beside the paper's protocol: for each position it edits (``position_index(n, early|middle|late)``) the
edited step's ``cf``, its rank among the chain's steps, whether it is the anchor (against the chance ``1/m``
of m ranked steps), and the run's propagation rate at that line.
"""
from __future__ import annotations

import math
from collections import defaultdict
from typing import Any

from behavioural.causal.resample_matrix import ceiling, resample_accuracy, select_band, step_matrix
from behavioural.causal.resample_similarity import load_similarity
from loadbearing.questions.prompts import POSITION_FRACTIONS, position_index
from loadbearing.runs import Run, question_key_of
from loadbearing.stats import cluster_bootstrap_ci, format_rate, wilson_rate
from loadbearing.tables import render_table

DEFINITION = ("cf importance of step i = acc(rollouts from lines[:i] whose new step i differs in meaning) - "
              "acc(rollouts from lines[:i+1]); anchor = the step with the largest |cf|")


def _acc(rows: list[dict]) -> float | None:
    scored = [r for r in rows if r["correct"] is not None]
    return sum(bool(r["correct"]) for r in scored) / len(scored) if scored else None


def _sub(a: float | None, b: float | None) -> float | None:
    return None if a is None or b is None else a - b


#: thought-anchors' KL smoothing (calculate_kl_divergence, laplace_smooth=False)
ALPHA = 1e-9


def as_thought_anchors(x: float | None) -> float:
    """A value as thought-anchors reports it: their 0.0 where this toolkit has no estimate (None)."""
    return 0.0 if x is None else float(x)


def answer_kl(p_rows: list[dict], q_rows: list[dict], alpha: float = ALPHA) -> float | None:
    """KL(P || Q) of the parsed-answer distributions, ``(count + alpha) / (total + alpha * V)`` over the union of
    the V answers (thought-anchors ``calculate_kl_divergence``); None when either side has no parsed answer."""
    p = [r["parsed_answer"] for r in p_rows if r["parsed_answer"] is not None]
    q = [r["parsed_answer"] for r in q_rows if r["parsed_answer"] is not None]
    if not p or not q:
        return None
    support = sorted(set(p) | set(q))
    v = len(support)
    kl = 0.0
    for a in support:
        pa, qa = (p.count(a) + alpha) / (len(p) + alpha * v), (q.count(a) + alpha) / (len(q) + alpha * v)
        kl += pa * math.log(pa / qa)
    return max(0.0, kl)


def _cf_ci(d: list[dict], nxt: list[dict], n_boot: int, seed: int) -> list[float | None]:
    vals = [(0, r["correct"]) for r in d if r["correct"] is not None] + \
        [(1, r["correct"]) for r in nxt if r["correct"] is not None]
    if n_boot <= 0 or not vals:
        return [None, None]

    def stat(sample: list) -> float | None:
        a = [bool(c) for s, c in sample if s == 0]
        b = [bool(c) for s, c in sample if s == 1]
        return sum(a) / len(a) - sum(b) / len(b) if a and b else None

    return cluster_bootstrap_ci(list(range(len(vals))), vals, stat, n_boot=n_boot, seed=seed)["ci"]


def question_steps(rows: list[dict], n: int, *, n_boot: int, seed: int) -> list[dict[str, Any]]:
    """One entry per step ``i < n`` of one question (see the module docstring)."""
    roll: dict[int, list[dict]] = defaultdict(list)
    forced: dict[int, list[dict]] = defaultdict(list)
    for r in rows:
        (roll if r["kind"] == "rollout" else forced)[r["k"]].append(r)
    steps: list[dict[str, Any]] = []
    for i in range(n):
        here, nxt = roll.get(i, []), roll.get(i + 1, [])
        diff = [r for r in here if r.get("different")]
        similar = [r for r in here if r.get("different") is False]
        f_here, f_next = forced.get(i, []), forced.get(i + 1, [])
        cf = _sub(_acc(diff), _acc(nxt))
        original = next((r["original_step"] for r in here if r.get("original_step") is not None), None)
        steps.append({
            "step": i, "original": original, "n_rollouts": len(here), "n_different": len(diff),
            "different_fraction": len(diff) / len(here) if here else None,
            "acc_resampled": _acc(here), "acc_different": _acc(diff), "acc_next": _acc(nxt),
            "cf_importance": cf, "cf_ci": _cf_ci(diff, nxt, n_boot, seed + i) if cf is not None else [None, None],
            "resampling_importance": _sub(_acc(nxt), _acc(here)),
            "kl_importance": answer_kl(diff, nxt + similar), "resampling_kl": answer_kl(here, nxt),
            "forced_acc": _acc(f_here), "forced_acc_next": _acc(f_next),
            "forced_importance": _sub(_acc(f_next), _acc(f_here)), "forced_kl": answer_kl(f_here, f_next),
            "examples": [r["new_step"] for r in diff[:3]],
        })
    ranked = sorted((s for s in steps if s["cf_importance"] is not None),
                    key=lambda s: (-abs(float(s["cf_importance"])), int(s["step"])))
    for rank, s in enumerate(ranked, 1):
        s["rank"] = rank
    for s in steps:
        s.setdefault("rank", None)
    return steps


def _propagation(run: Run) -> dict[tuple[str, int], tuple[int, int]]:
    """(question key, edited line) -> (C, parseable) over the run's perturbed continuations."""
    out: dict[tuple[str, int], list[int]] = defaultdict(lambda: [0, 0])
    for c in run.continuations("perturbed"):
        if c.label is None:
            continue
        cell = out[(question_key_of(c), c.line_index)]
        cell[0] += c.label == "C"
        cell[1] += 1
    return {k: (v[0], v[1]) for k, v in out.items()}


def _positions(run: Run) -> tuple[str, ...]:
    got = (run.manifest.get("settings") or {}).get("positions") or list(POSITION_FRACTIONS)
    return tuple(p for p in got if p in POSITION_FRACTIONS)


def summarise(config: Any, rows: list[dict], chains: list, run: Run) -> dict[str, Any]:
    by_q: dict[str, list[dict]] = defaultdict(list)
    for r in rows:
        by_q[r["question_id"]].append(r)

    prop = _propagation(run)
    positions = _positions(run)
    lines_of = {c.baseline.question_id: c.trace.lines for c in chains}
    sim = load_similarity(config.similarity)
    questions = []
    for rs in by_q.values():
        r0, n = rs[0], rs[0]["n_lines"]
        steps = question_steps(rs, n, n_boot=config.n_boot, seed=config.seed)
        anchor = next((s["step"] for s in steps if s["rank"] == 1), None)
        edited = []
        for p in positions:
            if n < 2:
                continue
            i = position_index(n, p)
            kc = prop.get((r0["question_key"], i))
            n_ranked = sum(s["rank"] is not None for s in steps)
            edited.append({"position": p, "step": i, "cf_importance": steps[i]["cf_importance"],
                           "rank": steps[i]["rank"], "n_ranked": n_ranked, "is_anchor": anchor == i,
                           "propagation": None if not kc or not kc[1] else kc[0] / kc[1],
                           "n_perturbed_scored": kc[1] if kc else 0})
        questions.append({k: r0[k] for k in ("question_id", "question_key", "dataset", "task", "difficulty", "n_lines")}
                         | {"steps": steps, "anchor": anchor, "edited": edited,
                            "full_chain_rollout_acc": _acc([r for r in rs if r["kind"] == "rollout" and r["k"] == n]),
                            "resample_accuracy": resample_accuracy(rs),
                            "step_matrix": step_matrix(rs, lines_of.get(r0["question_id"], ()), sim, config.threshold)})
    band = getattr(config, "accuracy_band", None)
    all_questions = questions
    questions = select_band(questions, band)
    kept = {q["question_id"] for q in questions}
    for q in all_questions:
        q["in_band"] = q["question_id"] in kept
    scored = [r for r in rows if r["correct"] is not None]
    roll = [r for r in rows if r["kind"] == "rollout" and r.get("different") is not None]
    return {
        "definition": DEFINITION,
        "sampling": config.sampling.to_dict(), "rollouts_per_prefix": config.rollouts,
        "similarity": {"method": config.similarity, "threshold": config.threshold},
        "conventions": "None where thought-anchors returns 0.0 (no data); resampling importance = next minus current "
                       "(theirs); KLs over answer distributions with 1e-9 smoothing (theirs)",
        "accuracy_band": None if band is None else list(band), "ceiling": ceiling(all_questions),
        "n_in_band": len(questions),
        "n_sampled_questions": len(all_questions), "n_rollouts": len(rows), "n_scored": len(scored),
        "different_fraction": sum(bool(r["different"]) for r in roll) / len(roll) if roll else None,
        "by_position": _by_position(questions, n_boot=config.n_boot, seed=config.seed),
        "by": _by_group(questions),
        "questions": all_questions,
    }


def _by_position(questions: list[dict], *, n_boot: int, seed: int) -> dict[str, dict[str, Any]]:
    """Pooled over questions (one value each): is the edited step the one resampling finds important?"""
    out: dict[str, dict[str, Any]] = {}
    cells: dict[str, list[dict]] = defaultdict(list)
    for q in questions:
        for e in q["edited"]:
            cells[e["position"]].append(e | {"key": q["question_key"]})
    for p, es in cells.items():
        ranked = [e for e in es if e["rank"] is not None]
        cf = [e for e in es if e["cf_importance"] is not None]
        mean_cf = cluster_bootstrap_ci([e["key"] for e in cf], [e["cf_importance"] for e in cf],
                                       lambda v: sum(v) / len(v) if v else None, n_boot=n_boot, seed=seed)
        out[p] = {"n_questions": len(es), "mean_cf_importance": mean_cf["estimate"], "mean_cf_ci": mean_cf["ci"],
                  "is_anchor": wilson_rate(sum(e["is_anchor"] for e in ranked), len(ranked),
                                           n_questions=len(ranked)).to_dict(),
                  "chance_anchor": sum(1 / e["n_ranked"] for e in ranked) / len(ranked) if ranked else None,
                  "mean_rank_fraction": (sum((e["rank"] - 1) / max(e["n_ranked"] - 1, 1) for e in ranked) / len(ranked)
                                         if ranked else None),
                  "mean_propagation": _mean([e["propagation"] for e in es])}
    return out


def _by_group(questions: list[dict]) -> dict[str, dict[str, dict[str, Any]]]:
    """Per dataset, task and level: the mean anchor strength (max |cf| per question) and how often the anchor is
    a step the paper edits (for the report's side-by-side table)."""
    out: dict[str, dict[str, dict[str, Any]]] = {}
    for g in ("dataset", "task", "difficulty"):
        vals = sorted({str(q[g]) for q in questions})
        if len(vals) < 2 and g != "dataset":
            continue
        out[g] = {}
        for v in vals:
            qs = [q for q in questions if str(q[g]) == v]
            strength = [max(abs(st["cf_importance"]) for st in q["steps"] if st["cf_importance"] is not None)
                        for q in qs if any(st["cf_importance"] is not None for st in q["steps"])]
            with_anchor = [q for q in qs if q["anchor"] is not None]
            out[g][v] = {"n_questions": len(qs), "mean_anchor_abs_cf": _mean(list(strength)),
                         "anchor_is_edited": wilson_rate(
                             sum(any(e["is_anchor"] for e in q["edited"]) for q in with_anchor), len(with_anchor),
                             n_questions=len(with_anchor)).to_dict()}
    return out


def _mean(vals: list) -> float | None:
    v = [x for x in vals if x is not None]
    return sum(v) / len(v) if v else None


def _f(x: float | None, ci: list | None = None, digits: int = 2) -> str:
    if x is None:
        return "n/a"
    s = f"{x:+.{digits}f}"
    if ci and ci[0] is not None:
        s += f" [{ci[0]:+.{digits}f}, {ci[1]:+.{digits}f}]"
    return s


def _u(x: float | None) -> str:
    return "n/a" if x is None else f"{x:.2f}"


def _line(text: str | None, width: int = 28) -> str:
    t = (text or "").replace("|", "/")
    return t if len(t) <= width else t[:width - 1] + "…"


def format_summary(summary: dict[str, Any], style: str = "text") -> str:
    """The summary as tables (``style`` "text", "md" or "html")."""
    fs = "md" if style == "md" else "text"
    s = summary["sampling"]
    head = (f"Resampling importance (thought anchors): {summary['rollouts_per_prefix']} rollouts per prefix, "
            f"T={s['temperature']}, top-p={s['top_p']}, seed {s['seed']}; similarity {summary['similarity']['method']} "
            f"< {summary['similarity']['threshold']} = a different step; {summary['n_sampled_questions']} questions, "
            f"{summary['n_rollouts']} rollouts ({summary['n_scored']} scored). {summary['definition']}.")
    rows = []
    for q in summary["questions"]:
        for st in q["steps"]:
            rows.append([q["question_id"], st["step"], _line(st["original"]), _f(st["acc_different"]),
                         _f(st["acc_next"]), _f(st["cf_importance"], st["cf_ci"]), _f(st["kl_importance"]),
                         _f(st["resampling_importance"]), _f(st["forced_importance"]), f"{st['n_different']}/{st['n_rollouts']}",
                         "" if st["rank"] is None else st["rank"], "*" if q["anchor"] == st["step"] else ""])
    c = summary.get("ceiling") or {}
    if c:
        band = summary.get("accuracy_band")
        head += (f" Resample accuracy (rollouts from the question alone): mean {_u(c.get('mean_resample_accuracy'))}, "
                 f"{c.get('at_ceiling', 0)} of {c.get('n_questions', 0)} questions at the ceiling (every rollout right: "
                 "importance is 0 there by construction), " + (f"{summary.get('n_in_band')} kept in the band "
                 f"{band[0]:g}-{band[1]:g} (thought-anchors keeps 0.25-0.75)." if band else "no band (all kept)."))
    out = [head, render_table(["question", "step", "original", "acc diff", "acc next",
                               "cf [rollout bootstrap, descriptive]", "KL", "resampling",
                               "forced", "different", "rank", "anchor"], rows, style)]
    pos = summary["by_position"]
    if pos:
        prow = [[p, v["n_questions"], _f(v["mean_cf_importance"], v["mean_cf_ci"]), format_rate(v["is_anchor"], fs),
                 "n/a" if v["chance_anchor"] is None else f"{100 * v['chance_anchor']:.1f}%",
                 _u(v["mean_rank_fraction"]), _u(v["mean_propagation"])] for p, v in pos.items()]
        out.append("The steps the paper edits: their importance, whether resampling makes them the anchor (vs chance), "
                   "their rank (0 = most important, 1 = least), and the run's propagation there")
        out.append(render_table(["position", "questions", "mean cf [bootstrap, descriptive]", "is anchor", "chance", "rank (0-1)",
                                 "propagation"], prow, style))
    return "\n\n".join(out) if style != "text" else "\n".join(out)
