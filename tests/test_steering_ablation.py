"""Directional ablation (steering.ablation) and the sweep's ``--operator add,ablate``, on tiny in-process models;
one integration test on the embedded model.

    .venv/bin/pytest -q tests/test_steering_ablation.py -m "not integration"
"""
from __future__ import annotations

import hashlib
import json

import numpy as np
import pytest
import torch
from helpers.steering import CHAIN, PLANT, cli_case, make_steering_run, planted_lm, sweep_config, unit, write_dirs
from helpers.tiny import make_tiny_lm

from steering.ablation import ablate, generate_ablated, orthonormal_rows, project_out
from steering.hooks import SteeringError

pytestmark = pytest.mark.usefixtures("one_thread")

DEAD = (40, 41)  # residual dimensions no layer of the "dead-dims" model ever writes


def _texts(tok, n_inputs=3, reps=4):
    base = [tok.apply_chat_template([{"role": "user", "content": f"Question {i}: start with {i}. add 3."}],
                                    tokenize=False, add_generation_prompt=True) + "Start = 4\n" for i in range(n_inputs)]
    return [t for t in base for _ in range(reps)]


def _enc(tok, texts):
    return tok(texts, add_special_tokens=False, padding=True, padding_side="left", return_tensors="pt")


def _dead_dims_lm(tokenizer):
    """A 3-layer random Llama whose residual stream never has a component on DEAD: the embeddings, attention
    outputs and MLP outputs are zero there (so every hidden state at every layer is exactly zero on them)."""
    lm = make_tiny_lm(tokenizer, layers=3, hidden=64, seed=3, name="dead-dims")
    with torch.no_grad():
        lm.model.model.embed_tokens.weight[:, list(DEAD)] = 0.0
        for layer in lm.model.model.layers:
            layer.self_attn.o_proj.weight[list(DEAD), :] = 0.0
            layer.mlp.down_proj.weight[list(DEAD), :] = 0.0
    return lm


def _n_hooks(model):
    """Hooks of this module's making (transformers registers its own output-recording hooks on first use)."""
    from steering.ablation import AblationHandle, RowAblate

    hooks = [h for m in model.modules() for h in (*m._forward_hooks.values(), *m._forward_pre_hooks.values())]
    return sum(isinstance(getattr(h, "__self__", h), (AblationHandle, RowAblate)) for h in hooks)


# ------------------------------------------------------------------------------------------------ the operator


def test_ablating_a_direction_the_model_never_uses_changes_nothing(tokenizer):
    from loadbearing.engine.generation import generate

    lm = _dead_dims_lm(tokenizer)
    m, tok = lm.model, lm.tokenizer
    texts = _texts(tok, 3, 1)
    enc = _enc(tok, texts)
    with torch.inference_mode():
        ref = m(**enc, output_hidden_states=True)
    assert all(float(h[..., list(DEAD)].abs().max()) == 0.0 for h in ref.hidden_states)  # the premise
    dead = np.zeros((2, 64), np.float32)
    dead[0, DEAD[0]], dead[0, DEAD[1]] = 0.6, 0.8  # a rotated basis of the two dead dimensions
    dead[1, DEAD[0]], dead[1, DEAD[1]] = -0.8, 0.6
    for positions in ("all", "continuation"):
        with ablate(m, dead, layers=[1, 2, 3], positions=positions) as h, torch.inference_mode():
            out = m(**enc)
        assert h.steered_positions > 0 and h.n_hooks == 0
        torch.testing.assert_close(out.logits, ref.logits, rtol=0, atol=1e-6)
    # the same generations, on the hooked path and on the sweep's fast path
    plain = generate(lm, texts, max_new_tokens=8, batch_size=3, progress=False, dedupe=False)
    fast = generate_ablated(lm, texts, dead, layers=[1, 2, 3], max_new_tokens=8, batch_size=3, progress=False)
    assert fast == plain
    # ...whereas ablating a direction the stream does use changes the logits (the hook is live)
    live = np.zeros(64, np.float32)
    live[3] = 1.0
    with ablate(m, live, layers=[2], positions="all"), torch.inference_mode():
        moved = m(**enc).logits
    assert float((moved - ref.logits).abs().max()) > 1e-3
    assert _n_hooks(m) == 0


