"""Blind annotation sheets (behavioural.labels.stage): export (blind, seeded, never overwritten), import with
Cohen's kappa between annotators and against the labellers, and the bad sheets refused with their row."""
from __future__ import annotations

import csv
import json
import re
from pathlib import Path

import pytest
from helpers.label_runs import Q, fake_run

from behavioural.labels.stage import compare_sheets, export_sheet, main, read_sheet
from loadbearing.files import read_jsonl

# ----------------------------------------------------------------------------------------------------
# blind annotation sheets


def _fill(sheet: Path, dest: Path, labels: dict[str, str], mutate=None) -> Path:
    with open(sheet, newline="") as f:
        rows = list(csv.reader(f))
    header, body = rows[0], rows[1:]
    for r in body:
        r[-1] = labels.get(r[0], "")
    if mutate:
        header, body = mutate(header, body)
    with open(dest, "w", newline="") as f:
        w = csv.writer(f)
        w.writerow(header)
        w.writerows(body)
    return dest


def test_export_sheet_is_blind_seeded_and_never_overwrites(tmp_path):
    rd, conts = fake_run(tmp_path)
    sheet, key = export_sheet(rd, 5, seed=3)
    with open(sheet, newline="") as f:
        rows = list(csv.DictReader(f))
    assert list(rows[0]) == ["item_id", "question", "reasoning_before_edit", "original_line", "edited_line",
                             "continuation", "label"]
    assert len(rows) == 5 and all(r["label"] == "" for r in rows)
    assert all(re.fullmatch(r"item-\d{3}", r["item_id"]) for r in rows)
    assert not any("perturbed" in v or "control" in v for r in rows for v in r.values())
    items = json.loads(key.read_text())["items"]
    by_id = {c["id"]: c for c in conts}
    for r in rows:
        c = by_id[items[r["item_id"]]]
        assert c["condition"] == "perturbed"
        assert r["continuation"] == c["continuation"] and r["edited_line"] == c["edited_line"] and r["question"] == Q
    sheet2, key2 = export_sheet(rd, 5, seed=3)
    assert sheet2 != sheet and sheet2.read_bytes() == sheet.read_bytes()  # same seed, same sample; new file
    assert json.loads(key2.read_text())["items"] == items
    sheet3, _ = export_sheet(rd, 5, seed=4)
    assert json.loads(sheet3.with_name(sheet3.stem + ".key.json").read_text())["items"] != items


def test_sheet_kappa_between_annotators_and_labellers(tmp_path, capsys):
    rd, conts = fake_run(tmp_path)
    assert main([str(rd), "--quiet"]) == 0
    assert main([str(rd), "--export-sheet", "6", "--seed", "1"]) == 0
    sheet = rd / "annotation" / "sheet-s1-n6.csv"
    items = json.loads((rd / "annotation" / "sheet-s1-n6.key.json").read_text())["items"]
    order = sorted(items)
    a = dict(zip(order, ["A", "A", "B", "C", "C", "A"]))
    b = dict(zip(order, ["A", "B", "B", "C", "C", "A"]))
    fa = _fill(sheet, tmp_path / "alice.csv", a)
    fb = _fill(sheet, tmp_path / "bob.csv", b)
    capsys.readouterr()
    assert main([str(rd), "--import-sheet", str(fa), str(fb)]) == 0
    out = capsys.readouterr().out
    assert "alice vs bob" in out
    rep = json.loads((rd / "annotation" / "agreement.json").read_text())
    pair = rep["between_annotators"][0]
    assert pair["ABC"]["kappa"] == pytest.approx(0.75) and pair["ABC"]["n"] == 6
    assert pair["C_vs_nonC"]["kappa"] == pytest.approx(1.0)
    # against the rule labeller: recompute by hand from the labels file
    lab = {r["id"]: r["label"] for r in read_jsonl(rd / "labels" / "rule" / "labels.jsonl")}
    ours = [lab[items[i]] for i in order]
    from sklearn.metrics import cohen_kappa_score

    pairs = [(x, a[i]) for x, i in zip(ours, order) if x is not None]
    row = next(r for r in rep["against_labellers"] if r["annotator"] == "alice" and r["labeller"] == "rule")
    assert row["ABC"]["n"] == len(pairs)
    exp = cohen_kappa_score([p[0] for p in pairs], [p[1] for p in pairs])
    assert row["ABC"]["kappa"] == pytest.approx(exp)
    assert any(r["labeller"] == "answer (correctness)" for r in rep["against_labellers"])
    # a second import writes a new agreement file
    assert main([str(rd), "--import-sheet", str(fa), str(fb)]) == 0
    assert (rd / "annotation" / "agreement-2.json").is_file()
    # direct API on one sheet with a missing row: counts say so
    rep = compare_sheets(rd, [_fill(sheet, tmp_path / "carol.csv", dict(list(a.items())[:4]),
                                    mutate=lambda h, body: (h, [r for r in body if r[-1]]))])
    assert rep["annotators"]["carol"]["n_missing"] == 2


@pytest.mark.parametrize("mutate,needle", [
    (lambda h, b: (h, [["", *b[0][1:]], *b[1:]]), "row 2: missing item_id"),
    (lambda h, b: (h, [b[0], [*b[1][:-1], "D"], *b[2:]]), "row 3: unknown label 'D'"),
    (lambda h, b: (h, [b[0], [*b[1][:-1], ""], *b[2:]]), "row 3: no label"),
    (lambda h, b: (h, [*b, b[0]]), "duplicate row"),
    (lambda h, b: (h, [["item-999", *b[0][1:]], *b[1:]]), "row 2: unknown item id 'item-999'"),
    (lambda h, b: (h[:-1] + ["verdict"], b), "no 'label' column"),
])
def test_bad_sheets_fail_with_row(tmp_path, capsys, mutate, needle):
    rd, _ = fake_run(tmp_path)
    sheet, key = export_sheet(rd, 4, seed=0)
    items = json.loads(key.read_text())["items"]
    bad = _fill(sheet, tmp_path / "bad.csv", {i: "A" for i in items}, mutate=mutate)
    capsys.readouterr()
    assert main([str(rd), "--import-sheet", str(bad)]) == 2
    err = capsys.readouterr().err.strip()
    assert needle in err and "bad.csv" in err and "\n" not in err
    assert not (rd / "annotation" / "agreement.json").exists()


def test_read_sheet_accepts_lowercase_and_blank_lines(tmp_path):
    p = tmp_path / "s.csv"
    p.write_text("item_id,label\nitem-001, b \n\nitem-002,c\n")
    assert read_sheet(p, {"item-001": "x", "item-002": "y", "item-003": "z"}) == {"item-001": "B", "item-002": "C"}
