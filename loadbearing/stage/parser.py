"""A command's parser made from its config dataclass: one option per field, and the few flags that are not config.

    @dataclass
    class GradientConfig:
        runs: tuple[str, ...] = option(parse=tuple, positional=True, nargs="+", metavar="RUN_DIR", help="...")
        seed: int = option(0, help="bootstrap seed", group="analysis")
        plot: bool = option(True, negate="--no-plot", help="skip gradient.png", group="output")

    p = parser_from_config(GradientConfig, prog="python -m behavioural.gradient", groups=("inputs", "analysis", "output"))
    cfg = config_from_parsed(GradientConfig, p.parse_args(argv))

Each field made with :func:`option` is a command-line option; everything about it lives in the field's metadata:
the flag (the field's name with dashes unless ``flag=``; ``required`` for one the command cannot run without),
other names (``aliases``, listed; ``deprecated``, working with one warning and not listed:
:func:`loadbearing.cli.add_option`), help, metavar, choices, the argparse
``type``, ``nargs`` / ``action="append"``, the help group, and the value's grammar (``parse``, one of
:mod:`loadbearing.options`, applied to the typed text when the config is built). A bool field is an on/off switch:
``--name`` turns a False default on, ``negate="--no-x"`` turns a True default off (``--quiet`` for a field named
``progress``), and ``off=(FLAG, HELP)`` adds the opposite switch of a three-state ``bool | None``. The argparse
default is the field's own (``cli_default=`` when the command shows it as text, e.g. ``"0.25,0.5"`` for a tuple
the field's ``parse`` makes from it); an option left at an argparse default of None keeps the field's default.

Flags that choose what a command does rather than what a stage computes (``--plan``, ``--dry-run``, the vLLM
engine's options) are :class:`Extra` options, declared beside the config; the parser records which dests came
from the config (:attr:`ConfigParser.config_fields`) and which from extras (:attr:`ConfigParser.extra_dests`),
so a test checks that every console command is its config plus its declared extras.
"""
from __future__ import annotations

import argparse
import dataclasses
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any, TypeVar

from loadbearing.cli import SAYS_DEFAULT, OneLineParser, add_option

_MISSING: Any = dataclasses.MISSING
T = TypeVar("T")
_BOOL_TYPES = (bool, "bool", "bool | None")


def option(default: Any = _MISSING, *, help: str, flag: str | None = None, aliases: Sequence[str] = (),
           deprecated: Sequence[str] = (), metavar: str | None = None, choices: Sequence[str] | None = None,
           type: Callable[[str], Any] | None = None, parse: Callable[[Any], Any] | None = None,
           negate: str | None = None, off: tuple[str, str] | None = None, nargs: str | None = None,
           action: str | None = None, positional: bool = False, required: bool = False, group: str | None = None,
           cli: bool = True,
           compare: bool = True, default_text: str | None = None, cli_default: Any = _MISSING,
           factory: Callable[[], Any] | None = None) -> Any:
    """A config field that is also a command-line option (keyword-only in the config's constructor, unless
    ``positional``). See the module docstring for each keyword. ``compare=False`` marks an option that does not
    change the stage's records (it stays out of the recorded settings); ``default_text`` is how a stage's
    ``--help`` shows the default; ``factory`` is the field's ``default_factory``."""
    meta = {"cli": cli, "help": help, "flag": flag, "aliases": tuple(aliases), "deprecated": tuple(deprecated),
            "metavar": metavar, "choices": choices, "type": type, "parse": parse, "negate": negate, "off": off,
            "nargs": nargs, "action": action, "positional": positional, "required": required, "group": group,
            "default_text": default_text,
            "cli_default": cli_default}
    kw: dict[str, Any] = {"compare": compare, "kw_only": not positional, "metadata": {"option": meta}}
    if factory is not None:
        return field(default_factory=factory, **kw)
    return field(default=default, **kw)


@dataclass(frozen=True)
class Extra:
    """An option that is not a config field (``--plan``, ``--dry-run``, an engine's options): the names and
    keywords of one ``add_argument`` call, and the help group it is listed in."""

    names: tuple[str, ...]
    group: str | None = None
    kwargs: dict[str, Any] = field(default_factory=dict)


def extra(*names: str, group: str | None = None, **kwargs: Any) -> Extra:
    """``extra("--plan", group="planning", action="store_true", help=...)``: an :class:`Extra` option."""
    return Extra(tuple(names), group, kwargs)


class ConfigParser(OneLineParser):
    """A :class:`~loadbearing.cli.OneLineParser` made by :func:`parser_from_config`: it knows its config type, the
    fields it made an option of, and the dests its extras added."""

    config_type: type | None = None
    config_fields: tuple[str, ...] = ()
    extra_dests: tuple[str, ...] = ()


