"""One parser per kind of command-line value: layers, token positions, line positions, lists, fractions.

    from loadbearing.options import parse_layers, parse_list
    parse_layers("0,6,-1", n_layers=12)                  # [0, 6, 12]   (hidden-state indices, sorted)
    parse_layers("4-8", available=[0, 4, 6, 8])          # [4, 6, 8]    (a store's layers)
    parse_list("1,2,4", "--k", kind=int)                 # [1, 2, 4]

Every command reads these kinds of value through this module, so ``--layers`` means the same thing to the
activation cache, the probes, patching and the steering sweep, and a bad value is one line naming the option
and the fix. Each parser takes ``error=``, the calling stage's own error type (a subclass of
:class:`loadbearing.errors.LoadBearingError`), which :func:`loadbearing.cli.run_cli` prints as ``error: ...``.

Grammars:

* **layers** (:func:`parse_layers`): ``all``, or a comma list of hidden-state indices (0 = embeddings, L = the
  output of block L-1; :mod:`loadbearing.engine.layers`) and ranges ``LO-HI`` (both ends included); a negative
  index counts from the last hidden state (``-1`` = L) where the model's ``n_layers`` is known. The result is
  sorted and without repeats.
* **token positions** (:func:`parse_token_positions`): which tokens of a continuation's input an activation is
  read at (``prefix_last``, ``edit_mean``...; the names are the caller's).
* **line positions** (:func:`parse_line_positions`): which reasoning line the protocol edits (``early``,
  ``middle``, ``late``).
* **lists** (:func:`parse_list`): a comma list of strings, integers or finite numbers (blank items skipped).
* **fractions** (:func:`parse_fractions`): a comma list of fractions of a chain, each in (0, 1].
"""
from __future__ import annotations

import math
import operator
import re
from collections.abc import Callable, Sequence

from loadbearing.cli import UsageError

ErrorType = Callable[[str], Exception]

#: the reasoning lines the protocol can edit, in trace order
LINE_POSITIONS = ("early", "middle", "late")

_INT = re.compile(r"^-?\d+$")
_RANGE = re.compile(r"^(\d+)\s*-\s*(\d+)$")
_LAYERS_HELP = "give 'all', a comma list like '0,6,-1' or a range like '10-20'"


def split_list(spec: str | Sequence[str] | None) -> list[str]:
    """``"a, b,,c"`` -> ``["a", "b", "c"]`` (a sequence is taken item by item; None is empty)."""
    if spec is None:
        return []
    items = str(spec).split(",") if isinstance(spec, str) else [str(x) for x in spec]
    return [s.strip() for s in items if s.strip()]


def parse_list(spec: str | Sequence[str] | None, option: str, *, kind: type = str, minimum: float | None = None,
               choices: Sequence[str] | None = None, error: ErrorType = UsageError) -> list | None:
    """A comma list of ``kind`` (``str``, ``int`` or ``float``); None stays None; an empty list, a bad item, a
    non-finite number, one below ``minimum`` or a name outside ``choices`` is refused with one line."""
    if spec is None:
        return None
    noun = {int: "integer", float: "number"}.get(kind, "name")
    parts = split_list(spec)
    if not parts:
        raise error(f"{option} is empty; give a comma list of {noun}s")
    out: list = []
    for s in parts:
        try:
            v = kind(s)
        except ValueError:
            raise error(f"{option}: {s!r} is not a{'n' if noun[0] in 'aeiou' else ''} {noun}; give a comma list of "
                        f"{noun}s, e.g. {option} {'1,2,4' if kind is int else '0.5,1' if kind is float else 'a,b'}") from None
        if kind is float and not math.isfinite(v):
            raise error(f"{option} must be finite numbers, got {s!r}")
        if minimum is not None and v < minimum:
            raise error(f"{option} must be >= {minimum:g}, got {s}")
        if choices is not None and v not in choices:
            raise error(f"{option}: unknown {s!r}; choose from {', '.join(choices)}")
        out.append(v)
    return out


def parse_float_list(spec: str, option: str, *, minimum: float | None = None,
                     error: ErrorType = UsageError) -> tuple[float, ...]:
    """A comma list of finite numbers as a tuple (NaN, inf and an empty list are refused)."""
    return tuple(parse_list(spec, option, kind=float, minimum=minimum, error=error) or ())


def parse_fractions(spec: str | Sequence[float], option: str = "--fractions", *,
                    error: ErrorType = UsageError) -> tuple[float, ...]:
    """``"0.25,0.5,0.75,1"`` -> a tuple of floats; text that is not a comma list of numbers is refused (the range
    (0, 1] is checked with the rest of the stage's config, where the fractions are used)."""
    if not isinstance(spec, str):
        return tuple(float(x) for x in spec)
    try:
        return tuple(float(x) for x in split_list(spec))
    except ValueError:
        raise error(f"{option} {spec!r}: give numbers in (0, 1], e.g. 0.25,0.5,0.75,1") from None


# ------------------------------------------------------------------------------------------------ layers
def _layer_numbers(spec: str, option: str, error: ErrorType) -> list[int]:
    """The integers a layers string names (syntax only; a negative index is kept negative)."""
    out: list[int] = []
    for tok in split_list(spec):
        m = _RANGE.match(tok)
        if m:
            lo, hi = int(m.group(1)), int(m.group(2))
            if hi < lo:
                raise error(f"{option}: the layer range {tok!r} is empty; write it low-high, e.g. '10-20'")
            out.extend(range(lo, hi + 1))
        elif _INT.match(tok):
            out.append(int(tok))
        else:
            raise error(f"{option} {spec!r}: unknown layer {tok!r}; {_LAYERS_HELP}")
    return out