def _carrying_lm(tokenizer):
    """The planted model of test_steering whose "Ġ" embedding also carries the planted direction: after
    "Answer: " it says 7 (the planted readout) instead of 3."""
    lm = planted_lm(tokenizer)
    with torch.no_grad():
        lm.model.model.embed_tokens.weight[tokenizer.convert_tokens_to_ids("Ġ"), PLANT] = 1.0
    return lm


def test_ablating_the_planted_direction_removes_its_signal(tokenizer):
    lm = _carrying_lm(tokenizer)
    m = lm.model
    ids = torch.tensor([[tokenizer.convert_tokens_to_ids(t) for t in CHAIN]])  # "\nAnswer: "
    seven, three = tokenizer.convert_tokens_to_ids("7"), tokenizer.convert_tokens_to_ids("3")
    seen: dict = {}
    # the readout: what the unembedding reads (lm_head's input, after the last block and the final norm)
    grab = m.lm_head.register_forward_pre_hook(lambda mod, args: seen.__setitem__("x", args[0].detach().clone()))
    try:
        with torch.inference_mode():
            ref = m(input_ids=ids).logits[0, -1]
        planted = float(seen["x"][0, -1, PLANT])
        with ablate(m, unit(PLANT), layers=[1], positions="all"), torch.inference_mode():
            out = m(input_ids=ids).logits[0, -1]
        gone = seen["x"][0, :, PLANT]
        rnd = orthonormal_rows(np.random.default_rng(0).standard_normal(64))
        with ablate(m, rnd, layers=[1], positions="all"), torch.inference_mode():
            other = m(input_ids=ids).logits[0, -1]
        kept = float(seen["x"][0, -1, PLANT])
    finally:
        grab.remove()
    assert planted > 0 and int(ref.argmax()) == seven and float(ref[seven] - ref[three]) > 0
    # the planted readout is exactly zero downstream, and the answer falls back to the default one
    assert float(gone.abs().max()) == 0.0
    assert int(out.argmax()) == three and float(out[seven] - out[three]) < 0
    # a random direction ablated the same way leaves the planted readout (and the answer) in place
    assert kept > 0 and int(other.argmax()) == seven


def test_projection_and_bad_bases():
    rng = np.random.default_rng(1)
    b = orthonormal_rows(rng.standard_normal((3, 16)) * 5.0)  # unnormalised rows: their span
    assert np.allclose(b @ b.T, np.eye(3), atol=1e-5)
    h = torch.as_tensor(rng.standard_normal((2, 4, 16)).astype(np.float32))
    once = project_out(h, torch.as_tensor(b)[None])
    assert float((once @ torch.as_tensor(b).T).abs().max()) < 1e-5  # nothing left in the span
    torch.testing.assert_close(project_out(once, torch.as_tensor(b)[None]), once)  # idempotent
    with pytest.raises(SteeringError, match="linearly dependent"):
        orthonormal_rows(np.stack([np.ones(16), 2 * np.ones(16)]))
    with pytest.raises(SteeringError, match="non-finite"):
        orthonormal_rows(np.full(16, np.nan))