def meta_of(f: dataclasses.Field) -> dict[str, Any]:
    """The field's option metadata ({} for a field that is no option)."""
    return dict(f.metadata.get("option") or {})


def cli_fields(config: type) -> list[dataclasses.Field]:
    """The config's fields that are command-line options, in declaration order, the positional ones first."""
    fs = [f for f in dataclasses.fields(config) if meta_of(f).get("cli")]  # type: ignore[arg-type]
    return sorted(fs, key=lambda f: not meta_of(f).get("positional"))


def flag_of(f: dataclasses.Field) -> str:
    """The option's main flag: ``flag=``, else ``--`` and the field's name with dashes (the name, if positional)."""
    meta = meta_of(f)
    if meta.get("positional"):
        return f.name
    if meta.get("negate"):
        return str(meta["negate"])
    return meta.get("flag") or "--" + f.name.replace("_", "-")


def flags_of(f: dataclasses.Field) -> list[str]:
    """Every option string that sets the field: its flag, aliases, deprecated names and its ``off`` switch."""
    meta = meta_of(f)
    if meta.get("positional"):
        return []
    out = [flag_of(f), *meta.get("aliases", ()), *meta.get("deprecated", ())]
    if meta.get("off"):
        out.append(meta["off"][0])
    return out


def _field_default(f: dataclasses.Field) -> object:
    if f.default is not _MISSING:
        return f.default
    factory: Any = f.default_factory
    if factory is not _MISSING:
        return factory()
    return None


def _argparse_default(f: dataclasses.Field) -> object:
    meta = meta_of(f)
    return _field_default(f) if meta.get("cli_default", _MISSING) is _MISSING else meta["cli_default"]


def _default_text(f: dataclasses.Field, meta: dict[str, Any]) -> str | None:
    if meta.get("default_text") is not None:
        return str(meta["default_text"])
    d = _field_default(f)
    if d is None or isinstance(d, bool) or d == "":
        return None
    if isinstance(d, (tuple, list)):
        return ",".join(f"{x:g}" if isinstance(x, float) else str(x) for x in d)
    return f"{d:g}" if isinstance(d, float) else str(d)


def _help(f: dataclasses.Field, meta: dict[str, Any], say_default: bool) -> str:
    """The option's help; ``say_default``: the default appended as ``(default X)`` here (a stage's style), else
    :class:`loadbearing.cli.HelpFormatter` appends ``(default: X)`` from the argparse default."""
    text = str(meta.get("help") or "")
    if not say_default:
        return text
    shown = _default_text(f, meta)
    if shown is None or SAYS_DEFAULT.search(text) or meta.get("negate"):
        return text.replace("%", "%%")
    return f"{text} (default {shown})".replace("%", "%%")


def _add_field(where: Any, f: dataclasses.Field, say_default: bool, infer_type: bool) -> None:
    meta = meta_of(f)
    if meta.get("positional"):
        kw = {"metavar": meta.get("metavar"), "help": meta.get("help")}
        if meta.get("nargs"):
            kw.update(nargs=meta["nargs"])
            if meta["nargs"] in ("?", "*"):
                kw.update(default=_argparse_default(f))
        where.add_argument(f.name, **kw)
        return
    kw = {"dest": f.name, "default": _argparse_default(f), "help": _help(f, meta, say_default)}
    aliases = tuple(meta.get("aliases", ()))
    if meta.get("negate"):
        add_option(where, meta["negate"], *aliases, action="store_const", const=False,
                   deprecated=meta.get("deprecated", ()), **kw)
        return
    if f.type in _BOOL_TYPES:
        kw["action"] = "store_true"
    else:
        metavar = meta.get("metavar")
        if metavar is None and meta.get("choices") is None and flag_of(f) != "--" + f.name.replace("_", "-"):
            metavar = flag_of(f).lstrip("-").replace("-", "_").upper()  # argparse's, were the dest the flag's
        kw.update(metavar=metavar, choices=meta.get("choices"))
        for key in ("nargs", "action", "required"):
            if meta.get(key):
                kw[key] = meta[key]
        d = _field_default(f)
        if meta.get("type") is not None:
            kw["type"] = meta["type"]
        elif infer_type and meta.get("parse") is None and isinstance(d, (int, float)) and not isinstance(d, bool):
            kw["type"] = type(d)
    add_option(where, flag_of(f), *aliases, deprecated=meta.get("deprecated", ()), **kw)
    if meta.get("off"):
        name, text = meta["off"]
        where.add_argument(name, dest=f.name, action="store_false", help=text)


def _name(item: dataclasses.Field | Extra) -> str:
    """A field's name, or the dest an extra's ``add_argument`` makes."""
    if not isinstance(item, Extra):
        return item.name
    if "dest" in item.kwargs:
        return str(item.kwargs["dest"])
    long = next((n for n in item.names if n.startswith("--")), item.names[0])
    return long.lstrip("-").replace("-", "_")


