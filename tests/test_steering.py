"""Steering hooks and the steering sweep, on tiny in-process models (whole file well under a minute).

The planted-effect test builds a Llama whose blocks are the identity and whose unembedding is a hand-written
transition table: after "Answer: " it says "3", unless the residual stream carries the planted direction
e_63, which makes it say "7". The sweep must find that effect (and not in random directions), so a null
from the same pipeline is informative.
"""
from __future__ import annotations

import json

import numpy as np
import pytest
import torch
from helpers.steering import PLANT, cli_case, make_steering_run, planted_lm, sweep_config, unit, write_dirs
from helpers.tiny import make_tiny_lm

from steering.hooks import (
    SteeringError,
    combine_directions,
    patch,
    steer,
    steer_vectors,
)
from steering.norms import mean_resid_norm

# ------------------------------------------------------------------------------------------------ helpers

pytestmark = pytest.mark.usefixtures("one_thread")


def _enc(tok, texts):
    return tok(texts, add_special_tokens=False, padding=True, padding_side="left", return_tensors="pt")


def _greedy(model, enc, n=8, **kw):
    out = model.generate(**enc, max_new_tokens=n, do_sample=False, temperature=None, top_p=None, top_k=None,
                         output_scores=True, return_dict_in_generate=True, pad_token_id=0, **kw)
    return out.sequences, torch.stack(out.scores, 1)


@pytest.fixture(scope="module")
def lm3(tokenizer):
    """A 3-layer tiny random Llama (hidden 64) whose greedy outputs react to steering."""
    return make_tiny_lm(tokenizer, layers=3, hidden=64, seed=1)


def _gen_fn():
    from loadbearing.engine.generation import generate

    return generate


# ------------------------------------------------------------------------------------------------ hooks


def test_alpha_zero_is_token_identical(tiny_lm):
    tok, m = tiny_lm.tokenizer, tiny_lm.model
    enc = _enc(tok, ["The cat sat on the", "Two plus two"])
    ref, ref_s = _greedy(m, enc)
    basis = np.stack([unit(i) for i in range(4)])
    for positions in ("continuation", "all"):
        with steer(m, basis, layers=[1, 2], alpha=0.0, positions=positions):
            got, got_s = _greedy(m, enc)
        assert torch.equal(ref, got)
        assert torch.equal(ref_s, got_s)


def test_hooks_removed_on_error_and_user_hooks_kept(tiny_lm):
    m = tiny_lm.model
    layer = m.model.layers[0]
    fired = []
    mine = layer.register_forward_hook(lambda *a: fired.append(1))
    mine_pre = m.register_forward_pre_hook(lambda *a: None)
    before = (len(layer._forward_hooks), len(m._forward_pre_hooks), len(m._forward_pre_hooks_with_kwargs))
    try:
        with pytest.raises(RuntimeError, match="boom"):
            with steer(m, unit(0), layers=[1], alpha=1.0) as h:
                assert h.n_hooks == 2
                assert len(layer._forward_hooks) == before[0] + 1
                raise RuntimeError("boom")
        assert h.n_hooks == 0
        assert (len(layer._forward_hooks), len(m._forward_pre_hooks), len(m._forward_pre_hooks_with_kwargs)) == before
        h2 = patch(m, unit(0), layers=[1], alpha=1.0)
        h2.remove()
        h2.remove()  # idempotent
        assert len(layer._forward_hooks) == before[0]
        m(**_enc(tiny_lm.tokenizer, ["hi"]))
        assert fired, "the user's own hook must survive"
    finally:
        mine.remove()
        mine_pre.remove()


def test_bad_hook_input(tiny_lm):
    m = tiny_lm.model
    with pytest.raises(SteeringError, match="d_model"):
        with steer(m, np.ones(32), layers=[1], alpha=1.0):
            pass
    with pytest.raises(SteeringError, match="unknown layer"):
        with steer(m, unit(0), layers=[5], alpha=1.0):
            pass
    with pytest.raises(SteeringError, match="positions"):
        with steer(m, unit(0), layers=[1], alpha=1.0, positions="prefix"):
            pass
    assert len(m.model.layers[0]._forward_hooks) == 0


