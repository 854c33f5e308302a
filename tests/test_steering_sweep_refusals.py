"""The steering sweep's refusals on the planted model: a second writer, inputs that do not fit the model or the
directions, and the CLI's bad inputs (one error line, exit 2, before a model is loaded, nothing written)."""
from __future__ import annotations

import numpy as np
import pytest
from helpers.steering import PLANT, cli_case, make_steering_run, planted_lm, sweep_config, unit, write_dirs

pytestmark = pytest.mark.usefixtures("one_thread")


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
