"""The stage type (loadbearing.stage): a toy stage is one config, one ``run`` and one ``report``, and the machinery
gives it a command (options generated from the config's fields), a completeness check, resume, and one-line errors.

    .venv/bin/pytest -q tests/test_stage.py
"""
from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path

import pytest

from loadbearing.errors import LoadBearingError
from loadbearing.options import split_list
from loadbearing.stage import RunDirOptions, Stage, SummarySection, option, result_settings


class ToyError(LoadBearingError, ValueError):
    """The toy stage's own error."""


def _words(text: str) -> tuple[str, ...]:
    words = tuple(split_list(text))
    if not words:
        raise ToyError("--words is empty; give a comma list of words, e.g. --words a,b")
    return words


# -- the whole stage: a config, a run, a completeness check and a report ------------------------------------------
@dataclass(frozen=True, kw_only=True)
class ToyConfig(RunDirOptions):
    CLI_SHARED = ("output_dir", "resume", "quiet", "seed")

    repeats: int = option(3, help="lines per word")
    words: tuple[str, ...] = option(("a", "b"), parse=_words, metavar="LIST", help="comma list of words")


RUNS: list[ToyConfig] = []  # every call that did the work


def _out(config: ToyConfig) -> Path:
    return Path(config.output_dir) if config.output_dir else Path(config.run_dir) / "toy"


def toy_complete(path: Path) -> bool:
    return (Path(path) / "summary.json").is_file()


def run_toy(config: ToyConfig) -> dict:
    out = _out(config)
    if toy_complete(out):
        if not config.resume:
            raise ToyError(f"{out} already exists; continue it with --resume, or remove it")
        return json.loads((out / "summary.json").read_text())
    RUNS.append(config)
    out.mkdir(parents=True)
    lines = [w for w in config.words for _ in range(config.repeats)]
    (out / "lines.txt").write_text("\n".join(lines) + "\n")
    summary = {"n_lines": len(lines), "settings": result_settings(config)}
    (out / "summary.json").write_text(json.dumps(summary))
    return summary


def toy_report(summary: dict) -> SummarySection:
    return SummarySection("Toy", summary, lambda s, style: f"{'**lines**' if style == 'md' else 'lines'}: {s['n_lines']}")


TOY = Stage("toy", ToyConfig, run=run_toy, is_complete=toy_complete, report=toy_report, command="toy",
            description="Write each word --repeats times.", errors=(ToyError,))


# -- what the machinery gives it ------------------------------------------------------------------------------------
def test_the_command_is_built_from_the_config(capsys):
    p = TOY.build_parser()
    flags = {s for a in p._actions for s in a.option_strings}
    assert {"--repeats", "--words", "--output-dir", "--resume", "--quiet", "--seed"} <= flags
    assert not {"--device", "--dtype", "--shard", "--batch-size"} & flags  # shared options the toy does not offer
    with pytest.raises(SystemExit):
        p.parse_args(["--help"])
    out = capsys.readouterr().out
    assert "RUN_DIR" in out and "lines per word (default 3)" in out and "comma list of words (default a,b)" in out
    cfg = TOY.config_from_args(p.parse_args(["runs/x", "--words", "x, y,z", "--quiet"]))
    assert cfg == ToyConfig("runs/x", words=("x", "y", "z"), quiet=True) and cfg.repeats == 3 and not cfg.progress


def test_run_is_complete_resume_and_report(tmp_path, capsys):
    RUNS.clear()
    assert TOY.main([str(tmp_path), "--repeats", "2", "--words", "p,q"]) == 0
    out = tmp_path / "toy"
    assert TOY.is_complete(out) and (out / "lines.txt").read_text() == "p\np\nq\nq\n"
    summary = json.loads((out / "summary.json").read_text())
    # the settings that change the records: the stage's own first, then the shared ones (seed compares False)
    assert summary == {"n_lines": 4, "settings": {"repeats": 2, "words": ["p", "q"], "shard": None}}
    assert TOY.report(summary).render("md") == "**lines**: 4" and TOY.report(summary).title == "Toy"

    before = (out / "lines.txt").stat().st_mtime_ns
    assert TOY.main([str(tmp_path), "--repeats", "2"]) == 2  # exists, no --resume: refused, nothing rewritten
    err = capsys.readouterr().err
    assert err.startswith("error: ") and err.count("\n") == 1 and "--resume" in err
    assert TOY.main([str(tmp_path), "--resume"]) == 0  # complete: nothing to do
    assert len(RUNS) == 1 and (out / "lines.txt").stat().st_mtime_ns == before


@pytest.mark.parametrize("argv, words", [
    (["--repeats", "two"], "--repeats"),           # argparse's own type check
    (["--words", " , "], "--words is empty"),       # the field's parse, raising the stage's error
    (["--bogus"], "unrecognized arguments"),
])
def test_bad_input_is_one_error_line_and_writes_nothing(tmp_path, capsys, argv, words):
    try:
        rc = TOY.main([str(tmp_path), *argv])
    except SystemExit as e:  # a usage error ends in the parser, as in every command
        rc = e.code
    assert rc == 2
    err = capsys.readouterr().err
    assert err.startswith("error: ") and err.count("\n") == 1 and words in err, err
    assert not (tmp_path / "toy").exists()


def test_an_old_flag_still_works_with_one_warning(tmp_path, capsys):
    out = tmp_path / "elsewhere"
    assert TOY.main([str(tmp_path), "--output", str(out), "--repeats", "1"]) == 0
    assert toy_complete(out)
    assert "warning: --output is deprecated; use --output-dir" in capsys.readouterr().err


CAUSAL_COMMANDS = ["behavioural.causal.early_answer", "behavioural.causal.filler", "behavioural.causal.paraphrase",
                   "behavioural.causal.resample", "behavioural.causal.receiver_heads", "behavioural.causal.suppression"]


@pytest.mark.parametrize("module", CAUSAL_COMMANDS)
def test_each_causal_command_is_its_config(module):
    """The causal tests' commands are built by the machinery: one flag per option field, and no option given is
    the config's own default."""
    import dataclasses
    import importlib

    cmd = importlib.import_module(module).COMMAND
    parser = cmd.build_parser()
    flags = {s for a in parser._actions for s in a.option_strings}
    for f in cmd.options():
        meta = f.metadata["option"]
        if not meta.get("positional"):
            assert (meta.get("negate") or meta.get("flag") or "--" + f.name.replace("_", "-")) in flags, f.name
    assert cmd.config_from_args(parser.parse_args(["runs/x"])) == cmd.config("runs/x")
    assert {f.name for f in dataclasses.fields(cmd.config)} >= {"run_dir", "resume", "quiet", "shard", "batch_size",
                                                               "device", "seed", "n_boot"}
