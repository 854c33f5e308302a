"""vLLM's own distributed options reach the engine: ``behavioural.run`` passes --tensor-parallel-size,
--pipeline-parallel-size, --data-parallel-size and --distributed-executor-backend through to ``vllm.LLM``
(checked with a stand-in ``vllm`` module that records its arguments; the real engine is tested in test_vllm.py)."""
from __future__ import annotations

import sys
import types

import pytest

from behavioural.run import RunConfig, build_parser, main, vllm_options


@pytest.fixture
def fake_vllm(monkeypatch):
    seen: dict = {}

    class LLM:
        def __init__(self, **kw):
            seen.update(kw)

    mod = types.ModuleType("vllm")
    mod.LLM, mod.SamplingParams, mod.__version__ = LLM, object, "0-test"
    platforms = types.ModuleType("vllm.platforms")
    platforms.current_platform = types.SimpleNamespace(is_cpu=lambda: False, device_type="cuda")
    monkeypatch.setitem(sys.modules, "vllm", mod)
    monkeypatch.setitem(sys.modules, "vllm.platforms", platforms)
    return seen


def _config(argv):
    from behavioural import run as run_mod

    args = build_parser().parse_args(argv)
    return RunConfig(settings=None, output_dir="x", tensor_parallel_size=args.tensor_parallel_size,
                     gpu_memory_utilization=args.gpu_memory_utilization,
                     pipeline_parallel_size=args.pipeline_parallel_size, data_parallel_size=args.data_parallel_size,
                     distributed_executor_backend=args.distributed_executor_backend), run_mod


def test_distributed_options_reach_the_engine(fake_vllm, tiny_lm):
    from loadbearing.engine.vllm_backend import make_vllm_generate

    cfg, _ = _config(["--backend", "vllm", "--tensor-parallel-size", "4", "--pipeline-parallel-size", "2",
                      "--data-parallel-size", "2", "--distributed-executor-backend", "ray"])
    make_vllm_generate(tiny_lm, **vllm_options(cfg))
    assert fake_vllm["tensor_parallel_size"] == 4 and fake_vllm["pipeline_parallel_size"] == 2
    assert fake_vllm["data_parallel_size"] == 2 and fake_vllm["distributed_executor_backend"] == "ray"


def test_defaults_pass_only_what_vllm_defaults_differently(fake_vllm, tiny_lm):
    from loadbearing.engine.vllm_backend import make_vllm_generate

    cfg, _ = _config([])
    make_vllm_generate(tiny_lm, **vllm_options(cfg))
    assert fake_vllm["tensor_parallel_size"] == 1
    assert "pipeline_parallel_size" not in fake_vllm and "distributed_executor_backend" not in fake_vllm


@pytest.mark.parametrize("argv", [["--tensor-parallel-size", "0"], ["--data-parallel-size", "-1"],
                                  ["--distributed-executor-backend", "slurm"], ["--shard", "3/3"]])
def test_bad_parallel_options_are_one_line_errors(argv, tmp_path, capsys):
    try:
        rc = main(argv + ["--output-dir", str(tmp_path / "r")])
    except SystemExit as e:  # argparse's own refusals exit from the parser
        rc = e.code
    assert rc == 2
    err = capsys.readouterr().err.strip()
    assert err.startswith("error:") and "\n" not in err and "Traceback" not in err
    assert not (tmp_path / "r").exists()
