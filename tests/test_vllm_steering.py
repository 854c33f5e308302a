"""Steering, ablation and the causal tests' generations inside the real vLLM engine (vllm tier: `make test-vllm`,
i.e. `.venv-vllm/bin/python -m pytest -m vllm tests/test_vllm.py tests/test_vllm_steering.py`), on the embedded
model, against the HF path's records. Each test <= 120 s (the one engine starts lazily inside the first test)."""
from __future__ import annotations

import importlib.util
import json
import os

import numpy as np
import pytest

HAVE_VLLM = importlib.util.find_spec("vllm") is not None
pytestmark = [pytest.mark.vllm, pytest.mark.integration,
              pytest.mark.skipif(not HAVE_VLLM, reason="vllm is not installed here; run `make vllm` and `make test-vllm`")]
LAYER = 15  # the middle of SmolLM2-135M's 30 blocks
NEW = 48


@pytest.fixture(scope="module")
def vs():
    os.environ.setdefault("VLLM_CPU_KVCACHE_SPACE", "1")  # GiB of KV cache: the default takes half the host memory
    from steering.vllm.engine import VLLMSteering

    engine = VLLMSteering()
    yield engine
    engine.shutdown()


@pytest.fixture(scope="module")
def texts(smol):
    from loadbearing.questions.data import load_questions, sample
    from loadbearing.questions.prompts import build_prompt

    qs = sample(load_questions("arith", task="s2_o5,s3_o5", seed=7), 10, 7)
    return [build_prompt(smol.tokenizer, q) + "We start with 3.\n" for q in qs]


def _unit_rows(n, d, seed):
    v = np.random.default_rng(seed).standard_normal((n, d)).astype(np.float32)
    return v / np.linalg.norm(v, axis=1, keepdims=True)


def _trace(smol, vs, rows_text, hf, vl, op, data, layer):
    """Every differing row traced to its first differing token: HF's top-2 margin there (printed)."""
    from steering.vllm.compare import first_difference

    ids = vs.lazy.vg.last_token_ids
    out = []
    for i, (a, b) in enumerate(zip(hf, vl)):
        if a != b:
            d = first_difference(smol, rows_text[i], a.text, ids[i], op=op, data=data[i], layer=layer)
            print(f"row {i} differs at token {d['index']}: HF top-2 margin {d['margin']}, vLLM's token is HF's "
                  f"runner-up: {d['vllm_token_is_runner_up']} | HF {a.text[:50]!r} | vLLM {b.text[:50]!r}")
            out.append(d)
    return out


@pytest.mark.timeout(120, func_only=True)  # the engine starts (lazily) inside the first test
def test_alpha_zero_is_no_hook_and_hooks_are_gone(smol, vs, texts):
    from loadbearing.engine.vllm_hooks import hook_count

    plain = vs.generate(smol, texts, max_new_tokens=NEW, progress=False)  # no hook at all
    assert hook_count(vs.lazy.vg.llm) == 0
    zero = vs.add(smol, texts, _unit_rows(len(texts), 576, 0), 0.0, layers=[LAYER], max_new_tokens=NEW, progress=False)
    assert zero == plain  # identical records
    assert vs.last["steered_tokens"] > 0 and vs.last["remaining_hooks"] == 0  # the hooks ran, and left
    assert hook_count(vs.lazy.vg.llm) == 0


@pytest.mark.timeout(120, func_only=True)  # the engine starts (lazily) inside the first test
def test_steered_tokens_match_hf_and_differences_are_fp_ties(smol, vs, texts):
    from steering.generate import generate_steered
    from steering.norms import mean_resid_norm

    norm = mean_resid_norm(smol, texts, LAYER)
    rows = texts * 2  # 20 rows: every text under two settings, mixed in one call (per-request vectors)
    V = _unit_rows(len(rows), 576, 1)
    A = np.array([0.25, 0.5, 1.0, 2.0] * 5, dtype=np.float32) * norm
    vl = vs.add(smol, rows, V, A, layers=[LAYER], max_new_tokens=NEW, progress=False)
    hf = generate_steered(smol, rows, V, A, layers=[LAYER], max_new_tokens=NEW, progress=False)
    same = sum(a == b for a, b in zip(hf, vl))
    diffs = _trace(smol, vs, rows, hf, vl, "add", A[:, None] * V, LAYER)
    print(f"steered vLLM vs HF: {same}/{len(rows)} records identical")
    assert same >= 0.95 * len(rows)
    assert all(d["index"] is None or (d["vllm_token_is_runner_up"] and d["margin"] < 0.05) for d in diffs), diffs
    assert sum(a.text != p.text for a, p in zip(vl, vs.generate(smol, rows, max_new_tokens=NEW, progress=False))) > 0
    # per request: a row steered alone is the same row steered beside others
    alone = vs.add(smol, rows[3:4], V[3:4], A[3:4], layers=[LAYER], max_new_tokens=NEW, progress=False)
    assert alone[0] == vl[3]


