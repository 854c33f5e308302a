"""The exact re-run command of a stage, from the settings that stage recorded (issue #32).

    from study.report.commands import probes_command, steering_command
    probes_command("runs/study", results["settings"])   # python -m probes.train ... --seed 42 --steer-holdout 0.5

The report prints, beside each verdict, the command that re-runs that stage alone. A command that drops a
setting the study changed (its seed, ``steer_holdout``, ``max_cases``, the generation budget) does not
reproduce the stage, so the command is built from the stage's *recorded* settings (``probes/results.json``
``settings``, ``steering/config.json`` ``config``) against the stage CLI's own parser: every option whose
recorded value parses to something other than the parser's default is written out. The output goes to a
fresh directory, ``STUDY/rerun/<stage>``, so the re-run neither collides with (the stages refuse an existing
output directory) nor overwrites the study's own files, and its summary can be compared with the study's
(tests/test_report_commands.py does exactly that).
"""
from __future__ import annotations

import argparse
import importlib
import shlex
from collections.abc import Callable, Iterable, Mapping
from typing import Any

#: where a printed re-run writes, inside the study directory (a fresh directory: the stages refuse an existing one)
RERUN_DIR = "rerun"

#: recorded settings that do not change a stage's numbers or are given separately (never printed as flags)
_NEVER = frozenset({"help", "output", "quiet", "progress", "resume", "command", "store", "run_dir", "directions",
                    "plan", "pilot", "base_rate", "effect"})


def _fmt(v: Any) -> str | None:
    """A recorded value as the CLI writes it (lists comma-joined, floats as short as exact), None: not writable."""
    if v is None:
        return None
    if isinstance(v, bool):
        return None
    if isinstance(v, float):
        short = format(v, "g")
        return short if float(short) == v else repr(v)
    if isinstance(v, (list, tuple)):
        parts = [_fmt(x) for x in v]
        return None if any(p is None for p in parts) else ",".join(p for p in parts if p is not None)
    return str(v)


def _flag(action: argparse.Action) -> str:
    longs = [s for s in action.option_strings if s.startswith("--")]
    return (longs or list(action.option_strings))[0]


def _parse(parser: argparse.ArgumentParser, argv: list[str]) -> argparse.Namespace | None:
    try:
        return parser.parse_args(argv)
    except (SystemExit, Exception):  # noqa: BLE001 - a value the parser refuses is simply not printed
        return None


def non_default_flags(parser: argparse.ArgumentParser, positionals: list[str], recorded: Mapping[str, Any], *,
                      negated: Mapping[str, str] | None = None, rename: Mapping[str, str] | None = None,
                      skip: Iterable[str] = ()) -> list[str]:
    """The flags (in the parser's order) whose recorded value differs from the parser's default.

    ``rename`` maps an option's dest to its recorded name; ``negated`` maps a ``--no-X`` switch's dest to the
    recorded boolean it turns off (a parser built from its config needs neither: its dests are the recorded
    field names, and its ``--no-X`` stores False into the field it turns off). A value is compared after the
    parser's own conversion, so ``0.50`` and ``0.5`` are one value and a list is compared with the default string
    it parses from.
    """
    negated, rename, never = dict(negated or {}), dict(rename or {}), _NEVER | set(skip)
    defaults = _parse(parser, positionals)
    if defaults is None:
        return []
    out: list[str] = []
    for action in parser._actions:
        dest = action.dest
        if not action.option_strings or dest in never or dest == argparse.SUPPRESS:
            continue
        if dest in negated:
            if recorded.get(negated[dest]) is False:
                out.append(_flag(action))
            continue
        key = rename.get(dest, dest)
        if key not in recorded:
            continue
        value = recorded[key]
        if action.nargs == 0:  # a switch: --x stores True, --no-x (a config's negated field) stores False
            if isinstance(value, bool) and value == action.const and getattr(defaults, dest) != value:
                out.append(_flag(action))
            continue
        text = _fmt(value)
        if text is None:
            continue
        parsed = _parse(parser, [*positionals, _flag(action), text])
        if parsed is None or getattr(parsed, dest) == getattr(defaults, dest):
            continue
        out.append(f"{_flag(action)} {shlex.quote(text)}")
    return out


def _command(prog: str, positionals: list[str], flags: list[str]) -> str:
    return " ".join([prog, *(shlex.quote(p) for p in positionals), *flags])


def _lazy_parser(module: str) -> Callable[[], argparse.ArgumentParser] | None:
    try:
        return importlib.import_module(module).build_parser
    except ImportError:
        return None


def rerun_dir(study: str, stage: str) -> str:
    """The fresh output directory a printed re-run of ``stage`` writes to."""
    return f"{study.rstrip('/')}/{RERUN_DIR}/{stage}"


def probes_command(study: str, settings: Mapping[str, Any] | None) -> str:
    """``python -m probes.train`` with every setting the probes stage recorded that is not the CLI's default."""
    store = f"{study}/activations.h5"
    head = ["--output-dir", rerun_dir(study, "probes")]
    build = _lazy_parser("probes.train")
    if build is None or not settings:
        folds = (settings or {}).get("folds")
        return _command("python -m probes.train", [store], [" ".join(head)] + ([f"--folds {folds}"] if folds else []))
    flags = non_default_flags(build(), [store], settings)  # --no-transfer sets the recorded transfer (ProbeConfig)
    return _command("python -m probes.train", [store], [" ".join(shlex.quote(h) for h in head), *flags])


def steering_command(study: str, config: Mapping[str, Any] | None, summary: Mapping[str, Any] | None = None) -> str:
    """``python -m steering.sweep`` with every setting the sweep recorded (``steering/config.json``) that differs
    from the CLI's default, reading the study's own directions and writing to a fresh directory."""
    pos = [study]
    head = ["--directions", f"{study}/probes", "--output-dir", rerun_dir(study, "steering")]
    build = _lazy_parser("steering.sweep")
    cfg = dict(config or {})
    if build is None or not cfg:  # no recorded config: the grid from the summary, as before
        s = summary or {}
        sets = [d for d in s.get("settings") or [] if isinstance(d, dict)]
        extra = []
        for flag, key in (("--layers", "layer"), ("--k", "k"), ("--alphas", "alpha_rel")):
            vals = sorted({d[key] for d in sets if isinstance(d.get(key), (int, float)) and not isinstance(d[key], bool)})
            if vals:
                extra.append(f"{flag} {','.join(_fmt(v) or '' for v in vals)}")
        return _command("python -m steering.sweep", pos, [" ".join(shlex.quote(h) for h in head), *extra])
    flags = non_default_flags(build(), pos, cfg)  # the parser's dests are SweepConfig's field names
    return _command("python -m steering.sweep", pos, [" ".join(shlex.quote(h) for h in head), *flags])


__all__ = ["RERUN_DIR", "non_default_flags", "probes_command", "rerun_dir", "steering_command"]
