"""The vLLM steering hooks' per-request logic (loadbearing.engine.vllm_hooks) on a stand-in model runner, and the
vLLM path's one-line refusals. Fast and vLLM-free: the real engine is tests/test_vllm_steering.py's (vllm tier).

The stand-in runner has exactly the fields the hooks read from vLLM 0.32's GPUModelRunner / CPUModelRunner
(``input_batch.req_ids`` / ``num_reqs``, ``requests[id].sampling_params.extra_args`` / ``prompt_token_ids``,
``query_start_loc.np``) and a model whose blocks return vLLM's ``(hidden, residual)`` pair."""
from __future__ import annotations

import sys
import types
from types import SimpleNamespace

import numpy as np
import pytest
import torch

from loadbearing.engine.vllm_hooks import (
    EXTRA_KEY,
    HookSpec,
    SteeringExtension,
    VLLMHookError,
    check_version,
    merge,
)

D = 8


class _Block(torch.nn.Module):
    """vLLM's fused-add-norm layer shape: returns (hidden, residual), the stream being their sum."""

    def __init__(self, seed: int) -> None:
        super().__init__()
        g = torch.Generator().manual_seed(seed)
        self.w = torch.nn.Parameter(torch.randn(D, D, generator=g) * 0.3)

    def forward(self, positions, hidden, residual):
        stream = hidden if residual is None else hidden + residual
        return torch.tanh(stream @ self.w), stream