@pytest.mark.timeout(120, func_only=True)  # the engine starts (lazily) inside the first test
def test_ablation_projection_is_zero_and_matches_hf(smol, vs, texts):
    from steering.ablation import generate_ablated, stack_bases

    bases = np.random.default_rng(2).standard_normal((len(texts), 4, 576)).astype(np.float32)
    vl = vs.ablate(smol, texts, bases, layers=[10], max_new_tokens=NEW, progress=False)
    assert vs.last["steered_tokens"] > 0 and vs.last["max_projection"] < 1e-5  # |B h| / |h| after the edit
    hf = generate_ablated(smol, texts, bases, layers=[10], max_new_tokens=NEW, progress=False)
    same = sum(a == b for a, b in zip(hf, vl))
    diffs = _trace(smol, vs, texts, hf, vl, "ablate", stack_bases(list(bases)), 10)
    print(f"ablated vLLM vs HF: {same}/{len(texts)} records identical; max projection {vs.last['max_projection']:.2e}")
    assert same >= 0.9 * len(texts)  # 10 rows: at most one floating-point tie
    assert all(d["index"] is None or (d["vllm_token_is_runner_up"] and d["margin"] < 0.05) for d in diffs), diffs


@pytest.mark.timeout(120, func_only=True)  # the engine starts (lazily) inside the first test
def test_hooks_gone_after_an_exception_and_bad_settings(smol, vs, texts):
    from loadbearing.engine.vllm_hooks import hook_count
    from steering.errors import SteeringError

    too_long = texts[0] + "1 + 1 = 2\n" * 3000  # past the engine's max_model_len: vLLM refuses the request
    with pytest.raises(Exception) as e:
        vs.add(smol, [texts[1], too_long], _unit_rows(2, 576, 3), 1.0, layers=[LAYER], max_new_tokens=4,
               progress=False)
    assert not isinstance(e.value, SteeringError)
    assert vs.last == {} or vs.last.get("remaining_hooks", 0) == 0
    assert hook_count(vs.lazy.vg.llm) == 0
    ok = vs.add(smol, texts[:1], _unit_rows(1, 576, 3), 0.0, layers=[LAYER], max_new_tokens=8, progress=False)
    assert ok[0].new_tokens >= 1 and hook_count(vs.lazy.vg.llm) == 0
    for bad, msg in (([0], "layer 0"), ([31], "outside 1..30")):
        with pytest.raises(SteeringError, match=msg):
            vs.add(smol, texts[:1], _unit_rows(1, 576, 3), 1.0, layers=bad, progress=False)
    with pytest.raises(SteeringError, match="expected"):
        vs.add(smol, texts[:2], _unit_rows(1, 64, 3), 1.0, layers=[LAYER], progress=False)


