"""The part files of an unfinished activation store: one atomic ``part-NNNNNN.npz`` per committed batch.

    <store>.parts/meta.json          the header: layers, positions, d_model, dtype, attributes
    <store>.parts/part-000000.npz    one batch: acts/<position>, spans/<position>, rows (JSON bytes)

Each file is written through :func:`loadbearing.files.atomic_write_bytes` (temp name, fsync, rename), so a
part either exists whole or not at all; a SIGKILL at any moment loses at most the batch being written.
"""
from __future__ import annotations

import json
import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import numpy as np

from activations.assemble import Block
from activations.schema import KIND, META, StoreError
from loadbearing.files import atomic_write_bytes

_PART = re.compile(r"^part-(\d{6})\.npz$")


def part_path(parts: Path, index: int) -> Path:
    return parts / f"part-{index:06d}.npz"


def write_meta(parts: Path, header: dict) -> None:
    atomic_write_bytes(parts / META, json.dumps(header).encode())


def write_part(parts: Path, index: int, arrays: dict[str, np.ndarray]) -> None:
    """Commit one batch's arrays as part ``index`` (durable when this returns)."""
    atomic_write_bytes(part_path(parts, index), lambda f: np.savez(f, **arrays))  # type: ignore[arg-type]


def read_meta(parts: Path) -> dict[str, Any]:
    try:
        meta = json.loads((parts / META).read_text(encoding="utf-8"))
    except FileNotFoundError:
        raise StoreError(f"{parts} holds no {META} (not an unfinished activation store); delete it to start over") from None
    except (ValueError, UnicodeDecodeError) as e:
        raise StoreError(f"{parts / META} is damaged ({e}); delete {parts} to start over") from None
    if not isinstance(meta, dict) or meta.get("kind") != KIND or "layers" not in meta:
        raise StoreError(f"{parts / META} is not an activation store header; delete {parts} to start over")
    return meta


def list_parts(parts: Path) -> list[Path]:
    found = sorted((int(m.group(1)), p) for p in parts.iterdir() if (m := _PART.match(p.name)))
    for want, (have, p) in enumerate(found):
        if want != have:
            raise StoreError(f"{parts}: part {want:06d} is missing (found {p.name}); the store was edited by hand; "
                             f"delete {parts} to start over")
    return [p for _, p in found]


def _load_npz(path: Path):
    try:
        return np.load(path, allow_pickle=False)
    except Exception as e:  # noqa: BLE001 - a damaged part file, whatever numpy raises
        raise StoreError(f"{path} is damaged ({type(e).__name__}: {e}); delete it to recompute its rows with "
                         f"--resume") from None


def read_part_rows(path: Path) -> list[dict[str, Any]]:
    with _load_npz(path) as z:
        try:
            return json.loads(z["rows"].tobytes().decode("utf-8"))
        except Exception as e:  # noqa: BLE001
            raise StoreError(f"{path} is damaged ({e}); delete it to recompute its rows with --resume") from None


def count_rows(parts: Path) -> int:
    return sum(len(read_part_rows(p)) for p in list_parts(parts))


def iter_parts(parts: Path, positions: list[str]) -> Iterator[Block]:
    """Yield ``(rows, acts, spans)`` per committed part, in commit order, one part in memory at a time."""
    for path in list_parts(parts):
        with _load_npz(path) as z:
            rows = json.loads(z["rows"].tobytes().decode("utf-8"))
            yield rows, {p: z[f"acts/{p}"] for p in positions}, {p: z[f"spans/{p}"] for p in positions}


__all__ = ["count_rows", "iter_parts", "list_parts", "part_path", "read_meta", "read_part_rows", "write_meta",
           "write_part"]
