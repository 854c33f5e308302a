"""Design matrices before a fit (loadbearing.stats.design): collapsed positions become one level, duplicate and
dependent columns are merged or dropped with a note; the gradient's fits and tables use it, and its Table 4
counts perturbed generations only."""
from __future__ import annotations

import json

import numpy as np
import pandas as pd
from helpers.gradient_runs import make_run

from behavioural.gradient import GradientConfig, format_summary, run_gradient
from behavioural.gradient.analysis import taxonomy
from behavioural.gradient.rows import load_runs
from loadbearing.stats.design import distinct_columns, full_rank, merged_position, position_index


def test_merged_position_labels_and_trend_index():
    assert merged_position(["late", "middle"]) == "middle=late"
    assert merged_position(["middle", "late", "early"]) == "early=middle=late"
    assert merged_position(["early"]) == "early" and merged_position(["middle=late", "late"]) == "middle=late"
    assert [position_index(p) for p in ("early", "middle", "late", "middle=late")] == [0.0, 1.0, 2.0, 1.5]
    assert position_index("unknown") is None and position_index("middle=unknown") is None


def test_full_rank_merges_duplicates_and_drops_dependent_columns():
    rng = np.random.default_rng(0)
    a, c = rng.normal(size=20), rng.normal(size=20)
    X = pd.DataFrame({"Intercept": 1.0, "a": a, "a_copy": a, "c": c, "a_plus_c": a + c, "zero": 0.0})
    R, notes = full_rank(X)
    assert list(R.columns) == ["Intercept", "a", "c"]
    assert np.linalg.matrix_rank(R.to_numpy()) == 3
    assert notes == ["a_copy equals a in every row: merged into a (one coefficient)",
                     "a_plus_c is a linear combination of the columns before it (Intercept, a, c): dropped "
                     "(not identified)",
                     "zero is zero in every row: dropped"]
    same, none = full_rank(X[["Intercept", "a", "c"]])
    assert none == [] and same is not None and list(same.columns) == ["Intercept", "a", "c"]
    arr, dup = distinct_columns(np.column_stack([a, a + c, a]))  # only exact duplicates, arrays stay arrays
    assert isinstance(arr, np.ndarray) and arr.shape == (20, 2) and dup == ["2 equals 0 in every row: merged into 0 "
                                                                            "(one coefficient)"]


def _collapse(d, share_all: bool = True) -> int:
    """Make the middle and late edits of each question (all, or every other question) one generation, as the
    protocol records it when both land on one line. Returns the number of questions collapsed."""
    path = d / "continuations.jsonl"
    recs = [json.loads(x) for x in path.read_text().splitlines()]
    late = {(r["question_id"], r["strategy"], r["condition"]): r for r in recs if r["position"] == "late"}
    out, hit = [], set()
    for r in recs:
        i = int(r["question_id"].rsplit("/", 1)[1])
        if share_all or i % 2 == 0:
            if r["position"] == "late":
                continue
            if r["position"] == "middle":
                twin = late[(r["question_id"], r["strategy"], r["condition"])]
                r["memberships"] = [[r["strategy"], "middle"], [r["strategy"], "late"]]
                r["label"], r["correct"], r["continuation"] = twin["label"], twin["correct"], twin["continuation"]
                hit.add(i)
        else:
            r["line_index"] = {"early": 0, "middle": 1, "late": 2}[r["position"]]
        out.append(r)
    path.write_text("".join(json.dumps(r) + "\n" for r in out))
    return len(hit)


def test_a_fit_with_collapsed_positions_has_no_duplicate_coefficient_and_says_so(tmp_path):
    runs = [make_run(tmp_path, lv, level=lv, acc=a, p_c=p, n_q=16, labels=True, seed=k)
            for k, (lv, a, p) in enumerate((("s2_o3", 0.75, 0.3), ("s2_o5", 0.5, 0.5), ("s2_o9", 0.4, 0.7)))]
    n_q = sum(_collapse(d) for d in runs)
    s = run_gradient(GradientConfig(runs=tuple(map(str, runs)), output=str(tmp_path / "g"), plot=False))
    reg = s["regression"]
    assert reg["status"] == "ok"
    pos_terms = [k for k in reg["coefficients"] if "position" in k]
    assert pos_terms == ["C(position)[T.middle=late]", "difficulty:C(position)[T.middle=late]"]
    coefs = [round(v["coef"], 9) for v in reg["coefficients"].values()]
    assert len(coefs) == len(set(coefs))  # no estimate printed twice
    assert any("middle=late is one generation" in n for n in reg["notes"])
    assert s["position_merges"]["merged"] == {"middle=late": n_q} and s["position_merges"]["of"] == n_q
    assert s["position_merges"]["levels"] == ["early", "middle=late"]
    pos = s["position"]
    assert list(pos["rates"]) == ["early", "middle=late"] and pos["position_index"] == {"early": 0.0, "middle=late": 1.5}
    assert "merged middle=late=1.5" in pos["model"]
    assert set(s["taxonomy"]["position"]) == {"early", "middle=late"}
    md = (tmp_path / "g" / "gradient.md").read_text()
    assert f"positions merged: middle=late in {n_q} of {n_q} questions" in md
    assert f"merged positions (one generation edits the same line at both): middle=late in {n_q} of {n_q}" in md
    assert "C(position)[T.late]" not in md and "C(position)[T.middle]" not in md


