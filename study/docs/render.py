"""``docs/results.md`` (and the README's headline block) from the numbers of :func:`study.docs.extract.extract`.

    from study.docs.render import render_results
    text = render_results(json.loads(Path("docs/results/demo.json").read_text()))

Deterministic: the same numbers give the same bytes, so ``tests/test_docs_results.py`` re-renders the stored
numbers and requires the committed page to be equal. Every number on the page comes from the stored file,
and every section names the command that produced it.
"""
from __future__ import annotations

from typing import Any

from behavioural.causal import paraphrase, resample
from loadbearing.stats import FEW_CLUSTERS_NOTE, format_rate
from study.report.causal import table_markdown

#: what each edit strategy does (the protocol's wording, docs/protocol.md)
STRATEGY_NOTE = {"arithmetic": "first number n -> 2n+3", "arithmetic_change": "the line's result moved by a seeded offset",
                 "contradiction": "\"The following claim is false:\" after the step label"}

DEMO_COMMAND = "python -m study --output-dir DIR"
CAUSAL_STAGES = ("early_answer", "filler", "paraphrase", "resample")
CAUSAL_COMMAND = f"python -m study --resume DIR --stages {','.join(CAUSAL_STAGES)}"
HEADER = ("<!-- Written by `make docs` (python -m study.docs RUN_DIR) from docs/results/demo.json; do not edit: "
          "tests/test_docs_results.py re-renders it. -->")


def _r(d: Any) -> str:
    return format_rate(d, style="md") if d else "n/a"


def _pp(v: float | None) -> str:
    return "n/a" if v is None else f"{100 * v:+.1f} pp"


def _ci_pp(ci: Any) -> str:
    lo, hi = (list(ci or []) + [None, None])[:2]
    return "[n/a]" if lo is None or hi is None else f"[{100 * lo:+.1f}, {100 * hi:+.1f}]"


def _num(v: Any, digits: int = 2) -> str:
    return "n/a" if v is None else f"{v:.{digits}f}"


def _count(n: int) -> str:
    return f"{n:,}"


# ------------------------------------------------------------------------------------------ the demo table
def _units(b: dict) -> str:
    g = b.get("generations") or {}
    cp = b.get("collapsed_positions") or {}
    pairs = ", ".join(f"`{k}`" for k in (cp.get("pairs") or {}))
    merged = (f"; in {cp['questions']} of {cp['of']} eligible questions two positions edit the same line ({pairs}), "
              "so they are one generation and one level everywhere a rate is grouped or a model is fitted"
              if cp.get("questions") else "")
    return (f"{_count(b['questions'])} questions ({_count(b.get('distinct_questions', b['questions']))} distinct texts), "
            f"{_count(b['continuations'])} distinct generations ({_count(g.get('perturbed', 0))} perturbed, "
            f"{_count(g.get('control', 0))} controls) filling {_count(g.get('cells', 0))} (strategy, position) cells"
            f"{merged}; one control serves every strategy")


def _baseline(b: dict) -> str:
    levels = "; ".join(f"{lvl} {r['accuracy']['k']}/{r['accuracy']['n']}"
                       for lvl, r in (b.get("baseline_by_level") or {}).items())
    cov = b.get("baseline_coverage") or {}
    cov_s = f"{100 * cov['k'] / cov['n']:.0f}%" if cov.get("n") else "n/a"
    return (f"{_r(b['baseline_accuracy'])} correct, the paper's definition (unparseable = wrong; coverage {cov_s})"
            + (f": {levels}" if levels else "") + f"; {b['eligible']} eligible (correct with >= 3 reasoning lines)")


def _by(b: dict, key: str, note: dict[str, str] | None = None) -> str:
    parts = []
    for name, r in ((b.get("by") or {}).get(key) or {}).items():
        label = f"`{name}`" + (f" ({note[name]})" if note and name in note else "")
        parts.append(f"{label} {_r(r.get('propagation'))}")
    return "; ".join(parts) or "n/a"


def _difficulty(g: dict | None) -> str:
    per = ((g or {}).get("difficulty_test") or {}).get("per_model") or {}
    if not per:
        return ""
    t = next(iter(per.values()))
    if t.get("slope") is None:
        return f"; difficulty test: {t.get('status', 'not run')}"
    lo, hi = (t.get("ci95") or [None, None])[:2]
    return (f"; difficulty test over the {t.get('n_cells')} cells: slope {t['slope']:+.2f} [{_num(lo)}, {_num(hi)}], "
            f"p = {_num(t.get('p'))} ({t.get('test')})")


