"""The steering sweep's fitting rows and controls on the planted model: the fitting questions read from the
directions' store are left out of the steered cases, fresh random directions per generation, covariance-matched
controls drawn from the fitting rows (isotropic where a layer's activations do not vary), one random direction per
sweep."""
from __future__ import annotations

import json

import numpy as np
import pytest
from helpers.steering import PLANT, make_steering_run, planted_lm, sweep_config, unit, write_dirs

pytestmark = pytest.mark.usefixtures("one_thread")


def test_fitting_questions_read_from_the_directions_store(tokenizer, tmp_path):
    from activations.store import StoreWriter
    from steering.sweep.cli import run_sweep

    lm = planted_lm(tokenizer)
    run = make_steering_run(tmp_path, tokenizer, n_c=4, n_non=0)  # questions q0..q3
    store = tmp_path / "activations.h5"
    w = StoreWriter(store, layers=[2], positions=["prefix_last"], d_model=64, attrs={"model_name": "planted"})
    rows = [{"continuation_id": f"c{i}", "question_id": f"q{i}", "label": "C", "input_tokens": 5} for i in (0, 1)]
    w.append(rows, {"prefix_last": np.zeros((2, 1, 64))}, {"prefix_last": np.zeros((2, 2), np.int32)})
    w.finish()
    dirs = write_dirs(tmp_path / "probes", {2: np.stack([unit(PLANT)])},
                       attrs={"store": json.dumps({"path": str(store)})})
    s = run_sweep(sweep_config(run, dirs, layers=[2], ks=[1], alphas=[1.0], random_seeds=1), lm=lm, echo=lambda m: None)
    assert s["n_c_questions"] == 2 and s["split"]["disjoint"] is True and "activation store" in s["split"]["source"]
    recs = [json.loads(x) for x in (run / "steering" / "generations.jsonl").read_text().splitlines()]
    assert {r["question_id"] for r in recs} == {"q2", "q3"}



def test_fresh_random_directions_and_covariance_matched_controls(tokenizer, tmp_path):
    """Each random generation draws its own direction; for k > 1 covariance-matched controls are drawn from the
    fitting rows' within-class covariance (read from the store the directions name) beside isotropic ones."""
    from steering.sweep.cli import run_sweep
    from steering.sweep.controls import covariance_basis

    rng = np.random.default_rng(0)
    rows = rng.standard_normal((200, 64)) * 0.01
    rows[:, 5] *= 1000.0  # one high-variance axis
    b = covariance_basis(2, rows, seed=1)
    assert np.allclose(b @ b.T, np.eye(2), atol=1e-5) and abs(b[0, 5]) > 0.9

    lm = planted_lm(tokenizer)
    run = make_steering_run(tmp_path, tokenizer, n_c=4, n_non=0)  # questions q0..q3, steered
    X = rng.standard_normal((40, 1, 64)) * 0.01
    X[:, 0, 5] *= 1000.0
    store = _fit_store(tmp_path, X)
    dirs = write_dirs(tmp_path / "probes", {2: np.stack([unit(PLANT), unit(62)])},
                       attrs={"store": json.dumps({"path": str(store)}), "position": "prefix_last"})
    s = run_sweep(sweep_config(run, dirs, layers=[2], ks=[1, 2], alphas=[1.0], random_seeds=2), lm=lm, echo=lambda m: None)
    assert s["n_c_questions"] == 4
    by = {d["key"]: d for d in s["settings"]}
    assert by["L2|k1|a1|probe"]["control"]["kind"] == "random" and "isotropic" not in by["L2|k1|a1|probe"]
    k2 = by["L2|k2|a1|probe"]
    assert k2["control"]["kind"] == "random_cov" and k2["control"]["m"] == 2
    assert k2["isotropic"]["keys"] == ["L2|k2|a1|random0", "L2|k2|a1|random1"]
    assert "covariance-matched" in s["controls_note"] and "40 fitting rows" in s["controls_note"]
    recs = [json.loads(x) for x in (run / "steering" / "generations.jsonl").read_text().splitlines()]
    seeds = [r["direction_seed"] for r in recs if r["basis"] in ("random", "random_cov")]
    assert len(seeds) == len(set(seeds)) == 4 * (2 + 2 + 2) == s["n_random_directions"]
    assert all(r["direction_seed"] is None for r in recs if r["basis"] in ("probe", "none"))
    # without a readable store: isotropic only, and said so
    plain = write_dirs(tmp_path / "plain", {2: np.stack([unit(PLANT), unit(62)])})
    s2 = run_sweep(sweep_config(run, plain, layers=[2], ks=[2], alphas=[1.0], random_seeds=2, output=str(tmp_path / "o2")),
                   lm=lm, echo=lambda m: None)
    assert s2["settings"][0]["control"]["kind"] == "random" and "isotropic only" in s2["controls_note"]


