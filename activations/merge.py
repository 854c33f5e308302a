"""Merge the shards of an activation store into the store one unsharded run writes.

    python -m activations.merge RUN/activations.shard-0-of-2.h5 RUN/activations.shard-1-of-2.h5 \
        --output-file RUN/activations.h5

Each shard comes from ``python -m activations.cache RUN --shard I/N`` (a deterministic partition by question
key, so shards can run on different machines or GPUs, e.g. one Slurm array task per shard). The merge checks
that the shards are complete, come from the same run, model, engine, layers, positions and labels, cover
every shard ``0..N-1`` exactly once and share no continuation; it then writes the rows in the run's own order
(``source_index``), so the result equals, row for row, the store of one unsharded run. Memory stays at one
64-row block; the output appears only when it is whole (atomic rename), under a one-writer lock.
"""
from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from activations.assemble import Block, publish_h5
from activations.reader import open_store
from activations.schema import CHUNK_ROWS, parts_dir
from loadbearing.cli import run_cli
from loadbearing.files import RunDirError
from loadbearing.locks import output_lock
from loadbearing.shards import MergeError, ShardError, parse_shard
from loadbearing.stage.parser import config_from_parsed, option, parser_from_config

MATCH_ATTRS = ("model_id", "weights_hash", "engine", "source_run", "source_manifest_sha256",
               "source_continuations_sha256", "label_source", "decoder_layers_path", "dtype", "d_model", "leaky")
MATCH_SETTINGS = ("layers", "positions", "engine", "dtype", "conditions", "labels", "allow_outcome_tokens", "padding",
                  "layer_semantics", "decoder_layers_path", "quantize", "model_dtype")


def _row_dicts(st: Any) -> list[dict[str, Any]]:
    df = st.rows
    out = []
    for rec in df.to_dict("records"):
        out.append({k: (None if isinstance(v, float) and np.isnan(v) else v) for k, v in rec.items()})
    return out


