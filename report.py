"""Write ``report.md`` for a study directory from the files every stage left there (never their objects).

    python report.py runs/study-20261129-150000

Sections: behaviour (propagation per level with intervals), labels (A/B/C), activations (store
provenance), probes (nested-CV headline, per-layer curve and controls, figure), steering (grid table,
figure, verdict). A stage that has not run yet is reported as missing, not as empty numbers.
"""
from __future__ import annotations

import json
import sys
from pathlib import Path


def read_json_if_exists(path: Path):
    """A stage's JSON output, or None when that stage has not written it yet."""
    return json.loads(path.read_text()) if path.is_file() else None


_json = read_json_if_exists


def _pct(r) -> str:
    if not r or r.get("rate") is None:
        return "n/a"
    lo, hi = r["wilson"]
    return f"{100 * r['rate']:.1f}% [{100 * lo:.1f}, {100 * hi:.1f}] ({r['k']}/{r['n']})"


def _behaviour(out: Path) -> list[str]:
    s = _json(out / "summary.json")
    if s is None:
        return ["_Behavioural stage has not finished._"]
    lines = [
        f"Questions: {s['questions']}; baseline accuracy {_pct(s['baseline_accuracy'])}; eligible {s['eligible']}; "
        f"continuations {s['continuations']}; not-applicable edits {s['not_applicable']}.",
        "",
        "| group | propagation (95% Wilson) | control error | coverage |",
        "|---|---|---|---|",
    ]

    def row(name, r):
        cov = r["coverage"]["rate"]
        flag = " (too few cases)" if r["propagation"]["n"] < 5 else ""
        return f"| {name} | {_pct(r['propagation'])}{flag} | {_pct(r['control_error'])} | {'n/a' if cov is None else f'{100 * cov:.0f}%'} |"

    lines.append(row("overall", s["overall"]))
    for key, groups in s["by"].items():
        for g, r in groups.items():
            lines.append(row(f"{key}={g}", r))
    d = s["overall"]["paired_difference"]
    if d["estimate"] is not None and d["ci"][0] is not None:
        lines += ["", f"Paired perturbed - control difference: {100 * d['estimate']:.1f} pp, question-clustered bootstrap "
                      f"95% CI [{100 * d['ci'][0]:.1f}, {100 * d['ci'][1]:.1f}] ({d['n_pairs']} pairs, {d['n_clusters']} questions)."]
    if s.get("baseline_by_level"):
        lines += ["", "| level | baseline accuracy | eligible |", "|---|---|---|"]
        for lvl, v in s["baseline_by_level"].items():
            lines.append(f"| {lvl} | {_pct(v['accuracy'])} | {v['eligible']} |")
    if s.get("message"):
        lines += ["", f"**{s['message']}**"]
    return lines


def _labels(out: Path) -> list[str]:
    root = out / "labels"
    dirs = sorted(p for p in root.glob("*") if (p / "summary.json").is_file()) if root.is_dir() else []
    if not dirs:
        return ["_No labelling yet (python -m behavioural.label RUN_DIR)._"]
    from behavioural.label import format_summary

    lines = []
    for d in dirs:
        lines += [f"Labelling `{d.name}`:", "", "```", format_summary(_json(d / "summary.json")), "```"]
    return lines


def _activations(out: Path) -> list[str]:
    p = out / "activations.h5"
    if not p.is_file():
        return ["_No activation store yet._"]
    from activations.store import StoreError, open_store

    try:
        with open_store(p) as st:
            a = st.attrs
            return [f"`activations.h5`: {st.n_rows} rows, layers {st.layers[0]}..{st.layers[-1]} ({len(st.layers)}), "
                    f"positions {', '.join(st.positions)}, d_model {st.d_model}, engine {a.get('engine')}, dtype "
                    f"{a.get('dtype')}, leaky {bool(a.get('leaky'))}; size {p.stat().st_size / 1e6:.1f} MB."]
    except StoreError as e:
        return [f"_Activation store incomplete: {e}_"]