@pytest.mark.parametrize("positions", ["continuation", "generated", "all"])
def test_fast_path_matches_the_hooked_path(tokenizer, positions):
    """The sweep's fast path (shared prefix, one basis per row, rows of different k) gives the hooked
    model.generate records, for each positions rule."""
    from loadbearing.engine.generation import generate_simple

    lm = make_tiny_lm(tokenizer, layers=3, hidden=64, seed=1)
    texts = _texts(lm.tokenizer)
    rng = np.random.default_rng(0)
    bases = [rng.standard_normal(((4, 16, 32)[i % 3], 64)).astype(np.float32) for i in range(len(texts))]
    fast = generate_ablated(lm, texts, bases, layers=[1, 2], positions=positions, max_new_tokens=10, batch_size=5,
                            progress=False)
    padded = np.zeros((len(texts), 32, 64), np.float32)
    for i, b in enumerate(bases):
        padded[i, : len(b)] = orthonormal_rows(b)

    def ctx(ix):
        return ablate(lm.model, padded[ix], layers=[1, 2], positions=positions)

    simple = generate_simple(lm, texts, max_new_tokens=10, batch_size=5, progress=False, batch_context=ctx,
                             dedupe=False)
    assert fast == simple
    plain = generate_simple(lm, texts, max_new_tokens=10, batch_size=5, progress=False, dedupe=False)
    assert sum(f.text != p.text for f, p in zip(fast, plain)) > 0, "ablation should change some outputs"
    assert _n_hooks(lm.model) == 0


# ------------------------------------------------------------------------------------------------ the sweep


def test_sweep_with_add_and_ablate_gives_a_verdict_per_operator(tokenizer, tmp_path):
    import steering
    from steering.sweep.cli import format_summary, is_complete, run_sweep

    lm = _carrying_lm(tokenizer)
    run = make_steering_run(tmp_path, tokenizer, n_c=8, n_non=0, gold_c="3")  # the model says 7: every C case propagates
    dirs = write_dirs(tmp_path / "probes", {2: np.stack([unit(PLANT), unit(62)])})
    s = run_sweep(sweep_config(run, dirs, layers=[2], ks=[1], alphas=[1.0], random_seeds=2, operators=["add", "ablate"]),
                  lm=lm, echo=lambda m: None)
    assert s["status"] == "ok" and s["operators"] == ["add", "ablate"]
    by = {d["key"]: d for d in s["settings"]}
    assert set(by) == {"L2|k1|a1|probe", "L2|k1|ablate|probe"}
    ab = by["L2|k1|ablate|probe"]
    assert ab["operator"] == "ablate" and ab["alpha_rel"] is None and ab["alpha"] is None
    assert ab["moved_of_all"]["k"] == 8 and ab["control"]["kind"] == "random" and ab["control"]["m"] == 2
    assert ab["control"]["keys"] == ["L2|k1|ablate|random0", "L2|k1|ablate|random1"]
    assert ab["control"]["moved_of_all"]["k"] == 0 and ab["p_value"] == pytest.approx(2 / 3 ** 8)
    assert ab["beats_control"] and ab["strongest"]
    add = by["L2|k1|a1|probe"]
    assert add["operator"] == "add" and add["moved_of_all"]["k"] == 0 and add["strongest"]  # each operator's own
    v = s["verdicts"]
    assert v["ablate"]["verdict_code"] == "effect" and v["add"]["verdict_code"] != "effect"
    assert v["ablate"]["multiple_comparisons"]["n_tests"] == 1 and v["add"]["multiple_comparisons"]["n_tests"] == 1
    assert v["ablate"]["n_random_directions"] == v["add"]["n_random_directions"] == 8 * 2
    assert s["verdict_code"] == v["add"]["verdict_code"]  # the first operator's, as a one-operator summary reads
    assert s["verdict"].startswith("[add] ") and "[ablate] effect:" in s["verdict"] and "ablated moved" in s["verdict"]
    out = run / "steering"
    assert is_complete(out) and (out / "sweep.png").stat().st_size > 1000
    summ = json.loads((out / "summary.json").read_text())
    assert summ["verdicts"]["ablate"]["verdict_code"] == "effect"
    recs = [json.loads(x) for x in (out / "generations.jsonl").read_text().splitlines()]
    assert len(recs) == 8 * (1 + 3 + 3)
    assert {r["operator"] for r in recs} == {"none", "add", "ablate"}
    seeds = [r["direction_seed"] for r in recs if r["basis"] == "random"]
    assert len(seeds) == len(set(seeds)) == 8 * 4  # a fresh basis per case, never shared across operators
    assert {r["parsed_answer"] for r in recs if r["setting"] == "L2|k1|ablate|probe"} == {"3"}
    # the table and the DataFrame name the operator of every row
    text, md = format_summary(s), format_summary(s, style="md")
    head = text.splitlines()[2]
    assert head.split()[:2] == ["setting", "operator"]
    assert any(line.startswith("L2|k1|ablate|probe") and " ablate " in line for line in text.splitlines())
    assert "verdict (add): " in text and "verdict (ablate): effect:" in text
    assert "| operator |" in md and "**ablate:** effect:" in md
    g = steering.read_sweep(out)
    assert list(g.columns[:3]) == ["setting", "operator", "basis"]
    assert g.groupby("operator").size().to_dict() == {"ablate": 24, "add": 24, "none": 8}
    assert g[g.operator == "ablate"].alpha_rel.isna().all()
    c = g[(g.case_label == "C") & (g.operator == "ablate")].groupby("basis").moved.mean().to_dict()
    assert c == {"probe": 1.0, "random": 0.0}


