"""Thought anchors' white-box methods (behavioural.causal.attention / receiver): the arithmetic against ports of
interp-reasoning/thought-anchors ``whitebox-analyses/attention_analysis`` (1e-12 on fixed inputs), scripted
attention models with known answers, a real tiny Llama (sdpa switched to eager and back; causal masking), and
one error line for attention that cannot be read."""
from __future__ import annotations

import json
import shutil
from pathlib import Path

import numpy as np
import pytest
import torch
from fakes import fake_lm, scripted_generate
from helpers.attention import K, scripted_lm

from behavioural.causal import receiver as rc
from behavioural.causal.attention import AttentionConfig, chain_tokens, run_receiver_heads, run_suppression
from behavioural.causal.common import eligible_chains
from behavioural.causal.receiver_heads import main as rh_main
from behavioural.protocol import Settings, run_protocol
from loadbearing.engine.models import LoadedModel
from loadbearing.questions.data import load_questions
from loadbearing.runs import Run


# ------------------------------------------------------------------------------------------------ ports
def _avg_port(matrix, sentence_boundaries):  # attn_funcs._compute_averaged_matrix
    n = len(sentence_boundaries)
    result = np.zeros((n, n), dtype=np.float32)
    for i in range(n):
        row_start, row_end = sentence_boundaries[i]
        row_start, row_end = min(row_start, matrix.shape[0] - 1), min(row_end, matrix.shape[0] - 1)
        if row_start >= row_end:
            continue
        for j in range(n):
            col_start, col_end = sentence_boundaries[j]
            col_start, col_end = min(col_start, matrix.shape[1] - 1), min(col_end, matrix.shape[1] - 1)
            if col_start >= col_end:
                continue
            region = matrix[row_start:row_end, col_start:col_end]
            if region.size > 0:
                result[i, j] = np.mean(region)
    return result


def _vert_port(avg_mat, proximity_ignore):  # attn_funcs.get_vertical_scores, control_depth=False, "mean"
    trius = np.triu_indices_from(avg_mat, k=1)
    avg_mat = avg_mat.copy()
    avg_mat[trius] = np.nan
    trils = np.triu_indices_from(avg_mat, k=-proximity_ignore + 1)
    avg_mat[trils] = np.nan
    import warnings

    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)  # nanmean of an empty or all-NaN slice: NaN, as theirs
        return np.array([np.nanmean(avg_mat[i + proximity_ignore:, i]) for i in range(avg_mat.shape[-1])])


def test_step_matrix_vertical_scores_kurtosis_and_top_heads_equal_thought_anchors():
    from scipy import stats

    rng = np.random.default_rng(7)
    attn = rng.random((3, 4, 40, 40))  # [layers, heads, seq, seq]
    bounds = [(2, 8), (8, 15), (15, 21), (21, 30), (30, 39), (39, 40)]
    for pi in (1, 2, 4):
        mats = np.stack([[rc.step_attention(attn[la, h], bounds) for h in range(4)] for la in range(3)])
        ref = np.stack([[_avg_port(attn[la, h].astype(np.float32), bounds) for h in range(4)] for la in range(3)])
        assert np.allclose(mats, ref, atol=1e-6, rtol=0)  # theirs accumulates in float32
        verts = np.stack([[rc.vertical_scores(mats[la, h], pi) for h in range(4)] for la in range(3)])
        vref = np.stack([[_vert_port(mats[la, h], pi) for h in range(4)] for la in range(3)])
        assert np.allclose(verts, vref, atol=1e-12, rtol=0, equal_nan=True)
        kurt = rc.head_kurtosis(verts)
        kref = stats.kurtosis(vref, axis=2, fisher=True, bias=True, nan_policy="omit")
        assert np.allclose(kurt, np.ma.filled(kref, np.nan), atol=1e-12, equal_nan=True)
    # top heads: receiver_head_funcs.get_top_k_layer_head_kurts
    mean_k = rng.normal(size=(3, 4))
    mean_k[0, 1] = np.nan
    flat = mean_k.flatten()
    valid = np.where(~np.isnan(flat))[0]
    top = np.argpartition(flat[valid], -5)[-5:]
    top = valid[top[np.argsort(-flat[valid][top])]]
    assert rc.top_heads(mean_k, 5) == [tuple(int(x) for x in np.unravel_index(t, mean_k.shape)) for t in top]
    heads = rc.top_heads(mean_k, 5)
    assert np.allclose(rc.receiver_scores(verts, heads), np.mean([verts[a, b] for a, b in heads], axis=0),
                       atol=1e-12, equal_nan=True)