def merge_stores(parts: Sequence[str | Path], output: str | Path) -> Path:
    """Merge complete shard stores into ``output``; returns its path."""
    paths = [Path(p) for p in parts]
    out = Path(output)
    if not paths:
        raise MergeError("no shards given; pass the shard stores written with python -m activations.cache --shard I/N")
    if len({p.resolve() for p in paths}) != len(paths):
        raise MergeError("the same shard is given twice; pass each shard once")
    if out.exists() or parts_dir(out).exists():
        raise MergeError(f"{out} already exists; choose another --output-file or delete it")
    if any(out.resolve() == p.resolve() for p in paths):
        raise MergeError(f"--output-file {out} is one of the shards; choose another --output-file")
    stores = []
    try:
        for p in paths:
            stores.append(open_store(p))
        first = stores[0]
        seen_shards: dict[int, Path] = {}
        total = None
        for st in stores:
            try:
                sh = parse_shard(st.attrs.get("shard") or None)
            except ShardError as e:
                raise MergeError(f"{st.path}: its shard attribute is damaged ({e}); re-cache that shard") from None
            if sh is None:
                raise MergeError(f"{st.path} is not a shard (no shard attribute); merge only stores written with "
                                 "--shard I/N")
            if total is not None and sh.count != total:
                raise MergeError(f"{st.path} is shard {sh} but another is of {total}; merge shards of one split")
            total = sh.count
            if sh.index in seen_shards:
                raise MergeError(f"{st.path} and {seen_shards[sh.index]} are both shard {sh}")
            seen_shards[sh.index] = st.path
            for k in MATCH_ATTRS:
                if st.attrs.get(k) != first.attrs.get(k):
                    raise MergeError(f"{st.path} differs from {first.path} in {k} ({st.attrs.get(k)!r} vs "
                                     f"{first.attrs.get(k)!r}); merge shards of one caching run")
            if st.layers != first.layers or st.positions != first.positions:
                raise MergeError(f"{st.path} has layers/positions {st.layers}/{st.positions}, {first.path} has "
                                 f"{first.layers}/{first.positions}; merge shards of one caching run")
            for k in MATCH_SETTINGS:
                if st.attrs["settings"].get(k) != first.attrs["settings"].get(k):
                    raise MergeError(f"{st.path} differs from {first.path} in setting {k}; merge shards of one caching run")
        assert total is not None
        missing = sorted(set(range(total)) - set(seen_shards))
        if missing:
            raise MergeError(f"shard(s) {', '.join(f'{i}/{total}' for i in missing)} missing; cache them with "
                             f"python -m activations.cache RUN --shard I/{total}, then merge all {total}")
        rows = [_row_dicts(st) for st in stores]
        order: list[tuple[int, int, int]] = []  # (source_index, store, local row)
        ids: dict[str, Path] = {}
        for si, (st, rs) in enumerate(zip(stores, rows)):
            for li, r in enumerate(rs):
                if r["continuation_id"] in ids:
                    raise MergeError(f"continuation {r['continuation_id']!r} is in both {ids[r['continuation_id']]} "
                                     f"and {st.path}")
                ids[r["continuation_id"]] = st.path
                if r.get("source_index") is None or int(r["source_index"]) < 0:
                    raise MergeError(f"{st.path} has no source_index column (cached by an older version); re-cache it")
                order.append((int(r["source_index"]), si, li))
        order.sort()
        attrs = {k: v for k, v in first.attrs.items()
                 if k not in ("schema_version", "kind", "complete", "n_rows", "layers", "positions", "d_model", "dtype")}
        attrs["settings"] = {**first.attrs["settings"], "shard": None}
        attrs["shard"] = ""
        attrs["merged_from"] = [str(p) for p in paths]
        attrs.pop("cache_seconds_last_session", None)
        attrs.pop("batching", None)  # each shard's own batch size (loadbearing.engine.oom); kept in the shards
        header = {"layers": first.layers, "positions": first.positions, "d_model": first.d_model,
                  "dtype": first.attrs["dtype"], "attrs": json.loads(json.dumps(attrs, default=str))}

        def blocks() -> Iterator[Block]:
            for s in range(0, len(order), CHUNK_ROWS):
                chunk = order[s : s + CHUNK_ROWS]
                acts = {p: np.empty((len(chunk), len(first.layers), first.d_model), dtype=first.attrs["dtype"])
                        for p in first.positions}
                spans = {p: np.empty((len(chunk), 2), dtype=np.int32) for p in first.positions}
                for si in sorted({c[1] for c in chunk}):
                    where = [k for k, c in enumerate(chunk) if c[1] == si]
                    local = [chunk[k][2] for k in where]  # increasing: a shard keeps the run's order
                    for p in first.positions:
                        acts[p][where] = stores[si].get(f"acts/{p}", np.s_[local])
                        spans[p][where] = stores[si].get(f"spans/{p}", np.s_[local])
                yield [rows[c[1]][c[2]] for c in chunk], acts, spans

        out.parent.mkdir(parents=True, exist_ok=True)
        try:
            with output_lock(out, command="python -m activations.merge"):
                publish_h5(out, header, len(order), blocks())
        except RunDirError as e:
            raise MergeError(str(e)) from None
    finally:
        for st in stores:
            st.close()
    return out


@dataclass(frozen=True)
class StoreMergeConfig:
    """What ``python -m activations.merge`` accepts (its parser is built from these fields)."""

    parts: tuple[str, ...] = option(positional=True, nargs="+", parse=tuple, group="inputs",
                                    help="the shard stores (.h5), all N of them, in any order")
    output: str = option(flag="--output-file", deprecated=("--output",), metavar="FILE", required=True,
                         group="output", help="the merged store to write (must not exist)")


def build_parser() -> argparse.ArgumentParser:
    """The command's parser, built from :class:`StoreMergeConfig`."""
    return parser_from_config(StoreMergeConfig, prog="python -m activations.merge", groups=("inputs", "output"),
                              description="Merge activation-store shards (--shard I/N) into the store of one unsharded "
                                          "run.")


def main(argv: Sequence[str] | None = None) -> int:
    config: StoreMergeConfig = config_from_parsed(StoreMergeConfig, build_parser().parse_args(argv))

    def body() -> None:
        out = merge_stores(config.parts, config.output)
        with open_store(out) as st:
            print(f"wrote {out}: {st.n_rows} rows from {len(config.parts)} shards")

    return run_cli(body)


__all__ = ["MergeError", "main", "merge_stores"]

if __name__ == "__main__":
    sys.exit(main())