def _sweep_run(tmp_path, smol, texts):
    """A run directory whose perturbed cases are real arith prefixes (labelled C), and random probe directions."""
    import h5py

    from loadbearing.records import Continuation
    from steering.norms import mean_resid_norm

    run = tmp_path / "run"
    run.mkdir()
    with open(run / "continuations.jsonl", "w") as f:
        for i, t in enumerate(texts[:4]):
            c = Continuation(id=f"q{i}|numeric|middle|perturbed|0", question_id=f"q{i}", dataset="arith", task=None,
                             difficulty=None, strategy="numeric", position="middle", line_index=0, n_lines=3,
                             original_line="x", edited_line="y", condition="perturbed", prefix_text="",
                             input_text=t, input_tokens=10, edit_span=(0, 1), continuation="Answer: 1", new_tokens=3,
                             finish_reason="answer_line", parsed_answer="1", gold="99", correct=False, label="C")
            f.write(json.dumps(c.to_dict()) + "\n")
    (run / "baselines.jsonl").write_text("")
    (run / "manifest.json").write_text(json.dumps({"model": {"name": smol.name}, "status": "ok"}))
    probes = tmp_path / "probes"
    probes.mkdir()
    q, _ = np.linalg.qr(np.random.default_rng(5).standard_normal((576, 2)))
    with h5py.File(probes / "directions.h5", "w") as h:
        h.attrs["kind"] = "probe_directions"
        h.attrs["layers"] = np.array([LAYER], dtype=np.int64)
        g = h.create_group(f"layer_{LAYER}")
        g.create_dataset("basis", data=q.T.astype(np.float32))
        g.attrs["resid_norm"] = mean_resid_norm(smol, texts[:4], LAYER)
    return run, probes


def _rows(path):
    return [json.loads(x) for x in path.read_text().splitlines()]


@pytest.mark.timeout(120, func_only=True)  # the engine starts (lazily) inside the first test
def test_sweep_backend_vllm_writes_the_hf_records(smol, vs, texts, tmp_path):
    from steering.sweep.cli import SweepConfig, run_sweep

    run, probes = _sweep_run(tmp_path, smol, texts)
    kw = dict(run_dir=str(run), directions=str(probes), layers=[LAYER], ks=[1, 2], alphas=[0.5, 1.0], random_seeds=1,
              operators=["add", "ablate"], max_new_tokens=32, progress=False)
    run_sweep(SweepConfig(output=str(tmp_path / "hf"), **kw), lm=smol, echo=lambda m: None)
    run_sweep(SweepConfig(output=str(tmp_path / "vllm"), **kw), lm=smol, echo=lambda m: None,
              generate_fn=vs.add, ablate_fn=vs.ablate)
    hf, vl = _rows(tmp_path / "hf" / "generations.jsonl"), _rows(tmp_path / "vllm" / "generations.jsonl")
    assert any("steer_audit" in r for r in hf) and not any("steer_audit" in r for r in vl)
    hf = [{k: v for k, v in r.items() if k != "steer_audit"} for r in hf]  # only the HF fast path records an audit
    assert [(r["setting"], r["case_id"]) for r in hf] == [(r["setting"], r["case_id"]) for r in vl]
    same = sum(a == b for a, b in zip(hf, vl))
    print(f"sweep records identical: {same}/{len(hf)}")
    assert same >= 0.95 * len(hf)
    cfg = json.loads((tmp_path / "vllm" / "config.json").read_text())
    assert cfg["backend"]["backend"] == "vllm" and cfg["backend"]["per_request"] and cfg["status"] == "complete"
    assert "backend" not in json.loads((tmp_path / "hf" / "config.json").read_text())


@pytest.mark.timeout(120, func_only=True)  # the engine starts (lazily) inside the first test
def test_forced_answers_and_rollouts_through_vllm(smol, vs, texts):
    from loadbearing.engine.generation import generate
    from loadbearing.engine.sampling import Sampling

    # forced answers: the causal tests' inputs (chain cut, then "Answer:"), greedy, prefix cache shared
    forced = [t + "3 + 1 = 4\nAnswer:" for t in texts] + [t + "Answer:" for t in texts]
    v = vs.generate(smol, forced, max_new_tokens=8, progress=False)
    h = generate(smol, forced, max_new_tokens=8, progress=False)
    assert sum(a == b for a, b in zip(v, h)) >= 0.95 * len(forced)
    # rollouts: vLLM's sampler, one seed per row key: reproducible, distinct across keys
    s = Sampling(temperature=0.6, top_p=0.95, seed=44)
    keys = [f"q|k=1|r={j}" for j in range(6)]
    a = vs.generate(smol, [texts[0]] * 6, max_new_tokens=24, progress=False, sampling=s, sample_keys=keys)
    b = vs.generate(smol, [texts[0]] * 6, max_new_tokens=24, progress=False, sampling=s, sample_keys=keys)
    assert a == b and len({g.text for g in a}) > 1


