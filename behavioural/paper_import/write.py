"""Writing an imported run directory (records, the paper's labellings, the manifest) in one atomic publish, and
the paper's Table 4 from it."""
from __future__ import annotations

import csv
import io
import os
import shutil
import tempfile
from collections import Counter
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from behavioural.labels.records import LabelRecord
from behavioural.paper_import.convert import convert, fill_record
from behavioural.paper_import.rows import PaperImportError, bbh_task_map, parse_accuracy, read_rows
from loadbearing.files import JsonlWriter, atomic_write_text, publish_dir, write_json
from loadbearing.provenance import now, package_versions
from loadbearing.runs import BASELINES, CONTINUATIONS, LABEL_SETTINGS, LABELS_DIR, LABELS_FILE, MANIFEST
from loadbearing.tables import render_table

__all__ = ["TABLE4_COLUMNS", "TABLE4_FILE", "import_rows", "label_records", "table4", "table4_rows", "write_table4"]


def label_records(conts: Sequence, labels: Sequence, which: str) -> list[dict[str, Any]]:
    by_id = {c.id: c for c in conts}
    out = []
    for cid, fin, rule, judge in labels:
        c = by_id[cid]
        lab = rule if which == "rule" else fin
        correct = None if lab is None else lab != "C"
        per = {"paper_rule": {"label": rule, "noticed": None if rule in (None, "C") else rule == "B"}}
        if which != "rule":
            per["paper_judge"] = {"label": judge, "noticed": None if judge in (None, "C") else judge == "B"}
        out.append(fill_record(LabelRecord, dict(
            id=cid, question_id=c.question_id, condition="perturbed", dataset=c.dataset, task=c.task,
            difficulty=None, strategy=c.strategy, position=c.position, correct=correct,
            outcome=None if correct is None else ("non-C" if correct else "C"), label=lab,
            reason="paper rule label" if which == "rule" else "paper final label (judge if present, else rule)",
            final_labeller="paper_rule" if which == "rule" else "paper", labellers=per)).to_dict())
    return out


def import_rows(src: str, output: str | os.PathLike[str], *, model: str | None = None, config: str | None = None,
                split: str | None = None, bbh_map_file: str | None = None, data_dir: str | None = None,
                baseline_accuracy: str | None = None, limit: int | None = None) -> dict[str, Any]:
    """Convert and write a run directory; returns a small summary dict. Refuses an existing ``output``."""
    out = Path(output)
    if out.exists():
        raise PaperImportError(f"output {str(out)!r} already exists; choose a new --output-dir")
    acc = parse_accuracy(baseline_accuracy)
    bmap = bbh_task_map(bbh_map_file, data_dir)
    rows, prov = read_rows(src, config=config, split=split)
    if not rows:
        raise PaperImportError(f"{src}: no rows")
    model, baselines, conts, labels, notes = convert(rows, model=model, bbh_map=bmap, limit=limit)
    manifest = {
        "kind": "paper_import", "protocol_version": "paper", "schema_version": 1, "status": "ok",
        "model": {"name": model}, "label_source": "paper",
        "settings": {"min_lines": None, "max_new_tokens": None, "model": model},
        "dataset": {"name": "paper", "source": prov, "n_questions": len(baselines)},
        "baselines_eligible_only": True, "external_baseline_accuracy": acc,
        "input_text_note": "input_text = the paper's prompt + perturbed prefix, not the chat-templated model input; "
                           "token counts unknown (0); no controls in the release",
        "notes": notes, "created": now(), "updated": now(), "packages": package_versions(),
    }
    out.parent.mkdir(parents=True, exist_ok=True)
    tmp = Path(tempfile.mkdtemp(prefix=f".{out.name}.", dir=out.parent))
    try:
        write_json(tmp / MANIFEST, manifest)
        for name, recs in ((BASELINES, baselines), (CONTINUATIONS, conts)):
            with JsonlWriter(tmp / name, fsync=False) as w:
                for rec in recs:
                    w.write(rec)
        created = now()
        labelled = any(lab is not None or rule is not None for _, lab, rule, _ in labels)
        for name, which, stamp in (("paper-rule", "rule", "0"), ("paper", "final", "1")) if labelled else ():
            d = tmp / LABELS_DIR / name
            d.mkdir(parents=True)
            with JsonlWriter(d / LABELS_FILE, fsync=False) as w:
                for rec in label_records(conts, labels, which):
                    w.write(rec)
            write_json(d / LABEL_SETTINGS, {
                "schema_version": 1, "name": name, "created": f"{created}.{stamp}", "status": "ok",
                "run_dir": str(out.resolve()), "n_continuations": len(conts),
                "labellers": [{"name": "paper_rule", "kind": "imported"}] +
                             ([] if which == "rule" else [{"name": "paper_judge", "kind": "imported"}]),
                "final_labeller": "paper_rule" if which == "rule" else "paper",
                "final_rule": "the paper's rule label" if which == "rule" else
                              "the paper's final label: judge A/B/C when present, else the rule label",
                "source": prov, "finished": now()})
        if labelled:
            write_table4(tmp)  # the paper's Table 4 layout, beside the records it counts
        publish_dir(tmp, out)
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        raise
    finals = Counter(lab for _, lab, _, _ in labels)
    return {"output": str(out), "model": model, "rows": len(conts), "questions": len(baselines),
            "labels": {k: finals.get(k, 0) for k in ("A", "B", "C", None)}, "notes": notes}