def test_log_kl_is_the_suppression_cell():
    rng = np.random.default_rng(1)
    p, q = rng.normal(size=(3, 11)), rng.normal(size=(3, 11))
    got = rc.log_kl(p, q, 0.6)
    for row in range(3):
        a = np.exp(p[row] / 0.6) / np.exp(p[row] / 0.6).sum()
        b = np.exp(q[row] / 0.6) / np.exp(q[row] / 0.6).sum()
        assert got[row] == pytest.approx(np.log(max(0.0, float(np.sum(a * np.log(a / b)))) + 1e-9), abs=1e-12)
    assert rc.log_kl(p, p)[0] == pytest.approx(np.log(1e-9))


# ------------------------------------------------------------------------------------------------ scripted models
@pytest.fixture(scope="module")
def run_dir(tokenizer, tmp_path_factory) -> Path:
    qs = load_questions("arith", task="s2_o5,s3_o5", n_per_level=4)
    out = tmp_path_factory.mktemp("attention") / "run"
    settings = Settings(model="scripted", dataset="arith", strategies=("arithmetic_change",), task="s2_o5,s3_o5",
                        max_examples=None, max_new_tokens=64, n_per_level=4, batch_size=4)
    run_protocol(fake_lm(tokenizer), qs, settings, out, generate_fn=scripted_generate, echo=None, progress=False)
    return out


@pytest.fixture
def run_copy(run_dir, tmp_path) -> Path:
    dst = tmp_path / "run"
    shutil.copytree(run_dir, dst)
    return dst


def test_later_steps_attending_only_to_step_k_give_it_the_top_vertical_score(run_copy, tokenizer):
    s = run_receiver_heads(AttentionConfig(run_copy, max_questions=None, quiet=True), scripted_lm(run_copy, tokenizer),
                           echo=None)
    assert s["n_sampled_questions"] == len(eligible_chains(Run(run_copy))) >= 2
    assert s["proximity_ignore"] == 1 and len(s["top_heads"]) == 4  # 2 layers x 2 heads, all kept (k = 20)
    for q in s["questions"]:
        assert q["top_step"] == K, q["receiver_score"]
        assert q["receiver_score"][-1] is None  # the last step has no later step
    rows = [json.loads(x) for x in (run_copy / "receiver_heads" / "records.jsonl").read_text().splitlines()]
    assert all(r["attn_implementation"] == "eager" and len(r["bounds"]) == r["n_lines"] for r in rows)
    assert "Receiver heads" in (run_copy / "receiver_heads" / "summary.md").read_text()
    # a study stage: complete, and rendered in the report from its summary
    import study.stages.extra  # noqa: F401 - registers the optional stages
    from study.stages.core import REGISTRY

    st = REGISTRY["receiver_heads"]
    assert st.is_complete(run_copy) and not REGISTRY["suppression"].is_complete(run_copy)
    assert "| receiver score per step |" in (st.render(run_copy, "md") or "")


def test_masking_a_step_changes_only_the_steps_that_read_it(run_copy, tokenizer):
    s = run_suppression(AttentionConfig(run_copy, max_questions=None, quiet=True), scripted_lm(run_copy, tokenizer),
                        echo=None)
    floor = np.log(1e-9)
    for q in s["questions"]:
        m = np.array(q["matrix"], dtype=float)
        n = m.shape[0]
        reads = {(i, K) for i in range(K + 1, n)} | {(i, i) for i in range(K + 1)}  # the script's readers
        for i in range(n):
            for j in range(n):
                if (i, j) in reads:
                    assert m[i, j] > floor + 5, (i, j, m)
                else:
                    assert m[i, j] == pytest.approx(floor, abs=1e-6), (i, j, m)
        assert q["top_step"] == K
    import study.stages.extra  # noqa: F401 - registers the optional stages
    from study.stages.core import REGISTRY

    assert "| effect of masking each step |" in (REGISTRY["suppression"].render(run_copy, "md") or "")


def test_attention_that_cannot_be_read_is_one_error_line(run_copy, tokenizer, capsys, monkeypatch):
    import behavioural.causal.common as common

    monkeypatch.setattr(common.Run, "load_model", lambda self, device=None: scripted_lm(
        run_copy, tokenizer, impl="flash_attention_2", can_switch=False))
    assert rh_main([str(run_copy), "--quiet"]) == 2
    err = capsys.readouterr().err.strip()
    assert err.startswith("error: attention weights: the loaded model uses 'flash_attention_2' attention")
    assert "attn_implementation='eager'" in err and "\n" not in err


