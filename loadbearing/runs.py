"""The one home for reading a run directory written by ``python -m behavioural.run``.

Every later stage (labels, activations, probes, steering, gradient, browser, study) reads a run through
:class:`Run`; no other module opens ``manifest.json``, ``baselines.jsonl`` or ``continuations.jsonl`` by
name::

    from loadbearing.runs import Run
    run = Run("runs/arith")              # refuses a path that is not a run directory, in one line
    run.manifest["model"]["name"]        # the manifest, read once
    run.continuations("perturbed")       # list[Continuation], validated once (one clear error per bad line)
    run.questions()                      # question id -> Baseline (question text, gold, choices...)
    run.labels()                         # ("rule", {continuation id: "A"|"B"|"C"|None}) of the newest labelling
    run.continuations_df()               # pandas: one row per (generation, cell), A/B/C joined (loadbearing.frames)
    lm = run.load_model()                # the run's model, weights hash checked against the manifest

File names are constants here (``MANIFEST``, ``BASELINES``...). Writing stays with each stage.
"""
from __future__ import annotations

import json
import os
from functools import cached_property
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal

from loadbearing.files import RunDirError, read_json, read_jsonl
from loadbearing.records import Baseline, Continuation, Skipped

if TYPE_CHECKING:
    import pandas as pd

MANIFEST = "manifest.json"
BASELINES = "baselines.jsonl"
CONTINUATIONS = "continuations.jsonl"
SKIPPED = "skipped.jsonl"
SUMMARY = "summary.json"
LABELS_DIR = "labels"
LABELS_FILE = "labels.jsonl"
LABEL_SETTINGS = "settings.json"
# the file names every stage's directory shares (each stage's own names live here too, so a run directory's
# layout is read in one module)
RECORDS = "records.jsonl"  # a causal test's rows
SUMMARY_MD = "summary.md"  # a stage's summary as markdown
CONFIG = "config.json"  # a stage's resolved configuration
SKIPPED_STAGE = "skipped.json"  # a study stage that was skipped, with the reason
ACTIVATIONS = "activations.h5"  # the activations store
DIRECTIONS = "directions.h5"  # the probes' directions
GENERATIONS = "generations.jsonl"  # the steering sweep's generations

#: manifest statuses of a finished run ("insufficient_data": finished, but no eligible baseline)
DONE_STATUSES = ("ok", "insufficient_data", "complete")

Condition = Literal["perturbed", "control", "all"]
CONDITIONS = ("perturbed", "control", "all")


def question_key_of(record: Any) -> str:
    """The question a record belongs to: its ``question_key`` (the normalised-text hash), else its ``question_id``.

    The one statement of this rule; every stage that groups, folds, bootstraps or shards by question calls it.
    Works on dicts and on record objects.
    """
    if isinstance(record, dict):
        return str(record.get("question_key") or record.get("question_id") or "")
    return str(getattr(record, "question_key", None) or getattr(record, "question_id", None) or "")


#: what a run directory may hold before its run starts: the writer's lock, the study driver's settings
FRESH_DIR_FILES = frozenset({".lock", "study.json", "study.json.tmp", ".study.json.tmp"})


def is_fresh_dir(path: str | os.PathLike) -> bool:
    """True for an existing directory that holds no run yet (only :data:`FRESH_DIR_FILES`)."""
    p = Path(path)
    return p.is_dir() and {x.name for x in p.iterdir()} <= FRESH_DIR_FILES


def create_run_dir(path: str | os.PathLike) -> Path:
    p = Path(path)
    if is_fresh_dir(p):
        return p  # created (and locked) by this command's own writer, or by the study driver
    if p.exists():
        raise RunDirError(
            f"output directory {str(p)!r} already exists; choose a new --output-dir, or continue it with --resume {p}"
        )
    p.mkdir(parents=True)
    return p


class ModelMismatchError(RunDirError):
    """The loaded model is not the one that wrote the run."""


def _records(path: Path, cls: Any, *, required: bool) -> list:
    if not path.is_file():
        if required:
            raise RunDirError(f"{str(path)!r} not found; is {str(path.parent)!r} a run directory written by "
                              "python -m behavioural.run?")
        return []
    out = []
    for i, d in enumerate(read_jsonl(path), 1):
        if not isinstance(d, dict):
            raise RunDirError(f"{path}:{i}: record is a {type(d).__name__}, not a JSON object; fix or delete that line")
        try:
            out.append(cls.from_dict(d))
        except (TypeError, ValueError) as e:
            raise RunDirError(f"{path}:{i}: not a {cls.__name__} record ({e}); fix or delete that line") from None
    return out


