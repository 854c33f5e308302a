"""The study's settings: rules that follow the model, --dry-run, --stages, study files and presets.

    .venv/bin/pytest -q tests/test_study_settings.py -m "not integration"
"""
from __future__ import annotations

import functools
import json
import os
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
DATA = Path(os.environ.get("LOADBEARING_DATA", REPO.parent / "shared" / "data"))
FAST = ["--task", "s2_o5", "--max-examples", "16", "--folds", "2", "--k", "1", "--alphas", "0.5", "--max-cases", "2",
        "--random-seeds", "1", "--max-new-tokens", "16", "--quiet"]


def _one_error(capsys) -> str:
    err = capsys.readouterr().err
    assert err.startswith("error:") and err.count("\n") == 1, err
    return err


def test_defaults_follow_the_model_and_the_dataset():
    from study.config import StudyConfig
    from study.settings import resolve

    emb, rules = resolve(StudyConfig(output_dir="x", dataset="gsm8k"))
    assert emb.task is None and emb.max_new_tokens == 96 and emb.steer_max_new_tokens == 64 and emb.few_shot is True
    assert "embedded" in rules["max_new_tokens"] and emb.strategy == "arithmetic,contradiction"
    big, rules = resolve(StudyConfig(output_dir="x", model="gemma-2-9b-it", dataset="bbh"))
    assert big.max_new_tokens == 4096 and big.steer_max_new_tokens == 4096 and big.few_shot is None
    assert "paper" in rules["max_new_tokens"] and big.task is None
    mine, rules = resolve(StudyConfig(output_dir="x", model="gemma-2-9b-it", max_new_tokens=512))
    assert mine.max_new_tokens == 512 and "max_new_tokens" not in rules
    arith, _ = resolve(StudyConfig(output_dir="x"))
    assert arith.task == "s2_o3,s2_o5,s2_o9" and arith.n_per_level == 53 and arith.few_shot is None
    assert 3 * arith.n_per_level <= arith.max_examples  # every generated question of the three levels is sampled
    assert resolve(arith)[0] == arith  # resolving twice changes nothing


def test_dry_run_of_a_gpu_study_on_this_machine(capsys, tmp_path):
    from study.driver import main

    out = tmp_path / "never"
    assert main(["--dry-run", "--model", "gemma-2-9b-it", "--dataset", "bbh", "--device", "cuda", "--backend", "vllm",
                 "--tensor-parallel-size", "2", "--output-dir", str(out)]) == 0
    text = capsys.readouterr().out
    assert text.count("---- study settings") == 1 and "tensor_parallel_size         = 2" in text
    assert "4096   (not the embedded model" in text and "NOT checked offline" in text
    assert "1. behaviour" in text and "6. steering" in text and "no model loaded" in text
    assert not out.exists()


@pytest.mark.parametrize("dataset,task", [("gsm8k", None), ("mmlu", "anatomy,astronomy"),
                                          ("bbh", "navigate,sports_understanding")])
def test_dry_run_on_each_dataset_with_local_files(dataset, task, capsys):
    from study.driver import main

    argv = ["--dry-run", "--dataset", dataset, "--data-dir", str(DATA)] + (["--task", task] if task else [])
    assert main(argv) == 0, capsys.readouterr().err
    text = capsys.readouterr().out
    assert "s2_o3" not in text and f"questions in {DATA}" in text


@pytest.mark.parametrize("argv,needle", [
    (["--stages", "behaviour,lables"], "behaviour, labels, gradient, activations, probes, steering, browser"),
    (["--dataset", "gsm8k", "--strategy", "wrong_elimination"], "does not apply to dataset 'gsm8k'"),
    (["--dataset", "bbh", "--task", "navigate,nagivate"], "'nagivate'"),
    (["--tensor-parallel-size", "2"], "--backend vllm"),
    (["--backend", "tpu"], "hf, hf-plain, vllm"),
    (["--labeller", "rule", "--final", "judge:x"], "--final"),
    (["--model", "not a/model id"], "Hugging Face id"),
    (["--device", "gpu"], "cuda:N"),
])
def test_dry_run_refuses_in_one_line(argv, needle, capsys):
    from study.driver import main

    assert main(["--dry-run", *argv]) == 2
    assert needle in _one_error(capsys)


def test_a_real_run_refuses_a_missing_device(capsys, tmp_path):
    import torch

    from study.driver import main

    if torch.cuda.is_available():
        pytest.skip("this machine has CUDA")
    assert main(["--device", "cuda", "--output-dir", str(tmp_path / "s")]) == 2
    assert "not available here" in _one_error(capsys) and not (tmp_path / "s").exists()


def test_comma_task_lists_load():
    from loadbearing.questions.data import load_questions

    qs = load_questions("bbh", task="navigate,boolean_expressions", data_dir=DATA)
    assert {q.task for q in qs} == {"navigate", "boolean_expressions"}
    assert {q.task for q in load_questions("mmlu", task="anatomy, astronomy", data_dir=DATA)} == {"anatomy", "astronomy"}