@pytest.mark.parametrize("positions", ["continuation", "generated", "all"])
def test_kv_cache_and_no_cache_agree(lm3, positions):
    tok, m = lm3.tokenizer, lm3.model
    enc = _enc(tok, ["Once upon a time there", "Hello"])  # left-padded second row
    v = torch.randn(64, generator=torch.Generator().manual_seed(0))
    unsteered, _ = _greedy(m, enc, n=10)
    with steer(m, v, layers=[2], alpha=4.0, positions=positions) as h:
        a, sa = _greedy(m, enc, n=10, use_cache=True)
        n_cached = h.steered_positions
        b, sb = _greedy(m, enc, n=10, use_cache=False)
    assert torch.equal(a, b)
    torch.testing.assert_close(sa, sb, atol=1e-4, rtol=1e-4)
    assert not torch.equal(a, unsteered), "the test direction should change the output"
    width, real = enc["input_ids"].shape[1], enc["attention_mask"].sum(1)
    # positions steered in the cached run: the rule, counted per row (pads excluded)
    steps = 10 - 1  # the last generated token is never fed back
    expect = {"continuation": 2 * (1 + steps), "generated": 2 * steps, "all": int(real.sum()) + 2 * steps}[positions]
    assert n_cached == expect * 1  # one layer
    assert width > int(real.min())


def test_left_padding_never_steered(lm3):
    tok, m = lm3.tokenizer, lm3.model
    texts = ["A much longer prompt that forces padding of the other row", "Short one"]
    enc = _enc(tok, texts)
    assert enc["attention_mask"][1, 0] == 0
    v = torch.randn(64, generator=torch.Generator().manual_seed(1))
    seen = {}
    layer = m.model.layers[1]
    for name, ctx in (("ref", None), ("steered", steer(m, v, layers=[2], alpha=5.0, positions="all"))):
        with ctx if ctx is not None else torch.no_grad():
            # registered after the steering hook: sees the steered output
            grab = layer.register_forward_hook(lambda mod, a, out, name=name: seen.__setitem__(name, out.clone()))
            try:
                m(**enc)
            finally:
                grab.remove()
    pad = ~enc["attention_mask"].bool()
    diff = (seen["steered"] - seen["ref"]).norm(dim=-1)  # [batch, pos]
    assert torch.all(diff[pad] == 0)
    torch.testing.assert_close(diff[~pad], torch.full_like(diff[~pad], 5.0 * float(v.norm())), rtol=1e-4, atol=1e-4)
    # a row generated alone == the same row left-padded in a batch, both steered (per-row alphas)
    with steer(m, v, layers=[2], alpha=[3.0, 3.0]):
        both, sb = _greedy(m, enc, n=8)
    with steer(m, v, layers=[2], alpha=3.0):
        alone, sa = _greedy(m, _enc(tok, texts[1:]), n=8)
    n_pad = int(pad[1].sum())
    assert torch.equal(both[1, n_pad:], alone[0])
    torch.testing.assert_close(sb[1], sa[0], atol=1e-4, rtol=1e-4)


def test_dose_matching():
    q, _ = np.linalg.qr(np.random.default_rng(0).standard_normal((64, 8)))
    basis = q.T
    n1 = float(combine_directions(basis[:1]).norm())
    n8 = float(combine_directions(basis[:8]).norm())
    assert n1 == pytest.approx(1.0, abs=1e-5) and n8 == pytest.approx(1.0, abs=1e-5)
    assert float(combine_directions(basis[:8], dose="sum").norm()) == pytest.approx(np.sqrt(8), rel=1e-5)
    with pytest.raises(SteeringError):
        combine_directions(basis[:2], dose="double")


def test_dose_matching_in_the_residual(tiny_lm):
    tok, m = tiny_lm.tokenizer, tiny_lm.model
    q, _ = np.linalg.qr(np.random.default_rng(0).standard_normal((64, 8)))
    enc = _enc(tok, ["Hello there"])
    got = {}
    for k in (1, 8):
        outs = []
        for ctx in (None, steer(m, q.T[:k], layers=[1], alpha=2.5, positions="all")):
            with ctx if ctx is not None else torch.no_grad():
                grab = m.model.layers[0].register_forward_hook(lambda mod, a, out, outs=outs: outs.append(out.clone()))
                try:
                    m(**enc)
                finally:
                    grab.remove()
        got[k] = (outs[1] - outs[0]).norm(dim=-1)
    torch.testing.assert_close(got[1], got[8])
    torch.testing.assert_close(got[1], torch.full_like(got[1], 2.5), rtol=1e-4, atol=1e-4)


