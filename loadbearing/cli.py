"""Shared command-line plumbing: one-line errors, device and number checks, for every stage's ``main(argv)``.

    from loadbearing.cli import run_cli
    def main(argv=None) -> int:
        args = build_parser().parse_args(argv)
        return run_cli(lambda: _main(args), errors=(MyStageError,))

A user mistake never ends in a traceback: the stage raises its own error type with a message naming the
problem and the fix, and :func:`run_cli` prints it as ``error: ...`` on one line to stderr and returns 2.
OS errors on user paths (read-only or full destinations, missing files) are reported the same way.

The options several commands share are built here, so they have one name and one meaning everywhere
(docs/architecture.md, "Command-line vocabulary"): :func:`add_output` (``--output-dir DIR`` for a command that
writes a directory, ``--output-file FILE`` for one that writes one file), :func:`add_quiet` (``--quiet``),
:func:`add_labelling` (``--labelling NAME``), :func:`add_line_positions` (``--line-positions``; the token positions
of the activation cache are ``--token-positions``, the steered positions of the sweep ``--steer-positions``), and
:func:`check_fraction` (a fraction option such as ``--sesoi``: a value >= 1, meant as points, is refused with the
fraction to give). An old name stays as a deprecated alias (:func:`add_option`): it still works and prints one
``warning: --old is deprecated; use --new`` line. :class:`HelpFormatter` says each default once.
"""
from __future__ import annotations

import argparse
import copy
import math
import re
import sys
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import Any, TextIO

from loadbearing.commands import COMMANDS
from loadbearing.errors import LoadBearingError

EXIT_USAGE = 2
EXIT_INTERRUPTED = 130


#: an option's help that already says its default ("(default 8)", "default: the run's", "...; default runs/<time>")
SAYS_DEFAULT = re.compile(r"\(default\b|\bdefault:|[;,]\s*default\b|^default\b|%\(default\)", re.IGNORECASE)


class HelpFormatter(argparse.HelpFormatter):
    """``--help`` that says each option's default once and leaves deprecated aliases out.

    The default is appended as ``(default: X)`` unless the help already says it in words (:data:`SAYS_DEFAULT`:
    "(default ...", "default: ...", "...; default ...", ``%(default)s``: a default that depends on the model or the
    run) or there is none to say (None, an on/off switch). A deprecated alias (:func:`add_option`) still works but
    is not listed.
    """

    def _get_help_string(self, action: argparse.Action) -> str | None:
        text = action.help
        if not text or text is argparse.SUPPRESS or SAYS_DEFAULT.search(text):
            return text
        d = action.default
        if d is None or d is argparse.SUPPRESS or isinstance(d, bool) or d == "" or action.nargs == 0:
            return text
        if not action.option_strings and action.nargs not in (argparse.OPTIONAL, argparse.ZERO_OR_MORE):
            return text  # a required positional has no default to say
        return f"{text} (default: %(default)s)"

    def _format_action_invocation(self, action: argparse.Action) -> str:
        hidden = getattr(action, "deprecated_aliases", ())
        if hidden:
            action = copy.copy(action)
            action.option_strings = [s for s in action.option_strings if s not in hidden]
        return super()._format_action_invocation(action)


class RawDescriptionHelpFormatter(argparse.RawDescriptionHelpFormatter, HelpFormatter):
    """:class:`HelpFormatter` that keeps the description's own line breaks."""


class OneLineParser(argparse.ArgumentParser):
    """An ``ArgumentParser`` whose usage errors are one line: ``error: <message> (see <prog> --help)``, exit 2.

    Run as a console script (``cot-run``...), its ``prog`` is the script's name, so usage and error lines name
    what the user typed (``loadbearing.commands``); run with ``python -m``, the given ``prog``. Its help is
    always :class:`HelpFormatter`'s (each default once): a ``formatter_class`` deriving argparse's
    ``RawDescriptionHelpFormatter`` gets :class:`RawDescriptionHelpFormatter`, any other argparse formatter
    (``ArgumentDefaultsHelpFormatter`` would say a default twice) gets :class:`HelpFormatter`.
    """

    def __init__(self, *, prog: str | None = None, **kwargs: Any) -> None:
        script = Path(sys.argv[0]).name if sys.argv and sys.argv[0] else ""
        if prog is not None and script in COMMANDS:
            prog = script
        fc = kwargs.pop("formatter_class", None)
        if not (isinstance(fc, type) and issubclass(fc, HelpFormatter)):
            raw = isinstance(fc, type) and issubclass(fc, argparse.RawDescriptionHelpFormatter)
            fc = RawDescriptionHelpFormatter if raw else HelpFormatter
        super().__init__(prog=prog, formatter_class=fc, **kwargs)

    def error(self, message: str):  # type: ignore[override]
        print(f"error: {message} (see {self.prog} --help)", file=sys.stderr)
        raise SystemExit(EXIT_USAGE)