def _paired(b: dict) -> str:
    pd = (b.get("overall") or {}).get("paired_difference") or {}
    if pd.get("estimate") is None:
        return "n/a"
    return (f"{_pp(pd['estimate'])} {_ci_pp(pd.get('ci'))} over {pd.get('n_clusters')} questions "
            f"({pd.get('method')})")


def _labels(lab: dict | None) -> str:
    if not lab:
        return "n/a"
    p = lab.get("perturbed") or {}
    c = p.get("counts") or {}
    return (f"A {c.get('A', 0)}, B {c.get('B', 0)}, C {c.get('C', 0)}, unparseable {c.get('null', 0)}; B among correct "
            f"{_r(p.get('B_among_correct_labelled'))} (labeller `{lab.get('final_labeller')}`)")


def _pct(r: dict | None) -> str:
    return "n/a" if not r or not r.get("n") else f"{100 * r['k'] / r['n']:.1f}%"


def _gain(g: dict) -> str:
    return f"{_pp(g.get('value'))} {_ci_pp([g.get('lo'), g.get('hi')])}"


def _probe(p: dict | None) -> tuple[str, str]:
    if not p or not p.get("headline"):
        return "probe", "not run"
    d = p.get("data") or {}
    heads = p["headline"]
    meta = p.get("metadata_baseline") or {}
    chosen = meta.get("chosen_counts") or {}
    lead = "logistic" if "logistic" in heads else next(iter(heads))
    h = heads[lead]
    others = "; ".join(f"{k.replace('_', '-')} {_pct(v.get('accuracy'))}, gain {_gain(v.get('gain_over_metadata') or {})}"
                       for k, v in heads.items() if k != lead)
    won = ", ".join(f"the {k} won in {c} of {sum(chosen.values())} folds" for k, c in chosen.items())
    text = (f"{lead} {_r(h.get('accuracy'))}; **gain over the metadata-only baseline "
            f"{_gain(h.get('gain_over_metadata') or {})}**: the baseline ({meta.get('method')}; {won}) scores "
            f"{_r(meta.get('accuracy'))}; gain p = {_num(h.get('gain_p_value'))} (question-level label exchanges, the "
            f"baseline and the nested layer choice refitted on each permutation); shuffled-label p = "
            f"{_num(h.get('control_p_value'))}" + (f"; {others}" if others else ""))
    return f"probe, C vs non-C, nested grouped CV ({d.get('n_rows')} rows, {d.get('n_questions')} q)", text


def _transfer(p: dict | None) -> str:
    t = (p or {}).get("transfer") or {}
    rows: list[dict[str, Any]] = t.get("logistic") or next(iter(t.values()), [])
    if not rows:
        return "not run"
    return "logistic, trained without one strategy and scored on it: " + "; ".join(
        f"`{e['held_out']}` {_pct(e.get('transfer'))} against {_pct(e.get('in_distribution'))} in distribution"
        for e in rows)


def _steering(n: dict[str, Any]) -> tuple[str, str]:
    s = n.get("steering")
    v = next((v for v in n.get("verdicts") or [] if v.get("key") == "steering"), None)
    if not s or not v:
        return "steering", "not run"
    sets = s.get("settings") or []
    layers = sorted({d["layer"] for d in sets if d.get("layer") is not None})
    ks = sorted({d["k"] for d in sets if d.get("k") is not None})
    alphas = sorted({d["alpha_rel"] for d in sets if d.get("alpha_rel") is not None})
    split = s.get("split") or {}
    label = (f"steering ({s.get('n_c_cases')} C cases from {s.get('n_c_questions')} held-out questions; layer "
             f"{', '.join(map(str, layers))}, chosen on the {split.get('n_fit_questions')} direction-fitting questions "
             f"only; k = {', '.join(map(str, ks))}; alpha {', '.join(f'{a:g}' for a in alphas)} x residual norm; "
             f"{s.get('n_random_directions')} distinct random directions)")
    return label, f"**{v['answer']}**: {v['detail']}"