def test_per_row_alpha_and_vectors_match_separate_runs(lm3):
    tok, m = lm3.tokenizer, lm3.model
    enc1 = _enc(tok, ["The weather today is"])
    enc3 = {k: v.repeat(3, 1) for k, v in enc1.items()}
    v = torch.randn(64, generator=torch.Generator().manual_seed(2))
    alphas = [0.0, 3.0, 6.0]
    with steer(m, v, layers=[2], alpha=alphas):
        batch, sb = _greedy(m, enc3, n=8)
    singles = []
    for i, a in enumerate(alphas):
        with steer(m, v, layers=[2], alpha=a):
            s, ss = _greedy(m, enc1, n=8)
        assert torch.equal(batch[i], s[0])
        torch.testing.assert_close(sb[i], ss[0], atol=1e-4, rtol=1e-4)
        singles.append(s[0])
    assert not torch.equal(singles[0], singles[2])
    # per-row direction sets of different k, and the [batch, d_model] vector form
    bases = [v[None].numpy(), np.stack([unit(0), unit(1)]), np.stack([unit(i) for i in range(4)])]
    with steer(m, bases, layers=[2], alpha=4.0):
        rows, _ = _greedy(m, enc3, n=8)
    vecs = torch.stack([combine_directions(b) for b in bases])
    with steer_vectors(m, vecs, layers=[2], alpha=4.0):
        rows2, _ = _greedy(m, enc3, n=8)
    assert torch.equal(rows, rows2)
    for i, b in enumerate(bases):
        with steer(m, b, layers=[2], alpha=4.0):
            s, _ = _greedy(m, enc1, n=8)
        assert torch.equal(rows[i], s[0])
    with pytest.raises(SteeringError, match="rows"):
        with steer(m, v, layers=[2], alpha=[1.0, 2.0]):
            m(**enc3)


def test_mean_resid_norm_matches_hidden_states(tiny_lm):
    tok, m = tiny_lm.tokenizer, tiny_lm.model
    texts = ["Hello there", "A longer sentence here"]
    enc = _enc(tok, texts)
    hs = m(**enc, output_hidden_states=True).hidden_states[1]
    want = float(hs.detach().norm(dim=-1)[enc["attention_mask"].bool()].mean())
    assert mean_resid_norm(tiny_lm, texts, 1, positions="all") == pytest.approx(want, rel=1e-5)
    last = float(hs.detach()[:, -1].norm(dim=-1).mean())
    assert mean_resid_norm(tiny_lm, texts, 1, batch_size=1) == pytest.approx(last, rel=1e-5)


# ------------------------------------------------------------------------------------------------ sweep


