"""Label a run's continuations A/B/C, and measure agreement with blind human annotators.

    python -m behavioural.label RUN_DIR [--labeller rule] [--labeller judge:<model>] [--final rule|judge|...] [--name NAME]
    python -m behavioural.label RUN_DIR --export-sheet N --seed S
    python -m behavioural.label RUN_DIR --import-sheet FILE [FILE ...] [--key KEY] [--name LABELLING]

Labelling never touches the generation records: it reads ``RUN_DIR/continuations.jsonl`` (and the questions
from ``baselines.jsonl``) and writes a new directory ``RUN_DIR/labels/<name>/`` with

* ``labels.jsonl`` - one :class:`LabelRecord` per continuation, keyed by the continuation ``id``: the final
  label, why, and every labeller's verdict with its evidence (rule: spans; judge: each variant's reply and
  parsed verdict);
* ``summary.json`` - A/B/C counts and rates with Wilson and exact intervals (``stats.rate``), perturbed and
  control reported separately, broken down by position, strategy, task and difficulty; every labeller's own
  A/B/C; the judge's agreement across prompt variants; agreement between labellers;
* ``settings.json`` - labellers and their full settings (prompts, model provenance), the final-label rule,
  the source file's hash, status.

The automatic name joins the labellers' names (``rule``, ``rule+judge-smollm2-135m-instruct``; ``_final-<x>``
when the final labeller is not the first) and is suffixed ``-2``, ``-3``... when taken: a labelling is never
overwritten. An explicit ``--name`` that exists is an error.

**Final label rule** (:data:`FINAL_RULE`, recorded in settings and summary): C from correctness alone - a
parseable wrong answer is ``C``; an unparseable answer is null. For a correct answer the chosen (``--final``)
labeller decides: noticed -> ``B`` (noticed and repaired), not noticed -> ``A`` (bypass), undecided (e.g. no
strict majority of judge variants) -> null. Controls are labelled by the same rule and reported separately
(a control's A/B tells how often the labeller "sees" a repair where no error was injected).

**Blind annotation**: ``--export-sheet N --seed S`` writes ``RUN_DIR/annotation/sheet-sS-nN.csv``: a seeded
random sample of N perturbed continuations in shuffled order under opaque item ids, with the question, the
reasoning before the edit, the original and edited line, the continuation and an empty ``label`` column
(fill with A, B or C) - no condition, strategy, answer or label is shown. The private key
(``sheet-sS-nN.key.json``, item id -> continuation id) stays with the researcher. ``--import-sheet`` reads
one or more filled copies (one per annotator, named by file stem), validates them (a bad row is a one-line
error naming the file, the row - spreadsheet numbering, header = row 1 - and the fix), and reports Cohen's
kappa (scikit-learn) with counts on C vs non-C and on A/B/C between every pair of annotators and between
each annotator and each labeller of a labelling (``--name``, default the newest), written to
``RUN_DIR/annotation/agreement*.json``.
"""
from __future__ import annotations

import argparse
import csv
import itertools
import json
import random
import re
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Sequence

from behavioural.labellers import JudgeLabeller, RuleLabeller, kappa, make_labeller, variant_agreement
from behavioural.records import _Record
from behavioural.rundir import JsonlWriter, RunDirError, file_sha256, git_info, now, read_json, read_jsonl, write_json
from behavioural.stats import rate

SCHEMA_VERSION = 1
LABELS = ("A", "B", "C")
GROUP_KEYS = ("position", "strategy", "task", "difficulty")
FINAL_RULE = (
    "C if the answer is parseable and wrong; null if the answer is unparseable; for a correct answer the final "
    "labeller decides: noticed -> B (noticed and repaired), not noticed -> A (bypass), undecided -> null. "
    "Controls follow the same rule and are reported separately."
)
SHEET_COLUMNS = ("item_id", "question", "reasoning_before_edit", "original_line", "edited_line", "continuation", "label")


class SheetError(ValueError):
    """A bad annotation sheet; the message names the file, the row and the fix."""


