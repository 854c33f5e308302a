"""python -m steering.sweep RUN_DIR --directions RUN_DIR/probes  (this module: the sweep's statistics)

From ``generations.jsonl`` to ``summary.json``: per probe setting, the fraction of type-C cases moved to a
correct answer, next to its matched control, tested and bounded at the level of questions.

* **Moved-of-all** ranks settings: a steered generation whose answer does not parse counts as *not moved*
  (coverage, the parsed fraction, is printed beside it). ``moved`` (parsed only) is kept for reference.
* **Paired difference, per question.** For each C case, ``a`` = moved under the probe setting, ``b`` = the
  mean moved over its control generations (the random seeds of the same layer/k/alpha, else the alpha-0
  rerun). Each question's difference is the mean of ``a - b`` over its cases; the estimate is the mean
  over questions.
* **Test:** a two-sided sign-flip permutation test on the per-question differences (exact up to 16
  non-zero questions, else 20,000 seeded flips); Holm (the verdict) and Benjamini-Hochberg adjust across the
  grid.
* **Interval:** a t-interval over the per-question differences, computed with one pseudo-question at +1
  and one at -1 added (an Agresti-Caffo-style adjustment, so that 20 questions that all show 0 give
  [-13.7, +13.7] points, not a zero-width interval).
* **Verdict**, three outcomes: ``effect`` (some setting beats its control, Holm p < level, estimate > 0);
  ``null`` (no effect, and every setting's upper 95% bound lies below the smallest effect of interest,
  ``sesoi``, default 10 points); ``inconclusive`` (neither). ``insufficient_data`` when no C case was
  steered. The strongest setting's minimum detectable effect (80% power at the Holm-worst level) and the
  number of questions a null would need are printed with it.
"""
from __future__ import annotations

import itertools
import math
from collections import defaultdict
from collections.abc import Sequence
from typing import Any

import numpy as np

from loadbearing.runs import question_key_of
from loadbearing.tables import render_table
from steering.grid import Setting

VERDICTS = ("effect", "null", "inconclusive", "insufficient_data")
POWER = 0.8
EXACT_MAX = 16
N_FLIPS = 20_000


# ------------------------------------------------------------------------------------------------ rates


def _rate(hits: Sequence[bool], groups: Sequence[str]) -> dict[str, Any]:
    """The stats stage's rate: pooled k/n, interval bootstrapped over questions (:func:`clustered_rate`)."""
    from loadbearing.stats import clustered_rate

    return clustered_rate(list(hits), list(groups)).to_dict()


def fmt_rate(r: dict[str, Any] | None, style: str = "text") -> str:
    """A rate through the one formatter, :func:`loadbearing.stats.format_rate`."""
    from loadbearing.stats import format_rate

    return format_rate(r, style=style) if r else "n/a"


def _pct(x: float | None) -> str:
    return "n/a" if x is None else f"{100 * x:.1f}%"


def _pp(x: float | None) -> str:
    return "n/a" if x is None else f"{100 * x:+.1f}"


# ------------------------------------------------------------------------------------------------ tests


def sign_flip_p(diffs: Sequence[float], *, seed: int = 0, n_flips: int = N_FLIPS) -> float:
    """Two-sided sign-flip permutation p-value of the mean of ``diffs`` (per-question differences)."""
    d = np.asarray([x for x in diffs if x != 0], dtype=np.float64)
    if d.size == 0:
        return 1.0
    obs = abs(d.sum())
    if d.size <= EXACT_MAX:
        signs = np.array(list(itertools.product((1.0, -1.0), repeat=d.size)))  # [2^n, n]
        stats = np.abs(signs @ d)
        return float(np.mean(stats >= obs - 1e-12))
    rng = np.random.default_rng(seed)
    signs = rng.choice((1.0, -1.0), size=(n_flips, d.size))
    stats = np.abs(signs @ d)
    return float((np.sum(stats >= obs - 1e-12) + 1) / (n_flips + 1))


def adjusted_interval(diffs: Sequence[float], level: float = 0.95) -> dict[str, Any]:
    """Mean of ``diffs`` with the pseudo-question t-interval (see the module docstring)."""
    from scipy.stats import t as t_dist

    d = np.asarray(diffs, dtype=np.float64)
    if d.size == 0:
        return {"estimate": None, "ci": [None, None], "sd": None, "n_questions": 0}
    aug = np.concatenate([d, [1.0, -1.0]])
    sd = float(aug.std(ddof=1))
    se = sd / math.sqrt(aug.size)
    q = float(t_dist.ppf(1 - (1 - level) / 2, aug.size - 1))
    m = float(aug.mean())
    return {"estimate": float(d.mean()), "ci": [max(-1.0, m - q * se), min(1.0, m + q * se)], "sd": sd,
            "n_questions": int(d.size)}


