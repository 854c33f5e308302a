"""The bad-input battery's machinery (tests/test_bad_inputs.py): a case (a command, its argv, a set-up that breaks
an input, the inputs that must stay unchanged and the outputs that must not appear), the private copy of the base
study a case runs on, and the mutations that break a file."""
from __future__ import annotations

import hashlib
import json
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path


@dataclass
class Env:
    tmp: Path
    study: Path  # a private copy of the base study

    def f(self, rel: str) -> Path:
        return self.study / rel


def hashes(paths: list[Path]) -> dict[str, str]:
    out = {}
    for p in paths:
        if p.is_file():
            files = [p]
        else:
            files = sorted(x for x in p.rglob("*") if x.is_file() and not x.name.endswith(".lock")) if p.is_dir() else []
        for f in files:
            out[str(f)] = hashlib.sha256(f.read_bytes()).hexdigest()
    return out


# ------------------------------------------------------------------------------------------ mutations
def truncate(p: Path, keep: float = 0.5) -> None:
    data = p.read_bytes()
    p.write_bytes(data[: max(1, int(len(data) * keep))])


def set_json(p: Path, **kv) -> None:
    d = json.loads(p.read_text())
    for k, v in kv.items():
        cur = d
        *head, last = k.split(".")
        for h in head:
            cur = cur[h]
        cur[last] = v
    p.write_text(json.dumps(d))


def append(p: Path, text: str) -> None:
    with open(p, "a") as f:
        f.write(text)


def replace_line(p: Path, i: int, text: str) -> None:
    lines = p.read_text().splitlines(keepends=True)
    lines[i] = text + "\n"
    p.write_text("".join(lines))


def nan_bases(p: Path) -> None:
    import h5py
    import numpy as np

    with h5py.File(p, "r+") as f:
        def visit(name, obj):
            if isinstance(obj, h5py.Dataset) and obj.dtype.kind == "f" and obj.ndim == 2:
                obj[...] = np.nan
        f.visititems(visit)


def hold_lock(p: Path):
    from loadbearing.locks import output_lock

    cm = output_lock(p, command="another writer")
    cm.__enter__()
    return cm


# ------------------------------------------------------------------------------------------ cases
@dataclass
class Case:
    id: str
    cmd: str
    argv: Callable[[Env], list[str]]
    setup: Callable[[Env], object] | None = None
    inputs: Callable[[Env], list[Path]] = lambda e: [e.study]
    absent: Callable[[Env], list[Path]] = lambda e: []
    needle: str | None = None  # a word the one-line error must contain


def S(e: Env) -> str:
    return str(e.study)


def NEW(e: Env) -> str:
    return str(e.tmp / "new")


def absent_new(e: Env) -> list[Path]:
    return [e.tmp / "new"]


def gguf(e: Env) -> str:
    p = e.tmp / "model.gguf"
    p.write_text("this is not a gguf file")
    return str(p)


def steer_argv(extra: list[str]) -> Callable[[Env], list[str]]:
    return lambda e: [S(e), "--directions", str(e.f("probes")), "--output-dir", NEW(e), *extra]


def study_new_argv(extra: list[str]) -> Callable[[Env], list[str]]:
    return lambda e: ["--output-dir", NEW(e), *extra]