# ------------------------------------------------------------------------------------------------ a real tiny model
def test_a_real_tiny_llama_is_read_eagerly_and_masked_causally(run_copy, tiny_lm, tokenizer):
    from behavioural.causal.attention import eager_attention, forward

    model = tiny_lm.model
    before = model.config._attn_implementation
    c = eligible_chains(Run(run_copy))[0]
    ids, bounds = chain_tokens(c, tokenizer)
    with eager_attention(model):
        out = forward(model, ids, attentions=True)
    assert model.config._attn_implementation == before
    att = out.attentions[0][0].numpy()  # [heads, seq, seq]
    assert np.allclose(att.sum(axis=-1), 1, atol=1e-5) and np.allclose(np.triu(att[0], 1), 0)
    lm = LoadedModel(model=model, tokenizer=tokenizer, name="scripted", model_id="scripted", weights_hash="0" * 64)
    s = run_suppression(AttentionConfig(run_copy, max_questions=2, quiet=True), lm, echo=None)
    for q in s["questions"]:
        m = np.array(q["matrix"], dtype=float)
        n = m.shape[0]
        assert all(m[i, j] == pytest.approx(np.log(1e-9), abs=1e-3) for i in range(n) for j in range(i + 1, n))
        assert all(m[i, j] > np.log(1e-9) + 1 for i in range(n) for j in range(i + 1) if i > j)


def test_the_prompt_cache_gives_the_full_pass_logits_and_attention(run_copy, tiny_lm, tokenizer):
    from behavioural.causal.attention import eager_attention, forward, prefix_cache, suppression_mask

    model = tiny_lm.model
    c = eligible_chains(Run(run_copy))[0]
    ids, bounds = chain_tokens(c, tokenizer)
    start = bounds[0][0]
    past = prefix_cache(model, ids, start)
    assert past is not None
    full = forward(model, ids).logits[0]
    cached = forward(model, ids[start:], past=past).logits[0]
    assert torch.allclose(full[start:], cached, atol=1e-4)
    m_full = forward(model, ids, mask=suppression_mask(len(ids), bounds[0], torch.float32)).logits[0]
    m_cached = forward(model, ids[start:], mask=suppression_mask(len(ids), bounds[0], torch.float32, start),
                       past=past).logits[0]
    assert torch.allclose(m_full[start:], m_cached, atol=1e-4) and not torch.allclose(m_cached, cached, atol=1e-3)
    with eager_attention(model):
        a_full = forward(model, ids, attentions=True).attentions[1][0]
        a_cached = forward(model, ids[start:], attentions=True, past=prefix_cache(model, ids, start)).attentions[1][0]
    assert torch.allclose(a_full[:, start:, :], a_cached, atol=1e-5)


def test_agreement_between_receiver_heads_suppression_and_propagation(run_copy, tokenizer):
    from behavioural.causal.agreement import format_agreement, pair_agreement, step_agreement
    from study.report.causal import causal_section

    lm = scripted_lm(run_copy, tokenizer)
    run_receiver_heads(AttentionConfig(run_copy, max_questions=None, quiet=True), lm, echo=None)
    run_suppression(AttentionConfig(run_copy, max_questions=None, quiet=True), lm, echo=None)
    t = step_agreement(run_copy, n_boot=100)
    assert t is not None and t["measures"] == ["propagation", "receiver", "suppression"]
    pair = next(p for p in t["pairs"] if (p["a"], p["b"]) == ("receiver", "suppression"))
    # both find step K: every question agrees on the top step
    assert pair["same_top_step"]["k"] == pair["same_top_step"]["n"] == len(t["questions"]) >= 2
    md = causal_section(run_copy)
    assert md is not None and "| receiver vs suppression |" in md
    assert md == format_agreement(t, "md") + "\n\n![step-level agreement](report_figures/step_agreement.png)"
    assert (run_copy / "report_figures" / "step_agreement.png").is_file()  # drawn from the same pairs
    # by hand on fixed values: rho +1 for one question, -1 for another; tops agree once of two
    vals = {"q1": {"a": {0: 1.0, 1: 2.0, 2: 3.0}, "b": {0: 1.0, 1: 2.0, 2: 9.0}},
            "q2": {"a": {0: 3.0, 1: 2.0, 2: 1.0}, "b": {0: 1.0, 1: 2.0, 2: 3.0}}}
    p = pair_agreement(vals, "a", "b", n_boot=50)
    assert p["mean_spearman"] == pytest.approx(0.0) and p["n_questions_rho"] == 2
    assert p["same_top_step"]["k"] == 1 and p["same_top_step"]["n"] == 2 and p["chance_same_top"] == pytest.approx(1 / 3)
