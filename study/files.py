"""A study as a TOML file: ``python -m study --config study.toml`` (or a shipped preset: ``--config paper``).

    python -m study --config paper --dry-run              # the paper's 3 models x 3 datasets, checked and planned
    python -m study --config embedded-cpu                 # the CPU demo
    python -m study --config runs/x/study.toml --output-dir runs/y   # reproduce a run from the file it wrote

A file's top-level keys are the settings of :class:`study.config.StudyConfig` (``python -m study --help``
names each: ``--max-new-tokens`` is ``max_new_tokens``). Several models and datasets make a gradient study:
``models = [...]`` and ``datasets = [...]`` (every pair is one run, into ``OUTPUT_DIR/<model>/<dataset>``),
with per-dataset settings in ``[dataset_settings.<name>]`` tables; or an explicit ``[[run]]`` list of tables,
each one run (what the study writes back). Options given on the command line override the file.

Each run writes its fully resolved settings back as ``OUTPUT_DIR/study.toml`` (a several-run study: one
``[[run]]`` table per run); running that file again reproduces the run's records. A mistake in a file (an
unknown key, a wrong type) is one ``error:`` line naming the key and the fix, before anything is written.
"""
from __future__ import annotations

import dataclasses
import difflib
import json
import typing
from importlib import resources
from pathlib import Path
from typing import Any

from loadbearing.engine.models import DTYPES
from loadbearing.files import atomic_write_text
from loadbearing.runs import MANIFEST
from study.config import StudyConfig, StudyError

CONFIG_FILE = "study.toml"
PRESETS = ("paper", "embedded-cpu", "embedded-paper-datasets", "reproduce", "r1-distill")
#: keys of a study file besides the settings
LIST_KEYS = ("models", "datasets", "dataset_settings", "run")


def _toml():
    try:
        import tomllib  # deferred: tomllib or its backport, by Python version
    except ModuleNotFoundError:  # Python 3.10: the tomli backport (a dependency there)
        # deferred: tomllib or its backport, by Python version
        import tomli as tomllib  # type: ignore[no-redef]
    return tomllib


def _types() -> dict[str, tuple[type, ...]]:
    hints = typing.get_type_hints(StudyConfig)
    out: dict[str, tuple[type, ...]] = {}
    for f in dataclasses.fields(StudyConfig):
        args = typing.get_args(hints[f.name]) or (hints[f.name],)
        out[f.name] = tuple(a for a in args if a is not type(None))
    return out


def _check_settings(table: dict[str, Any], where: str, *, allow_lists: bool) -> dict[str, Any]:
    types = _types()
    out = {}
    for k, v in table.items():
        if k in LIST_KEYS and allow_lists:
            continue
        if k not in types:
            near = difflib.get_close_matches(k, list(types) + list(LIST_KEYS), n=1)
            hint = f"did you mean {near[0]!r}?" if near else "see python -m study --help for the settings"
            raise StudyError(f"{where}: unknown key {k!r}; {hint}")
        want = types[k]
        ok = isinstance(v, want) and not (isinstance(v, bool) and bool not in want)
        if not ok and float in want and isinstance(v, int) and not isinstance(v, bool):
            v, ok = float(v), True
        if not ok:
            names = " or ".join({int: "an integer", float: "a number", str: "a string", bool: "true/false"}[t]
                                for t in want)
            raise StudyError(f"{where}: key {k!r} must be {names}, got {type(v).__name__} {v!r}; write e.g. "
                             f"{k} = {_value(_example(want[0]))}")
        out[k] = v
    return out


def _example(t: type) -> int | float | str | bool:
    examples: dict[type, int | float | str | bool] = {int: 10, float: 0.5, str: "text", bool: True}
    return examples[t]


def resolve_path(spec: str) -> tuple[str, str]:
    """(the file's text, its name) for a path or a preset name."""
    if spec in PRESETS:
        return (resources.files("study") / "presets" / f"{spec}.toml").read_text(encoding="utf-8"), f"preset {spec}"
    p = Path(spec)
    if not p.is_file():
        raise StudyError(f"--config {spec!r}: no such file; pass a study TOML file or a preset ({', '.join(PRESETS)})")
    return p.read_text(encoding="utf-8"), str(p)