def test_add_only_sweep_reads_as_before(tokenizer, tmp_path):
    """The default operator is add: the same keys, records and one verdict, with an operator column saying add."""
    from steering.sweep.cli import format_table, run_sweep

    lm = planted_lm(tokenizer)
    run = make_steering_run(tmp_path, tokenizer, n_c=3, n_non=0)
    dirs = write_dirs(tmp_path / "probes", {2: np.stack([unit(PLANT)])})
    s = run_sweep(sweep_config(run, dirs, layers=[2], ks=[1], alphas=[1.0], random_seeds=1), lm=lm, echo=lambda m: None)
    assert s["operators"] == ["add"] and list(s["verdicts"]) == ["add"]
    assert s["verdict"] == s["verdicts"]["add"]["verdict"] and not s["verdict"].startswith("[")
    assert [d["key"] for d in s["settings"]] == ["L2|k1|a1|probe"]
    recs = [json.loads(x) for x in (run / "steering" / "generations.jsonl").read_text().splitlines()]
    assert sorted({r["setting"] for r in recs}) == ["L2|k1|a1|probe", "L2|k1|a1|random0", "none|alpha0"]
    rows = format_table(s).splitlines()
    assert rows[0].split()[:2] == ["setting", "operator"] and rows[3].split()[:3] == ["L2|k1|a1|probe", "*", "add"]