def test_positions_that_collapse_in_some_questions_keep_all_levels(tmp_path):
    d = make_run(tmp_path, "mixed", n_q=16, acc=1.0, p_c=0.5)
    n_hit = _collapse(d, share_all=False)
    s = run_gradient(GradientConfig(runs=(str(d),), plot=False))
    assert s["position_merges"]["merged"] == {"middle=late": n_hit} and s["position_merges"]["of"] == 16
    assert s["position_merges"]["every_question"] == {"middle=late": False}
    assert list(s["position"]["rates"]) == ["early", "middle", "middle=late", "late"]
    assert s["position"]["position_index"]["middle=late"] == 1.5
    terms = [k for k in s["regression"]["coefficients"] if k.startswith("C(position)")]
    assert terms == ["C(position)[T.late]", "C(position)[T.middle]", "C(position)[T.middle=late]"]


def test_a_rank_deficiency_from_another_column_is_reduced_with_a_note(tmp_path):
    # the text family exists at one level only: difficulty:C(family)[T.text] is difficulty_a x C(family)[T.text]
    a = make_run(tmp_path, "a", level="s2_o3", acc=0.75, p_c=0.4, n_q=16, strategies=("arithmetic", "contradiction"))
    b = make_run(tmp_path, "b", level="s2_o5", acc=0.5, p_c=0.6, n_q=16, strategies=("arithmetic",), seed=3)
    s = run_gradient(GradientConfig(runs=(str(a), str(b)), plot=False))
    reg = s["regression"]
    assert reg["status"] == "ok" and "difficulty:C(family)" in reg["formula"]
    assert "difficulty:C(family)[T.text]" not in reg["coefficients"] and "C(family)[T.text]" in reg["coefficients"]
    assert any(n.startswith("difficulty:C(family)[T.text] is a linear combination of the columns before it")
               for n in reg["design_notes"])
    assert all(v["se"] is not None for v in reg["coefficients"].values())  # every kept term is identified
    assert "note: difficulty:C(family)[T.text] is a linear combination" in format_summary(s, style="md")


def test_table4_counts_perturbed_generations_only(tmp_path):
    d = make_run(tmp_path, "lab", labels=True, p_c=0.4)  # the labelling labels the controls too (A / B)
    lab = {json.loads(x)["id"]: json.loads(x)["label"] for x in (d / "labels/rule/labels.jsonl").read_text().splitlines()}
    assert any(k.endswith("|control") for k in lab)
    data = load_runs([str(d)])
    tx = taxonomy(data.rows)
    pert = [k for k in lab if k.endswith("|perturbed")]
    assert tx["n"] == len(pert) == len(data.rows)
    want = {x: sum(lab[k] == x for k in pert) for x in "ABC"}
    assert {x: sum(g[x]["count"] for g in tx["dataset"].values()) for x in "ABC"} == want
    # even handed the controls, Table 4 leaves them out
    both = taxonomy(data.rows + data.controls)
    assert both["n"] == tx["n"] and both["position"] == tx["position"] and both["controls_excluded"] == len(data.controls)
    md = format_summary(run_gradient(GradientConfig(runs=(str(d),), plot=False)), style="md")
    assert (f"(perturbed generations only, {len(pert)} distinct labelled generations, each counted once per group; "
            "the controls are left out)") in md


def test_metadata_baseline_merges_duplicate_one_hot_columns():
    from probes.fit.cv import outer_folds
    from probes.validity import metadata_baseline

    rng = np.random.default_rng(3)
    n = 120
    level = rng.choice(["s2_o3", "s2_o5"], n)
    strat = rng.choice(["a", "b"], n)
    y = ((strat == "a") ^ (rng.random(n) < 0.1)).astype(int)
    # an arith store: task and difficulty are the same level name, so their one-hot columns are identical
    meta = pd.DataFrame({"strategy": strat, "task": level, "difficulty": level})
    g = np.arange(n) // 2
    mb = metadata_baseline(meta, y, g, outer_folds(y, g, 4, 0), Cs=(0.1, 1.0, 10.0))
    assert mb["features"] == ["strategy", "task", "difficulty"]
    assert mb["merged_columns"] == [f"difficulty={v} equals task={v} in every row: merged into task={v} (one coefficient)"
                                    for v in ("s2_o3", "s2_o5")]
    assert np.mean(mb["pred"] == y) > 0.8
