"""One count for one quantity (issue #32, finding 6): the gradient's rates and Table 4 count each distinct
generation once in a group, as section 1 and the verdict do; the probe figure's headline interval is the text's.

    .venv/bin/pytest -q tests/test_one_count.py

Before the fix, a generation two strategies shared at the early position was two rows in the gradient's
position=early (136/169 against section 1's 131/164), Table 4's total was 257 against the verdict's 252, and
the probe plot's headline showed the Wilson interval [0.762, 0.846] beside the text's clustered [75.4, 85.3].
"""
from __future__ import annotations


def _rows():
    """Rows as behavioural.gradient.rows emits them: one per (record, strategy); record q1|early is one
    generation shared by strategies a and b (its memberships), so it has two rows."""
    rows = []
    for q in ("q1", "q2", "q3"):
        for rid, strats, pos, c in ((f"{q}|early", ("a", "b"), "early", True), (f"{q}|middle", ("a",), "middle=late", q == "q1")):
            for i, st in enumerate(strats):
                rows.append({"id": rid, "run": "R", "model": "m", "cell": "t", "qkey": q, "gen": rid, "first": i == 0,
                             "strategy": st, "family": "numerical", "position": pos, "label": "C" if c else "non-C",
                             "abc": "C" if c else "A", "condition": "perturbed", "dataset": "arith"})
    return rows


def test_a_shared_generation_counts_once_in_a_position_group_and_in_table4():
    from behavioural.gradient import analysis as A
    from behavioural.gradient.rates import pooled, propagation
    from behavioural.gradient.regression import position_test

    rows = _rows()
    distinct = len({r["id"] for r in rows})  # 6 generations, 9 rows
    early = position_test(rows, {})["rates"]["early"]
    assert (early["k"], early["n"]) == (3, 3)  # not 6/6
    assert pooled(rows)["n"] == distinct and pooled(rows)["k"] == 4
    tx = A.taxonomy(rows)
    assert tx["n"] == distinct == pooled(rows)["n"]  # Table 4's total is the verdict's
    assert tx["position"]["early"]["C"]["count"] == 3 and tx["position"]["middle=late"]["A"]["count"] == 2
    # a strategy group still holds every generation of that strategy once
    assert tx["strategy"]["b"]["C"]["count"] == 3 and propagation([r for r in rows if r["strategy"] == "a"])["n"] == 6


def test_the_probe_figure_shows_the_texts_interval(tmp_path, monkeypatch):
    import matplotlib.pyplot as plt

    from loadbearing.stats import format_rate
    from probes.plot import plot_accuracy_vs_layer

    acc = {"k": 68, "n": 77, "rate": 68 / 77, "wilson": [0.79, 0.94], "lo": 0.7486, "hi": 0.9607,
           "method": "korn-graubard", "n_questions": 13}
    layer = {"layer": 2, "accuracy": acc, "control": {"accuracy": {"k": 39, "n": 77, "rate": 0.5, "wilson": [0.4, 0.6]}}}
    results = {"majority_baseline": {"accuracy": {"rate": 0.5}}, "metadata_baseline": {},
               "probes": {"logistic": {"layers": [layer, dict(layer, layer=3)], "nested": {"accuracy": acc}}},
               "settings": {"target": "propagation", "position": "prefix_last", "folds": 5, "group": "question"},
               "data": {"n_rows": 77}}
    kept = []
    monkeypatch.setattr(plt, "close", lambda fig: kept.append(fig))
    plot_accuracy_vs_layer(results, tmp_path / "p.png")
    ax = kept[0].axes[0]
    labels = [t.get_text() for t in ax.get_legend().get_texts()]
    assert f"logistic nested-CV headline {format_rate(acc)}" in labels  # the text's call, the text's numbers
    band = ax.collections[0].get_paths()[0].vertices[:, 1]
    assert round(float(band.min()), 4) == 0.7486 and round(float(band.max()), 4) == 0.9607  # not Wilson's