def power_numbers(sd: float | None, n_q: int, n_cases: int, *, level: float, n_tests: int,
                  sesoi: float) -> dict[str, Any]:
    """Minimum detectable effect (80% power, two-sided at the Holm-worst level ``level / n_tests``) and the
    questions (and cases, at this sample's cases per question) a null would need (upper 95% bound below
    ``sesoi`` with 80% power when the true difference is 0), from the per-question spread ``sd``."""
    from scipy.stats import norm

    if sd is None or n_q == 0:
        return {"mde": None, "n_questions_for_null": None, "n_cases_for_null": None}
    z_test = float(norm.ppf(1 - level / max(n_tests, 1) / 2))
    z_pow = float(norm.ppf(POWER))
    z_ci = float(norm.ppf(0.975))
    mde = (z_test + z_pow) * sd / math.sqrt(n_q)
    nq = int(math.ceil(((z_ci + z_pow) * sd / sesoi) ** 2))
    per_q = n_cases / n_q if n_q else 1.0
    return {"mde": float(min(mde, 1.0)), "n_questions_for_null": nq, "n_cases_for_null": int(math.ceil(nq * per_q))}


# ------------------------------------------------------------------------------------------------ summary


def _moved(r: dict[str, Any]) -> float:
    """Moved-of-all: 1 when the steered C case now answers correctly; unparsed or wrong -> 0."""
    return 1.0 if r.get("correct") is True else 0.0


def _q(r: dict[str, Any]) -> str:
    return question_key_of(r)


def _setting_stats(rs: list[dict[str, Any]]) -> dict[str, Any]:
    c = [r for r in rs if r["case_label"] == "C"]
    n = [r for r in rs if r["case_label"] == "non-C"]
    c_parsed = [r for r in c if r["correct"] is not None]
    n_parsed = [r for r in n if r["correct"] is not None]
    return {"moved_of_all": _rate([r["correct"] is True for r in c], [_q(r) for r in c]),
            "moved": _rate([r["correct"] is True for r in c_parsed], [_q(r) for r in c_parsed]),
            "coverage_c": _rate([r["correct"] is not None for r in c], [_q(r) for r in c]),
            "broken": _rate([r["correct"] is False for r in n_parsed], [_q(r) for r in n_parsed]),
            "coverage_non_c": _rate([r["correct"] is not None for r in n], [_q(r) for r in n]),
            "n_generations": len(rs)}