def test_ablate_only_with_covariance_controls(tokenizer, tmp_path):
    """An ablate-only sweep: no alpha setting at all, and for k > 1 covariance-matched random bases beside the
    isotropic ones, as many per case as the additive controls."""
    from activations.store import StoreWriter
    from steering.sweep.cli import run_sweep

    lm = _carrying_lm(tokenizer)
    run = make_steering_run(tmp_path, tokenizer, n_c=4, n_non=0, gold_c="3")
    store = tmp_path / "activations.h5"
    w = StoreWriter(store, layers=[2], positions=["prefix_last"], d_model=64, attrs={"model_name": "planted"})
    rng = np.random.default_rng(0)
    X = rng.standard_normal((40, 1, 64))
    meta = [{"continuation_id": f"f{i}", "question_id": f"fit{i // 2}", "label": "C" if i % 2 else "non-C",
             "condition": "perturbed", "input_tokens": 5} for i in range(40)]
    w.append(meta, {"prefix_last": X}, {"prefix_last": np.zeros((40, 2), np.int32)})
    w.finish()
    dirs = write_dirs(tmp_path / "probes", {2: np.stack([unit(PLANT), unit(62)])},
                       attrs={"store": json.dumps({"path": str(store)}), "position": "prefix_last"})
    s = run_sweep(sweep_config(run, dirs, layers=[2], ks=[1, 2], alphas=[0.5, 1.0], random_seeds=2, operators=["ablate"]),
                  lm=lm, echo=lambda m: None)
    assert s["operators"] == ["ablate"] and not s["verdict"].startswith("[")
    by = {d["key"]: d for d in s["settings"]}
    assert set(by) == {"L2|k1|ablate|probe", "L2|k2|ablate|probe"}
    k2 = by["L2|k2|ablate|probe"]
    assert k2["control"]["kind"] == "random_cov" and k2["control"]["m"] == 2
    assert k2["isotropic"]["keys"] == ["L2|k2|ablate|random0", "L2|k2|ablate|random1"]
    assert k2["moved_of_all"]["k"] == 4  # the planted direction is in the span of the first two rows
    recs = [json.loads(x) for x in (run / "steering" / "generations.jsonl").read_text().splitlines()]
    assert len(recs) == 4 * (1 + 3 + 5) and all(r["alpha_rel"] is None for r in recs if r["operator"] == "ablate")
    assert (run / "steering" / "sweep.png").stat().st_size > 1000  # the ablation panel, no alpha axis
    # an interval end that rounds just past its rate (Wilson's lower end of 0/n can be 5.6e-17) still plots
    from steering.sweep.plot import plot_sweep

    tipped = json.loads(json.dumps(s))
    tipped["settings"][0]["control"]["moved_of_all"].update(rate=0.0, lo=5.6e-17)
    plot_sweep(tipped, tmp_path / "tipped.png")
    assert (tmp_path / "tipped.png").stat().st_size > 1000


@pytest.mark.parametrize("operator", ["foo", "add,foo", "add,add", ","])
def test_cli_bad_operator_is_one_line_and_writes_nothing(tokenizer, tmp_path, capsys, monkeypatch, operator):
    import loadbearing.engine.models as models
    from steering.sweep.cli import main

    def boom(*a, **k):
        raise AssertionError("the model must not be loaded for a bad input")

    monkeypatch.setattr(models, "load_model", boom)
    argv, run, inputs = cli_case(tmp_path, tokenizer, "ok")
    before = {p: hashlib.sha256(p.read_bytes()).hexdigest() for p in inputs}
    assert main(argv + ["--operator", operator]) == 2
    err = capsys.readouterr().err.strip()
    assert err.startswith("error: ") and "\n" not in err and "operator" in err, err
    if operator != ",":
        assert "add, ablate" in err
    assert not (run / "steering").exists()
    assert {p: hashlib.sha256(p.read_bytes()).hexdigest() for p in inputs} == before


# ------------------------------------------------------------------------------------------------ the study


def test_study_passes_the_operator_and_plans_its_generations(capsys, tmp_path, monkeypatch):
    import steering.sweep.cli
    from study.config import StudyConfig
    from study.driver import main
    from study.dryrun.plan import generation_bound
    from study.stages.core import REGISTRY

    base = StudyConfig(output_dir="x", steer_max_new_tokens=64, stages="steering")
    both = StudyConfig(output_dir="x", steer_max_new_tokens=64, stages="steering", steer_operator="add,ablate")
    # 24 cases x (rerun + 2 alphas x (k=1: 3, k=4: 5) + one ablation x (3 + 5))
    assert generation_bound(base) == 24 * 17 and generation_bound(both) == 24 * 25
    assert main(["--dry-run", "--steer-operator", "add,ablate"]) == 0
    text = capsys.readouterr().out
    assert "steer_operator               = add,ablate" in text and "(2 alphas + 1 ablation)" in text
    assert main(["--dry-run", "--steer-operator", "foo"]) == 2
    err = capsys.readouterr().err.strip()
    assert err.startswith("error: ") and "--steer-operator 'foo'" in err and "\n" not in err
    toml = tmp_path / "s.toml"
    toml.write_text('steer_operator = "ablate"\n')
    assert main(["--dry-run", "--config", str(toml)]) == 0
    assert "steer_operator               = ablate" in capsys.readouterr().out
    seen = {}
    monkeypatch.setattr(steering.sweep.cli, "run_sweep", lambda cfg, echo=None: seen.setdefault("cfg", cfg))
    REGISTRY["steering"].run(tmp_path, both)
    assert seen["cfg"].operators == ["add", "ablate"]
    REGISTRY["steering"].run(tmp_path, base)
    assert StudyConfig(output_dir="x").steer_operator == "add"


