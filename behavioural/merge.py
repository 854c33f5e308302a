"""Merge the shards of one behavioural run into the run directory an unsharded run would have written.

    python -m behavioural.merge runs/g-0 runs/g-1 runs/g-2 runs/g-3 --output-dir runs/g

Each part is a run directory written with ``--shard I/N`` (see :mod:`loadbearing.shards`). The merge
refuses parts that are not shards 0..N-1 of one run (same protocol version, result settings, model weights
and full question sample), or that have not finished (``--allow-incomplete`` overrides that, and is
recorded). Records are put back in the full sample's question order (within a question, in the part's own
order, which is the order the protocol plans them), so the merged ``baselines.jsonl``,
``continuations.jsonl`` and ``skipped.jsonl`` equal an unsharded run's, row for row; the summary is
recomputed from the merged records. The output is written to a temporary directory and renamed into place,
so a refused or interrupted merge leaves nothing behind.
"""
from __future__ import annotations

import argparse
import hashlib
import json
import os
import shutil
import sys
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from loadbearing import files as rundir
from loadbearing import provenance as provenance_mod
from loadbearing.cli import run_cli
from loadbearing.runs import BASELINES, CONTINUATIONS, MANIFEST, SKIPPED, SUMMARY, Run
from loadbearing.shards import MergeError, Shard, check_complementary
from loadbearing.stage.parser import config_from_parsed, option, parser_from_config

#: settings that may differ between parts (they do not change results)
NON_RESULT = {"shard", "batch_size", "backend"}


def _shard_info(run: Run) -> dict[str, Any]:
    info = run.manifest.get("shard")
    if not isinstance(info, dict) or "index" not in info or "count" not in info:
        raise MergeError(f"{run.path}: its manifest records no shard; merge only run directories written with --shard I/N")
    if not isinstance(info.get("sample_ids"), list):
        raise MergeError(f"{run.path}: its manifest's shard entry has no sample_ids (written by an older version); "
                         "re-run that shard")
    return info


def _result_settings(run: Run) -> dict[str, Any]:
    return {k: v for k, v in (run.manifest.get("settings") or {}).items() if k not in NON_RESULT}


def check_parts(runs: Sequence[Run], *, allow_incomplete: bool = False) -> list[str]:
    """Validate the parts; returns the full sample's question ids in order."""
    if not runs:
        raise MergeError("no parts given; pass the shard run directories")
    infos = [_shard_info(r) for r in runs]
    check_complementary([Shard(int(i["index"]), int(i["count"])) for i in infos], [str(r.path) for r in runs])
    ref = runs[0]
    for r, info in zip(runs, infos):
        if not allow_incomplete and not r.complete:
            raise MergeError(f"{r.path} has status {r.status!r} (not finished); finish it with python -m behavioural.run "
                             f"--resume {r.path}, or pass --allow-incomplete")
        for what, a, b in (("protocol version", ref.manifest.get("protocol_version"), r.manifest.get("protocol_version")),
                           ("settings", _result_settings(ref), _result_settings(r)),
                           ("model weights", ref.weights_hash, r.weights_hash),
                           ("question sample", infos[0]["sample_ids"], info["sample_ids"])):
            if a != b:
                raise MergeError(f"{r.path} and {ref.path} differ in {what}; they are not shards of one run")
    return list(infos[0]["sample_ids"])


def _ordered(rows: list[dict[str, Any]], order: dict[str, int], path: Path) -> list[dict[str, Any]]:
    for r in rows:
        if r.get("question_id") not in order:
            raise MergeError(f"{path}: record for question {r.get('question_id')!r} is not in the run's question sample")
    # stable sort: within a question the part's own (planned) order is kept
    return sorted(rows, key=lambda r: order[r["question_id"]])


