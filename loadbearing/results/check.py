"""Typed results: the JSON a stage writes, described as a ``TypedDict``, written and read back through one pair of
functions that check its shape.

    from behavioural.results import BehaviourSummary
    from loadbearing.results.check import read_result, write_result
    write_result("runs/demo/summary.json", summary)              # the bytes loadbearing.files.write_json writes
    s = read_result("runs/demo/summary.json", BehaviourSummary)  # s["overall"]["propagation"]["rate"], typed

A ``TypedDict`` is a ``dict`` at run time, so the files stay exactly what they were (same keys, same order,
same numbers): the types describe the JSON, they do not change it. :func:`check_result` checks the required
keys (recursively, through nested ``TypedDict`` fields) and raises one :class:`ResultError` naming the file,
the missing key and its path, so a damaged or foreign file is one clear line, not a ``KeyError`` later.

:class:`RateJSON` is the JSON of :class:`loadbearing.stats.Rate` (``Rate.to_dict``), the one shape every stage's
rates share.
"""
from __future__ import annotations

import os
import typing
from pathlib import Path
from typing import Any, TypedDict, TypeVar, cast, get_type_hints

from loadbearing.errors import LoadBearingError
from loadbearing.files import read_json, write_json


class ResultError(LoadBearingError, ValueError):
    """A stage's result file lacks a key its type requires."""


class RateJSON(TypedDict, total=False):
    """A rate as ``Rate.to_dict`` writes it (``k`` and ``n`` always; the interval may be null)."""

    k: int
    n: int
    rate: float | None
    lo: float | None
    hi: float | None
    method: str | None
    n_questions: int | None
    n_generations: int | None
    few_clusters: bool


T = TypeVar("T")


def _is_typeddict(t: object) -> bool:
    return isinstance(t, type) and issubclass(t, dict) and hasattr(t, "__required_keys__")


def _fields(cls: type) -> dict[str, tuple[object, bool]]:
    """A TypedDict's keys -> (type, required), ``NotRequired`` / ``Required`` and ``total`` read from the hints
    (so string annotations count too)."""
    out = {}
    for key, t in get_type_hints(cls, include_extras=True).items():
        origin = typing.get_origin(t)
        required = bool(getattr(cls, "__total__", True))
        name = getattr(origin, "_name", None) or getattr(origin, "__name__", None)
        if name in ("NotRequired", "Required"):  # typing's (3.11) or typing_extensions' (3.10)
            required = name == "Required"
            t = typing.get_args(t)[0]
        out[key] = (t, required)
    return out


def _check_value(obj: object, t: object, where: str, errors: list[str]) -> None:
    """Check ``obj`` against a field type: a TypedDict, a dict / list of them, or a union holding one."""
    if _is_typeddict(t):
        _check(obj, t, where, errors)  # type: ignore[arg-type]
        return
    origin, args = typing.get_origin(t), typing.get_args(t)
    if origin is dict and len(args) == 2 and isinstance(obj, dict):
        for k, v in obj.items():
            _check_value(v, args[1], f"{where}.{k}", errors)
    elif origin is list and args and isinstance(obj, list):
        for i, v in enumerate(obj):
            _check_value(v, args[0], f"{where}[{i}]", errors)
    elif args and origin is not None and obj is not None:  # a union: the member that describes an object
        sub = next((a for a in args if _is_typeddict(a) or typing.get_origin(a) in (dict, list)), None)
        if sub is not None:
            _check_value(obj, sub, where, errors)


def _check(obj: object, cls: type, where: str, errors: list[str]) -> None:
    if not isinstance(obj, dict):
        errors.append(f"{where or 'the file'} is {type(obj).__name__}, not an object")
        return
    for key, (t, required) in _fields(cls).items():
        path = f"{where}.{key}" if where else key
        if key not in obj:
            if required:
                errors.append(f"missing key {path!r}")
        elif obj[key] is not None:
            _check_value(obj[key], t, path, errors)


def check_result(obj: object, cls: type[T], *, source: str = "result") -> T:
    """``obj`` as ``cls`` after checking its required keys (and those of nested typed fields); raises
    :class:`ResultError` naming ``source`` and every missing key."""
    errors: list[str] = []
    _check(obj, cls, "", errors)
    if errors:
        raise ResultError(f"{source} is not a {cls.__name__}: {'; '.join(errors[:5])}"
                          f"{'; ...' if len(errors) > 5 else ''}; re-run the stage that writes it")
    return cast(T, obj)


def read_result(path: str | os.PathLike[str], cls: type[T]) -> T:
    """Read a stage's JSON file as ``cls`` (checked, :func:`check_result`)."""
    return check_result(read_json(path), cls, source=str(path))


def write_result(path: str | os.PathLike[str], result: Any) -> Path:
    """Write a stage's result as JSON, atomically (:func:`loadbearing.files.write_json`)."""
    write_json(path, result)
    return Path(path)


__all__ = ["RateJSON", "ResultError", "check_result", "read_result", "write_result"]