@dataclass(frozen=True)
class LabelRecord(_Record):
    """One line of ``labels/<name>/labels.jsonl``."""

    id: str  # the continuation id
    question_id: str
    condition: str  # perturbed | control
    dataset: str
    task: str | None
    difficulty: str | None
    strategy: str
    position: str
    correct: bool | None
    outcome: str | None  # "C" | "non-C" | None (unparseable), from correctness alone
    label: str | None  # final "A" | "B" | "C" | None
    reason: str
    final_labeller: str
    labellers: dict  # labeller name -> {"label", "noticed", ...evidence / variants}
    schema_version: int = SCHEMA_VERSION


def final_label(correct: bool | None, noticed: bool | None) -> tuple[str | None, str]:
    """Apply :data:`FINAL_RULE`: (label, reason)."""
    if correct is None:
        return None, "unparseable answer"
    if correct is False:
        return "C", "wrong answer"
    if noticed is None:
        return None, "correct answer, notice undecided"
    return ("B", "correct answer, error noticed") if noticed else ("A", "correct answer, error not noticed")


# ----------------------------------------------------------------------------------------------------
# reading a run


def load_run(run_dir: str | Path) -> tuple[list[dict], dict[str, str]]:
    """(continuation dicts, question id -> question text) of a run directory."""
    rd = Path(run_dir)
    path = rd / "continuations.jsonl"
    if not path.is_file():
        raise RunDirError(f"{str(path)!r} not found; is {str(rd)!r} a run directory written by python -m behavioural.run?")
    conts = read_jsonl(path)
    if not conts:
        raise RunDirError(f"{str(path)!r} holds no continuations; run (or --resume) python -m behavioural.run first")
    ids = [c.get("id") for c in conts]
    if len(set(ids)) != len(ids):
        dup = next(i for i in ids if ids.count(i) > 1)
        raise RunDirError(f"{str(path)!r} has duplicate continuation id {dup!r}; repair the run with --resume")
    questions = {b["question_id"]: b.get("question", "") for b in read_jsonl(rd / "baselines.jsonl") if "question_id" in b}
    return conts, questions


# ----------------------------------------------------------------------------------------------------
# labelling


def _resolve_final(final: str | None, names: list[str]) -> str:
    if final is None:
        return names[0]
    if final in names:
        return final
    if final == "judge":
        judges = [n for n in names if n.startswith("judge:")]
        if len(judges) == 1:
            return judges[0]
        raise ValueError(f"--final judge is ambiguous or absent among labellers {names}; name one of them exactly")
    raise ValueError(f"--final {final!r} is not one of the labellers {names}; add it with --labeller or pick one of those")


def _claim_dir(root: Path, name: str, explicit: bool) -> Path:
    if not re.fullmatch(r"[A-Za-z0-9][A-Za-z0-9._+\-]*", name):
        raise ValueError(f"labelling name {name!r} has odd characters; use letters, digits, '.', '_', '+', '-'")
    root.mkdir(parents=True, exist_ok=True)
    for i in itertools.count(1):
        cand = root / (name if i == 1 else f"{name}-{i}")
        try:
            cand.mkdir()  # exclusive: two processes can never claim the same labelling
            return cand
        except FileExistsError:
            if explicit:
                raise RunDirError(
                    f"labelling {str(cand)!r} already exists and labellings are never overwritten; pick another --name "
                    "or omit --name for an automatic one"
                ) from None
    raise AssertionError("unreachable")