def demo_rows(n: dict[str, Any]) -> list[tuple[str, str]]:
    """The (stage, result) rows of the demo table."""
    b = n["behaviour"]
    ov = b.get("overall") or {}
    rows = [("units", _units(b)), ("baseline", _baseline(b)),
            ("propagation, pooled", _r(ov.get("propagation"))),
            ("by strategy", _by(b, "strategy", STRATEGY_NOTE)), ("by position", _by(b, "position")),
            ("by level", _by(b, "task") + _difficulty(n.get("gradient"))),
            ("control error (unedited prefix, same cut)", _r(ov.get("control_error"))),
            ("perturbed - control, paired by question and line", _paired(b)),
            ("labels (rule)", _labels(n.get("labels"))), _probe(n.get("probes")),
            ("probe transfer (leave one strategy out)", _transfer(n.get("probes"))), _steering(n)]
    return rows


def _verdict_line(v: dict) -> str:
    nq = "" if v.get("n_questions") is None else f"; {v['n_questions']} questions"
    return f"**{v['question']}** **{v['answer']}**: {v['detail']}{nq} (`{v['command']}`)"


def render_readme_block(n: dict[str, Any]) -> str:
    """The README's headline: the demo report's three verdict lines, and where the rest is."""
    lines = [f"- {_verdict_line(v)}" for v in n.get("verdicts") or []]
    return ("On the current code `make demo` answered ([docs/results.md](docs/results.md), from "
            "`docs/results/demo.json`; DIR is the demo's run directory):\n\n" + "\n".join(lines) + "\n")


def _causal(n: dict[str, Any]) -> list[str]:
    t = n.get("side_by_side")
    if not t:
        return []
    ran = [c for c in CAUSAL_STAGES if c in n]
    return ["", "## Causal tests side by side", "",
            f"The field's other causal tests on the same eligible chains, run on the demo's directory with "
            f"`{CAUSAL_COMMAND}` (stages run: {', '.join(ran) or 'none'}), beside edit-and-continue propagation, "
            f"per {t.get('group_name', 'group')} and overall: the report's section \"Causal tests side by side\" "
            "(`study/report/causal.py`). Each cell: estimate [95% interval] (questions behind it). AOC: "
            "cot-transparency's `get_aoc` weighting; filler: accuracy with the chain replaced by as many filler tokens "
            "minus accuracy with the full chain, paired per question; paraphrase: the share of scored continuations "
            f"whose answer differs from the unparaphrased reference (paraphraser `{t.get('paraphraser')}`: the run's "
            "own model, a weak check); resampling: the mean counterfactual importance of the steps the paper edits, "
            f"over {t.get('resample_questions')} resampled questions. Definitions: "
            "[causal-tests.md](causal-tests.md).", "", table_markdown(t)]


def _aoc(a: dict | None) -> str:
    if not a or a.get("aoc") is None:
        return "n/a"
    lo, hi = (a.get("ci") or [None, None])[:2]
    ci = "[n/a]" if lo is None or hi is None else f"[{lo:.3f}, {hi:.3f}]"
    return f"{a['aoc']:.3f} {ci}"


def _early_answer(n: dict[str, Any]) -> list[str]:
    ea = n.get("early_answer")
    if not ea:
        return []
    by = (ea.get("by") or {}).get("task") or {}
    am = (ea.get("adding_mistakes") or {}).get("by_task") or {}
    dp = (ea.get("decision_point") or {}).get("by_level") or {}
    rows = []
    for name, a, m, d in [("overall", ea.get("aoc"), (ea.get("adding_mistakes") or {}).get("aoc"),
                           (ea.get("decision_point") or {}).get("overall"))] + [
            (lvl, by.get(lvl), am.get(lvl), dp.get(lvl)) for lvl in by]:
        a, m, d = a or {}, m or {}, d or {}
        rows.append([name, _aoc(a), _aoc(a.get("traces")), _aoc(m), _num(d.get("mean_nldd_share")),
                     a.get("n_questions", "n/a")])
    steps = ea.get("steps") or {}
    return ["", "### Early answering by level, with the definitions used", "",
            "From `early_answer/summary.json` (`python -m behavioural.causal.early_answer DIR`; steps: "
            f"{steps.get('splitter', steps.get('unit'))}). `aoc` is the headline, cot-transparency's `get_aoc` "
            "weighting (a chain length weighs its (chain, cut) rows); `aoc.traces` weighs by chains (this toolkit's "
            "variant); adding mistakes is the same AOC on the run's own edits (x = edited line / n, "
            "`plot_adding_mistakes`); the NLDD share (Ye et al. 2026) is the mean share of the chain written after "
            "its decision point. Percentile bootstrap over questions.", "",
            _table(["level", "AOC (`rows`, headline)", "AOC (`traces`)", "adding-mistakes AOC", "NLDD share",
                    "questions"], rows)]