def parser_from_config(config: type, *, prog: str, description: str = "", epilog: str | None = None,
                       raw_description: bool = False, groups: Sequence[str] = (), extras: Sequence[Extra] = (),
                       hooks: Sequence[Callable[[argparse.ArgumentParser], None]] = (),
                       fields: Sequence[dataclasses.Field] | None = None, say_default: bool = False,
                             infer_type: bool = False, by_group: bool = True, help_order: Sequence[str] = ()) -> ConfigParser:
    """The command's parser: one option per config field (``fields``: which, in order; default
    :func:`cli_fields`), then each :class:`Extra`, then each hook (options a shared builder adds, such as a retired
    option's pointer). ``groups``: help groups in the order ``--help`` lists them (a group named by a field or an
    extra but not here is made where it first appears). ``say_default``: see :func:`_help`; ``infer_type``: an
    int or float default with no ``type``/``parse`` converts the typed text to its type. ``by_group``: the options
    are added group by group (the ungrouped first, then in ``groups``' order), so ``usage:`` lists them as ``--help``
    does; else in the order of ``fields``, then the extras. Inside a group they keep the fields' order, then the
    extras'; ``help_order`` (field names and extras' dests) puts the options it names first, in its order (the
    layout ``--help`` had before the command was a config, where the config's field order is another one); naming
    every option, it is the order they are added in (``usage:``'s order; ``--help`` still lists them by group)."""
    fc = argparse.RawDescriptionHelpFormatter if raw_description else argparse.HelpFormatter
    p = ConfigParser(prog=prog, description=description, epilog=epilog, formatter_class=fc)
    made: dict[str, argparse._ActionsContainer] = {g: p.add_argument_group(g) for g in groups}

    def where(group: str | None) -> argparse._ActionsContainer:
        if not group:
            return p
        if group not in made:
            made[group] = p.add_argument_group(group)
        return made[group]

    fs = list(cli_fields(config) if fields is None else fields)
    rank = {g: i for i, g in enumerate(groups)}
    items: list[tuple[str | None, dataclasses.Field | Extra]] = [(meta_of(f).get("group"), f) for f in fs]
    items += [(e.group, e) for e in extras]
    order = {g: i for i, g in enumerate(dict.fromkeys(g for g, _ in items))}
    first = {name: i for i, name in enumerate(help_order)}
    unknown = set(first) - {_name(it) for _, it in items}
    if unknown:
        raise ValueError(f"help_order names no option of {config.__name__}: {sorted(unknown)}")
    if set(first) == {_name(it) for _, it in items}:  # every option named: added in exactly that order
        items.sort(key=lambda gi: first[_name(gi[1])])
    elif by_group:
        at = {id(it): i for i, (_, it) in enumerate(items)}
        items.sort(key=lambda gi: (gi[0] is not None, rank.get(gi[0], len(rank) + order[gi[0]]) if gi[0] else 0,
                                   first.get(_name(gi[1]), len(first) + at[id(gi[1])])))
    added: list[str] = []
    for group, item in items:
        if isinstance(item, Extra):
            added.append(where(group).add_argument(*item.names, **item.kwargs).dest)
        else:
            _add_field(where(group), item, say_default, infer_type)
    before = {a.dest for a in p._actions}
    for hook in hooks:
        hook(p)
    added += [a.dest for a in p._actions if a.dest not in before]
    p.config_type = config
    p.config_fields = tuple(f.name for f in fs)
    p.extra_dests = tuple(added)
    return p


def config_kwargs(config: type, args: argparse.Namespace,
                  fields: Sequence[dataclasses.Field] | None = None) -> dict[str, Any]:
    """The config's keyword arguments from parsed options: ``parse`` applied to typed text (a string, or the list
    ``nargs`` / ``append`` collect); an option whose parsed value is None keeps the field's default."""
    given = vars(args)
    out: dict[str, Any] = {}
    for f in cli_fields(config) if fields is None else fields:
        if f.name not in given:
            continue
        v = given[f.name]
        if v is None and _field_default(f) is not None:
            continue
        parse = meta_of(f).get("parse")
        out[f.name] = parse(v) if parse is not None and isinstance(v, (str, list)) else v
    return out


def config_from_parsed(config: type[T], args: argparse.Namespace, **overrides: Any) -> T:
    """``config(**config_kwargs(config, args), **overrides)``: the config of parsed options (``overrides``: the
    fields the command fills itself, such as the command line it records)."""
    return config(**(config_kwargs(config, args) | overrides))


__all__ = ["ConfigParser", "Extra", "cli_fields", "config_from_parsed", "config_kwargs", "extra",
           "flag_of", "flags_of", "meta_of", "option", "parser_from_config"]