def label_run(
    run_dir: str | Path,
    labellers: Sequence[RuleLabeller | JudgeLabeller] | None = None,
    *,
    final: str | None = None,
    name: str | None = None,
    progress: bool = True,
    command: Sequence[str] | None = None,
) -> Path:
    """Label every continuation of ``run_dir`` and write a new ``labels/<name>/``; returns that directory."""
    rd = Path(run_dir)
    labellers = list(labellers) if labellers else [RuleLabeller()]
    names = [lab.name for lab in labellers]
    if len(set(names)) != len(names):
        raise ValueError(f"labeller given twice in {names}; pass each --labeller once")
    final_name = _resolve_final(final, names)
    conts, questions = load_run(rd)
    missing_q = sorted({c["question_id"] for c in conts} - set(questions))
    if missing_q and any(isinstance(lab, JudgeLabeller) for lab in labellers):
        raise RunDirError(f"{rd / 'baselines.jsonl'} lacks questions for {missing_q[:3]}; the judge needs the question text")
    by_name = dict(zip(names, labellers))
    auto = "+".join(lab.slug for lab in labellers)
    if final_name != names[0]:
        auto += f"_final-{by_name[final_name].slug}"
    out = _claim_dir(rd / "labels", name or auto, explicit=name is not None)
    settings = {
        "schema_version": SCHEMA_VERSION,
        "name": out.name,
        "created": now(),
        "status": "running",
        "run_dir": str(rd.resolve()),
        "continuations_sha256": file_sha256(rd / "continuations.jsonl"),
        "n_continuations": len(conts),
        "labellers": [lab.settings() for lab in labellers],
        "final_labeller": final_name,
        "final_rule": FINAL_RULE,
        "command": list(command) if command is not None else None,
        "git": git_info(),
    }
    write_json(out / "settings.json", settings)
    try:
        results = {lab.name: lab.label(conts, questions, progress=progress) for lab in labellers}
        records = []
        for i, c in enumerate(conts):
            per = {}
            for n in names:
                r = dict(results[n][i])
                r["label"], _ = final_label(c.get("correct"), r.get("noticed"))
                per[n] = r
            lab, reason = final_label(c.get("correct"), per[final_name].get("noticed"))
            if c.get("correct") is True and per[final_name].get("noticed") is not None:
                reason += f" ({final_name})"
            correct = c.get("correct")
            records.append(LabelRecord(
                id=c["id"], question_id=c["question_id"], condition=c["condition"], dataset=c.get("dataset", ""),
                task=c.get("task"), difficulty=c.get("difficulty"), strategy=c.get("strategy", ""),
                position=c.get("position", ""), correct=correct,
                outcome=None if correct is None else ("non-C" if correct else "C"),
                label=lab, reason=reason, final_labeller=final_name, labellers=per,
            ))
        with JsonlWriter(out / "labels.jsonl", fsync=False) as w:
            for r in records:
                w.write(r)
        summary = summarize([r.to_dict() for r in records], labellers, final_name)
        summary["labelling"] = out.name
        write_json(out / "summary.json", summary)
    except BaseException as e:
        settings.update(status="interrupted" if isinstance(e, KeyboardInterrupt) else "failed", error=repr(e)[:500],
                        finished=now())
        write_json(out / "settings.json", settings)
        raise
    settings.update(status="ok", finished=now())
    write_json(out / "settings.json", settings)
    return out


# ----------------------------------------------------------------------------------------------------
# summary


def _block(labels: list[str | None], corrects: list[bool | None]) -> dict:
    n = len(labels)
    cnt = {k: labels.count(k) for k in LABELS}
    cnt["null"] = labels.count(None)
    n_lab = cnt["A"] + cnt["B"] + cnt["C"]
    n_parse = sum(c is not None for c in corrects)
    return {
        "n": n,
        "counts": cnt,
        "n_labelled": n_lab,
        "rates": {k: rate(cnt[k], n_lab) for k in LABELS},  # over labelled (non-null) continuations
        "null": rate(cnt["null"], n),
        "propagation": rate(cnt["C"], n_parse),  # C over parseable answers (the protocol's rate)
        "B_among_correct_labelled": rate(cnt["B"], cnt["A"] + cnt["B"]),
    }


def _section(rows: list[dict], key=lambda r: r["label"], breakdown: bool = True) -> dict:
    out = _block([key(r) for r in rows], [r["correct"] for r in rows])
    if breakdown:
        out["by"] = {}
        for g in GROUP_KEYS:
            vals = sorted({str(r.get(g)) for r in rows})
            out["by"][g] = {v: _block([key(r) for r in rows if str(r.get(g)) == v],
                                      [r["correct"] for r in rows if str(r.get(g)) == v]) for v in vals}
    return out