#: the paper's Table 4 (``figures/table4_behavioral.csv``, the release's ``aggregates/behavioral_taxonomy.csv``)
TABLE4_COLUMNS = ("Category", "Setting", "Behavior", "Count", "Percentage")
TABLE4_FILE = "table4.csv"
BEHAVIOR = {"A": "Silent Bypass", "B": "Self-Correction", "C": "Error Propagation"}
#: the paper's names of the settings (its positions carry their relative place; its sources are upper-case)
PAPER_SETTING = {"early": "early (25%)", "middle": "middle (50%)", "late": "late (75%)", "gsm8k": "GSM8K",
                 "mmlu": "MMLU", "bbh": "BBH"}
SOURCE_ORDER = ("gsm8k", "mmlu", "bbh")  # the paper's order (by difficulty), any other source after them


def table4_rows(run_dir: str | os.PathLike[str], labelling: str = "paper") -> list[list[str]] | str:
    """The paper's Table 4 rows (A/B/C by position, strategy, source; its names and order) from a run's final
    labels (the gradient's taxonomy: perturbed generations only), or the reason there are none."""
    from behavioural.gradient.analysis import taxonomy  # deferred: behavioural.gradient.analysis loads numpy
    from behavioural.gradient.rows import load_runs  # deferred: behavioural.gradient.rows loads numpy

    tx = taxonomy(load_runs([str(run_dir)], labelling=labelling).rows)
    if tx.get("status") != "ok":
        return str(tx.get("message"))
    rows = []
    for key, cat in (("position", "Position"), ("strategy", "Strategy"), ("dataset", "Source")):
        groups = list(tx[key])
        if key == "dataset":
            groups.sort(key=lambda g: (SOURCE_ORDER.index(g) if g in SOURCE_ORDER else len(SOURCE_ORDER), g))
        for g in groups:
            v = tx[key][g]
            for lbl in ("A", "B", "C"):
                rows.append([cat, PAPER_SETTING.get(g, g), BEHAVIOR[lbl], str(v[lbl]["count"]),
                             f"{100 * v[lbl]['share']:.1f}%"])
    return rows


def table4(run_dir: str | os.PathLike[str]) -> str:
    """The paper's Table 4 (A/B/C by position, strategy, source) from an imported run's final labels, as text."""
    rows = table4_rows(run_dir)
    return rows if isinstance(rows, str) else render_table(list(TABLE4_COLUMNS), rows, style="text")


def write_table4(run_dir: str | os.PathLike[str], labelling: str = "paper") -> Path | None:
    """``RUN_DIR/table4.csv`` in the paper's layout (None, nothing written, when the run has no A/B/C labels)."""
    rows = table4_rows(run_dir, labelling)
    if isinstance(rows, str):
        return None
    buf = io.StringIO()
    w = csv.writer(buf, lineterminator="\n")
    w.writerow(TABLE4_COLUMNS)
    w.writerows(rows)
    return atomic_write_text(Path(run_dir) / TABLE4_FILE, buf.getvalue())