def summarize_records(recs: list[dict[str, Any]], grid: list[Setting], *, sesoi: float = 0.10,
                      level: float = 0.05, seed: int = 0) -> dict[str, Any]:
    """The statistics part of ``summary.json`` from the generation records of one sweep."""
    from statsmodels.stats.multitest import multipletests

    by_setting: dict[str, dict[str, dict]] = defaultdict(dict)
    for r in recs:
        by_setting[r["setting"]][r["case_id"]] = r  # one per (setting, case); the writer never duplicates

    baseline = None
    if any(s.basis == "none" for s in grid):
        rs = list(by_setting.get("none|alpha0", {}).values())
        st = _setting_stats(rs)
        c = [r for r in rs if r["case_label"] == "C"]
        nn = [r for r in rs if r["case_label"] == "non-C"]
        baseline = dict(st, key="none|alpha0",
                        reproduced_c=_rate([r["correct"] is False for r in c], [_q(r) for r in c]),
                        reproduced_non_c=_rate([r["correct"] is True for r in nn], [_q(r) for r in nn]))

    out: list[dict[str, Any]] = []
    for s in (g for g in grid if g.basis == "probe"):
        rs = list(by_setting.get(s.key, {}).values())
        st = _setting_stats(rs)
        ctrl_keys = [g.key for g in grid if g.basis == "random" and (g.layer, g.k, g.alpha_rel) == (s.layer, s.k, s.alpha_rel)]
        kind = "random" if ctrl_keys else ("none" if baseline else None)
        if not ctrl_keys and baseline:
            ctrl_keys = ["none|alpha0"]
        ctrl_recs = [r for k in ctrl_keys for r in by_setting.get(k, {}).values()]
        ctrl = _setting_stats(ctrl_recs)
        per_q: dict[str, list[float]] = defaultdict(list)
        for cid, r in by_setting.get(s.key, {}).items():
            if r["case_label"] != "C":
                continue
            vals = [_moved(by_setting[k][cid]) for k in ctrl_keys if cid in by_setting.get(k, {})]
            if vals:
                per_q[_q(r)].append(_moved(r) - float(np.mean(vals)))
        diffs = [float(np.mean(v)) for _, v in sorted(per_q.items())]
        n_cases = sum(len(v) for v in per_q.values())
        diff = dict(adjusted_interval(diffs), n_cases=n_cases,
                    method="mean over questions of per-question mean (moved_probe - mean moved_control), moved-of-all; "
                           "t-interval with one pseudo-question at +1 and one at -1") if kind else None
        p = sign_flip_p(diffs, seed=seed) if kind and diffs else None
        out.append(dict(
            key=s.key, layer=s.layer, k=s.k, alpha_rel=s.alpha_rel, alpha=s.alpha, **st,
            control={"kind": kind, "keys": ctrl_keys, "moved_of_all": ctrl["moved_of_all"], "moved": ctrl["moved"],
                     "coverage_c": ctrl["coverage_c"], "broken": ctrl["broken"]},
            difference=diff, p_value=p,
            test="two-sided sign-flip permutation test on per-question differences (exact up to 16 non-zero questions)",
        ))
    idx = [i for i, d in enumerate(out) if d["p_value"] is not None]
    for method, name in (("holm", "p_holm"), ("fdr_bh", "p_bh")):
        adj = multipletests([out[i]["p_value"] for i in idx], method=method)[1] if idx else []
        for d in out:
            d[name] = None
        for i, a in zip(idx, adj):
            out[i][name] = float(a)
    for d in out:
        diff = d["difference"] or {}
        est, hi = diff.get("estimate"), (diff.get("ci") or [None, None])[1]
        d["beats_control"] = bool(d["p_holm"] is not None and d["p_holm"] < level and est is not None and est > 0)
        d["excludes_sesoi"] = bool(hi is not None and hi < sesoi)
        d.update(power_numbers(diff.get("sd"), diff.get("n_questions") or 0, diff.get("n_cases") or 0, level=level,
                               n_tests=len(idx), sesoi=sesoi))
        d["strongest"] = False
    ranked = [d for d in out if d["moved_of_all"]["n"]]
    strongest = None
    if ranked:
        strongest = max(ranked, key=lambda d: (d["moved_of_all"]["rate"],
                                               -(d["p_value"] if d["p_value"] is not None else 1.0)))
        strongest["strongest"] = True
    c_recs = [r for r in recs if r["case_label"] == "C"]
    n_c = len({r["case_id"] for r in c_recs})
    if strongest is None or n_c == 0:
        code = "insufficient_data"
    elif any(d["beats_control"] for d in out):
        code = "effect"
    elif all(d["excludes_sesoi"] for d in out if d["control"]["kind"]) and any(d["control"]["kind"] for d in out):
        code = "null"
    else:
        code = "inconclusive"
    summary = {
        "status": "ok" if code != "insufficient_data" else "insufficient_data",
        "verdict_code": code,
        "sesoi": sesoi,
        "level": level,
        "n_c_cases": n_c,
        "n_c_questions": len({_q(r) for r in c_recs}),
        "n_non_c_cases": len({r["case_id"] for r in recs if r["case_label"] == "non-C"}),
        "n_generations": len(recs),
        "baseline": baseline,
        "strongest": strongest["key"] if strongest else None,
        "multiple_comparisons": {"method": "holm (verdict) and fdr_bh", "n_tests": len(idx), "level": level},
        "settings": out,
    }
    summary["verdict"] = verdict_text(summary)
    return summary


# ------------------------------------------------------------------------------------------------ text


def _setting_str(d: dict[str, Any]) -> str:
    diff = d["difference"] or {}
    est, ci = diff.get("estimate"), diff.get("ci") or [None, None]
    s = (f"L{d['layer']} k={d['k']} alpha={d['alpha_rel']:g}x|resid| moved {fmt_rate(d['moved_of_all'])} of all C "
         f"(coverage {_pct(d['coverage_c']['rate'])})")
    if d["control"]["kind"]:
        s += f" vs {d['control']['kind']} control {fmt_rate(d['control']['moved_of_all'])}"
    if est is not None:
        s += (f", difference {_pp(est)} pp (95% CI {_pp(ci[0])} to {_pp(ci[1])} pp over "
              f"{diff.get('n_questions')} questions)")
    if d["p_holm"] is not None:
        s += f", permutation p={d['p_value']:.3g}, Holm p={d['p_holm']:.3g}"
    return s


