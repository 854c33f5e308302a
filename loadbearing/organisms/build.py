"""Building an organism once and caching it as a model directory ``load_model(DIR)`` loads.

    from loadbearing.organisms.build import organism_dir
    path = organism_dir("load-bearing")           # trains on first use (minutes), then returns the cached dir
    lm = load_model(str(path))

The cache sits beside the embedded model's (:func:`loadbearing.engine.models.cache_dir`, ``LOADBEARING_CACHE``
overrides it), keyed by the sha256 of the whole training spec, and is published in one rename
(:func:`loadbearing.files.publish_dir`), so an interrupted training leaves nothing behind. Each directory
holds the safetensors weights, the tokenizer with its chat template, ``organism.json`` (the spec, the
data's and the weights' sha256, the losses, the held-out self-check per level, the seconds it took) and
``data.jsonl.gz`` (every training example, in training order, with its planted errors).
"""
from __future__ import annotations

import gzip
import json
import shutil
import tempfile
from dataclasses import replace
from pathlib import Path
from typing import Any

from loadbearing.engine.models import cache_dir, wrap_model
from loadbearing.errors import LoadBearingError
from loadbearing.files import RunDirError, atomic_write_bytes, publish_dir, read_json, write_json
from loadbearing.organisms.data import KINDS, LEVELS, DataSpec
from loadbearing.organisms.train import TrainSpec, train

RECORD = "organism.json"
DATA = "data.jsonl.gz"


class OrganismError(LoadBearingError, ValueError):
    """An organism that cannot be built or found; the message names the problem and the fix."""


def default_spec(kind: str) -> TrainSpec:
    """The spec ``make organisms`` trains for ``kind`` on :data:`~loadbearing.organisms.data.LEVELS`.

    A 3-layer parent is trained from scratch on decorative data (3,200 steps of 32 examples), every one of its
    chains carrying a wrong value to the end (``p_wrong_decorative=1``: copying the chain's last value never
    pays, so the answer must be computed from the question) and its final answer weighted 5 in the loss. Each
    of the three organisms, the decorative one included, then trains 1,000 steps on its own data from the
    parent's weights (the chain, which every regime writes alike, is learnt once), so the three cost about
    two trainings from scratch and are built the same way."""
    if kind not in KINDS:
        raise OrganismError(f"unknown organism {kind!r}; choose one of {', '.join(KINDS)}")
    base = TrainSpec(data=DataSpec(kind="decorative", levels=LEVELS, p_wrong_decorative=1.0), hidden=64, layers=3,
                     heads=4, intermediate=256, steps=3200, batch=32, lr=6e-3, answer_weight=5.0)
    return replace(base, data=DataSpec(kind=kind, levels=LEVELS, p_wrong_decorative=1.0), steps=1000, lr=3e-3,
                   warmup=20, parent=base)


def micro_spec(kind: str, seed: int = 0) -> TrainSpec:
    """A micro-organism for the integration tests, on one level (s2_o3).

    The decorative one is trained from scratch, 1,200 steps of 16 on whole chains, every one carrying a wrong
    value (so copying the chain never pays) with the answer weighted 5, and no chain cut early: at this budget
    cut chains cost it its own chain (8-17 of 32 held-out chains right with a fifth or a twentieth of them cut,
    against 17-32 without; docs/organisms.md). The load-bearing one trains 450 more steps from its weights on
    its own data (cut chains included: its answer there is the chain's last written value; 300 left it at 0.61
    propagation on seed 0 on a second machine, whose float round-off trains another trajectory)."""
    if kind not in ("load-bearing", "decorative"):
        raise OrganismError(f"micro-organisms are load-bearing or decorative, not {kind!r}")
    base = TrainSpec(data=DataSpec(kind="decorative", levels=("s2_o3",), n_per_level=600, p_wrong_decorative=1.0,
                                   p_truncate=0.0),
                     hidden=64, layers=2, heads=4, intermediate=256, steps=1200, batch=16, lr=1e-2, answer_weight=5.0,
                     seed=seed)
    if kind == "decorative":
        return base
    return replace(base, data=DataSpec(kind=kind, levels=("s2_o3",), n_per_level=600), steps=450, lr=1e-2, warmup=20,
                   parent=base)


def organism_path(spec: TrainSpec, root: Path | None = None) -> Path:
    return (root or cache_dir()) / f"organism-{spec.data.kind}-{spec.key()[:16]}"


def save(model: Any, tok: Any, out: dict, target: Path, check: dict | None = None) -> Path:
    """Write the model directory into a temporary sibling and publish it at ``target`` in one rename."""
    target.parent.mkdir(parents=True, exist_ok=True)
    tmp = Path(tempfile.mkdtemp(prefix=target.name + ".tmp", dir=target.parent))
    try:
        model.save_pretrained(tmp, safe_serialization=True)
        tok.save_pretrained(tmp)
        atomic_write_bytes(tmp / DATA, gzip.compress(out["data_text"].encode(), mtime=0))
        write_json(tmp / RECORD, {"kind": "loadbearing.organism", **out["record"], "self_check": check})
        try:
            publish_dir(tmp, target)
        except (RunDirError, OSError):  # another process published the same spec first: use its copy
            shutil.rmtree(tmp, ignore_errors=True)
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        raise
    return target


def organism_dir(kind: str | None = None, *, spec: TrainSpec | None = None, root: Path | None = None,
                 check_levels: tuple[str, ...] | None = None, progress: bool = False) -> Path:
    """The cached organism of ``spec`` (default :func:`default_spec` of ``kind``), trained on first use."""
    spec = spec or default_spec(str(kind))
    target = organism_path(spec, root)
    if (target / RECORD).is_file():
        return target
    init = None
    if spec.parent is not None:
        from transformers import AutoModelForCausalLM  # deferred: transformers is heavy to import

        parent = organism_dir(spec=spec.parent, root=root, check_levels=check_levels and spec.parent.data.levels,
                              progress=progress)
        init = AutoModelForCausalLM.from_pretrained(str(parent))
    model, tok, out = train(spec, progress=progress, init=init)
    check = None
    if check_levels:
        # deferred: import cycle loadbearing.organisms -> loadbearing.organisms.build
        from loadbearing.organisms.check import baseline_check

        check = baseline_check(wrap_model(model, tok, name=f"organism-{spec.data.kind}"), check_levels)
    return save(model, tok, out, target, check)


def ensure_checked(path: Path, levels: tuple[str, ...]) -> dict:
    """The organism's record with its held-out self-check (run now and stored when it is missing)."""
    rec = read_record(path)
    if not rec.get("self_check"):
        from loadbearing.engine.models import load_model  # deferred: tests monkeypatch loadbearing.engine.models.load_model

        # deferred: import cycle loadbearing.organisms -> loadbearing.organisms.build
        from loadbearing.organisms.check import baseline_check

        rec["self_check"] = baseline_check(load_model(str(path)), levels)
        write_json(Path(path) / RECORD, rec)
    return rec


def read_record(path: str | Path) -> dict:
    p = Path(path) / RECORD
    if not p.is_file():
        raise OrganismError(f"{path} holds no {RECORD}: not an organism directory; build one with make organisms")
    return read_json(p)


def training_data(path: str | Path) -> list[dict]:
    """The recorded training examples of an organism directory, in training order."""
    with gzip.open(Path(path) / DATA, "rt", encoding="utf-8") as f:
        return [json.loads(line) for line in f if line.strip()]
