"""The stage type: a frozen config, a ``run``, a completeness check and a report section; its CLI is generated.

    @dataclass(frozen=True, kw_only=True)
    class ToyConfig(RunDirOptions):
        repeats: int = option(3, help="how many lines to write")

    TOY = Stage("toy", ToyConfig, run=run_toy, is_complete=toy_complete, report=toy_section,
                command="toy", description="Write a toy file.")
    sys.exit(TOY.main())          # toy RUN_DIR --repeats 2 --resume --quiet

A stage is a config, a ``run`` and a ``report`` (docs/architecture.md, "The stage type"):

* the **config** is a frozen, keyword-only dataclass deriving :class:`Options` (the options every stage shares: output dir,
  resume, quiet, shard, device, dtype, batch size, seed) or :class:`RunDirOptions` (those and the run directory
  the stage reads, the first positional argument). Each field declared with :func:`option` is a command-line
  option: its flag is the field's name (``max_answer_tokens`` -> ``--max-answer-tokens``), its help and its
  value grammar (``parse``, one of :mod:`loadbearing.options`) live in the field's metadata;
* ``run(config) -> Result`` does the work (writes the stage's directory, resumes when ``config.resume``);
* ``is_complete(dir) -> bool`` says whether a directory holds a finished output;
* ``report(result) -> Section`` is what the study's report shows: any object with ``render(style)``
  (:class:`Section`; :class:`SummarySection` adapts a stage's ``format_summary``).

:meth:`Stage.build_parser` builds the argparse parser from the config's fields (their defaults are the
parser's), :meth:`Stage.config_from_args` the config from parsed options, and
:meth:`Stage.main` is the command's ``main(argv)``: a bad value ends in one ``error:`` line.
"""
from __future__ import annotations

import argparse
import dataclasses
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, ClassVar, Generic, Protocol, TypeVar

from loadbearing.cli import run_cli
from loadbearing.commands import prog
from loadbearing.stage.parser import config_kwargs, option, parser_from_config

#: the options every stage shares (fields of :class:`Options`), in the order ``--help`` lists them
SHARED = ("output_dir", "resume", "quiet", "shard", "device", "dtype", "batch_size", "seed")

@dataclass(frozen=True, kw_only=True)
class Options:
    """The options every stage shares. A config derives it and lists, in :attr:`CLI_SHARED`, which of them its
    command offers (the others keep their defaults); a stage overrides a default by declaring the field again."""

    #: the shared options this config's command offers (a subset of :data:`SHARED`)
    CLI_SHARED: ClassVar[tuple[str, ...]] = SHARED

    output_dir: str | None = option(None, help="output directory", metavar="DIR", deprecated=("--output",),
                                    compare=False)
    resume: bool = option(False, help="continue an interrupted stage (work already written is kept)", compare=False)
    quiet: bool = option(False, help="no progress bars", compare=False)
    shard: str | None = option(None, help="only shard I of N of the questions (by question key); an unsharded run "
                               "afterwards merges the shards", metavar="I/N")
    device: str | None = option(None, help="cpu, cuda, cuda:N or auto (default: the model loader's)", compare=False)
    dtype: str | None = option(None, help="model dtype (default: the model loader's)", compare=False)
    batch_size: int = option(16, help="generations decoded at once", compare=False)
    seed: int = option(0, help="random seed", compare=False)

    @property
    def progress(self) -> bool:
        """Progress bars on (the negation of ``quiet``, the one stored name)."""
        return not self.quiet


@dataclass(frozen=True)
class RunDirOptions(Options):
    """:class:`Options` and the run directory the stage reads (positional: ``Config("runs/demo", ...)``)."""

    run_dir: str | Path = field(metadata={"option": {"cli": True, "positional": True, "metavar": "RUN_DIR",
                                                     "help": "a finished run directory written by python -m "
                                                             "behavioural.run"}})