class _Model(torch.nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.model = torch.nn.Module()
        self.model.layers = torch.nn.ModuleList([_Block(i) for i in range(3)])
        self.seen: dict[int, torch.Tensor] = {}

    def forward(self, input_ids=None, positions=None, intermediate_tensors=None, inputs_embeds=None):
        hidden, residual = inputs_embeds, None
        for i, layer in enumerate(self.model.layers):
            hidden, residual = layer(positions, hidden, residual)
            self.seen[i] = hidden + residual  # [tokens, d]: the residual stream after block i
        return hidden + residual


def _runner(reqs):
    """reqs: (id, prompt_len, tag or None, n scheduled tokens, first position)."""
    qsl = np.cumsum([0] + [r[3] for r in reqs])
    requests = {r[0]: SimpleNamespace(prompt_token_ids=list(range(r[1])),
                                      sampling_params=SimpleNamespace(extra_args={EXTRA_KEY: r[2]} if r[2] else None))
                for r in reqs}
    positions = torch.cat([torch.arange(r[4], r[4] + r[3]) for r in reqs])
    runner = SimpleNamespace(input_batch=SimpleNamespace(num_reqs=len(reqs), req_ids=[r[0] for r in reqs]),
                             requests=requests, query_start_loc=SimpleNamespace(np=qsl), model=_Model())
    return SimpleNamespace(model_runner=runner), positions


def _forward(worker, positions, x):
    with torch.inference_mode():
        worker.model_runner.model(positions=positions, inputs_embeds=x)
    return {k: v.clone() for k, v in worker.model_runner.model.seen.items()}


@pytest.mark.parametrize("host_positions", [False, True])
def test_add_edits_only_tagged_requests_at_the_steered_positions(host_positions):
    # request a: prefill of its 4 prompt tokens (positions 0..3); b: untagged decode; c: tagged decode at 9
    worker, pos = _runner([("a", 4, [7, 1], 4, 0), ("b", 5, None, 1, 6), ("c", 3, [7, 2], 1, 9)])
    if host_positions:  # the runner's num_computed_tokens_cpu (vLLM's own), else the positions tensor
        worker.model_runner.input_batch.num_computed_tokens_cpu = np.array([0, 6, 9])
    x = torch.randn(6, D, generator=torch.Generator().manual_seed(1))
    plain = _forward(worker, pos, x)
    table = np.zeros((3, D), dtype=np.float32)
    table[1], table[2] = 1.0, -2.0
    spec = HookSpec(op="add", blocks=(1,), prompt_mode="last", table=table, call=7)
    info = SteeringExtension.lb_hooks_install(worker, spec.to_wire())
    assert info == {"hooks": 2, "blocks_hooked": 1} and SteeringExtension.lb_hooks_count(worker) == 2
    steered = _forward(worker, pos, x)
    out = SteeringExtension.lb_hooks_remove(worker)
    assert out["removed"] == 2 and out["remaining_hooks"] == 0 and SteeringExtension.lb_hooks_count(worker) == 0
    assert torch.equal(steered[0], plain[0])  # before the hooked block: nothing
    diff = steered[1] - plain[1]  # [tokens, d] after block 1: exactly the row's vector, where steered
    want = torch.zeros(6, D)
    want[3] = 1.0  # a's last prompt token (position 3 = prompt_len - 1); a's earlier tokens are never steered
    want[5] = -2.0  # c's generated token
    torch.testing.assert_close(diff, want, rtol=0, atol=1e-5)
    assert out["steered_tokens"] == 2 and out["passes"] == 1
    assert not torch.equal(steered[2], plain[2])  # later blocks read the edited stream
    # another call's tag (a stale request) is never steered
    SteeringExtension.lb_hooks_install(worker, HookSpec("add", (1,), "all", table, call=8).to_wire())
    again = _forward(worker, pos, x)
    assert SteeringExtension.lb_hooks_remove(worker)["steered_tokens"] == 0 and torch.equal(again[2], plain[2])


@pytest.mark.parametrize("mode,steered_rows", [("none", []), ("all", [0, 1, 2, 3])])
def test_prompt_modes(mode, steered_rows):
    worker, pos = _runner([("a", 4, [3, 1], 4, 0)])
    x = torch.randn(4, D, generator=torch.Generator().manual_seed(2))
    plain = _forward(worker, pos, x)
    table = np.stack([np.zeros(D), np.ones(D)]).astype(np.float32)
    SteeringExtension.lb_hooks_install(worker, HookSpec("add", (0,), mode, table, call=3).to_wire())
    got = _forward(worker, pos, x)
    SteeringExtension.lb_hooks_remove(worker)
    changed = [i for i in range(4) if not torch.equal(got[0][i], plain[0][i])]
    assert changed == steered_rows


def test_ablation_leaves_no_projection_at_steered_tokens():
    worker, pos = _runner([("a", 2, [5, 1], 3, 0), ("b", 2, None, 1, 4)])
    x = torch.randn(4, D, generator=torch.Generator().manual_seed(3)) * 5
    plain = _forward(worker, pos, x)
    q, _ = np.linalg.qr(np.random.default_rng(0).standard_normal((D, 2)))
    table = np.zeros((2, 2, D), dtype=np.float32)
    table[1] = q.T
    SteeringExtension.lb_hooks_install(worker, HookSpec("ablate", (1,), "last", table, call=5).to_wire())
    got = _forward(worker, pos, x)
    out = SteeringExtension.lb_hooks_remove(worker)
    B = torch.as_tensor(q.T, dtype=torch.float32)
    proj = got[1] @ B.T  # [tokens, 2]
    assert proj[1:3].abs().max() < 1e-5 and out["max_projection"] < 1e-6  # a's last prompt token and its next
    assert torch.equal(got[1][0], plain[1][0]) and torch.equal(got[1][3], plain[1][3])  # a's first token; b
    assert (plain[1][1:3] @ B.T).abs().max() > 0.1  # there was something to remove


def test_install_failure_leaves_no_hook():
    worker, _ = _runner([("a", 2, [1, 1], 2, 0)])
    bad = HookSpec("add", (0, 9), "last", np.zeros((2, D), dtype=np.float32), call=1).to_wire()
    with pytest.raises(VLLMHookError, match="outside 0..2"):
        SteeringExtension.lb_hooks_install(worker, bad)
    assert SteeringExtension.lb_hooks_count(worker) == 0


def test_spec_and_version_refusals():
    with pytest.raises(VLLMHookError, match="unknown hook op"):
        HookSpec("scale", (0,), "last", np.zeros((2, D))).to_wire()
    with pytest.raises(VLLMHookError, match="3 dimensions"):
        HookSpec("ablate", (0,), "last", np.zeros((2, D))).to_wire()
    check_version("0.32.0")
    check_version("0.32.1+cpu")
    for v in ("0.31.2", "0.33.0", "1.0.0", "dev"):
        with pytest.raises(VLLMHookError) as e:
            check_version(v)
        msg = str(e.value)
        assert ">=0.32,<0.33" in msg and v in msg and "\n" not in msg and "--backend hf" in msg
    m = merge([{"removed": 2, "remaining_hooks": 0, "steered_tokens": 5, "passes": 3, "max_projection": 1e-8},
               {"removed": 2, "remaining_hooks": 0, "steered_tokens": 5, "passes": 3, "max_projection": 2e-8}])
    assert m["workers"] == 2 and m["removed"] == 4 and m["passes"] == 3 and m["max_projection"] == 2e-8


def _fake_vllm(monkeypatch, version):
    mod = types.ModuleType("vllm")
    mod.LLM, mod.SamplingParams, mod.__version__ = object, object, version
    monkeypatch.setitem(sys.modules, "vllm", mod)


@pytest.mark.parametrize("argv,needle", [
    (["--backend", "vllm", "--layers", "0"], "layer 0"),
    (["--backend", "vllm", "--tensor-parallel-size", "0"], "--tensor-parallel-size"),
    (["--backend", "vllm"], ">=0.32,<0.33"),  # the stand-in vLLM below is 0.31
])
def test_sweep_backend_refusals_are_one_line(argv, needle, tmp_path, capsys, monkeypatch):
    from steering.sweep.cli import main

    _fake_vllm(monkeypatch, "0.31.0")
    run = tmp_path / "run"
    rc = main([str(run), "--directions", str(tmp_path / "probes"), "--output-dir", str(tmp_path / "out"), *argv])
    err = capsys.readouterr().err.strip()
    assert rc == 2 and err.startswith("error:") and "\n" not in err and needle in err, err
    assert not (tmp_path / "out").exists() and not run.exists()


def test_causal_backend_refusal(tmp_path, capsys, monkeypatch):
    from behavioural.causal.early_answer import main

    monkeypatch.setitem(sys.modules, "vllm", None)  # import vllm -> ImportError
    rc = main([str(tmp_path / "run"), "--backend", "vllm"])
    err = capsys.readouterr().err.strip()
    assert rc == 2 and err.startswith("error:") and "\n" not in err and "make vllm" in err, err