def _fit_store(tmp_path, X):
    """An activation store of the direction-fitting rows ``X`` [n, 1, 64] at layer 2 (two rows per question,
    alternating non-C / C): the rows a covariance-matched control is drawn from."""
    from activations.store import StoreWriter

    store = tmp_path / "activations.h5"
    w = StoreWriter(store, layers=[2], positions=["prefix_last"], d_model=64, attrs={"model_name": "planted"})
    meta = [{"continuation_id": f"f{i}", "question_id": f"fit{i // 2}", "label": "C" if i % 2 else "non-C",
             "condition": "perturbed", "input_tokens": 5} for i in range(len(X))]
    w.append(meta, {"prefix_last": X}, {"prefix_last": np.zeros((len(X), 2), np.int32)})
    w.finish()
    return store


def test_a_layer_whose_activations_do_not_vary_gets_isotropic_controls_not_a_zero_vector(tokenizer, tmp_path):
    """A tiny model's embeddings at a token every row shares do not vary: the within-class covariance there is
    zero, and a covariance-matched draw from it is the zero vector (the study refused the whole steering stage
    on the graded and decorative organisms: "the directions sum to the zero vector"). Such a layer gets isotropic
    controls only, the note says why, and the sweep runs."""
    from steering.sweep.cli import run_sweep
    from steering.sweep.config import SweepError
    from steering.sweep.controls import covariance_basis, within_class_rank

    with pytest.raises(SweepError, match="rank < k = 2"):
        covariance_basis(2, np.zeros((40, 64)), seed=1)
    flat = np.zeros((40, 64))
    flat[:, 3] = np.random.default_rng(0).standard_normal(40)
    assert within_class_rank(flat, 4, scale=1.0) == 1 and within_class_rank(flat * 1e-9, 4, scale=1.0) == 0
    lm = planted_lm(tokenizer)
    run = make_steering_run(tmp_path, tokenizer, n_c=4, n_non=0)
    n = 40
    X = np.tile(np.linspace(-1, 1, 64), (n, 1, 1)) + 0.1 * (np.arange(n) % 2)[:, None, None]  # constant per class
    store = _fit_store(tmp_path, X)
    dirs = write_dirs(tmp_path / "probes", {2: np.stack([unit(PLANT), unit(62)])},
                      attrs={"store": json.dumps({"path": str(store)}), "position": "prefix_last"})
    s = run_sweep(sweep_config(run, dirs, layers=[2], ks=[1, 2], alphas=[1.0], random_seeds=2), lm=lm, echo=lambda m: None)
    by = {d["key"]: d for d in s["settings"]}
    assert by["L2|k2|a1|probe"]["control"]["kind"] == "random"
    assert "isotropic only" in s["controls_note"] and "layer 2: within-class rank 0 < k = 2" in s["controls_note"]
    recs = [json.loads(x) for x in (run / "steering" / "generations.jsonl").read_text().splitlines()]
    assert {r["setting"] for r in recs} == {"none|alpha0"} | {f"L2|k{k}|a1|{b}" for k in (1, 2)
                                                             for b in ("probe", "random0", "random1")}


def test_random_scope_sweep_applies_each_random_direction_to_every_case(tokenizer, tmp_path):
    from steering.sweep.cli import run_sweep

    lm = planted_lm(tokenizer)
    run = make_steering_run(tmp_path, tokenizer, n_c=4, n_non=0)
    dirs = write_dirs(tmp_path / "probes", {2: np.stack([unit(PLANT)])})
    s = run_sweep(sweep_config(run, dirs, layers=[2], ks=[1], alphas=[1.0], random_seeds=2, random_scope="sweep"), lm=lm,
                  echo=lambda m: None)
    recs = [json.loads(x) for x in (run / "steering" / "generations.jsonl").read_text().splitlines()]
    for j in (0, 1):
        seeds = {r["direction_seed"] for r in recs if r["setting"] == f"L2|k1|a1|random{j}"}
        assert len(seeds) == 1  # one direction for all 4 cases
    rk = s["settings"][0]["direction_rank"]
    assert rk["n_directions"] == 2 and rk["min_p_greater"] == pytest.approx(1 / 3)
    cfg = json.loads((run / "steering" / "config.json").read_text())
    assert cfg["random_directions"].startswith("per sweep")