def test_planted_direction_is_found_and_random_is_not(tokenizer, tmp_path):
    from steering.sweep.cli import is_complete, run_sweep

    lm = planted_lm(tokenizer)
    run = make_steering_run(tmp_path, tokenizer, n_c=8, n_non=2)
    dirs = write_dirs(tmp_path / "probes", {2: np.stack([unit(PLANT), unit(62)])})
    s = run_sweep(sweep_config(run, dirs, layers=[2], ks=[1, 2], alphas=[0.5, 1.0], random_seeds=2, cases="all",
                       batch_size=32), lm=lm, echo=lambda m: None)
    assert s["status"] == "ok" and s["verdict_code"] == "effect", s["verdict"]
    by = {d["key"]: d for d in s["settings"]}
    assert s["baseline"]["reproduced_c"]["rate"] == 1.0 and s["baseline"]["moved_of_all"]["k"] == 0
    top = by["L2|k1|a1|probe"]
    assert top["moved_of_all"]["k"] == 8 and top["moved_of_all"]["n"] == 8 and top["coverage_c"]["rate"] == 1.0
    assert top["control"]["kind"] == "random" and top["control"]["moved_of_all"]["k"] == 0
    assert top["difference"]["n_questions"] == 8 and top["difference"]["estimate"] == 1.0
    # moved-of-all's exact test: the probe's is the moved one of 3, 8 times; moved among parsed leaves out the
    # random generations that did not parse, so its p is larger, still tiny
    assert top["p_value_of_all"] == pytest.approx(2 / 3 ** 8) and top["p_value"] < 1e-3
    assert top["setting_verdict"] == "effect" and top["parse"]["status"] != "broken"
    assert top["p_greater"] == pytest.approx(top["p_value"] / 2) and top["exact"]["n_informative"] == 8
    assert top["difference"]["n_dropped"] == 0 and s["n_random_directions"] == 10 * 4 * 2
    assert top["beats_control"] and top["p_holm"] < 0.05
    assert top["broken"]["k"] == 2  # side effect: the non-C cases (gold 3) now say 7
    assert by["L2|k1|a0.5|probe"]["moved_of_all"]["k"] == 8
    # dose matched: at alpha 0.5 the k=2 vector puts only 0.5/sqrt(2) on the planted axis: too weak to flip
    assert by["L2|k2|a0.5|probe"]["moved_of_all"]["k"] == 0 and not by["L2|k2|a0.5|probe"]["beats_control"]
    assert sum(d["strongest"] for d in s["settings"]) == 1
    out = run / "steering"
    assert (out / "sweep.png").stat().st_size > 1000
    assert is_complete(out)
    summ = json.loads((out / "summary.json").read_text())
    from loadbearing.results.check import read_result
    from loadbearing.results.stages import SweepSummary

    assert read_result(out / "summary.json", SweepSummary) == summ  # the typed result reads the file back unchanged
    assert summ["verdict"].startswith("effect:") and "Holm" in summ["verdict"]
    assert summ["split"]["disjoint"] is None  # the file records no split
    recs = [json.loads(x) for x in (out / "generations.jsonl").read_text().splitlines()]
    assert len(recs) == 10 * (1 + 4 * 3)
    assert {"setting", "case_id", "question_id", "question_key", "text", "parsed_answer", "correct"} <= set(recs[0])


def test_few_questions_are_inconclusive_not_null(tokenizer, tmp_path):
    from steering.sweep.cli import run_sweep

    lm = planted_lm(tokenizer)
    run = make_steering_run(tmp_path, tokenizer, n_c=4, n_non=0)
    dirs = write_dirs(tmp_path / "probes", {2: np.stack([unit(60)])})
    s = run_sweep(sweep_config(run, dirs, layers=[2], ks=[1], alphas=[1.0], random_seeds=1), lm=lm, echo=lambda m: None)
    assert s["verdict_code"] == "inconclusive", s["verdict"]
    assert s["verdict"].startswith("inconclusive: no setting beats its control") and "0/4" in s["verdict"]
    assert "would need about" in s["verdict"]
    d = s["settings"][0]
    assert d["difference"]["estimate"] == 0.0 and d["difference"]["ci"][1] > 0.10


def test_analysis_outcomes_and_moved_of_all_ranking():
    from steering.sweep.analysis import adjusted_interval, summarize_records
    from steering.sweep.exact import randomisation_test
    from steering.sweep.grid import make_grid

    grid = make_grid([2], [1, 2], [1.0], ("random", "none"), 1, {2: 1.0})

    def recs(n_q, probe_moves, ctrl_moves=0, unparsed_k2=0):
        out = []
        for q in range(n_q):
            for s in grid:
                if s.basis == "probe" and s.k == 1:
                    correct = True if q < probe_moves else False
                elif s.basis == "probe" and s.k == 2:
                    correct = None if q < unparsed_k2 else False  # k=2: only unparsed answers
                    if q == 0 and unparsed_k2:
                        correct = True  # 1 parsed, moved: "1/1 (100%)" among parsed
                else:
                    correct = True if (s.basis == "random" and q < ctrl_moves) else False
                out.append({"setting": s.key, "case_id": f"c{q}", "question_id": f"q{q}", "question_key": f"k{q}",
                            "case_label": "C", "correct": correct})
        return out

    null = summarize_records(recs(40, 0), grid)
    assert null["verdict_code"] == "null", null["verdict"]
    assert all(d["difference"]["ci"][1] < 0.10 for d in null["settings"])
    small = summarize_records(recs(12, 0), grid)
    assert small["verdict_code"] == "inconclusive"
    eff = summarize_records(recs(12, 12), grid)
    assert eff["verdict_code"] == "effect"
    # ranking by moved-of-all: k=2 moved 1 of the 1 it parsed, but 1 of 12 overall; k=1 moved 3 of 12
    mixed = summarize_records(recs(12, 3, unparsed_k2=12), grid)
    by = {d["k"]: d for d in mixed["settings"]}
    assert by[2]["moved"]["rate"] == 1.0 and by[2]["coverage_c"]["k"] == 1
    assert by[1]["strongest"] and not by[2]["strongest"]
    # intervals and tests at the question level
    iv = adjusted_interval([0.0] * 20)
    assert iv["estimate"] == 0.0 and iv["ci"][1] == pytest.approx(0.137, abs=0.003)
    assert randomisation_test([[1, 0]] * 8)["p_two"] == pytest.approx(2 / 256)
    assert randomisation_test([[0, 0], [1, 1]])["p_two"] == 1.0
    assert 0 < randomisation_test([[1, 0]] * 30 + [[0, 1]] * 5)["p_two"] < 0.001