def read_config_file(spec: str) -> list[dict[str, Any]]:
    """The runs a study file describes, each a dict of settings (not yet resolved); checks keys and types.
    With several runs, a run without its own ``output_dir`` gets none (the caller puts it under the root: the
    file's top-level ``output_dir``, see :func:`run_dir_of`)."""
    text, name = resolve_path(spec)
    try:
        data = _toml().loads(text)
    except Exception as e:  # tomllib.TOMLDecodeError: the line and column are in the message
        raise StudyError(f"{name}: not valid TOML ({e}); fix that line") from None
    base = _check_settings(data, name, allow_lists=True)
    if "run" in data:
        if any(k in data for k in ("models", "datasets", "dataset_settings")):
            raise StudyError(f"{name}: key 'run' lists the runs; drop 'models'/'datasets'/'dataset_settings' beside it")
        runs = data["run"]
        if not isinstance(runs, list) or not runs or not all(isinstance(r, dict) for r in runs):
            raise StudyError(f"{name}: key 'run' must be a list of tables ([[run]]), one per run")
        out = [base | _check_settings(r, f"{name} [[run]] #{i + 1}", allow_lists=False) for i, r in enumerate(runs)]
        return out if len(out) == 1 else [_own_dir(r, runs[i]) for i, r in enumerate(out)]
    models = _str_list(data, "models", name) or [base.get("model", StudyConfig.model)]
    datasets = _str_list(data, "datasets", name) or [base.get("dataset", StudyConfig.dataset)]
    per = data.get("dataset_settings", {})
    if not isinstance(per, dict) or not all(isinstance(v, dict) for v in per.values()):
        raise StudyError(f"{name}: key 'dataset_settings' must hold one table per dataset ([dataset_settings.bbh])")
    extra = sorted(set(per) - set(datasets))
    if extra:
        raise StudyError(f"{name}: dataset_settings.{extra[0]} names a dataset not in 'datasets' {datasets}; add it "
                         "there or drop the table")
    checked = {d: _check_settings(t, f"{name} [dataset_settings.{d}]", allow_lists=False) for d, t in per.items()}
    runs = []
    several = len(models) * len(datasets) > 1
    for m in models:
        for d in datasets:
            run = base | {"model": m, "dataset": d} | checked.get(d, {})
            runs.append(_own_dir(run, checked.get(d, {})) if several else run)
    return runs


def _own_dir(run: dict[str, Any], own: dict[str, Any]) -> dict[str, Any]:
    """A run of several without the file's top-level output_dir (the root), unless it names its own."""
    return run if "output_dir" in own else {k: v for k, v in run.items() if k != "output_dir"}


def run_dir_of(root: str | Path, model: str, dataset: str) -> str:
    """Where one run of a several-run study goes: ``ROOT/<model>/<dataset>`` (a hub id's ``/`` as ``--``)."""
    return str(Path(root) / model.replace("/", "--") / dataset)


def _str_list(data: dict, key: str, name: str) -> list[str]:
    v = data.get(key)
    if v is None:
        return []
    if not isinstance(v, list) or not v or not all(isinstance(x, str) for x in v):
        raise StudyError(f"{name}: key {key!r} must be a non-empty list of strings, e.g. {key} = [\"gsm8k\", \"bbh\"]")
    return v


def _value(v: Any) -> str:
    if isinstance(v, bool):
        return "true" if v else "false"
    if isinstance(v, (int, float)):
        return repr(v)
    s = str(v).replace("\\", "\\\\").replace('"', '\\"')
    return f'"{s}"'


def _table(c: StudyConfig, rules: dict[str, str]) -> list[str]:
    lines = []
    for k, v in c.to_dict().items():
        note = f"  # {rules[k]}" if k in rules else ""
        lines.append(f"# {k} = (unset){note}" if v is None else f"{k} = {_value(v)}{note}")
    return lines


def config_text(runs: list[tuple[StudyConfig, dict[str, str]]]) -> str:
    """The fully resolved study file: top-level settings for one run, one ``[[run]]`` table each for several."""
    head = ["# written by python -m study: the fully resolved settings; python -m study --config THIS_FILE "
            "--output-dir NEW_DIR reruns it"]
    if len(runs) == 1:
        return "\n".join(head + _table(*runs[0])) + "\n"
    out = head
    for c, rules in runs:
        out += ["", "[[run]]", *_table(c, rules)]
    return "\n".join(out) + "\n"


def with_run_model(out: Path, config: StudyConfig, rules: dict[str, str]) -> tuple[StudyConfig, dict[str, str]]:
    """``config`` with ``dtype`` and ``device`` filled, where they were unset, from the model the run loaded
    (``manifest.json``): a study file that leaves them unset would load the model another way on another
    machine (bfloat16 on a GPU where the run used float32), so the written file says what the run used."""
    try:
        model = json.loads((Path(out) / MANIFEST).read_text(encoding="utf-8")).get("model") or {}
    except (OSError, ValueError, AttributeError):
        return config, rules
    upd: dict[str, Any] = {}
    rules = dict(rules)
    if config.dtype is None and config.quantize is None and model.get("dtype") in DTYPES:
        upd["dtype"] = str(model["dtype"])
        rules["dtype"] = "the dtype the run's model was loaded in (manifest.json)"
    if config.device is None and isinstance(model.get("device"), str) and model["device"]:
        upd["device"] = model["device"]
        rules["device"] = "the device the run's model was loaded on (manifest.json)"
    return (dataclasses.replace(config, **upd) if upd else config), rules


def write_config(out: Path, runs: list[tuple[StudyConfig, dict[str, str]]]) -> None:
    text = config_text(runs)
    p = Path(out) / CONFIG_FILE
    if not p.is_file() or p.read_text(encoding="utf-8") != text:
        atomic_write_text(p, text)


__all__ = ["CONFIG_FILE", "PRESETS", "config_text", "read_config_file", "resolve_path", "run_dir_of", "with_run_model",
           "write_config"]