def summarize(records: list[dict], labellers: Sequence, final_name: str) -> dict:
    """The ``summary.json`` of a labelling (see the module docstring)."""
    names = [lab.name for lab in labellers]
    conds = {c: [r for r in records if r["condition"] == c] for c in ("perturbed", "control")}
    out: dict = {"schema_version": SCHEMA_VERSION, "final_labeller": final_name, "final_rule": FINAL_RULE,
                 "rates_note": "A/B/C rates are over labelled continuations; propagation is C over parseable answers; "
                               "null counts unparseable answers and undecided notice verdicts"}
    for c, rows in conds.items():
        out[c] = _section(rows)
    out["labellers"] = {
        n: {c: _section(rows, key=lambda r, n=n: r["labellers"][n]["label"], breakdown=False) for c, rows in conds.items()}
        for n in names
    }
    # labellers vs each other on the A/B call (correct perturbed continuations)
    correct_p = [r for r in conds["perturbed"] if r["correct"] is True]
    out["labeller_agreement"] = [
        {"a": a, "b": b, "on": "noticed (A vs B), correct perturbed continuations",
         **kappa([r["labellers"][a]["noticed"] for r in correct_p], [r["labellers"][b]["noticed"] for r in correct_p])}
        for a, b in itertools.combinations(names, 2)
    ]
    out["judge_variant_agreement"] = {}
    for lab in labellers:
        if isinstance(lab, JudgeLabeller):
            vn = [v.name for v in lab.variants]
            out["judge_variant_agreement"][lab.name] = {
                c: variant_agreement([r["labellers"][lab.name] for r in rows], vn) for c, rows in conds.items()
            }
    return out


def _fmt_rate(r: dict) -> str:
    if r["rate"] is None:
        return f"{r['k']}/{r['n']} (n/a)"
    lo, hi = r["wilson"]
    return f"{r['k']}/{r['n']} = {100 * r['rate']:.1f}% [{100 * lo:.1f}, {100 * hi:.1f}]"


def format_summary(summary: dict) -> str:
    lines = [f"labelling {summary.get('labelling')} (final labeller: {summary['final_labeller']})"]
    for c in ("perturbed", "control"):
        s = summary[c]
        cnt = s["counts"]
        lines.append(f"{c}: n={s['n']}  A={cnt['A']} B={cnt['B']} C={cnt['C']} null={cnt['null']}  "
                     f"propagation {_fmt_rate(s['propagation'])}  B|correct {_fmt_rate(s['B_among_correct_labelled'])}")
        if c == "perturbed":
            for g in GROUP_KEYS:
                for v, b in s["by"][g].items():
                    k = b["counts"]
                    lines.append(f"  {g}={v}: n={b['n']} A={k['A']} B={k['B']} C={k['C']} null={k['null']}")
    for n, agr in summary.get("judge_variant_agreement", {}).items():
        a = agr["perturbed"]
        k = a["mean_pairwise_kappa"]
        lines.append(f"{n} variants (perturbed): unanimous {_fmt_rate(a['unanimous'])}, mean pairwise kappa "
                     f"{'n/a' if k is None else f'{k:.2f}'} over {a['n_pairs_with_kappa']} pairs")
    for p in summary.get("labeller_agreement", []):
        k = p["kappa"]
        lines.append(f"{p['a']} vs {p['b']} on A/B: n={p['n']} kappa {'n/a' if k is None else f'{k:.2f}'}")
    return "\n".join(lines)


# ----------------------------------------------------------------------------------------------------
# blind annotation sheets


def _unique_path(path: Path) -> Path:
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
        raise ValueError(f"--export-sheet needs a positive item count, got {n}")
    rd = Path(run_dir)
    conts, questions = load_run(rd)
    pop = sorted((c for c in conts if c["condition"] == "perturbed"), key=lambda c: c["id"])
    if not pop:
        raise RunDirError(f"{rd} has no perturbed continuations to annotate")
    chosen = random.Random(seed).sample(pop, min(n, len(pop)))  # sample order is already a shuffle
    od = Path(out_dir) if out_dir else rd / "annotation"
    od.mkdir(parents=True, exist_ok=True)
    sheet = _unique_path(od / f"sheet-s{seed}-n{n}.csv")
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
           "continuations_sha256": file_sha256(rd / "continuations.jsonl"), "items": items,
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