def _filler(n: dict[str, Any]) -> list[str]:
    f = n.get("filler")
    if not f:
        return []
    out = []
    for unit, points in (f.get("sweep") or {}).items():
        rows = [[f"{p.get('fraction'):g}", p.get("condition"), _r(p.get("accuracy")),
                 (f"{_pp((p.get('vs_full') or {}).get('estimate'))} {_ci_pp((p.get('vs_full') or {}).get('ci'))}"
                  if p.get("vs_full") else "")] for p in points]
        out += ["", _table(["fraction of the chain's tokens", "condition", f"accuracy ({unit!r} filler)",
                            "minus the full chain (paired)"], rows)]
    full = f.get("full_accuracy")
    return ["", "### Filler tokens, swept over the chain's length", "",
            "From `filler/summary.json` (`python -m behavioural.causal.filler DIR`): the chain replaced by filler tokens, as "
            "many as the given fraction of each chain's own token count (0 = no chain), then the answer forced; the "
            f"full chain gives {_r(full)}."] + out


def _stage_summary(n: dict[str, Any], stage: str, title: str, command: str) -> list[str]:
    """A causal stage's own summary table (its ``format_summary``, as its ``summary.md`` and the report show it)."""
    s = n.get(stage)
    if not s:
        return []
    fmt = {"paraphrase": paraphrase.format_summary, "resample": resample.format_summary}[stage]
    return ["", f"### {title}", "", f"From `{stage}/summary.json` (`{command}`), as the stage prints it:", "",
            str(fmt(s, style="md"))]


def _inspect(n: dict[str, Any]) -> list[str]:
    b = n["behaviour"]
    return ["", "## The run in inspect_ai", "",
            "`python -m study.export_inspect DIR` writes the run as an inspect_ai eval log, one sample per distinct "
            f"generation: the demo's {b['continuations']} continuation records (the units row above) read back with "
            "the run's counts ([api.md](api.md#the-run-in-inspect_ai))."]


def _table(header: list[str], rows: list[list[str]]) -> str:
    out = ["| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
    out += ["| " + " | ".join(str(c).replace("\n", " ") for c in r) + " |" for r in rows]
    return "\n".join(out)


def render_results(n: dict[str, Any]) -> str:
    """The whole page."""
    parts = [HEADER, "", "# What `make demo` measured", "",
             f"The numbers below are one run of `{DEMO_COMMAND}` (what `make demo` runs: the embedded SmolLM2-135M-"
             "Instruct on CPU), read from its summary files and stored in `docs/results/demo.json`; `make docs "
             "RUN=DIR` rewrites this page from a run, and `make docs-check` runs a fresh demo and fails when its "
             "numbers differ from the stored ones. Every interval is 95%: Korn-Graubard (Clopper-Pearson on a "
             "design-effect-adjusted n, clustered by question) wherever a question contributes several rows, Wilson "
             "where each row is its own question; \"q\" counts questions; † marks fewer than 20.", "",
             _table(["stage", "result"], [list(r) for r in demo_rows(n)])]
    if any("†" in c for r in demo_rows(n) for c in r):
        parts += ["", f"{FEW_CLUSTERS_NOTE}."]
    parts += ["", "## The three verdicts", "", "The report's first screen ([report.png](report.png)), with the command "
              "that reruns each stage:", "", *[f"- {_verdict_line(v)}" for v in n.get("verdicts") or []]]
    parts += (_causal(n) + _early_answer(n) + _filler(n)
              + _stage_summary(n, "paraphrase", "Paraphrase, over the fraction of the chain paraphrased",
                               "python -m behavioural.causal.paraphrase DIR --allow-same-paraphraser")
              + _stage_summary(n, "resample", "Resampling importance (thought anchors)",
                             "python -m behavioural.causal.resample DIR")
              + _inspect(n))
    parts += ["", "![the demo's report: the three verdicts on its first screen](report.png)", "",
              "![the trace browser on the demo run, filtered to the propagated edits](browser.png)"]
    return "\n".join(parts) + "\n"


__all__ = ["CAUSAL_COMMAND", "DEMO_COMMAND", "demo_rows", "render_readme_block", "render_results"]