class UsageError(LoadBearingError, ValueError):
    """A bad command-line value; the message names the option and the fix."""


def one_line(e: BaseException) -> str:
    """An exception's message as one line (an OSError names its file and reason)."""
    if isinstance(e, OSError) and e.strerror:
        where = f" {e.filename!r}" if e.filename else ""
        msg = f"{e.strerror}{where}"
    else:
        msg = str(e) or type(e).__name__
    return " ".join(part.strip() for part in msg.splitlines() if part.strip())


def default_errors() -> tuple[type[BaseException], ...]:
    """The errors every command reports as one line: the toolkit's root error, and the OS's."""
    return (LoadBearingError, OSError)


def run_cli(body: Callable[[], int | None], *, errors: Iterable[type[BaseException]] = (),
            interrupted_hint: str | Callable[[], str] | None = None, stderr: TextIO | None = None) -> int:
    """Run a CLI body; a stage error becomes ``error: <one line>`` on stderr and exit status 2."""
    err = stderr or sys.stderr
    try:
        rc = body()
    except KeyboardInterrupt:
        hint = interrupted_hint() if callable(interrupted_hint) else interrupted_hint
        print("\ninterrupted" + (f"; {hint}" if hint else ""), file=err)
        return EXIT_INTERRUPTED
    except (*default_errors(), *tuple(errors)) as e:
        print(f"error: {one_line(e)}", file=err)
        return EXIT_USAGE
    return 0 if rc is None else rc


def available_devices() -> list[str]:
    """Devices this machine can run on: cpu, and cuda / cuda:N when CUDA is available."""
    # deferred: torch is heavy to import
    import torch  # lazy: a required dependency, but heavy to import for commands that never ask for a device

    out = ["cpu", "auto"]
    if torch.cuda.is_available():
        out += ["cuda"] + [f"cuda:{i}" for i in range(torch.cuda.device_count())]
    return out


def check_device(device: str | None, option: str = "--device") -> None:
    """Refuse an unknown or unavailable device before any model is loaded, listing the available ones."""
    if device is None:
        return
    avail = available_devices()
    if device not in avail:
        raise UsageError(f"{option} {device!r} is not available here; choose one of {', '.join(avail)}")


def check_model_file(name: str | None, option: str = "--model") -> None:
    """Refuse a ``.gguf`` path that is missing or not a GGUF file (magic bytes), before anything is loaded."""
    if not name or not str(name).endswith(".gguf"):
        return

    p = Path(name)
    if not p.is_file():
        raise UsageError(f"{option} {name!r}: no such .gguf file; pass an existing GGUF file or a model name")
    with open(p, "rb") as f:
        magic = f.read(4)
    if magic != b"GGUF":
        raise UsageError(f"{option} {name!r} is not a GGUF file (it does not start with the GGUF magic bytes); pass a "
                         "real .gguf file, a model directory or a model name")


def check_number(value: float | int | None, option: str, *, minimum: float | None = None,
                 maximum: float | None = None, allow_none: bool = True) -> None:
    """Refuse NaN/inf and values outside ``[minimum, maximum]``, naming the option."""
    if value is None:
        if allow_none:
            return
        raise UsageError(f"{option} is required")
    if isinstance(value, float) and not math.isfinite(value):
        raise UsageError(f"{option} must be a finite number, got {value}")
    if minimum is not None and value < minimum:
        raise UsageError(f"{option} must be >= {minimum:g}, got {value:g}")
    if maximum is not None and value > maximum:
        raise UsageError(f"{option} must be <= {maximum:g}, got {value:g}")


def explicit_options(parser, argv: list[str] | None) -> set[str]:
    """The ``dest`` names of the options given on the command line (not left at their defaults)."""
    p = copy.deepcopy(parser)
    for a in p._actions:
        a.warn_aliases = False  # type: ignore[attr-defined]  # the real parse already warned
        if a.dest != "help":
            a.default = argparse.SUPPRESS
    ns, _ = p.parse_known_args(argv)
    return set(vars(ns))


