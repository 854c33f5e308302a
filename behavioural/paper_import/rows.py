"""Reading the paper's rows (a local JSON/JSONL file, the annotation-sheet CSV, or the Hugging Face release) and
the importer's options (the BBH task map, published baseline accuracy)."""
from __future__ import annotations

import csv
import hashlib
import io
import json
import sys
from pathlib import Path
from typing import Any

from loadbearing.errors import LoadBearingError
from loadbearing.questions.data import BBH_TASKS

HUB_ID = "ReneeJia/cot-load-bearingness"

__all__ = ["HUB_ID", "RELEASE_ROWS", "PaperImportError", "release_files", "bbh_task_map", "parse_accuracy", "read_rows"]


class PaperImportError(LoadBearingError, ValueError):
    """A bad source file or option; the message names the row or option and the fix."""


#: where a local copy of the release (a clone of the dataset repository) keeps its continuation rows
RELEASE_ROWS = ("data/continuations", "continuations")


def release_files(root: Path) -> list[Path]:
    """The continuation files (``*.jsonl``) of a local copy of the release, in name order; [] when it has none."""
    for sub in RELEASE_ROWS:
        files = sorted((root / sub).glob("*.jsonl"))
        if files:
            return files
    return []


def read_rows(src: str, *, config: str | None = None, split: str | None = None) -> tuple[list[dict[str, Any]], dict[str, Any]]:
    """Rows and a provenance dict from a local JSON/JSONL file, a local copy of the release (a directory holding
    ``data/continuations/*.jsonl``, as the Hugging Face repository lays it out), or from the hub when ``src`` is
    hub/hf:..."""
    if src == "hub" or src.startswith("hf:"):
        return _read_hub(src[3:] if src.startswith("hf:") else HUB_ID, config, split)
    if Path(src).is_dir():
        files = release_files(Path(src))
        if not files:
            raise PaperImportError(f"source {src!r} is a directory without {RELEASE_ROWS[0]}/*.jsonl; pass a local copy "
                                   f"of the release ({HUB_ID}) or one of its row files")
        parts = [read_rows(str(f)) for f in files]
        return ([r for rows, _ in parts for r in rows],
                {"source": str(src), "files": [prov for _, prov in parts], "n_rows": sum(len(r) for r, _ in parts),
                 "sha256": hashlib.sha256("".join(prov["sha256"] for _, prov in parts).encode()).hexdigest()})
    p = Path(src)
    if not p.is_file():
        raise PaperImportError(f"source {src!r} not found; pass a JSON/JSONL file of the paper's rows, or 'hub'")
    raw = p.read_bytes()
    text = raw.decode("utf-8", errors="replace").strip()
    rows: list[Any]
    if p.suffix.lower() == ".csv" or text.lstrip('"').startswith("annotation_id"):
        try:
            rows = [dict(r) for r in csv.DictReader(io.StringIO(text))]
        except csv.Error as e:
            raise PaperImportError(f"{src}: not a readable CSV ({e}); pass the annotation sheet as released") from None
        if rows and "annotation_id" not in rows[0]:
            raise PaperImportError(f"{src}: a CSV without an annotation_id column; pass the paper's annotation sheet "
                                   "(data_to_label_*.csv) or a JSON/JSONL file of its rows")
    elif text.startswith("["):
        try:
            rows = json.loads(text)
        except ValueError as e:
            raise PaperImportError(f"{src}: not valid JSON ({e}); pass the file as released") from None
    else:
        rows = []
        for i, line in enumerate(text.splitlines(), 1):
            if not line.strip():
                continue
            try:
                rows.append(json.loads(line))
            except ValueError as e:
                raise PaperImportError(f"{src}:{i}: not a JSON line ({e}); fix or delete that line") from None
    return rows, {"source": str(p), "sha256": hashlib.sha256(raw).hexdigest(), "n_rows": len(rows)}


def _read_hub(repo: str, config: str | None,  # pragma: no cover
              split: str | None) -> tuple[list[dict[str, Any]], dict[str, Any]]:
    import datasets  # deferred: datasets is heavy to import

    if config is None:
        names = datasets.get_dataset_config_names(repo)
        config = next((n for n in names if "continuation" in n), names[0] if names else None)
        print(f"hub: {repo} configs {names}; using {config!r} (pass --config to choose)", file=sys.stderr)
    ds = datasets.load_dataset(repo, config)
    splits = [split] if split else list(ds)
    rows = [dict(r) for s in splits for r in ds[s]]
    rev = getattr(getattr(ds[splits[0]], "info", None), "version", None)
    return rows, {"source": f"hf:{repo}", "config": config, "splits": splits, "n_rows": len(rows),
                  "version": str(rev) if rev else None}


def bbh_task_map(map_file: str | None, data_dir: str | None) -> dict[str, str]:
    """Paper BBH id (``bbh_<n>``) -> task: from the paper's mapping file, or derived from the BBH files
    (the paper numbered the examples of all tasks concatenated in alphabetical task order)."""
    if map_file:
        try:
            m = json.loads(Path(map_file).read_text(encoding="utf-8"))
        except (OSError, ValueError) as e:
            raise PaperImportError(f"--bbh-task-map {map_file}: cannot read a JSON object ({e})") from None
        if not isinstance(m, dict):
            raise PaperImportError(f"--bbh-task-map {map_file}: expected a JSON object id -> task")
        return {str(k): str(v) for k, v in m.items()}
    if not data_dir:
        return {}

    root = Path(data_dir)
    root = root / "bbh" if (root / "bbh").is_dir() else root
    out, n = {}, 0
    for task in sorted(BBH_TASKS):
        f = root / f"{task}.json"
        if not f.is_file():
            raise PaperImportError(f"--data-dir: {f} not found; the BBH task map needs every task file (or pass --bbh-task-map)")
        for _ in json.loads(f.read_text(encoding="utf-8"))["examples"]:
            out[f"bbh_{n}"] = task
            n += 1
    return out


def parse_accuracy(spec: str | None) -> dict[str, dict[str, Any]]:
    """``gsm8k=0.865,bbh=57.9`` -> {cell: {"rate": 0.865, "source": "--baseline-accuracy"}} (percent accepted)."""
    out: dict[str, dict[str, Any]] = {}
    for part in (spec or "").split(","):
        if not part.strip():
            continue
        if "=" not in part:
            raise PaperImportError(f"--baseline-accuracy: {part!r} is not NAME=VALUE; e.g. gsm8k=0.865,bbh=0.579")
        k, v = part.split("=", 1)
        try:
            x = float(v)
        except ValueError:
            raise PaperImportError(f"--baseline-accuracy: {v!r} is not a number") from None
        x = x / 100 if x > 1 else x
        if not 0 <= x <= 1:
            raise PaperImportError(f"--baseline-accuracy: {part!r} is outside 0..1 (or 0..100%)")
        out[k.strip()] = {"rate": x, "source": "--baseline-accuracy"}
    return out
