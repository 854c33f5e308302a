"""Blind human annotation: export a seeded blind sheet, read filled copies back, report Cohen's kappa.

    python -m behavioural.label RUN_DIR --export-sheet 40 --seed 1
    python -m behavioural.label RUN_DIR --import-sheet alice.csv bob.csv [--key KEY] [--labelling NAME]

``export_sheet`` writes ``RUN_DIR/annotation/sheet-sS-nN.csv``: a seeded random sample of N perturbed
continuations in shuffled order under opaque item ids (no condition, strategy, answer or label shown), and
the private key ``sheet-sS-nN.key.json`` (item id -> continuation id). ``compare_sheets`` validates filled
copies (a bad row is a one-line :class:`SheetError` naming the file, the row - spreadsheet numbering,
header = row 1 - and the fix) and reports Cohen's kappa on C vs non-C and on A/B/C between annotators and
against each labeller of a labelling. The run is read through :class:`loadbearing.runs.Run`.
"""
from __future__ import annotations

import csv
import itertools
import json
import random
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from behavioural.labels.agreement import Kappa, kappa
from loadbearing.errors import LoadBearingError
from loadbearing.files import file_sha256, read_jsonl
from loadbearing.provenance import now
from loadbearing.runs import CONTINUATIONS, LABELS_FILE, Run

SCHEMA_VERSION = 1
LABELS = ("A", "B", "C")
SHEET_COLUMNS = ("item_id", "question", "reasoning_before_edit", "original_line", "edited_line", "continuation", "label")


class SheetError(LoadBearingError, ValueError):
    """A bad annotation sheet; the message names the file, the row and the fix."""


def unique_path(path: Path) -> Path:
    """``path``, or ``<stem>-2<suffix>``, ``-3``... when it exists: nothing is ever overwritten."""
    if not path.exists():
        return path
    for i in itertools.count(2):
        cand = path.with_name(f"{path.stem}-{i}{path.suffix}")
        if not cand.exists():
            return cand
    raise AssertionError("unreachable")


def export_sheet(run_dir: str | Path, n: int, seed: int, out_dir: str | Path | None = None) -> tuple[Path, Path]:
    """Write a blind annotation sheet of ``n`` seeded perturbed continuations and its private key."""
    if n < 1:
        raise SheetError(f"--export-sheet needs a positive item count, got {n}")
    rd = Path(run_dir)
    run = Run(rd)
    conts, questions = run.continuation_dicts(), run.question_texts()
    pop = sorted((c for c in conts if c["condition"] == "perturbed"), key=lambda c: c["id"])
    if not pop:
        raise SheetError(f"{rd} has no perturbed continuations to annotate; label a run with perturbed continuations")
    chosen = random.Random(seed).sample(pop, min(n, len(pop)))  # sample order is already a shuffle
    od = Path(out_dir) if out_dir else rd / "annotation"
    od.mkdir(parents=True, exist_ok=True)
    sheet = unique_path(od / f"sheet-s{seed}-n{n}.csv")
    key_path = sheet.with_name(sheet.stem + ".key.json")
    width = max(3, len(str(len(chosen))))
    items = {}
    with open(sheet, "x", newline="", encoding="utf-8") as f:
        w = csv.writer(f)
        w.writerow(SHEET_COLUMNS)
        for j, c in enumerate(chosen, 1):
            item = f"item-{j:0{width}d}"
            items[item] = c["id"]
            before = "\n".join((c.get("prefix_text") or "").rstrip("\n").split("\n")[:-1])
            w.writerow([item, questions.get(c["question_id"], ""), before, c.get("original_line", ""),
                        c.get("edited_line", ""), c.get("continuation", ""), ""])
    key = {"schema_version": SCHEMA_VERSION, "sheet": sheet.name, "created": now(), "seed": seed, "n_requested": n,
           "n_items": len(chosen), "population": "perturbed continuations", "n_population": len(pop),
           "continuations_sha256": file_sha256(rd / CONTINUATIONS), "items": items,
           "instructions": "label each row A (correct answer, error not noticed), B (correct answer, error noticed and "
                           "repaired) or C (wrong final answer)"}
    with open(key_path, "x", encoding="utf-8") as f:
        json.dump(key, f, indent=2)
        f.write("\n")
    return sheet, key_path


def read_sheet(path: str | Path, key_items: dict[str, str]) -> dict[str, str]:
    """A filled sheet's ``item id -> label`` (A/B/C), validated against the key; raises :class:`SheetError`."""
    p = Path(path)
    if not p.is_file():
        raise SheetError(f"{p}: file not found; pass the path of a filled annotation sheet")
    with open(p, newline="", encoding="utf-8-sig") as f:
        reader = csv.DictReader(f)
        cols = [c.strip() for c in (reader.fieldnames or [])]
        for need in ("item_id", "label"):
            if need not in cols:
                raise SheetError(f"{p}: no {need!r} column (header has {cols}); keep the exported header row unchanged")
        reader.fieldnames = cols
        out: dict[str, str] = {}
        first_row: dict[str, int] = {}
        for i, row in enumerate(reader, start=2):
            item = (row.get("item_id") or "").strip()
            lab = (row.get("label") or "").strip().upper()
            if not item:
                if not any((v or "").strip() for v in row.values() if isinstance(v, str)):
                    continue  # a blank line
                raise SheetError(f"{p} row {i}: missing item_id; restore the row's item id from the exported sheet")
            if item not in key_items:
                raise SheetError(f"{p} row {i}: unknown item id {item!r} (not in the key); restore the exported id or "
                                 "delete the row")
            if item in first_row:
                raise SheetError(f"{p} row {i}: duplicate row for {item!r} (first at row {first_row[item]}); keep one row "
                                 "per item")
            first_row[item] = i
            if not lab:
                raise SheetError(f"{p} row {i}: no label for {item!r}; fill in A, B or C (or delete the row to leave it "
                                 "unannotated)")
            if lab not in LABELS:
                raise SheetError(f"{p} row {i}: unknown label {row.get('label')!r} for {item!r}; use A, B or C")
            out[item] = lab
    if not out:
        raise SheetError(f"{p}: no labelled rows; fill the 'label' column with A, B or C")
    return out


