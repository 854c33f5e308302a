"""``python -m study --dry-run`` checks what it says (issue #32, finding 4): the output directory as the real run
judges it, vllm's importability, the CUDA devices, values out of range, the estimate, one line per run of a
several-run file, "did you mean" for names, and errors that name the option at fault.

    .venv/bin/pytest -q tests/test_dry_run_checks.py
"""
from __future__ import annotations

import pytest


def _main(argv, capsys):
    from study.driver import main

    rc = main(argv)
    cap = capsys.readouterr()
    return rc, cap.out, cap.err


def test_an_existing_output_dir_is_refused_as_the_real_run_refuses_it(tmp_path, capsys):
    out = tmp_path / "s"
    out.mkdir()
    (out / "keep.txt").write_text("mine")
    rc, _, err = _main(["--dry-run", "--output-dir", str(out)], capsys)
    assert rc == 2 and err.count("\n") == 1 and "already exists" in err and f"--resume {out}" in err
    assert (out / "keep.txt").read_text() == "mine" and sorted(p.name for p in out.iterdir()) == ["keep.txt"]
    rc, text, _ = _main(["--dry-run", "--output-dir", str(tmp_path / "new")], capsys)
    assert rc == 0 and "output " + str(tmp_path / "new") + ": new" in text and not (tmp_path / "new").exists()


def test_a_resumed_dir_that_another_process_writes_is_refused(tmp_path, capsys):
    import multiprocessing as mp

    from study.config import StudyConfig, write_stored

    out = tmp_path / "s"
    out.mkdir()
    write_stored(out, StudyConfig(output_dir=str(out), max_examples=4))
    ready, done = mp.Event(), mp.Event()
    p = mp.get_context("fork").Process(target=_hold_lock, args=(str(out), ready, done))
    p.start()
    try:
        assert ready.wait(20)
        rc, _, err = _main(["--dry-run", "--resume", str(out)], capsys)
        assert rc == 2 and "in use by another writer" in err and err.count("\n") == 1
    finally:
        done.set()
        p.join(20)
    rc, text, _ = _main(["--dry-run", "--resume", str(out)], capsys)  # the writer is gone: a resume is planned
    assert rc == 0 and "a real run resumes it" in text


def _hold_lock(out: str, ready, done) -> None:
    from loadbearing.locks import output_lock

    with output_lock(out, "python -m study (test)"):
        ready.set()
        done.wait(30)


def test_vllm_that_cannot_be_imported_is_a_warning(tmp_path, capsys, monkeypatch):
    import loadbearing.engine.vllm_backend as vb

    def broken():
        raise vb.VLLMUnavailableError("the vLLM backend needs vllm, which cannot be imported here (ImportError: x)")

    monkeypatch.setattr(vb, "import_vllm", broken)
    rc, text, _ = _main(["--dry-run", "--backend", "vllm", "--output-dir", str(tmp_path / "s")], capsys)
    assert rc == 0
    warn = [x for x in text.splitlines() if x.startswith("warning: --backend vllm")]
    assert len(warn) == 1 and "cannot be imported here" in warn[0] and "a real run here stops" in warn[0]
    assert "1 warning above" in text.splitlines()[-1]


def test_the_device_is_checked_against_the_cuda_devices_torch_sees(monkeypatch):
    from study.config import StudyConfig
    from study.dryrun import checks as plan_checks

    c = StudyConfig(output_dir="x", device="cuda:1", backend="vllm", tensor_parallel_size=4)
    warnings, note = plan_checks.check_device(c, count=0)
    assert note == "device cuda:1: torch sees 0 CUDA devices" and "a real run here stops" in warnings[0]
    warnings, note = plan_checks.check_device(c, count=1)
    assert "cuda:0..cuda:0" in warnings[0] and "= 4 GPUs" in warnings[1]
    assert plan_checks.check_device(StudyConfig(output_dir="x", device="cuda:1"), count=2)[0] == []
    warnings, note = plan_checks.check_device(StudyConfig(output_dir="x"), count=2)
    assert warnings == [] and note == "device auto (auto picks cuda): torch sees 2 CUDA devices"
    # the dry run asks torch itself
    monkeypatch.setattr(plan_checks, "cuda_count", lambda: 3)
    assert plan_checks.check_device(StudyConfig(output_dir="x", device="cuda"))[1].endswith("torch sees 3 CUDA devices")


def test_alphas_that_turn_the_model_into_noise_are_a_warning(tmp_path, capsys):
    rc, text, _ = _main(["--dry-run", "--alphas", "0.5,5", "--output-dir", str(tmp_path / "s")], capsys)
    assert rc == 0
    assert any(x.startswith("warning: --alphas 0.5,5: 5 >= 1") for x in text.splitlines())
    rc, text, _ = _main(["--dry-run", "--alphas", "0.25,0.5", "--output-dir", str(tmp_path / "s")], capsys)
    assert rc == 0 and "warning:" not in text