def check_layers(spec: str | Sequence[int] | None, option: str = "--layers", *, error: ErrorType = UsageError) -> None:
    """A layers value's syntax, before any model or store is opened (the range is checked by :func:`parse_layers`)."""
    if spec is None or (isinstance(spec, str) and spec.strip().lower() == "all"):
        return
    if isinstance(spec, str):
        if not _layer_numbers(spec, option, error):
            raise error(f"{option} is empty; {_LAYERS_HELP}")
        return
    for x in spec:
        try:
            if isinstance(x, bool):
                raise TypeError
            operator.index(x)  # an int or a NumPy integer
        except TypeError:
            raise error(f"{option}: unknown layer {x!r}; layers are integers") from None


def parse_layers(spec: str | Sequence[int] | None, option: str = "--layers", *, n_layers: int | None = None,
                 available: Sequence[int] | None = None, allow_all: bool = True,
                 error: ErrorType = UsageError) -> list[int] | None:
    """The sorted hidden-state indices a layers value names (see the module docstring for the grammar).

    ``n_layers`` (the model's blocks): indices must lie in 0..n_layers, negative ones count from the end, and
    ``all`` / None is every one. ``available`` (a store's layers): indices must be stored ones, and ``all`` / None
    is all of them, in the store's order. With neither known, ``all`` / None is None (resolved later) and the
    syntax alone is checked. ``allow_all=False``: ``all`` is refused (None still means the caller's default).
    """
    if not allow_all and isinstance(spec, str) and spec.strip().lower() == "all":
        raise error(f"{option} all is not available here; give a comma list like '0,6' or a range like '10-20'")
    if spec is None or (isinstance(spec, str) and spec.strip().lower() == "all"):
        if available is not None:
            return list(available)
        return None if n_layers is None else list(range(n_layers + 1))
    if isinstance(spec, str):
        numbers = _layer_numbers(spec, option, error)
    else:
        check_layers(spec, option, error=error)
        numbers = [operator.index(x) for x in spec]
    shown = spec if isinstance(spec, str) else ",".join(str(x) for x in spec)
    if not numbers:
        raise error(f"{option} {shown!r} selects no layer; {_LAYERS_HELP}")
    if n_layers is not None:
        valid = (f"valid layers are 0..{n_layers} (0 = embeddings, {n_layers} = last block), 'all', or e.g. "
                 f"'0,6,-1' / '10-20'")
        resolved = []
        for i in numbers:
            j = i + n_layers + 1 if i < 0 else i
            if not 0 <= j <= n_layers:
                raise error(f"{option} {shown!r}: unknown layer {i}, out of range; {valid}")
            resolved.append(j)
        numbers = resolved
    if available is not None:
        missing = [x for x in dict.fromkeys(numbers) if x not in available]
        if missing:
            raise error(f"unknown layer(s) {missing} in {option} {shown!r}; this store has layers {list(available)}")
    return sorted(set(numbers))


# ------------------------------------------------------------------------------------------------ positions
def parse_token_positions(spec: str | Sequence[str] | None, option: str = "--token-positions", *,
                          safe: Sequence[str], outcome: Sequence[str] = (), allow_outcome_tokens: bool = False,
                          default: Sequence[str] = (), error: ErrorType = UsageError,
                          expand: Callable[[str], list[str] | None] | None = None, expand_name: str = "") -> list[str]:
    """Token positions an activation is read at: names from ``safe`` (before the outcome) and, only with
    ``allow_outcome_tokens``, from ``outcome`` (they average over the continuation, which holds the outcome the
    probes predict: label leakage). ``expand``: an entry that names several outcome positions at once
    (``continuation:N`` -> ``continuation_0`` ..; None when the entry is not one; ``expand_name`` is how the error
    lists it). None is ``default``; repeats are dropped, the order kept."""
    if spec is None:
        return list(default)
    out: list[str] = []
    for p in split_list(spec):
        many = expand(p) if expand is not None else None
        if many is not None:
            if not allow_outcome_tokens:
                raise error(f"position {p!r} reads the continuation written after the edit, which contains the "
                            "outcome (post-outcome, not for prediction); pass --allow-outcome-tokens to cache it "
                            "(the store is then marked leaky)")
            out += [c for c in many if c not in out]
            continue
        if p not in safe and p not in outcome:
            listed = [*outcome, expand_name] if expand_name else list(outcome)
            extra = f" (or {', '.join(listed)} with --allow-outcome-tokens)" if listed else ""
            raise error(f"{option}: unknown position {p!r}; choose from {', '.join(safe)}{extra}")
        if p in outcome and not allow_outcome_tokens:
            raise error(f"position {p!r} averages over the continuation, which contains the outcome the probes predict "
                        "(label leakage); pass --allow-outcome-tokens to cache it anyway (the store is then marked leaky)")
        if p not in out:
            out.append(p)
    if not out:
        raise error(f"{option}: no positions given; choose from {', '.join(safe)}")
    return out


def parse_line_positions(spec: str | Sequence[str], option: str = "--line-positions", *,
                         error: ErrorType = UsageError) -> tuple[str, ...]:
    """``"early,late"`` -> ``("early", "late")``: the reasoning lines edited; an unknown or empty list is refused."""
    positions = tuple(split_list(spec))
    bad = [p for p in positions if p not in LINE_POSITIONS]
    if bad or not positions:
        shown = bad or (spec if isinstance(spec, str) else list(spec))
        raise error(f"{option}: unknown position(s) {shown!r}; use a comma list of {','.join(LINE_POSITIONS)}")
    return positions


__all__ = ["LINE_POSITIONS", "check_layers", "parse_float_list", "parse_fractions", "parse_layers",
           "parse_line_positions", "parse_list", "parse_token_positions", "split_list"]