def result_settings(config: Any) -> dict[str, Any]:
    """The settings that change a stage's records: the config's fields with ``compare=True`` (not the run dir),
    the stage's own first and the shared ones after them, tuples as lists (as they are written to JSON)."""
    fs = [f for f in dataclasses.fields(config) if f.compare and f.name != "run_dir"]
    out = {}
    for f in sorted(fs, key=lambda f: f.name in SHARED):
        v = getattr(config, f.name)
        out[f.name] = list(v) if isinstance(v, tuple) else v
    return out


# ------------------------------------------------------------------------------------------------ report
class Section(Protocol):
    """What a stage's ``report`` returns: an object the report renders (``style`` is ``"md"`` or ``"text"``)."""

    @property
    def title(self) -> str: ...

    def render(self, style: str) -> str: ...


@dataclass(frozen=True)
class SummarySection:
    """A :class:`Section` made of a stage's summary and its ``format_summary(summary, style)``."""

    title: str
    summary: Any
    format: Callable[[Any, str], str]

    def render(self, style: str) -> str:
        return str(self.format(self.summary, style))


# ------------------------------------------------------------------------------------------------ the stage
C = TypeVar("C")
R = TypeVar("R")


@dataclass(frozen=True)
class Stage(Generic[C, R]):
    """A stage: its name, its config type, ``run``, ``is_complete`` and ``report`` (see the module docstring)."""

    name: str
    config: type[C]
    run: Callable[[C], R]
    is_complete: Callable[[Path], bool]
    report: Callable[[R], Section]
    #: one line saying what the stage asks (the report's section heading)
    title: str = ""
    #: the ``python -m`` module of its command (for ``usage:`` and the interrupted hint)
    command: str = ""
    description: str = ""
    #: the stage's own error types, reported as one ``error:`` line (the toolkit's root error always is)
    errors: tuple[type[BaseException], ...] = ()
    #: adds what the config's fields cannot say to the parser (a retired option's one-line pointer)
    extend: Callable[[argparse.ArgumentParser], None] | None = None
    #: options that choose how the stage runs rather than what it computes (``--backend`` and the engine's), added
    #: to the parser before ``extend``; they are not config fields, so they stay out of the recorded settings
    engine_options: Callable[[argparse.ArgumentParser], None] | None = None
    #: ``execute(config, args)`` runs the stage with those options (default: ``run(config)``)
    execute: Callable[[C, argparse.Namespace], R] | None = None

    def options(self) -> list[dataclasses.Field]:
        """The config's fields that are command-line options, the positional ones first."""
        offered = getattr(self.config, "CLI_SHARED", SHARED)
        fs = [f for f in dataclasses.fields(self.config)  # type: ignore[arg-type]
              if f.metadata.get("option", {}).get("cli") and (f.name not in SHARED or f.name in offered)]
        return sorted(fs, key=lambda f: (not f.metadata["option"].get("positional"), f.name in SHARED))

    def build_parser(self) -> argparse.ArgumentParser:
        """The command's parser, one option per config field (:func:`option`); defaults are the config's."""
        hooks = [h for h in (self.engine_options, self.extend) if h is not None]
        return parser_from_config(self.config, prog=prog(self.command or self.name), description=self.description,
                            raw_description=True, fields=self.options(), hooks=hooks, say_default=True,
                            infer_type=True, by_group=False)

    def config_from_args(self, args: argparse.Namespace) -> C:
        """The config of parsed options (``parse`` applied to typed text; an option left out has the config's default,
        which the parser holds as it is)."""
        return self.config(**config_kwargs(self.config, args, self.options()))

    def main(self, argv: list[str] | None = None) -> int:
        """``main(argv)`` of the stage's command: parse, build the config, run; bad input is one ``error:`` line."""
        def body() -> int:
            args = self.build_parser().parse_args(argv)
            config = self.config_from_args(args)
            if self.execute is not None:
                self.execute(config, args)
            else:
                self.run(config)
            return 0

        hint = f"continue with: python -m {self.command or self.name} RUN_DIR --resume"
        return run_cli(body, errors=self.errors, interrupted_hint=hint)


__all__ = ["Options", "RunDirOptions", "SHARED", "Section", "Stage", "SummarySection", "option", "result_settings"]