def test_stage_registry_takes_a_later_stage_by_name():
    from study import stages
    from study.dryrun.plan import select_stages

    assert select_stages("labels,behaviour") == ["behaviour", "labels"]
    assert select_stages("all") == list(stages.REGISTRY)
    with pytest.raises(ValueError, match="already registered"):
        stages.register(stages.REGISTRY["labels"])


# ------------------------------------------------------------------------------------------ study files
@pytest.mark.parametrize("body,needle", [
    ('modle = "x"\n', "unknown key 'modle'; did you mean 'model'"),
    ('max_examples = "10"\n', "key 'max_examples' must be an integer"),
    ('dataset = "bbh"\ntask = "nagivate"\n', "'nagivate'"),
    ('dataset = "gsm8k"\nstrategy = "wrong_elimination"\n', "does not apply to dataset 'gsm8k'"),
    ('datasets = ["gsm8k"]\n[dataset_settings.gsm8k]\nfolds = 1.5\n', "key 'folds' must be an integer"),
])
def test_a_mistake_in_a_study_file_is_one_line_and_writes_nothing(body, needle, tmp_path, capsys):
    from study.driver import main

    f = tmp_path / "study.toml"
    f.write_text(f'output_dir = "{tmp_path / "out"}"\n' + body)
    assert main(["--config", str(f)]) == 2
    err = _one_error(capsys)
    assert needle in err and "--" not in err.split(needle)[0][-3:]
    assert not (tmp_path / "out").exists()


def test_presets_are_package_files_and_dry_run(capsys):
    import tomllib

    from study.driver import main

    pyproject = tomllib.loads((REPO / "pyproject.toml").read_text())
    assert "presets/*.toml" in pyproject["tool"]["setuptools"]["package-data"]["study"]
    assert main(["--config", "paper", "--dry-run"]) == 0
    text = capsys.readouterr().out
    assert text.count("---- run ") == 9 and "all 9 runs" in text and "deepseek-r1-distill-qwen-7b on bbh" in text
    assert main(["--config", "embedded-cpu", "--dry-run"]) == 0
    assert "s2_o3,s2_o5,s2_o9" in capsys.readouterr().out


@pytest.fixture
def fake_models(monkeypatch, tiny_lm):
    from fakes import scripted_generate

    import behavioural.protocol as protocol
    import loadbearing.engine.models as models

    monkeypatch.setattr(models, "load_model", lambda *a, **k: tiny_lm)
    monkeypatch.setattr(protocol, "generate", functools.partial(scripted_generate))
    return tiny_lm


def _records(out: Path) -> dict[str, bytes]:
    return {f: (out / f).read_bytes() for f in ("baselines.jsonl", "continuations.jsonl", "skipped.jsonl",
                                                "labels/rule/labels.jsonl")}


def test_the_written_study_file_reproduces_the_run(tmp_path, fake_models, capsys):
    from study.driver import main

    first = tmp_path / "first"
    assert main(["--output-dir", str(first), "--stages", "behaviour,labels", *FAST]) == 0
    text = (first / "study.toml").read_text()
    assert "max_new_tokens = 16" in text and 'stages = "behaviour,labels"' in text
    # the dtype and device the run's model was loaded with, not left unset (issue #32: a GPU would read an
    # unset dtype as bfloat16 where the run used float32)
    model = json.loads((first / "manifest.json").read_text())["model"]
    assert f'dtype = "{model["dtype"]}"  # the dtype the run' in text and f'device = "{model["device"]}"  #' in text
    second = tmp_path / "second"
    assert main(["--config", str(first / "study.toml"), "--output-dir", str(second)]) == 0
    assert _records(second) == _records(first)
    assert not (second / "activations.h5").exists()  # the file's stage selection came with it
    def settings(t: str) -> list[str]:  # the values (a rule's comment says only where the first run's came from)
        return [line.split("  # ")[0] for line in t.splitlines()]

    assert settings((second / "study.toml").read_text()) == settings(text.replace(str(first), str(second)))


def test_a_several_run_study_writes_the_gradient_across_its_runs_or_says_why_not(tmp_path):
    import json

    from study.cross_run import cross_run_gradient as _cross_run_gradient

    said: list[str] = []
    runs = [tmp_path / "m" / d for d in ("gsm8k", "bbh")]
    for d in runs:
        d.mkdir(parents=True)
    (runs[0] / "summary.json").write_text(json.dumps({"status": "insufficient_data"}))  # no eligible baselines
    assert _cross_run_gradient(tmp_path, runs, said.append) is None
    assert said == ["cross-run gradient: skipped: 0 run(s) with eligible baselines; it needs >= 2"]
    assert not (tmp_path / "gradient").exists()
    (tmp_path / "gradient").mkdir()  # a resumed study whose gradient was written: left as it is
    assert _cross_run_gradient(tmp_path, runs, said.append) == tmp_path / "gradient" and len(said) == 1
