"""One vocabulary across the commands (docs/architecture.md, "Command-line vocabulary"): each old option name
still works as a deprecated alias that says what to use, ``--sesoi`` is a fraction everywhere (points are
refused with the fix), the sweep and the study steer with the same defaults, and help says each default once."""
from __future__ import annotations

import argparse
import importlib
import json

import pytest

from loadbearing.cli import HelpFormatter, OneLineParser, add_option, add_quiet, check_fraction, explicit_options

#: (module with build_parser, argv using the old name, old, new, dest, the value the dest must get)
ALIASES = [
    ("behavioural.run_options", ["--positions", "middle"], "--positions", "--line-positions", "positions", "middle"),
    ("study.options", ["--positions", "late"], "--positions", "--line-positions", "positions", "late"),
    ("activations.cache", ["RUN", "--positions", "edit_last"], "--positions", "--token-positions", "positions",
     "edit_last"),
    ("activations.cache", ["RUN", "--output", "x.h5"], "--output", "--output-file", "output", "x.h5"),
    ("activations.cache", ["RUN", "--labels", "rule"], "--labels", "--labelling", "labels", "rule"),
    ("activations.merge", ["a.h5", "--output", "m.h5"], "--output", "--output-file", "output", "m.h5"),
    ("probes.train", ["s.h5", "--output", "out"], "--output", "--output-dir", "output", "out"),
    ("probes.train", ["s.h5", "--position", "edit_last"], "--position", "--token-position", "position", "edit_last"),
    ("steering.sweep", ["RUN", "--positions", "generated"], "--positions", "--steer-positions", "positions",
     "generated"),
    ("steering.sweep", ["RUN", "--output", "out"], "--output", "--output-dir", "output", "out"),
    ("steering.sweep", ["RUN", "--no-progress"], "--no-progress", "--quiet", "progress", False),
    ("behavioural.labels.cli", ["RUN", "--name", "mine"], "--name", "--labelling", "name", "mine"),
    ("behavioural.labels.cli", ["RUN", "--no-progress"], "--no-progress", "--quiet", "progress", False),
    ("behavioural.gradient", ["RUN", "--output", "g"], "--output", "--output-dir", "output", "g"),
    ("behavioural.paper_import.cli", ["src", "--output", "r"], "--output", "--output-dir", "output", "r"),
    ("behavioural.merge", ["p0", "--output", "m"], "--output", "--output-dir", "output", "m"),
    ("study.browse", ["RUN", "--output", "b.html"], "--output", "--output-file", "output", "b.html"),
    ("study.export_inspect", ["RUN", "--output", "l.eval"], "--output", "--output-file", "output", "l.eval"),
    ("steering.patching.cli", ["RUN", "--output", "p"], "--output", "--output-dir", "output", "p"),
    ("steering.patching.cli", ["RUN", "--no-progress"], "--no-progress", "--quiet", "progress", False),
]


@pytest.mark.parametrize("module, argv, old, new, dest, value", ALIASES,
                         ids=[f"{a[0]}:{a[2]}" for a in ALIASES])
def test_deprecated_alias_warns_once_and_sets_the_new_option(module, argv, old, new, dest, value, capsys):
    parser = importlib.import_module(module).build_parser()
    args = parser.parse_args(argv)
    assert getattr(args, dest) == value
    assert capsys.readouterr().err == f"warning: {old} is deprecated; use {new}\n"
    # the new name gives the same value and no warning
    new_argv = [new if a == old else a for a in argv]
    assert getattr(parser.parse_args(new_argv), dest) == value
    assert capsys.readouterr().err == ""
    # --help offers the new name only
    text = parser.format_help()
    assert new in text and not any(w.startswith(old) and w.rstrip(",") == old for w in text.split())


def test_alias_on_the_command_line_runs_the_command(tmp_path, capsys, monkeypatch):
    """An old command line still runs end to end: the sweep's planner with --positions and --no-progress."""
    from steering.sweep.cli import main

    monkeypatch.chdir(tmp_path)
    rc = main(["--plan", "--base-rate", "0.05", "--k", "1", "--alphas", "1", "--positions", "generated",
               "--no-progress"])
    out = capsys.readouterr()
    assert rc == 0 and out.out.startswith("steering plan")
    assert out.err.splitlines() == ["warning: --positions is deprecated; use --steer-positions",
                                    "warning: --no-progress is deprecated; use --quiet"]


def test_explicit_options_sees_an_alias_without_warning_twice(capsys):
    """``--resume`` compares the options given: one given by its old name counts, and warns once, not twice."""
    from behavioural.run_options import build_parser

    p = build_parser()
    argv = ["--positions", "early", "--max-examples", "3"]
    p.parse_args(argv)
    assert explicit_options(p, argv) == {"positions", "max_examples"}
    assert capsys.readouterr().err.count("deprecated") == 1


def test_a_resume_difference_names_the_new_option(tmp_path):
    from behavioural.protocol import ProtocolError
    from behavioural.run_options import build_parser, settings_for_resume

    run = tmp_path / "run"
    run.mkdir()
    base = build_parser().parse_args(["--max-examples", "4"])
    from behavioural.run_options import settings_from_args

    settings = settings_from_args(base).to_dict()
    (run / "manifest.json").write_text(json.dumps({"kind": "behavioural.run", "settings": settings}))
    args = build_parser().parse_args(["--line-positions", "late"])
    with pytest.raises(ProtocolError, match=r"--line-positions \('late',\) differs"):
        settings_for_resume(run, args, {"positions"})