def check_fraction(value: float | None, option: str, *, allow_zero: bool = False,
                   error: type[Exception] = UsageError) -> None:
    """A fraction of cases in (0, 1) (``[0, 1)`` with ``allow_zero``), e.g. ``--sesoi 0.10`` for 10 points.

    A value >= 1 is someone giving points: refused with the fraction to give instead (``--sesoi 10`` -> "for 10
    points use --sesoi 0.10"). Raises ``error`` (the stage's own error type) with a one-line message.
    """
    if value is None:
        return
    sym = option.lstrip("-")[:1] or "x"
    lo = "0 <=" if allow_zero else "0 <"
    if not math.isfinite(value):
        raise error(f"{option} must be a finite fraction of cases ({lo} {sym} < 1), got {value}")
    if value >= 1:
        if value < 100:
            frac = value / 100
            fix = f"{frac:.2f}" if round(frac, 2) == frac else f"{frac:g}"
            raise error(f"{option} {value:g} is a fraction of cases ({lo} {sym} < 1); for {value:g} "
                        f"point{'' if value == 1 else 's'} use {option} {fix}")
        raise error(f"{option} {value:g} is a fraction of cases ({lo} {sym} < 1); give e.g. {option} 0.10 for 10 points")
    if value < 0 or (value == 0 and not allow_zero):
        raise error(f"{option} {value:g} is not a fraction of cases ({lo} {sym} < 1); give e.g. {option} 0.10 for "
                    "10 points")


# ------------------------------------------------------------------------------- options several commands share
class _Deprecating(argparse.Action):
    """Mixed into an option's action by :func:`add_option`: a deprecated alias warns once on stderr, then acts."""

    deprecated_aliases: tuple[str, ...] = ()
    warn_aliases = True

    def __call__(self, parser, namespace, values, option_string=None):  # type: ignore[no-untyped-def]
        if option_string in self.deprecated_aliases and self.warn_aliases:
            print(f"warning: {option_string} is deprecated; use {self.option_strings[0]}", file=sys.stderr)
        super().__call__(parser, namespace, values, option_string)


_DEPRECATING: dict[type, type] = {}


def _deprecating(cls: type) -> type:
    if cls not in _DEPRECATING:
        _DEPRECATING[cls] = type(f"Deprecating{cls.__name__}", (_Deprecating, cls), {})
    return _DEPRECATING[cls]


def add_option(parser: Any, *names: str, deprecated: Iterable[str] = (), **kwargs: Any) -> argparse.Action:
    """``parser.add_argument(*names, **kwargs)`` (a parser or an argument group), with old names kept working.

    Each name in ``deprecated`` is the same option under its old name: it still parses, prints
    ``warning: OLD is deprecated; use NEW`` (NEW = ``names[0]``) to stderr, and is not listed in ``--help``.
    """
    old = tuple(deprecated)
    action = parser.add_argument(*names, *old, **kwargs)
    if old:
        action.__class__ = _deprecating(type(action))
        action.deprecated_aliases = old  # type: ignore[attr-defined]
    return action


def add_output(parser: Any, kind: str, help: str, *, short: str | None = None,
               deprecated: Iterable[str] = ("--output",), **kwargs: Any) -> argparse.Action:
    """The output option: ``--output-dir DIR`` (``kind="dir"``: a command writing a directory) or
    ``--output-file FILE`` (``kind="file"``: a command writing one file); ``--output`` is its deprecated alias."""
    if kind not in ("dir", "file"):
        raise ValueError(f"kind must be 'dir' or 'file', got {kind!r}")
    kwargs.setdefault("metavar", kind.upper())
    names = (f"--output-{kind}",) + ((short,) if short else ())
    return add_option(parser, *names, deprecated=deprecated, help=help, **kwargs)


def add_quiet(parser: Any, help: str = "no progress bars", *, deprecated: Iterable[str] = ()) -> argparse.Action:
    """``--quiet``: no progress bars (``deprecated``: old names such as ``--no-progress``)."""
    return add_option(parser, "--quiet", action="store_true", deprecated=deprecated, help=help)


def add_labelling(parser: Any, help: str, *, deprecated: Iterable[str] = (), **kwargs: Any) -> argparse.Action:
    """``--labelling NAME``: which ``RUN_DIR/labels/NAME`` labelling (``deprecated``: ``--name``, ``--labels``)."""
    kwargs.setdefault("metavar", "NAME")
    return add_option(parser, "--labelling", deprecated=deprecated, help=help, **kwargs)


def add_line_positions(parser: Any, default: str, *, deprecated: Iterable[str] = ("--positions",)) -> argparse.Action:
    """``--line-positions``: the reasoning lines edited, a comma list of early, middle, late (dest ``positions``)."""
    return add_option(parser, "--line-positions", dest="positions", default=default, metavar="LIST",
                      deprecated=deprecated, help="edited line positions, a comma list of early, middle, late")