def _find_key(run_dir: Path, sheets: Sequence[Path], key: str | Path | None) -> Path:
    if key:
        return Path(key)
    keys = sorted((run_dir / "annotation").glob("*.key.json"))
    if len(keys) == 1:
        return keys[0]
    if not keys:
        raise SheetError(f"no key file in {run_dir / 'annotation'}; pass the export's .key.json with --key")
    raise SheetError(f"several key files in {run_dir / 'annotation'} ({', '.join(k.name for k in keys)}); pass one with --key")


def _binary(lab: str | None) -> str | None:
    return None if lab is None else ("C" if lab == "C" else "non-C")


def compare_sheets(run_dir: str | Path, sheets: Sequence[str | Path], *, key: str | Path | None = None,
                   labelling: str | None = None) -> dict[str, Any]:
    """Cohen's kappa (C vs non-C, and A/B/C) between annotators and against each labeller."""
    rd = Path(run_dir)
    sheet_paths = [Path(s) for s in sheets]
    key_path = _find_key(rd, sheet_paths, key)
    if not key_path.is_file():
        raise SheetError(f"key file {str(key_path)!r} not found; pass the .key.json written by --export-sheet")
    try:
        items = json.loads(key_path.read_text(encoding="utf-8"))["items"]
        if not isinstance(items, dict):
            raise TypeError("items is not an object")
    except (ValueError, KeyError, TypeError) as e:
        raise SheetError(f"key file {str(key_path)!r} is not a key written by --export-sheet ({e}); pass the .key.json "
                         "written beside the sheet") from None
    annot: dict[str, dict[str, str]] = {}
    for s in sheet_paths:
        name = s.stem
        while name in annot:
            name += "'"
        annot[name] = read_sheet(s, items)
    order = sorted(items)
    raters: dict[str, list[str | None]] = {a: [lab.get(i) for i in order] for a, lab in annot.items()}
    run = Run(rd)
    conts = {c["id"]: c for c in run.continuation_dicts()}
    answer = []
    for i in order:
        c = conts.get(items[i])
        corr = None if c is None else c.get("correct")
        answer.append(None if corr is None else ("non-C" if corr else "C"))
    labellers: dict[str, list[str | None]] = {}
    ldir = run.labelling_dir(labelling)
    if ldir is not None:
        recs = {r["id"]: r for r in read_jsonl(ldir / LABELS_FILE) if isinstance(r, dict) and "id" in r}
        for i in order:
            r = recs.get(items[i])
            names = list(r["labellers"]) if r else []
            for n in names:
                labellers.setdefault(n, [None] * len(order))
            labellers.setdefault(f"final ({r['final_labeller']})" if r else "final", [None] * len(order))
        for j, i in enumerate(order):
            r = recs.get(items[i])
            if r is None:
                continue
            for n, v in r["labellers"].items():
                labellers[n][j] = v.get("label")
            labellers[f"final ({r['final_labeller']})"][j] = r["label"]

    def both(a: list, b: list) -> dict[str, Kappa]:
        return {"C_vs_nonC": kappa([_binary(x) for x in a], [_binary(y) for y in b]),
                "ABC": kappa(a, b)}

    report: dict[str, Any] = {
        "schema_version": SCHEMA_VERSION, "created": now(), "key": str(key_path), "labelling": ldir.name if ldir else None,
        "n_items": len(order),
        "annotators": {a: {"sheet": str(s), "n_labelled": len(annot[a]), "n_missing": len(order) - len(annot[a]),
                           "counts": {k: list(annot[a].values()).count(k) for k in LABELS}}
                       for a, s in zip(annot, sheet_paths)},
        "between_annotators": [{"a": a, "b": b, **both(raters[a], raters[b])} for a, b in itertools.combinations(annot, 2)],
        "against_labellers": [],
    }
    for a in annot:
        report["against_labellers"].append({"annotator": a, "labeller": "answer (correctness)",
                                            "C_vs_nonC": kappa([_binary(x) for x in raters[a]], answer)})
        for n, vals in labellers.items():
            report["against_labellers"].append({"annotator": a, "labeller": n, **both(raters[a], vals)})
    return report


def format_agreement(rep: dict) -> str:
    def k(d):
        kv = "n/a" if d["kappa"] is None else f"{d['kappa']:.2f}"
        return f"kappa {kv} (n={d['n']}, agree {d['agreement']['k']}/{d['n']})"

    lines = [f"{rep['n_items']} items; labelling compared: {rep['labelling']}"]
    for a, info in rep["annotators"].items():
        lines.append(f"  annotator {a}: {info['n_labelled']} labelled {info['counts']}, {info['n_missing']} missing")
    for p in rep["between_annotators"]:
        lines.append(f"{p['a']} vs {p['b']}: C/non-C {k(p['C_vs_nonC'])}; A/B/C {k(p['ABC'])}")
    for p in rep["against_labellers"]:
        s = f"{p['annotator']} vs {p['labeller']}: C/non-C {k(p['C_vs_nonC'])}"
        if "ABC" in p:
            s += f"; A/B/C {k(p['ABC'])}"
        lines.append(s)
    return "\n".join(lines)