# ------------------------------------------------------------------------------------------------ integration


@pytest.mark.integration
@pytest.mark.timeout(120)
def test_smol_sweep_with_add_and_ablate(smol, tmp_path):
    """The embedded model: the ablate fast path gives the hooked model.generate records, and a small sweep with
    --operator add,ablate (through the CLI) writes one verdict per operator and the operator column."""
    from loadbearing.engine.generation import generate_simple
    from steering.norms import mean_resid_norm
    from steering.sweep.cli import build_parser, config_from_args, run_sweep

    tok = smol.tokenizer
    run = make_steering_run(tmp_path, tok, n_c=4, n_non=0, model=smol.name)
    texts = [json.loads(x)["input_text"] for x in (run / "continuations.jsonl").read_text().splitlines()][::2]
    layer, d = 15, smol.model.config.hidden_size
    # the directions: the mean last-token residual (a direction the stream does use), then random orthonormal rows
    with torch.inference_mode():
        hs = smol.model(**_enc(tok, texts), output_hidden_states=True).hidden_states[layer][:, -1].float().mean(0)
    basis = orthonormal_rows(np.vstack([hs.numpy(), np.random.default_rng(0).standard_normal((3, d))]))
    dirs = write_dirs(tmp_path / "probes", {layer: basis}, resid_norm=mean_resid_norm(smol, texts, layer))
    fast = generate_ablated(smol, texts, basis[:1], layers=[layer], max_new_tokens=12, batch_size=4, progress=False)
    ref = generate_simple(smol, texts, max_new_tokens=12, batch_size=4, progress=False, dedupe=False,
                          batch_context=lambda ix: ablate(smol, basis[:1], layers=[layer]))
    assert sum(f.text == r.text for f, r in zip(fast, ref)) >= len(texts) - 1  # fp noise may flip one greedy tie
    plain = generate_simple(smol, texts, max_new_tokens=12, batch_size=4, progress=False, dedupe=False)
    assert any(f.text != p.text for f, p in zip(fast, plain)), "ablating the mean residual direction changes outputs"
    out = tmp_path / "sweep"
    args = build_parser().parse_args([str(run), "--directions", str(dirs), "--layers", str(layer), "--k", "1",
                                      "--alphas", "0.5", "--random-seeds", "1", "--operator", "add,ablate",
                                      "--max-new-tokens", "16", "--batch-size", "16", "--output-dir", str(out),
                                      "--quiet"])
    s = run_sweep(config_from_args(args), lm=smol, echo=lambda m: None)
    assert s["status"] == "ok" and s["operators"] == ["add", "ablate"] and set(s["verdicts"]) == {"add", "ablate"}
    summ = json.loads((out / "summary.json").read_text())
    assert [d["key"] for d in summ["settings"]] == [f"L{layer}|k1|a0.5|probe", f"L{layer}|k1|ablate|probe"]
    assert all(v["verdict_code"] in ("effect", "harm", "null", "inconclusive") for v in summ["verdicts"].values())
    recs = [json.loads(x) for x in (out / "generations.jsonl").read_text().splitlines()]
    assert len(recs) == 4 * (1 + 2 + 2) and {r["operator"] for r in recs} == {"none", "add", "ablate"}