def test_cases_distinct_stratified_and_disjoint_from_fitting(tokenizer, tmp_path):
    from steering.sweep.cli import run_sweep

    lm = planted_lm(tokenizer)
    # 12 C cases over 4 questions (3 each) + 2 C records repeating an earlier input under another id
    run = make_steering_run(tmp_path, tokenizer, n_c=12, n_non=0, per_q=3, dup=2)
    dirs = write_dirs(tmp_path / "probes", {2: np.stack([unit(PLANT)])},
                       attrs={"question_split": json.dumps({"fit": ["q0"]})})
    s = run_sweep(sweep_config(run, dirs, layers=[2], ks=[1], alphas=[1.0], random_seeds=1, per_question=2, max_cases=5),
                  lm=lm, echo=lambda m: None)
    cfg = json.loads((run / "steering" / "config.json").read_text())
    stats = cfg["case_sample"]
    assert stats["n_duplicate_inputs_dropped"] == 2 and stats["n_excluded_fit_questions"] == 3
    assert stats["n_c_cases"] == 5 and stats["n_c_questions"] == 3  # round-robin: all 3 questions first
    assert cfg["split"]["disjoint"] is True and cfg["split"]["source"] == "directions.h5"
    recs = [json.loads(x) for x in (run / "steering" / "generations.jsonl").read_text().splitlines()]
    assert not any(r["question_id"] == "q0" for r in recs)
    per_q = {}
    for r in recs:
        if r["setting"].endswith("probe"):
            per_q[r["question_id"]] = per_q.get(r["question_id"], 0) + 1
    assert max(per_q.values()) <= 2 and len(per_q) == 3
    assert s["n_c_questions"] == 3 and s["split"]["disjoint"] is True
    # the sample is seeded: the same config draws the same cases
    s2 = run_sweep(sweep_config(run, dirs, layers=[2], ks=[1], alphas=[1.0], random_seeds=1, per_question=2, max_cases=5,
                        output=str(tmp_path / "again")), lm=lm, echo=lambda m: None)
    cfg2 = json.loads((tmp_path / "again" / "config.json").read_text())
    assert cfg2["case_ids"] == cfg["case_ids"] and s2["n_c_cases"] == 5
    # an exclude file removes more questions; a held-out list keeps only its questions
    ex = tmp_path / "fit.txt"
    ex.write_text("# fitting questions\nq1\n")
    s3 = run_sweep(sweep_config(run, dirs, layers=[2], ks=[1], alphas=[1.0], random_seeds=1, exclude_questions=str(ex),
                        output=str(tmp_path / "ex")), lm=lm, echo=lambda m: None)
    assert s3["n_c_questions"] == 2 and "--exclude-questions" in s3["split"]["source"]
    held = write_dirs(tmp_path / "held", {2: np.stack([unit(PLANT)])},
                       attrs={"question_split": json.dumps({"held_out": ["q3"]})})
    s4 = run_sweep(sweep_config(run, held, layers=[2], ks=[1], alphas=[1.0], random_seeds=1, output=str(tmp_path / "held_out")),
                   lm=lm, echo=lambda m: None)
    assert s4["n_c_questions"] == 1
    # --allow-overlap steers the fitting questions too, and says so
    s5 = run_sweep(sweep_config(run, dirs, layers=[2], ks=[1], alphas=[1.0], random_seeds=1, allow_overlap=True,
                        output=str(tmp_path / "overlap")), lm=lm, echo=lambda m: None)
    assert s5["n_c_questions"] == 4 and s5["split"]["disjoint"] is False and "not a held-out test" in s5["verdict"]