@pytest.fixture(scope="module")
def vllm_run(smol, vs, tmp_path_factory):
    """A small arith run whose behavioural stage itself ran through vLLM (baselines and continuations)."""
    from behavioural.protocol import Settings
    from behavioural.run import RunConfig, run_stage

    run = tmp_path_factory.mktemp("vllm-causal") / "run"
    s = Settings(model="smollm2-135m-instruct", dataset="arith", strategies=("arithmetic",), positions=("middle",),
                 task="s2_o3", max_examples=8, max_new_tokens=48, batch_size=8, backend="vllm")
    run_stage(RunConfig(settings=s, output_dir=run, progress=False), lm=smol, generate_fn=vs.generate, echo=None)
    return run


@pytest.mark.timeout(120, func_only=True)
def test_causal_stages_through_vllm_write_the_hf_records(smol, vs, vllm_run):
    import shutil

    from behavioural.causal.early_answer import EarlyAnswerConfig, run_early_answer
    from behavioural.causal.filler import FillerConfig, run_filler
    from behavioural.causal.resample import ResampleConfig, run_resample

    stages = [("early_answer", run_early_answer, EarlyAnswerConfig(vllm_run, max_answer_tokens=8, n_boot=50,
                                                                     quiet=True)),
              ("filler", run_filler, FillerConfig(vllm_run, fillers=("dots",), fractions=(0.5, 1.0), max_answer_tokens=8,
                                                  n_boot=50, quiet=True))]
    for name, fn, cfg in stages:
        fn(cfg, smol, echo=None)  # HF fast path
        shutil.move(vllm_run / name, vllm_run / f"{name}-hf")
        s = fn(cfg, smol, generate_fn=vs.generate, echo=None)  # forced answers through vLLM, prefix cache on
        assert s["status"] == "ok"
        hf, vl = _rows(vllm_run / f"{name}-hf" / "records.jsonl"), _rows(vllm_run / name / "records.jsonl")
        same = sum(a == b for a, b in zip(hf, vl))
        print(f"{name}: {same}/{len(hf)} records identical through vLLM")
        assert len(hf) == len(vl) >= 4 and same >= 0.95 * len(hf)
    rs = ResampleConfig(vllm_run, rollouts=3, max_questions=1, max_new_tokens=24, max_answer_tokens=6, n_boot=50,
                        quiet=True)
    s = run_resample(rs, smol, generate_fn=vs.generate, echo=None)
    rows = _rows(vllm_run / "resample" / "records.jsonl")
    assert s["status"] == "ok" and rows and all(r["sampling"]["temperature"] == 0.6 for r in rows)
    shutil.move(vllm_run / "resample", vllm_run / "resample-1")
    run_resample(rs, smol, generate_fn=vs.generate, echo=None)  # seeded per rollout id: reproducible
    assert _rows(vllm_run / "resample" / "records.jsonl") == rows


@pytest.mark.timeout(120, func_only=True)
def test_study_steering_stage_with_backend_vllm(smol, vs, texts, tmp_path, monkeypatch):
    """The study's steering stage with --backend vllm builds a VLLMSteering from the study's vLLM options and
    sweeps through it (here the module's engine stands in for the one it builds: one engine start per module)."""
    import shutil

    import steering.vllm.engine as vg_mod
    from study.config import StudyConfig
    from study.stages.core import _run_steering

    built = []

    class Shared:
        def __init__(self, **opts):
            built.append(opts)
            self.add, self.ablate = vs.add, vs.ablate

        def shutdown(self):
            built.append("shutdown")

    run, probes = _sweep_run(tmp_path, smol, texts)
    shutil.move(probes, run / "probes")
    monkeypatch.setattr(vg_mod, "VLLMSteering", Shared)
    c = StudyConfig(output_dir=str(run), backend="vllm", tensor_parallel_size=1, steer_layers=str(LAYER), k="1",
                    alphas="1", random_seeds=1, max_cases=2, steer_max_new_tokens=24, steer_operator="add,ablate",
                    quiet=True)
    s = _run_steering(run, c)
    assert s["status"] == "ok" and built[0]["tensor_parallel_size"] == 1 and built[-1] == "shutdown"
    cfg = json.loads((run / "steering" / "config.json").read_text())
    assert cfg["backend"]["backend"] == "vllm" and cfg["backend"]["steered_tokens"] > 0
    assert {r["operator"] for r in _rows(run / "steering" / "generations.jsonl")} == {"none", "add", "ablate"}
