"""``steering.read_sweep``'s ``direction_seed`` is the exact uint64 the sweep drew (issue #32, finding 8): a
float64 column altered 287 of 288 seeds, so the random controls could not be regenerated from the frame.

    .venv/bin/pytest -q tests/test_api_seeds.py
"""
from __future__ import annotations

import json


def test_direction_seeds_stay_exact_integers(tmp_path):
    import steering

    d = tmp_path / "steering"
    d.mkdir()
    seeds = [None, 11883511280033090040, 2**64 - 1, 9007199254740993]  # none of the last three survives float64
    with open(d / "generations.jsonl", "w") as f:
        for i, s in enumerate(seeds):
            rec = {"setting": f"s{i}", "basis": "probe" if s is None else "random", "case_id": "c1", "case_label": "C",
                   "correct": i == 1, "direction_seed": s, "seed": None if s is None else i}
            f.write(json.dumps(rec) + "\n")
    g = steering.read_sweep(d)
    assert str(g.direction_seed.dtype) == "UInt64"
    assert [None if v is None or str(v) == "<NA>" else int(v) for v in g.direction_seed.astype(object)] == seeds
    assert any(float(s) != s for s in seeds[1:])  # the float path would have altered them
    assert (g.continuation_id == g.case_id).all() and (g.outcome == g.case_label).all()


def test_directions_repr_is_one_short_line():
    import numpy as np

    from probes.directions import Directions

    layers = list(range(31))
    d = Directions(path="runs/s/probes/directions.h5", sha256="ab" * 32, layers=layers,
                   bases={L: np.zeros((8, 576), np.float32) for L in layers}, names={L: [] for L in layers},
                   resid_norm={L: 1.0 for L in layers}, selected_layer=22,
                   logistic={L: np.zeros(576, np.float32) for L in layers},
                   question_split={"fit": ["q1", "q2"], "held_out": ["q3"]})
    r = repr(d)
    assert "\n" not in r and len(r) < 300 and "array" not in r
    assert "layers=0..30 (31)" in r and "d_model=576" in r and "k=8" in r and "fit_questions=2" in r