def merge_runs(parts: Sequence[str | os.PathLike[str]], output: str | os.PathLike[str], *,
               allow_incomplete: bool = False) -> Path:
    """Merge shard run directories into ``output`` (which must not exist); returns its path."""
    out = Path(output)
    if out.exists():
        raise MergeError(f"output {str(out)!r} already exists; choose a new --output-dir")
    runs = [Run(p) for p in parts]
    sample_ids = check_parts(runs, allow_incomplete=allow_incomplete)
    order = {qid: i for i, qid in enumerate(sample_ids)}
    files: dict[str, list[dict[str, Any]]] = {}
    for name in (BASELINES, CONTINUATIONS, SKIPPED):
        rows: list[dict[str, Any]] = []
        for r in runs:
            rows += rundir.read_jsonl(r.path / name)
        files[name] = _ordered(rows, order, out / name)
    ids = [c.get("id") for c in files[CONTINUATIONS]]
    if len(set(ids)) != len(ids):
        raise MergeError("two parts hold the same continuation id; the parts overlap - re-run the shards")

    from behavioural.summary import summarise  # deferred: behavioural.summary loads numpy

    settings = dict(runs[0].manifest.get("settings") or {})
    summary = summarise(files[BASELINES], files[CONTINUATIONS], files[SKIPPED], seed=int(settings.get("seed") or 0))
    status = "ok" if summary.get("eligible", 0) else "insufficient_data"
    # in this order (the keys of summary.json): status, protocol_version, run_dir
    summary["status"], summary["protocol_version"] = status, runs[0].manifest.get("protocol_version")  # type: ignore[typeddict-item]
    summary["run_dir"] = str(out)
    manifest = json.loads(json.dumps(runs[0].manifest))
    info = manifest.pop("shard")
    manifest["settings"] = settings | {"shard": None}
    ds = manifest.setdefault("dataset", {})
    ds.update(n_questions=len(sample_ids),
              sample_ids_sha256=hashlib.sha256("\n".join(sample_ids).encode()).hexdigest())
    if info.get("dataset_fingerprint"):
        ds["fingerprint"] = info["dataset_fingerprint"]
    manifest.update(status=status, updated=provenance_mod.now(), allow_incomplete=allow_incomplete,
                    merged_from=[{"path": str(r.path), "shard": f"{r.manifest['shard']['index']}/{r.manifest['shard']['count']}",
                                  "manifest_sha256": rundir.file_sha256(r.path / MANIFEST), "status": r.status}
                                 for r in runs])
    tmp = out.with_name(f".{out.name}.merging-{os.getpid()}")
    if tmp.exists():
        shutil.rmtree(tmp)
    tmp.mkdir(parents=True)
    try:
        for name, rows in files.items():
            with rundir.JsonlWriter(tmp / name, fsync=False) as w:
                for row in rows:
                    w.write(row)
        rundir.write_json(tmp / SUMMARY, summary)
        rundir.write_json(tmp / MANIFEST, manifest)
        rundir.publish_dir(tmp, out)
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        raise
    return out


@dataclass(frozen=True)
class MergeConfig:
    """What ``python -m behavioural.merge`` accepts (its parser is built from these fields)."""

    parts: tuple[str, ...] = option(positional=True, nargs="+", parse=tuple, group="inputs",
                                    help="the shard run directories (written with --shard I/N)")
    allow_incomplete: bool = option(False, group="inputs", help="merge parts that have not finished (recorded)")
    output: str = option(flag="--output-dir", deprecated=("--output",), metavar="DIR", required=True, group="output",
                         help="the merged run directory (must not exist)")


def build_parser() -> argparse.ArgumentParser:
    """The command's parser, built from :class:`MergeConfig`."""
    return parser_from_config(MergeConfig, prog="python -m behavioural.merge", description=__doc__.split("\n\n")[0],
                              groups=("inputs", "output"))


def main(argv: Sequence[str] | None = None) -> int:
    config: MergeConfig = config_from_parsed(MergeConfig, build_parser().parse_args(argv))

    def body() -> int:
        out = merge_runs(config.parts, config.output, allow_incomplete=config.allow_incomplete)
        print(f"merged {len(config.parts)} shards into {out}")
        return 0

    return run_cli(body)


if __name__ == "__main__":
    sys.exit(main())