def test_the_estimate_of_tokens_store_and_time():
    from study.config import StudyConfig
    from study.dryrun.checks import estimate, estimate_lines
    from study.settings import resolve

    # one paper BBH run (study/presets/paper.toml): 1,000 questions x 6 edits x 3 positions perturbed rows,
    # gemma-2-9b-it's 42 blocks + the embeddings, width 3584, float32: the "about 11 GB"
    c, _ = resolve(StudyConfig(output_dir="x", model="gemma-2-9b-it", dataset="bbh", max_examples=1000,
                               strategy="arithmetic,contradiction,wrong_elimination,false_analogy,reversed_logic,"
                                        "confidence_injection", device="cuda"))
    e = estimate(c)
    assert e["rows"] == 18_000 and e["layers"] == 43 and e["store_bytes"] == 18_000 * 43 * 3584 * 4
    behaviour = 1000 + 18_000 + 3000
    assert e["tokens"] == behaviour * 4096 + (e["generations"] - behaviour) * 4096
    assert e["seconds"] == e["tokens"] / 2000.0
    lines = "\n".join(estimate_lines(c))
    assert "11.1 GB" in lines and "2,000 new tokens/s" in lines and "assumed" in lines
    small, _ = resolve(StudyConfig(output_dir="x"))  # the embedded demo on a CPU: the measured rate
    assert "100 new tokens/s" in "\n".join(estimate_lines(small)) and estimate(small)["layers"] == 31


def test_a_several_run_file_gets_one_line_per_run(tmp_path, capsys):
    f = tmp_path / "study.toml"
    f.write_text(f'output_dir = "{tmp_path / "root"}"\nmodels = ["smollm2-135m-instruct"]\n'
                 'datasets = ["arith", "gsm8k"]\nmax_examples = 8\n')
    rc, text, err = _main(["--dry-run", "--config", str(f)], capsys)
    assert rc == 0, err
    lines = text.splitlines()
    head = lines.index("2 runs (one line each; the details follow):")
    assert lines[head + 1].startswith("  1/2 smollm2-135m-instruct on arith (s2_o3,s2_o5,s2_o9) -> ")
    assert "generations" in lines[head + 1]
    assert lines[head + 2].startswith("  2/2 smollm2-135m-instruct on gsm8k -> ") and "store <= " in lines[head + 2]
    # the second run's block names only what differs from the first
    second = next(x for x in lines if x.startswith("---- run 2/2"))
    assert "dataset = gsm8k" in second and "max_examples" not in second
    assert text.count("---- study settings") == 0 and text.count("  max_examples ") == 1


@pytest.mark.parametrize("argv,option,suggestion", [
    (["--stages", "behavior"], "--stages", "did you mean 'behaviour'?"),
    (["--dataset", "gsm8K"], "--dataset", "did you mean 'gsm8k'?"),
    (["--dataset", "bbh", "--task", "navigat"], "--task", "did you mean 'navigate'?"),
    (["--strategy", "arithmetic_chnage"], "--strategy", "did you mean 'arithmetic_change'?"),
    (["--line-positions", "early,midle"], "--line-positions", "did you mean 'middle'?"),
    (["--backend", "vLLM"], "--backend", "did you mean 'vllm'?"),
    (["--dtype", "bfloat61"], "--dtype", "did you mean 'bfloat16'?"),
    (["--dataset", "bbh", "--data-dir", "/nonexistent/data"], "--data-dir", ""),
])
def test_names_get_a_suggestion_and_errors_name_the_option(argv, option, suggestion, tmp_path, capsys):
    rc, _, err = _main(["--dry-run", "--output-dir", str(tmp_path / "s"), *argv], capsys)
    assert rc == 2 and err.count("\n") == 1, err
    msg = err.removeprefix("error: ")
    assert msg.startswith(option + " "), msg  # the option at fault, first
    assert suggestion in msg
    other = {"--task", "--data-dir", "--strategy", "--line-positions", "--activation-layers"} - {option}
    assert not any(o in msg.split(":")[0] for o in other), msg


def test_a_study_file_error_names_its_key(tmp_path, capsys):
    f = tmp_path / "study.toml"
    f.write_text(f'output_dir = "{tmp_path / "out"}"\nprobe = "logistik"\n')
    rc, _, err = _main(["--dry-run", "--config", str(f)], capsys)
    assert rc == 2 and err.count("\n") == 1 and "key probe 'logistik'" in err and "--" not in err and "activation" not in err