def verdict_text(summary: dict[str, Any]) -> str:
    """The one-line verdict (with the strongest setting's MDE and the size a null would need)."""
    code = summary["verdict_code"]
    settings = summary["settings"]
    sesoi_pp = 100 * summary["sesoi"]
    if code == "insufficient_data":
        return ("insufficient_data: no steered generation of a type-C case was recorded "
                f"({len(settings)} settings); check the run's C cases and max_new_tokens")
    best = next(d for d in settings if d["strongest"])
    nq = summary["n_c_questions"]
    power = ""
    if best.get("mde") is not None:
        power = (f"; this sample ({nq} questions) detects about {100 * best['mde']:.0f} pp with 80% power; a null at "
                 f"{sesoi_pp:.0f} pp would need about {best['n_questions_for_null']} questions "
                 f"({best['n_cases_for_null']} cases)")
    if code == "effect":
        winners = [d for d in settings if d["beats_control"]]
        top = max(winners, key=lambda d: d["moved_of_all"]["rate"])
        return (f"effect: {len(winners)}/{len(settings)} settings beat their control (Holm p < {summary['level']}); "
                f"strongest: {_setting_str(top)}")
    if code == "null":
        return (f"null: no setting beats its control and every upper 95% bound is below {sesoi_pp:.0f} pp; "
                f"strongest: {_setting_str(best)}{power}")
    n_ex = sum(1 for d in settings if d["excludes_sesoi"])
    return (f"inconclusive: no setting beats its control (Holm p < {summary['level']}), but {len(settings) - n_ex}/"
            f"{len(settings)} intervals still reach {sesoi_pp:.0f} pp; strongest: {_setting_str(best)}{power}")


def _short(r: dict[str, Any] | None) -> str:
    if not r or not r["n"]:
        return "0/0"
    return f"{r['k']}/{r['n']} {_pct(r['rate'])}"


def _f3(x: float | None) -> str:
    return "n/a" if x is None else f"{x:.3g}"


def _rows(summary: dict[str, Any]) -> list[list[str]]:
    rows = []
    b = summary.get("baseline")
    if b:
        rows.append(["alpha=0 rerun", _short(b["moved_of_all"]), _pct(b["coverage_c"]["rate"]), "", "", "", "",
                     _short(b["broken"])])
    for d in summary["settings"]:
        diff = d["difference"] or {}
        est, ci = diff.get("estimate"), diff.get("ci") or [None, None]
        ds = "n/a" if est is None else f"{_pp(est)} [{_pp(ci[0])},{_pp(ci[1])}]"
        rows.append([d["key"] + (" *" if d["strongest"] else ""), _short(d["moved_of_all"]),
                     _pct(d["coverage_c"]["rate"]), _pct(d["control"]["moved_of_all"]["rate"]), ds,
                     _f3(d["p_value"]), _f3(d["p_holm"]), _short(d["broken"])])
    return rows


HEAD = ["setting", "moved C (of all)", "coverage", "control", "diff pp [95% CI]", "p", "Holm", "broken non-C"]
FOOT = ("* strongest setting (ranked by moved-of-all: unparsed answers count as not moved); coverage = parsed "
        "steered answers; diff = probe minus matched control, per question then averaged, CI over questions")


def format_table(summary: dict[str, Any], style: str = "text") -> str:
    """The grid as a text or markdown table."""
    rows = _rows(summary)
    if style == "md":
        return "\n".join([render_table(HEAD, rows, style="md"), "", FOOT])
    widths = [max(len(h), *(len(r[i]) for r in rows)) if rows else len(h) for i, h in enumerate(HEAD)]
    fmt = lambda r: "  ".join(c.ljust(w) if i == 0 else c.rjust(w) for i, (c, w) in enumerate(zip(r, widths)))  # noqa: E731
    lines = [fmt(HEAD), "-" * (sum(widths) + 2 * (len(widths) - 1))] + [fmt(r) for r in rows]
    return "\n".join(lines + [FOOT])


def format_summary(summary: dict[str, Any], style: str = "text") -> str:
    """The sweep's summary as text or markdown: cases and split, the grid table, the verdict."""
    if style not in ("text", "md"):
        raise ValueError(f"style must be 'text' or 'md', got {style!r}")
    cases = summary.get("cases") or {}
    split = summary.get("split") or {}
    head = (f"steered {summary.get('n_c_cases', 0)} type-C cases from {summary.get('n_c_questions', 0)} questions "
            f"(+{summary.get('n_non_c_cases', 0)} non-C), {summary.get('n_generations', 0)} generations")
    if cases:
        head += (f"; {cases.get('n_c_available', '?')} distinct C inputs from "
                 f"{cases.get('n_c_questions_available', '?')} questions were eligible "
                 f"(at most {cases.get('per_question')} per question, seed {cases.get('seed')})")
    if split:
        head += f"; directions/steered question split: {split.get('note', split.get('source'))}"
    if not summary.get("settings"):
        body = ""
    else:
        body = format_table(summary, style)
    verdict = summary.get("verdict", "")
    if style == "md":
        return "\n\n".join(x for x in (head + ".", body, f"**Verdict.** {verdict}") if x)
    return "\n".join(x for x in (head, body, verdict) if x)


__all__ = ["VERDICTS", "adjusted_interval", "fmt_rate", "format_summary", "format_table", "power_numbers",
           "sign_flip_p", "summarize_records", "verdict_text"]