def test_sweep_resume_has_no_duplicates(tokenizer, tmp_path):
    from steering.generate import generate_steered
    from steering.sweep.cli import SweepError, is_complete, run_sweep

    lm = planted_lm(tokenizer)
    run = make_steering_run(tmp_path, tokenizer, n_c=4, n_non=0)
    dirs = write_dirs(tmp_path / "probes", {2: np.stack([unit(PLANT)])})
    calls = []

    def counting(lm_, texts, *a, **kw):
        calls.append(len(texts))
        return generate_steered(lm_, texts, *a, **kw)

    kw = dict(layers=[2], ks=[1], alphas=[1.0], random_seeds=1)
    run_sweep(sweep_config(run, dirs, max_cases=2, **kw), lm=lm, generate_fn=counting, echo=lambda m: None)  # "killed" after two
    assert sum(calls) == 2 * 3
    # a torn last line (killed mid-write) is repaired, not duplicated
    gpath = run / "steering" / "generations.jsonl"
    with open(gpath, "a") as f:
        f.write('{"setting": "half')
    with pytest.raises(SweepError, match="resume"):
        run_sweep(sweep_config(run, dirs, **kw), lm=lm, generate_fn=counting, echo=lambda m: None)
    s = run_sweep(sweep_config(run, dirs, resume=True, **kw), lm=lm, generate_fn=counting, echo=lambda m: None)
    assert sum(calls) == 4 * 3
    recs = [json.loads(x) for x in gpath.read_text().splitlines()]
    pairs = [(r["setting"], r["case_id"]) for r in recs]
    assert len(pairs) == len(set(pairs)) == 4 * 3
    assert s["settings"][0]["moved_of_all"]["n"] == 4 and is_complete(run / "steering")
    calls.clear()
    run_sweep(sweep_config(run, dirs, resume=True, **kw), lm=lm, generate_fn=counting, echo=lambda m: None)
    assert sum(calls) == 0
    with pytest.raises(SweepError, match="max_new_tokens"):
        run_sweep(sweep_config(run, dirs, resume=True, **dict(kw, max_new_tokens=9)), lm=lm, echo=lambda m: None)


def test_second_writer_is_refused(tokenizer, tmp_path):
    from loadbearing.locks import LockError, output_lock
    from steering.sweep.cli import run_sweep

    lm = planted_lm(tokenizer)
    run = make_steering_run(tmp_path, tokenizer, n_c=2, n_non=0)
    dirs = write_dirs(tmp_path / "probes", {2: np.stack([unit(PLANT)])})
    kw = dict(layers=[2], ks=[1], alphas=[1.0], random_seeds=1)
    run_sweep(sweep_config(run, dirs, max_cases=1, **kw), lm=lm, echo=lambda m: None)
    before = (run / "steering" / "generations.jsonl").read_bytes()
    with output_lock(run / "steering", command="another sweep"):
        with pytest.raises(LockError, match="in use"):
            run_sweep(sweep_config(run, dirs, resume=True, **kw), lm=lm, echo=lambda m: None)
    assert (run / "steering" / "generations.jsonl").read_bytes() == before


def test_bad_input_errors_and_nothing_written(tokenizer, tmp_path):
    from probes import ProbeError
    from steering.sweep.cli import SweepError, run_sweep

    lm = planted_lm(tokenizer)
    run = make_steering_run(tmp_path, tokenizer, n_c=2, n_non=0)
    kw = dict(ks=[1], alphas=[1.0], random_seeds=1, max_new_tokens=4)
    wide = write_dirs(tmp_path / "wide", {2: np.ones((2, 32), dtype=np.float32)})
    with pytest.raises(SweepError, match="width 32 .* d_model is 64"):
        run_sweep(sweep_config(run, wide, layers=[2], **kw), lm=lm)
    ok = write_dirs(tmp_path / "ok", {2: np.stack([unit(PLANT)])})
    with pytest.raises(SweepError, match="unknown layer 7"):
        run_sweep(sweep_config(run, ok, layers=[7], **kw), lm=lm)
    with pytest.raises(SweepError, match="k must be between 1 and 1"):
        run_sweep(sweep_config(run, ok, layers=[2], **dict(kw, ks=[2])), lm=lm)
    with pytest.raises(ProbeError, match="no probe directions at"):  # the directions reader's own error
        run_sweep(sweep_config(run, tmp_path / "nowhere", layers=[2], **kw), lm=lm)
    assert not (run / "steering").exists()