class Run:
    """A run directory, read lazily and validated once. ``Run(path)`` refuses a non-run path at once."""

    def __init__(self, path: str | os.PathLike[str]):
        self.path = Path(path)
        if not self.path.is_dir():
            raise RunDirError(f"run directory {str(self.path)!r} does not exist; pass a directory written by "
                              "python -m behavioural.run")
        if not (self.path / MANIFEST).is_file():
            raise RunDirError(f"{str(self.path / MANIFEST)!r} not found; is {str(self.path)!r} a run directory "
                              "written by python -m behavioural.run?")

    def __repr__(self) -> str:
        return f"Run({str(self.path)!r})"

    # ---------------------------------------------------------------- files
    def file(self, name: str) -> Path:
        return self.path / name

    @cached_property
    def manifest(self) -> dict[str, Any]:
        return read_json(self.path / MANIFEST)

    @property
    def status(self) -> str | None:
        return self.manifest.get("status")

    @property
    def complete(self) -> bool:
        return self.status in DONE_STATUSES

    def require_complete(self, *, allow_incomplete: bool = False, flag: str = "--allow-incomplete") -> None:
        """Refuse a run whose manifest says it has not finished (unless the user asked for it by name)."""
        if not self.complete and not allow_incomplete:
            raise RunDirError(f"run {str(self.path)!r} has status {self.status!r}: it has not finished; finish it with "
                              f"python -m behavioural.run --resume {self.path}, or pass {flag}")

    @property
    def model_spec(self) -> dict[str, Any]:
        m = self.manifest.get("model") or {}
        return {"name": m} if isinstance(m, str) else dict(m)

    @property
    def weights_hash(self) -> str | None:
        return self.model_spec.get("weights_hash")

    @cached_property
    def _baselines(self) -> list[Baseline]:
        return _records(self.path / BASELINES, Baseline, required=True)

    @cached_property
    def _continuations(self) -> list[Continuation]:
        recs = _records(self.path / CONTINUATIONS, Continuation, required=False)
        seen: set[str] = set()
        for c in recs:
            if c.id in seen:
                raise RunDirError(f"{self.path / CONTINUATIONS}: duplicate continuation id {c.id!r} (two writers?); "
                                  f"repair the run with python -m behavioural.run --resume {self.path}")
            seen.add(c.id)
        return recs

    def baselines(self) -> list[Baseline]:
        return list(self._baselines)

    def continuations(self, condition: Condition = "all", *, required: bool = False) -> list[Continuation]:
        """Continuation records, optionally one condition; ``required`` refuses an empty result."""
        if condition not in CONDITIONS:
            raise RunDirError(f"unknown condition {condition!r}; choose {', '.join(CONDITIONS)}")
        recs = [c for c in self._continuations if condition == "all" or c.condition == condition]
        if required and not recs:
            what = "continuations" if condition == "all" else f"{condition} continuations"
            raise RunDirError(f"{str(self.path / CONTINUATIONS)!r} holds no {what} (no eligible baselines, or the run "
                              "is still at the baseline stage); run or --resume python -m behavioural.run first")
        return recs

    def continuation_dicts(self, condition: Condition = "all", *, required: bool = False) -> list[dict[str, Any]]:
        return [c.to_dict() for c in self.continuations(condition, required=required)]

    def continuations_df(self, explode_memberships: bool = True, labels: str | None = "newest",
                         condition: Condition = "all") -> pd.DataFrame:
        """The continuations as a pandas DataFrame, A/B/C joined: :func:`loadbearing.frames.continuations_df`."""
        from loadbearing.frames import continuations_df  # deferred: import cycle loadbearing.frames -> loadbearing.runs

        return continuations_df(self, explode_memberships=explode_memberships, labels=labels, condition=condition)

    def baselines_df(self) -> pd.DataFrame:
        """The baselines as a pandas DataFrame: :func:`loadbearing.frames.baselines_df`."""
        from loadbearing.frames import baselines_df  # deferred: import cycle loadbearing.frames -> loadbearing.runs

        return baselines_df(self)

    def skipped(self) -> list[Skipped]:
        return _records(self.path / SKIPPED, Skipped, required=False)

    def summary(self) -> dict[str, Any] | None:
        p = self.path / SUMMARY
        return read_json(p) if p.is_file() else None

    # ---------------------------------------------------------------- questions
    def questions(self) -> dict[str, Baseline]:
        """Question id -> its baseline record (question text, gold, task, difficulty)."""
        return {b.question_id: b for b in self._baselines}

    def question_texts(self) -> dict[str, str]:
        return {b.question_id: b.question for b in self._baselines}

    # ---------------------------------------------------------------- labels
    def labelling_dir(self, name: str | None = None) -> Path | None:
        """``labels/<name>`` (default: the newest complete labelling), or None when there is none."""
        root = self.path / LABELS_DIR
        if name:
            d = root / name
            if not (d / LABELS_FILE).is_file():
                raise RunDirError(f"labelling {str(d)!r} not found; run python -m behavioural.labels.stage {self.path} first "
                                  "or fix the labelling name")
            return d
        best: tuple[str, Path] | None = None
        for s_path in sorted(root.glob(f"*/{LABEL_SETTINGS}")) if root.is_dir() else []:
            try:
                s = json.loads(s_path.read_text(encoding="utf-8"))
            except ValueError:
                continue  # a labelling cut off while writing its settings is not complete
            if isinstance(s, dict) and s.get("status") == "ok" and (best is None or s.get("created", "") >= best[0]):
                best = (s.get("created", ""), s_path.parent)
        return best[1] if best else None

    def labels(self, name: str | None = None) -> tuple[str | None, dict[str, str | None]]:
        """(labelling name, continuation id -> final label "A"|"B"|"C"|None); ``(None, {})`` when unlabelled."""
        d = self.labelling_dir(name)
        if d is None:
            return None, {}
        out: dict[str, str | None] = {}
        path = d / LABELS_FILE
        for i, r in enumerate(read_jsonl(path), 1):
            if not isinstance(r, dict) or "id" not in r:
                raise RunDirError(f"{path}:{i}: label record has no 'id'; fix or delete that line, or relabel")
            lab = r.get("label")
            if lab not in ("A", "B", "C", None):
                raise RunDirError(f"{path}:{i}: continuation {r['id']!r} has label {lab!r}; expected A, B, C or null")
            out[str(r["id"])] = lab
        return d.name, out

    # ---------------------------------------------------------------- the run's model
    def load_model(self, name: str | None = None, **overrides: Any):
        """Load the model that wrote this run (same name, revision, quantisation, dtype) and check its weights.

        ``name`` overrides the model (its weights must still match); ``overrides`` (device, dtype...) go to
        :func:`loadbearing.engine.models.load_model`.
        """
        from loadbearing.engine.models import load_model  # deferred: tests monkeypatch loadbearing.engine.models.load_model

        m = self.model_spec
        name = name or m.get("name")
        if not name:
            raise RunDirError(f"{self.path / MANIFEST} names no model; pass --model")
        kw: dict[str, Any] = {}
        for key, src in (("quantize", "quantize"), ("revision", "revision"), ("dtype", "dtype_requested")):
            if m.get(src):
                kw[key] = m[src]
        kw.update({k: v for k, v in overrides.items() if v is not None})
        lm = load_model(name, **kw)
        self.check_model(lm)
        return lm

    def check_model(self, lm: Any, *, allow_unverified: bool = True) -> str:
        """Refuse a model whose weights hash differs from the run's; returns "verified" or "unverified"."""
        want, have = self.weights_hash, getattr(lm, "weights_hash", None)
        if want and have and want != have:
            raise ModelMismatchError(
                f"mismatched model: run {str(self.path)!r} was generated with weights {want[:16]}... "
                f"({self.model_spec.get('name')!r}) but the loaded model {getattr(lm, 'name', '?')!r} has "
                f"{have[:16]}...; use the run's model (omit --model)")
        if want and not have and not allow_unverified:
            raise ModelMismatchError(f"the run records weights hash {want[:16]}... but the loaded model has none, so it "
                                     "cannot be verified; use the run's model (omit --model)")
        return "verified" if want and have else "unverified"


__all__ = ["Run", "ModelMismatchError", "DONE_STATUSES", "MANIFEST", "BASELINES", "CONTINUATIONS", "SKIPPED", "SUMMARY",
           "LABELS_DIR", "LABELS_FILE", "CONDITIONS"]
