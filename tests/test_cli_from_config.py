"""Every console command's parser is built from its config dataclass (``loadbearing.stage.parser``): its options
are the config's fields plus the extras it declares, and its defaults are the config's own.

A command still written by hand is listed in ``HAND_WRITTEN`` (a ratchet: the list only shrinks, and a command
on it that became a config parser fails until it is taken off)."""
from __future__ import annotations

import dataclasses
import importlib

import pytest

from loadbearing.commands import COMMAND_TABLE
from loadbearing.stage.parser import ConfigParser, cli_fields, config_kwargs, flags_of, meta_of

#: console scripts whose parser is still hand-written argparse (not yet a config)
HAND_WRITTEN: set[str] = set()

#: the causal tests' commands (not console scripts) are stages, built from their configs the same way
STAGE_COMMANDS = ["behavioural.causal.early_answer", "behavioural.causal.filler", "behavioural.causal.paraphrase",
                  "behavioural.causal.resample"]


def _parser(entry: str):
    module = importlib.import_module(entry.split(":")[0])
    build = getattr(module, "build_parser", None)
    return build() if build is not None else None


def _stage_parser(module: str):
    return importlib.import_module(module).STAGE.build_parser()


def _parsers():
    for c in COMMAND_TABLE:
        if c.script not in HAND_WRITTEN:
            yield pytest.param(lambda c=c: _parser(c.entry), id=c.script)
    for m in STAGE_COMMANDS:
        yield pytest.param(lambda m=m: _stage_parser(m), id=m)


def test_every_console_command_is_listed_once():
    scripts = {c.script for c in COMMAND_TABLE}
    assert HAND_WRITTEN <= scripts, HAND_WRITTEN - scripts
    for c in COMMAND_TABLE:
        p = _parser(c.entry)
        if c.script in HAND_WRITTEN:
            assert not isinstance(p, ConfigParser), f"{c.script} is built from its config now: take it off HAND_WRITTEN"
        else:
            assert isinstance(p, ConfigParser), f"{c.script}'s parser is hand-written; build it from its config"


@pytest.mark.parametrize("make", list(_parsers()))
def test_parser_is_its_config_plus_declared_extras(make):
    p = make()
    assert isinstance(p, ConfigParser) and dataclasses.is_dataclass(p.config_type)
    fields = {f.name: f for f in dataclasses.fields(p.config_type)}
    # every option field of the config is an option (a stage offers a declared subset of the shared ones)
    offered = set(getattr(p.config_type, "CLI_SHARED", ()))
    wanted = {f.name for f in cli_fields(p.config_type)}
    from loadbearing.stage import SHARED
    if offered:
        wanted = {n for n in wanted if n not in SHARED or n in offered}
    assert set(p.config_fields) == wanted
    assert not set(p.extra_dests) & set(fields), "an extra option shadows a config field"
    for a in p._actions:
        if a.dest == "help":
            continue
        if a.dest in p.config_fields:
            f = fields[a.dest]
            if meta_of(f).get("positional"):
                assert a.option_strings == [], a
            else:  # the flags are the field's: its flag, listed aliases, deprecated names (and an off switch)
                assert set(a.option_strings) <= set(flags_of(f)), (a.option_strings, flags_of(f))
        else:
            assert a.dest in p.extra_dests, f"--help lists {a.option_strings or a.dest}, neither a field nor an extra"
    strings = {s for a in p._actions if a.dest in p.config_fields for s in a.option_strings}
    for name in p.config_fields:
        assert set(flags_of(fields[name])) <= strings, name


@pytest.mark.parametrize("make", list(_parsers()))
def test_defaults_are_the_configs(make):
    """Parsed with only the positionals, every option has the config's default (its text form parsed back)."""
    p = make()
    positionals = [a for a in p._actions if not a.option_strings and a.dest != "help"]
    argv = ["x"] * sum(a.nargs not in ("?", "*") for a in positionals)
    required = {a.dest for a in p._actions if a.required and a.option_strings}
    argv += [s for a in p._actions if a.dest in required for s in (a.option_strings[0], "x")]
    kwargs = config_kwargs(p.config_type, p.parse_args(argv),
                           [f for f in dataclasses.fields(p.config_type) if f.name in p.config_fields])
    for f in dataclasses.fields(p.config_type):
        if f.name not in p.config_fields or meta_of(f).get("positional") or f.name in required:
            continue
        default = f.default if f.default is not dataclasses.MISSING else (
            f.default_factory() if f.default_factory is not dataclasses.MISSING else None)  # type: ignore[misc]
        got = kwargs.get(f.name, default)
        assert got == default, f"{f.name}: the parser's default {got!r} is not the config's {default!r}"