def _latest_labelling(run_dir: Path, name: str | None) -> Path | None:
    root = run_dir / "labels"
    if name:
        d = root / name
        if not (d / "labels.jsonl").is_file():
            raise RunDirError(f"labelling {str(d)!r} not found; run python -m behavioural.label {run_dir} first or fix --name")
        return d
    best = None
    for d in sorted(root.glob("*/settings.json")) if root.is_dir() else []:
        s = json.loads(d.read_text(encoding="utf-8"))
        if s.get("status") == "ok" and (best is None or s.get("created", "") >= best[0]):
            best = (s.get("created", ""), d.parent)
    return best[1] if best else None


def load_labels(run_dir: str | Path, name: str | None = None) -> tuple[str | None, dict[str, str | None]]:
    """(labelling name, continuation id -> final label) of labelling ``name`` (default: the newest complete one).

    For later stages (activations, probes): ``(None, {})`` when the run has no complete labelling yet.
    """
    d = _latest_labelling(Path(run_dir), name)
    if d is None:
        return None, {}
    return d.name, {r["id"]: r["label"] for r in read_jsonl(d / "labels.jsonl")}


def _binary(lab: str | None) -> str | None:
    return None if lab is None else ("C" if lab == "C" else "non-C")


def compare_sheets(run_dir: str | Path, sheets: Sequence[str | Path], *, key: str | Path | None = None,
                   labelling: str | None = None) -> dict:
    """Cohen's kappa (C vs non-C, and A/B/C) between annotators and against each labeller."""
    rd = Path(run_dir)
    sheets = [Path(s) for s in sheets]
    key_path = _find_key(rd, sheets, key)
    if not key_path.is_file():
        raise SheetError(f"key file {str(key_path)!r} not found; pass the .key.json written by --export-sheet")
    items: dict[str, str] = json.loads(key_path.read_text(encoding="utf-8"))["items"]
    annot: dict[str, dict[str, str]] = {}
    for s in sheets:
        name = s.stem
        while name in annot:
            name += "'"
        annot[name] = read_sheet(s, items)
    order = sorted(items)
    raters: dict[str, list[str | None]] = {a: [lab.get(i) for i in order] for a, lab in annot.items()}
    conts = {c["id"]: c for c in read_jsonl(rd / "continuations.jsonl")}
    answer = []
    for i in order:
        c = conts.get(items[i])
        corr = None if c is None else c.get("correct")
        answer.append(None if corr is None else ("non-C" if corr else "C"))
    labellers: dict[str, list[str | None]] = {}
    ldir = _latest_labelling(rd, labelling)
    if ldir is not None:
        recs = {r["id"]: r for r in read_jsonl(ldir / "labels.jsonl")}
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

    def both(a: list, b: list) -> dict:
        return {"C_vs_nonC": kappa([_binary(x) for x in a], [_binary(y) for y in b]),
                "ABC": kappa(a, b)}

    report = {
        "schema_version": SCHEMA_VERSION, "created": now(), "key": str(key_path), "labelling": ldir.name if ldir else None,
        "n_items": len(order),
        "annotators": {a: {"sheet": str(s), "n_labelled": len(annot[a]), "n_missing": len(order) - len(annot[a]),
                           "counts": {k: list(annot[a].values()).count(k) for k in LABELS}}
                       for a, s in zip(annot, sheets)},
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


# ----------------------------------------------------------------------------------------------------
# CLI


def build_parser() -> argparse.ArgumentParser:
    ap = argparse.ArgumentParser(
        prog="python -m behavioural.label",
        description="Label a run's continuations A/B/C (new labels/<name>/ per run, never overwritten), or export/import "
                    "blind human annotation sheets and report Cohen's kappa.",
        formatter_class=argparse.ArgumentDefaultsHelpFormatter,
    )
    ap.add_argument("run_dir", help="run directory written by python -m behavioural.run")
    ap.add_argument("--labeller", action="append", default=None, metavar="SPEC",
                    help="'rule' (transparent notice detector) or 'judge:<model>' (any model load_model can load); "
                         "repeat to combine (default: rule)")
    ap.add_argument("--final", default=None,
                    help="labeller whose notice verdict splits correct answers into A/B: a --labeller spec, or 'judge' "
                         "when there is one judge (default: the first --labeller)")
    ap.add_argument("--name", default=None,
                    help="labelling directory name under RUN_DIR/labels (default: from the labellers; an existing name "
                         "is an error); with --import-sheet: the labelling to compare against (default: newest)")
    ap.add_argument("--device", default=None, help="judge device: cpu, cuda, cuda:N or auto")
    ap.add_argument("--dtype", default=None, help="judge dtype: float32, float16, bfloat16 or auto")
    ap.add_argument("--quantize", default=None, choices=("4bit", "8bit"), help="load the judge quantized (bitsandbytes)")
    ap.add_argument("--judge-batch-size", type=int, default=8, help="judge generation batch size")
    ap.add_argument("--judge-max-new-tokens", type=int, default=16,
                    help="tokens a judge may write per prompt (a longer reply whose last line is not a verdict is null)")
    ap.add_argument("--judge-all", action="store_true",
                    help="judge every continuation, not only those with a correct answer")
    ap.add_argument("--export-sheet", type=int, default=None, metavar="N",
                    help="write a blind annotation sheet of N seeded perturbed continuations + a private key")
    ap.add_argument("--seed", type=int, default=0, help="sampling seed for --export-sheet")
    ap.add_argument("--import-sheet", nargs="+", default=None, metavar="FILE",
                    help="filled annotation sheet(s), one per annotator: report Cohen's kappa")
    ap.add_argument("--key", default=None, help="the export's .key.json (default: the only one in RUN_DIR/annotation)")
    ap.add_argument("--no-progress", action="store_true", help="hide progress bars")
    return ap


def main(argv: Sequence[str] | None = None) -> int:
    ap = build_parser()
    args = ap.parse_args(argv)
    rd = Path(args.run_dir)
    sheet_mode = args.export_sheet is not None or args.import_sheet is not None
    try:
        if not rd.is_dir():
            raise RunDirError(f"run directory {str(rd)!r} does not exist; pass a directory written by python -m behavioural.run")
        if sheet_mode:
            if args.labeller or args.final:
                raise ValueError("labelling (--labeller/--final) and sheet export/import are separate runs; run them one at a time")
            if args.export_sheet is not None:
                sheet, key = export_sheet(rd, args.export_sheet, args.seed)
                print(f"wrote blind sheet {sheet} and private key {key} (keep the key away from annotators)")
            if args.import_sheet is not None:
                rep = compare_sheets(rd, args.import_sheet, key=args.key, labelling=args.name)
                out = _unique_path(rd / "annotation" / "agreement.json")
                out.parent.mkdir(parents=True, exist_ok=True)
                write_json(out, rep)
                print(format_agreement(rep))
                print(f"wrote {out}")
            return 0
        specs = args.labeller or ["rule"]
        if len(set(specs)) != len(specs):
            raise ValueError(f"labeller given twice in {specs}; pass each --labeller once")
        labellers = [make_labeller(s, device=args.device, dtype=args.dtype, quantize=args.quantize,
                                   max_new_tokens=args.judge_max_new_tokens, batch_size=args.judge_batch_size,
                                   judge_all=args.judge_all) for s in specs]
        out = label_run(rd, labellers, final=args.final, name=args.name, progress=not args.no_progress,
                        command=list(argv) if argv is not None else sys.argv[1:])
        print(format_summary(read_json(out / "summary.json")))
        print(f"wrote {out}")
        return 0
    except (SheetError, RunDirError, ValueError) as e:
        print(f"error: {e}", file=sys.stderr)
        return 2
    except Exception as e:  # model loading errors and the like: one line, non-zero
        from behavioural.models import ModelError

        if isinstance(e, ModelError):
            print(f"error: {e}", file=sys.stderr)
            return 2
        raise


if __name__ == "__main__":
    sys.exit(main())