@pytest.mark.parametrize("value, message", [
    (10, "--sesoi 10 is a fraction of cases (0 < s < 1); for 10 points use --sesoi 0.10"),
    (1, "--sesoi 1 is a fraction of cases (0 < s < 1); for 1 point use --sesoi 0.01"),
    (2.5, "--sesoi 2.5 is a fraction of cases (0 < s < 1); for 2.5 points use --sesoi 0.025"),
    (150, "--sesoi 150 is a fraction of cases (0 < s < 1); give e.g. --sesoi 0.10 for 10 points"),
    (0, "--sesoi 0 is not a fraction of cases (0 < s < 1); give e.g. --sesoi 0.10 for 10 points"),
    (float("nan"), "--sesoi must be a finite fraction of cases (0 < s < 1), got nan"),
])
def test_sesoi_that_cannot_be_a_fraction_is_refused_with_the_fix(value, message):
    with pytest.raises(ValueError) as e:
        check_fraction(value, "--sesoi")
    assert str(e.value) == message
    check_fraction(0.1, "--sesoi")
    check_fraction(0.0, "--base-rate", allow_zero=True)


def test_sesoi_in_points_is_refused_by_the_sweep_and_the_study(tmp_path, capsys):
    from steering.sweep.config import SweepConfig, SweepError
    from study.config import StudyConfig, StudyError
    from study.driver import main as study_main

    fix = "for 10 points use --sesoi 0.10"
    with pytest.raises(SweepError, match=fix):
        SweepConfig(run_dir="r", directions="d", sesoi=10).validate()
    with pytest.raises(StudyError, match=fix):
        StudyConfig(output_dir=str(tmp_path / "s"), sesoi=10).validate()
    out = tmp_path / "study"
    assert study_main(["--dry-run", "--output-dir", str(out), "--sesoi", "10"]) == 2
    err = capsys.readouterr().err
    assert err == f"error: --sesoi 10 is a fraction of cases (0 < s < 1); {fix}\n"
    assert not out.exists()


def test_sweep_and_study_share_their_steering_defaults():
    from loadbearing.options import parse_list
    from steering.sweep.cli import build_parser as sweep_parser
    from steering.sweep.config import (
        DEFAULT_ALPHAS,
        DEFAULT_KS,
        DEFAULT_PER_QUESTION,
        DEFAULT_RANDOM_SEEDS,
        DEFAULT_SESOI,
        SweepConfig,
    )
    from study.config import StudyConfig
    from study.options import build_parser as study_parser

    study = study_parser().parse_args([])
    sweep = sweep_parser().parse_args(["RUN"])
    cfg = SweepConfig(run_dir="r", directions="d")
    assert [int(k) for k in study.k.split(",")] == list(DEFAULT_KS) == [1, 4]
    assert sweep.ks is None  # None -> DEFAULT_KS within the stored basis (steering.sweep.plan)
    assert parse_list(sweep.alphas, "--alphas", kind=float) == parse_list(study.alphas, "--alphas", kind=float) \
        == cfg.alphas == list(DEFAULT_ALPHAS)
    assert sweep.per_question == study.per_question == cfg.per_question == DEFAULT_PER_QUESTION == 1
    assert sweep.random_seeds == study.random_seeds == cfg.random_seeds == DEFAULT_RANDOM_SEEDS == 2
    assert sweep.sesoi == study.sesoi == cfg.sesoi == StudyConfig(output_dir="").sesoi == DEFAULT_SESOI


def test_help_formatter_says_each_default_once():
    p = OneLineParser(prog="x", formatter_class=argparse.ArgumentDefaultsHelpFormatter)
    g = p.add_argument_group("things")
    g.add_argument("--n", type=int, default=5, help="count")
    g.add_argument("--m", type=int, default=None, help="count (default 50)")
    g.add_argument("--d", default=None, help="a directory; default runs/<time>")
    g.add_argument("--flag", action="store_true", help="a switch")
    add_quiet(g, deprecated=("--no-progress",))
    add_option(g, "--new", deprecated=("--old",), default="a", help="renamed")
    text = " ".join(p.format_help().split())
    assert "count (default: 5)" in text and "count (default 50) " in text and "(default: None)" not in text
    assert "runs/<time> " in text and "a switch --quiet" in text and "(default: False)" not in text
    assert "renamed (default: a)" in text and "--old" not in text and "--no-progress" not in text
    assert isinstance(p._get_formatter(), HelpFormatter)


@pytest.mark.parametrize("old", ["--line-position", "--position"])
def test_paraphrase_single_cut_names_its_replacement(old, capsys):
    """paraphrase's one cut became the --fractions curve: the old option is one error line naming the new one."""
    from behavioural.causal.paraphrase import main

    with pytest.raises(SystemExit) as e:
        main(["RUN", old, "late"])
    assert e.value.code == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "replaced by --fractions" in err and err.startswith("error:")
