"""``steering.sweep --design paper`` on the real embedded SmolLM2-135M-Instruct at small n (integration tier).

The run directory is built as tests/test_steering.py builds its own (``make_steering_run``: chat-templated prompts, a
prefix, C cases whose gold the unsteered model misses), for the embedded model; the directions are fitted by
the probes' own :func:`probes.fit.direction_fit.fit_directions` on the model's real hidden states at the paper's
relative depth, from the fit questions only, so the residual norm the raw alphas are set against is the model's.
"""
from __future__ import annotations

import csv
import json

import numpy as np
import pytest
from helpers.steering import make_steering_run

pytestmark = pytest.mark.integration


def test_paper_design_on_the_embedded_model(smol, tmp_path):
    import torch

    from probes.directions import write_directions
    from probes.fit.direction_fit import fit_directions
    from steering.paper.design import paper_layer, run_paper_design
    from steering.paper.table7 import PAPER_COLUMNS
    from steering.sweep.cli import SweepConfig

    layer = paper_layer(smol.model.config.num_hidden_layers)
    assert layer == 16  # block 15 of SmolLM2's 30, as block 21 of Gemma-2-9b-it's 42
    run = make_steering_run(tmp_path, smol.tokenizer, n_c=10, n_non=10, model="smollm2-135m-instruct")
    recs = [json.loads(x) for x in (run / "continuations.jsonl").read_text().splitlines()]
    pert = [r for r in recs if r["condition"] == "perturbed"]
    fit = [r for r in pert if int(r["question_id"][1:]) % 10 < 7]  # 7 C + 7 non-C fit questions, 3 + 3 held out
    enc = smol.tokenizer([r["input_text"] for r in fit], add_special_tokens=False, return_tensors="pt", padding=True,
                         padding_side="left")
    with torch.no_grad():
        hs = smol.model(**enc, output_hidden_states=True).hidden_states[layer][:, -1]  # [n, d_model], prefix_last
    y = np.array([r["label"] == "C" for r in fit], dtype=int)
    d = fit_directions(hs.float().numpy(), y, np.arange(len(fit)), n_directions=8, solver="sklearn")
    assert d["basis_m2"].shape == (8, 576) and d["basis_probe_pc"].shape == (8, 576)
    fit_q = sorted({r["question_id"] for r in fit})
    held = sorted({r["question_id"] for r in pert} - set(fit_q))
    (tmp_path / "probes").mkdir()
    write_directions(tmp_path / "probes" / "directions.h5", {layer: d}, target="propagation", position="prefix_last",
                     store={"path": "/nowhere/activations.h5"}, n_directions=8,
                     question_split={"fit": fit_q, "held_out": held, "key": "question_id", "fraction": 0.3})

    out = tmp_path / "steering-paper"
    cfg = SweepConfig(run_dir=str(run), directions=str(tmp_path / "probes"), output=str(out), max_cases=2,
                      n_non_c=2, random_seeds=1, max_new_tokens=10, batch_size=64, progress=False)
    s = run_paper_design(cfg, lm=smol, echo=lambda m: None)
    assert s["status"] == "ok" and s["n_c_cases"] == 2 and s["n_non_c_cases"] == 2
    assert s["split"]["disjoint"] is True
    design = json.loads((out / "design.json").read_text())
    assert design["layer"] == 16 and design["n_decoder_blocks"] == 30
    norm = design["resid_norm"]["16"]
    assert norm == pytest.approx(float(np.linalg.norm(hs.float().numpy(), axis=1).mean()), rel=1e-5)
    ratio = design["alpha_over_norm"]["16"]["10"]
    assert 0.02 < ratio < 0.3, ratio  # a raw alpha of 10 is a small push on this model (about 0.07-0.08 x the norm)
    with open(out / "table7.csv", newline="") as f:
        table = list(csv.DictReader(f))
    assert tuple(table[0])[:6] == PAPER_COLUMNS and len(table) == 9 * 11
    gens = [json.loads(x) for x in (out / "generations.jsonl").read_text().splitlines()]
    assert len(gens) == 4 * (1 + 60 + 30)
    row = next(r for r in table if r["Direction"] == "probe k=8" and r["Alpha"] == "-10.0")
    cell = [g for g in gens if g["setting"] == "L16|k8|raw-10|probe_pc"]
    assert int(row["N"]) == len(cell) == 4 and int(row["Correct"]) == sum(g["correct"] is True for g in cell)
    assert float(row["Resid_Norm"]) == pytest.approx(norm, abs=0.01)
