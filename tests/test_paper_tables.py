"""The paper's own tables by their real column names: the headers of the CSVs the paper released
(tests/fixtures/released_headers/, copied from r2m-ai/load-bearing-cot ``figures/``; see its README) come first,
in order and spelled exactly, in what ``probes.train --paper-table`` and ``steering.paper.table7`` write."""
from __future__ import annotations

import csv
import io
from pathlib import Path

import numpy as np
import pytest

HEADERS = Path(__file__).parent / "fixtures" / "released_headers"


def _released(name: str) -> list[str]:
    with open(HEADERS / name, newline="") as f:
        return next(csv.reader(f))


def test_probe_paper_table_starts_with_the_released_header():
    from probes.paper_table import COLUMNS, PAPER_COLUMNS, layer_row, to_csv

    released = _released("table5_7_probe_with_ci.csv")
    assert list(PAPER_COLUMNS) == released and list(COLUMNS[:len(released)]) == released
    y = np.array([0, 1, 0, 1, 1, 0, 1, 0])
    pred = np.array([0, 1, 1, 1, 1, 0, 0, 0])
    folds = np.array([0, 0, 0, 0, 1, 1, 1, 1])
    row = layer_row("Binary faithful", "propagation", 3, "logistic", y, pred, folds, np.array(list("aabbccdd")))
    text = to_csv({"rows": [row]})
    assert text.splitlines()[0].startswith(",".join(released) + ",target,")
    got = next(csv.DictReader(io.StringIO(text)))
    # fold 0: 3/4 right, fold 1: 3/4 right; written as the release writes them (3 decimals, "a,b" in one cell)
    assert got["probe"] == "linear" and got["acc_mean"] == "0.750" and got["acc_std"] == "0.000"
    assert got["acc_ci"] == "75.0% +/- 0.0%" and got["per_fold_acc"] == "0.750,0.750" and got["n"] == "8"
    from sklearn.metrics import f1_score

    f1s = [f1_score(y[folds == k], pred[folds == k], average="macro") for k in (0, 1)]
    assert float(got["f1_mean"]) == pytest.approx(np.mean(f1s), abs=5e-4)
    assert float(got["f1_std"]) == pytest.approx(np.std(f1s), abs=5e-4)


def test_steering_table7_starts_with_the_released_header():
    from steering.paper.table7 import COLUMNS, PAPER_COLUMNS, to_csv

    released = _released("table7_intervention.csv")
    assert list(PAPER_COLUMNS) == released and list(COLUMNS[:len(released)]) == released
    assert to_csv([]).splitlines()[0].startswith(",".join(released) + ",")