BAD_CASES = ["alphas_nan", "alphas_inf", "alphas_empty", "alphas_word", "max_cases_0", "max_cases_neg", "batch_0",
             "tokens_0", "per_q_0", "sesoi_nan", "other_model", "controls_bad", "seeds_0", "exclude_missing", "nan_bases",
             "missing_dirs", "truncated_dirs", "no_run", "incomplete", "foreign_store"]


@pytest.mark.parametrize("case", BAD_CASES)
def test_cli_bad_input_one_line_exit_2_before_loading(tokenizer, tmp_path, capsys, monkeypatch, case):
    import hashlib

    import loadbearing.engine.models as models
    from steering.sweep.cli import main

    def boom(*a, **k):
        raise AssertionError("the model must not be loaded for a bad input")

    monkeypatch.setattr(models, "load_model", boom)
    argv, run, inputs = cli_case(tmp_path, tokenizer, case)
    before = {p: hashlib.sha256(p.read_bytes()).hexdigest() for p in inputs}
    rc = main(argv)
    err = capsys.readouterr().err.strip()
    assert rc == 2, err
    assert err.startswith("error: ") and "\n" not in err and "Traceback" not in err, err
    assert not (run / "steering").exists()
    assert {p: hashlib.sha256(p.read_bytes()).hexdigest() for p in inputs} == before


def test_cli_existing_output_untouched(tokenizer, tmp_path, capsys):
    from steering.sweep.cli import main

    run = make_steering_run(tmp_path, tokenizer, n_c=2, n_non=0)
    ok = write_dirs(tmp_path / "ok", {2: np.stack([unit(PLANT)])})
    out = run / "steering"
    out.mkdir()
    (out / "keep.txt").write_text("x")
    rc = main([str(run), "--directions", str(ok), "--quiet"])
    assert rc == 2
    err = capsys.readouterr().err.strip()
    assert err.startswith("error: ") and "already exists" in err and "\n" not in err
    assert (out / "keep.txt").read_text() == "x" and len(list(out.iterdir())) == 1


def test_no_c_cases_is_insufficient_data(tokenizer, tmp_path):
    from steering.sweep.analysis import format_summary
    from steering.sweep.cli import is_complete, run_sweep

    lm = planted_lm(tokenizer)
    run = make_steering_run(tmp_path, tokenizer, n_c=0, n_non=3)
    dirs = write_dirs(tmp_path / "probes", {2: np.stack([unit(PLANT)])})
    msgs = []
    s = run_sweep(sweep_config(run, dirs, layers=[2], ks=[1], alphas=[1.0]), lm=lm, echo=msgs.append)
    assert s["status"] == "insufficient_data" and s["verdict"].startswith("insufficient_data")
    assert json.loads((run / "steering" / "summary.json").read_text())["status"] == "insufficient_data"
    assert any("no type-C" in m for m in msgs)
    assert is_complete(run / "steering")
    assert "insufficient_data" in format_summary(s, style="md")


def test_format_summary_text_and_md(tokenizer, tmp_path):
    from steering.sweep.cli import format_summary, format_table, run_sweep

    lm = planted_lm(tokenizer)
    run = make_steering_run(tmp_path, tokenizer, n_c=3, n_non=0)
    dirs = write_dirs(tmp_path / "probes", {2: np.stack([unit(PLANT)])})
    s = run_sweep(sweep_config(run, dirs, layers=[2], ks=[1], alphas=[1.0], random_seeds=1), lm=lm, echo=lambda m: None)
    text = format_summary(s)
    assert "3 type-C cases from 3 questions" in text and "parsed C" in text and s["verdict"] in text
    md = format_summary(s, style="md")
    assert "| setting |" in md and "**Verdict.**" in md and "L2\\|k1\\|a1\\|probe" in md
    assert format_table(s).splitlines()[0].startswith("setting")


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


def test_positions_rule_has_one_home():
    from steering.positions import POSITIONS, first_steered, prompt_steering

    assert [first_steered(p, 5) for p in POSITIONS] == [4, 5, 0, 4, 4]  # think / answer: the continuation's, one phase
    assert [prompt_steering(p) for p in POSITIONS] == ["last", "none", "all", "last", "last"]
    with pytest.raises(SteeringError, match="unknown positions"):
        first_steered("prefix", 5)


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