def _probes(out: Path) -> list[str]:
    r = _json(out / "probes" / "results.json")
    if r is None:
        return ["_No probes yet._"]
    lines = []
    data = r.get("data", {})
    classes = ", ".join(f"{c}: {v['rows']} rows / {v['questions']} questions" for c, v in data.get("class_counts", {}).items())
    maj = (r.get("majority_baseline") or {}).get("accuracy")
    lines.append(f"Rows {data.get('n_rows')} from {data.get('n_questions')} questions ({classes}); majority-class baseline "
                 f"{_pct(maj)}.")
    lines.append("")
    lines.append("Headline (nested CV: the layer is chosen on inner folds of each outer training split, then scored on the "
                 "outer fold):")
    lines.append("")
    for name, h in r.get("headline", {}).items():
        acc = h.get("accuracy")
        lines.append(f"* **{name}**: accuracy {_pct(acc) if isinstance(acc, dict) else acc}, balanced accuracy "
                     f"{h.get('balanced_accuracy'):.3f}; layers chosen {h.get('chosen_layer_counts')}"
                     if isinstance(h.get('balanced_accuracy'), (int, float)) else f"* **{name}**: {h}")
    for name, p in r.get("probes", {}).items():
        lines += ["", f"Per layer, `{name}` (held-out accuracy with Wilson CI; shuffled-label control; selectivity):", "",
                  "| layer | accuracy | balanced | control | selectivity |", "|---|---|---|---|---|"]
        for row in p.get("layers", []):
            acc = row.get("accuracy")
            bal = row.get("balanced_accuracy", {})
            ctrl = row.get("control", {}).get("accuracy")
            sel = row.get("selectivity")
            lines.append(f"| {row['layer']} | {_pct(acc) if isinstance(acc, dict) else acc} | "
                         f"{bal.get('value', float('nan')):.3f} | {_pct(ctrl) if isinstance(ctrl, dict) else ctrl} | "
                         f"{'n/a' if sel is None else f'{sel:+.3f}'} |")
        so = p.get("selected_optimistic")
        if so:
            lines += ["", f"Best single layer by its own CV score (optimistic, not the headline): layer {so['layer']}."]
    for name, t in r.get("transfer", {}).items():
        if not t.get("by"):
            continue
        lines += ["", f"Transfer (`{name}`, layer {t.get('layer')}): train on one group, test on the others' held-out questions "
                      "(a probe that only decodes the edit type fails here):", "",
                  "| trained on | accuracy on the others | accuracy within |", "|---|---|---|"]
        for key, rows in t["by"].items():
            for row in rows:
                within = (row.get("within") or {}).get("accuracy")
                lines.append(f"| {key}={row['train_on']} | {_pct((row.get('others') or {}).get('accuracy'))} | {_pct(within)} |")
    if (out / "probes" / "accuracy_vs_layer.png").is_file():
        lines += ["", "![probe accuracy vs layer](probes/accuracy_vs_layer.png)"]
    return lines


def _steering(out: Path) -> list[str]:
    s = _json(out / "steering" / "summary.json")
    if s is None:
        return ["_No steering sweep yet._"]
    from steering.sweep import format_table

    lines = [f"**Verdict:** {s['verdict']}", "", "```", format_table(s), "```"]
    if (out / "steering" / "sweep.png").is_file():
        lines += ["", "![steering sweep](steering/sweep.png)"]
    return lines


def write_report(out: str | Path, *, seconds: float | None = None) -> Path:
    out = Path(out)
    manifest = _json(out / "manifest.json") or {}
    model = manifest.get("model", {})
    settings = manifest.get("settings", {})
    parts = [
        f"# Study report: {out.name}",
        "",
        f"Model `{model.get('name')}` (weights sha256 `{str(model.get('weights_hash'))[:16]}...`), dataset "
        f"`{settings.get('dataset')}` task `{settings.get('task')}`, strategies {settings.get('strategies')}, positions "
        f"{settings.get('positions')}; protocol {manifest.get('protocol_version')}; git {manifest.get('git', {}).get('commit')}"
        f"{' (dirty)' if manifest.get('git', {}).get('dirty') else ''}."
        + (f" Wall time {seconds / 60:.1f} min." if seconds else ""),
    ]
    for title, fn in (("1. Behaviour: does the edit reach the answer?", _behaviour), ("2. Labels (A/B/C)", _labels),
                      ("3. Activations", _activations), ("4. Probes: can the hidden state predict propagation?", _probes),
                      ("5. Steering: do the probe directions change the outcome?", _steering)):
        parts += ["", f"## {title}", ""] + fn(out)
    path = out / "report.md"
    path.write_text("\n".join(parts) + "\n", encoding="utf-8")
    return path


if __name__ == "__main__":
    if len(sys.argv) != 2:
        sys.exit("usage: python report.py STUDY_DIR")
    print(write_report(sys.argv[1]))
