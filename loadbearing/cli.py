"""Shared command-line plumbing: one-line errors, device and number checks, for every stage's ``main(argv)``.

    from loadbearing.cli import run_cli
    def main(argv=None) -> int:
        args = build_parser().parse_args(argv)
        return run_cli(lambda: _main(args), errors=(MyStageError,))

A user mistake never ends in a traceback: the stage raises its own error type with a message naming the
problem and the fix, and :func:`run_cli` prints it as ``error: ...`` on one line to stderr and returns 2.
OS errors on user paths (read-only or full destinations, missing files) are reported the same way.
"""
from __future__ import annotations

import argparse
import math
import sys
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import Any, TextIO

from loadbearing.commands import COMMANDS
from loadbearing.errors import LoadBearingError

EXIT_USAGE = 2
EXIT_INTERRUPTED = 130


class OneLineParser(argparse.ArgumentParser):
    """An ``ArgumentParser`` whose usage errors are one line: ``error: <message> (see <prog> --help)``, exit 2.

    Run as a console script (``cot-run``...), its ``prog`` is the script's name, so usage and error lines name
    what the user typed (``loadbearing.commands``); run with ``python -m``, the given ``prog``.
    """

    def __init__(self, *, prog: str | None = None, **kwargs: Any) -> None:
        script = Path(sys.argv[0]).name if sys.argv and sys.argv[0] else ""
        if prog is not None and script in COMMANDS:
            prog = script
        super().__init__(prog=prog, **kwargs)

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
    from pathlib import Path

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


def parse_float_list(spec: str, option: str, *, minimum: float | None = None) -> tuple[float, ...]:
    """A comma list of finite numbers (NaN, inf and an empty list are refused)."""
    parts = [s.strip() for s in str(spec).split(",") if s.strip()]
    if not parts:
        raise UsageError(f"{option} is empty; give a comma list of numbers")
    out = []
    for s in parts:
        try:
            v = float(s)
        except ValueError:
            raise UsageError(f"{option}: {s!r} is not a number; give a comma list of numbers") from None
        check_number(v, option, minimum=minimum)
        out.append(v)
    return tuple(out)


def explicit_options(parser, argv: list[str] | None) -> set[str]:
    """The ``dest`` names of the options given on the command line (not left at their defaults)."""
    import argparse
    import copy

    p = copy.deepcopy(parser)
    for a in p._actions:
        if a.dest != "help":
            a.default = argparse.SUPPRESS
    ns, _ = p.parse_known_args(argv)
    return set(vars(ns))
