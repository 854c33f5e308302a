"""Cache the hidden states of a run's continuations into an HDF5 activation store.

    python -m activations.cache RUN_DIR [--layers all|LIST] [--token-positions prefix_last,edit_mean,edit_last]
        [--engine nnsight|transformer-lens|hf] [--dtype float16|float32] [--batch-size N] [--output-file FILE]
        [--resume] [--labelling NAME] [--allow-outcome-tokens] [--conditions perturbed|control|all] [--model NAME]
        [--device cpu|cuda|cuda:N|auto] [--shard I/N] [--allow-incomplete]

Reads the run through :class:`loadbearing.runs.Run` (``continuations.jsonl``, the newest labelling under
``labels/``) and writes ``RUN_DIR/activations.h5`` (layout and crash safety: :mod:`activations.store`;
inputs and positions: :mod:`activations.inputs`; engines: :mod:`activations.engines`).

* **Inputs** are rebuilt from each record's ``input_text`` alone (the exact text the model saw before it
  wrote the continuation), tokenised once with ``add_special_tokens=False``; the token count must equal the
  record's ``input_tokens``.
* **Layers** follow :mod:`loadbearing.engine.layers`: 0 = embeddings, L = output of block L-1, the last one before
  the final norm. The resolved decoder-layer module path is stored as the ``decoder_layers_path`` attribute.
* **Positions** are all before the outcome (``prefix_last``, ``edit_mean``, ``edit_last``; ``think_mean``,
  ``think_last`` for a thinking model's think block); ``continuation_mean`` and ``continuation[:N]`` (the first
  N generated tokens after the edit, ``continuation_0..N-1``: post-outcome reads, e.g. for the
  ``repair_post_outcome`` probe target) need ``--allow-outcome-tokens`` and mark the store ``leaky``.
* **Resume**: every batch is committed atomically; after an interruption (SIGKILL included) ``--resume``
  continues and gives the same store as an uninterrupted run. One writer per store (``<store>.lock``).
* **Shards**: ``--shard I/N`` caches only the questions whose key hashes to shard I (default output
  ``activations.shard-I-of-N.h5``); ``python -m activations.merge`` joins the shards into the store one
  unsharded run writes.

Everything is validated before the model is loaded; a refused command writes nothing.
"""
from __future__ import annotations

import argparse
import json
import os
import sys
import time
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

import numpy as np

from activations.engines import ENGINES, check_engine, make_engine, run_batch
from activations.inputs import (
    LAYER_SEMANTICS,
    OUTCOME_POSITIONS,
    SAFE_POSITIONS,
    CacheError,
    expand_continuation,
    is_outcome_position,
    prepare_item,
)
from activations.memory import bound_heap, release
from activations.store import StoreWriter, parts_dir
from activations.store import is_complete as _store_complete
from activations.summary import format_summary, summarize, summary_blocks  # noqa: F401  (the stage's summary, re-exported)
from loadbearing.cli import check_device as _check_device
from loadbearing.cli import run_cli
from loadbearing.engine.layers import d_model as model_width
from loadbearing.engine.layers import decoder_layers, n_layers
from loadbearing.engine.models import ModelError
from loadbearing.engine.oom import BatchSize
from loadbearing.files import RunDirError, check_jsonl_tail, file_sha256
from loadbearing.locks import output_lock
from loadbearing.options import check_layers, parse_layers, parse_token_positions
from loadbearing.provenance import package_versions
from loadbearing.runs import ACTIVATIONS, CONTINUATIONS, MANIFEST, Run, question_key_of
from loadbearing.shards import Shard, parse_shard
from loadbearing.stage.parser import config_from_parsed, option, parser_from_config

DEFAULT_OUTPUT = ACTIVATIONS
CONDITIONS = ("perturbed", "control", "all")
DTYPES = ("float16", "float32")
#: the help groups of ``python -m activations.cache`` (its parser is built from :class:`CacheConfig`)
_WHAT, _MODEL = "what is cached", "model and engine"
#: what the out-of-memory error at batch size 1 tells the user to change
OOM_FIX = ("cache fewer --layers (the nnsight engine stops after the last one), or on a device with more memory "
           "(--device)")


@dataclass
class CacheConfig:
    """Settings of one caching run (the CLI parses into this; the study builds it directly)."""

    run_dir: str | Path = option(positional=True, group="inputs",
                                 help="run directory written by python -m behavioural.run (reads continuations.jsonl)")
    layers: str | Sequence[int] | None = option("all", group=_WHAT, help="HF hidden_states indices: 'all' (default), a "
                                                "list '0,6,12,-1' or a range '10-20' (0 = embeddings, L = after block L-1)")
    positions: str | Sequence[str] | None = option(
        "prefix_last", flag="--token-positions", deprecated=("--positions",), metavar="LIST", group=_WHAT,
        help=f"comma-separated token positions: {', '.join(SAFE_POSITIONS)} (default prefix_last); "
             f"{', '.join(OUTCOME_POSITIONS)} and continuation[:N] (the first N tokens generated after the edit, one "
             f"position each) need --allow-outcome-tokens")
    engine: str = option("nnsight", choices=ENGINES, group=_MODEL,
                         help="nnsight (default), transformer-lens (TransformerBridge) or hf (output_hidden_states)")
    dtype: str = option("float32", choices=DTYPES, group=_WHAT, help="stored dtype (default float32)")
    batch_size: int = option(8, type=int, group=_MODEL, help="rows per forward pass (default 8); memory scales with it")
    output: str | Path | None = option(None, flag="--output-file", deprecated=("--output",), metavar="FILE",
                                       group="output", help=f"store path (default RUN_DIR/{DEFAULT_OUTPUT}; "
                                                            "RUN_DIR/activations.shard-I-of-N.h5 for a shard)")
    resume: bool = option(False, group="output", help="continue an interrupted store (stored rows are skipped)")
    #: labelling name under RUN_DIR/labels/; None = newest; "none" = no label3
    labels: str | None = option(None, flag="--labelling", deprecated=("--labels",), metavar="NAME", group="inputs",
                                help="labelling under RUN_DIR/labels/ for the A/B/C label3 column (default: the most "
                                     "recent; 'none' for no label3)")
    allow_outcome_tokens: bool = option(False, group=_WHAT, help="allow continuation_mean / continuation[:N] (tokens "
                                        "written after the edit: the outcome; post-outcome reads, not for prediction); "
                                        "marks the store leaky")
    conditions: str = option("all", choices=CONDITIONS, group="inputs",
                             help="which continuations to cache (default all: perturbed and control)")
    #: load this model instead of the manifest's (its weights must still match)
    model: str | None = option(None, group=_MODEL, help="model to load instead of the manifest's (its weights hash "
                               "must still match the run's)")
    device: str | None = option(None, group=_MODEL, help="cpu, cuda, cuda:N or auto (default: the model loader's "
                                "choice)")
    shard: str | None = option(None, group="inputs", help="I/N: cache only shard I of N (a deterministic partition by "
                               "question key); merge the shards with python -m activations.merge")
    allow_incomplete: bool = option(False, group="inputs", help="cache a run whose manifest says it has not finished")
    progress: bool = option(True, negate="--quiet", group="output", help="no progress bar")
    extra: dict[str, Any] = option(cli=False, factory=dict, help="recorded in the store's settings")


def default_output(run_dir: str | Path, shard: str | None = None) -> Path:
    """``RUN_DIR/activations.h5``, or ``RUN_DIR/activations.shard-I-of-N.h5`` for a shard."""
    sh = _shard(shard)
    name = DEFAULT_OUTPUT if sh is None else f"activations.shard-{sh.index}-of-{sh.count}.h5"
    return Path(run_dir) / name


def is_complete(path: str | os.PathLike) -> bool:
    """True when ``path`` is a finished activation store (the study's completeness test for this stage)."""
    return _store_complete(path)


def check_device(device: str | None) -> None:
    """Refuse an unknown or unavailable device in one line, listing the available ones."""
    _check_device(device)  # an unavailable device is the CLI's own one-line UsageError


def _shard(spec: str | None) -> Shard | None:
    """``--shard I/N`` (:mod:`loadbearing.shards`: the same partition by question key in every stage)."""
    return parse_shard(spec)  # a bad --shard is the shards' own one-line ShardError


def _validate(config: CacheConfig) -> tuple[str, list[str], Shard | None]:
    engine = check_engine(config.engine)
    if config.dtype not in DTYPES:
        raise CacheError(f"unknown dtype {config.dtype!r}; choose float16 or float32")
    if isinstance(config.batch_size, bool) or not isinstance(config.batch_size, int) or config.batch_size < 1:
        raise CacheError(f"--batch-size must be a whole number >= 1, got {config.batch_size!r}")
    if config.conditions not in CONDITIONS:
        raise CacheError(f"unknown --conditions {config.conditions!r}; choose {', '.join(CONDITIONS)}")
    pos = parse_token_positions(config.positions, safe=SAFE_POSITIONS, outcome=OUTCOME_POSITIONS,
                                allow_outcome_tokens=config.allow_outcome_tokens, default=("prefix_last",),
                                error=CacheError, expand=expand_continuation, expand_name="continuation[:N]")
    check_layers(config.layers, error=CacheError)
    shard = _shard(config.shard)
    check_device(config.device)
    return engine, pos, shard


def _records(config: CacheConfig):
    """(Run, [(source_index, record dict)]) for the configured conditions, refusing a bad run in one line."""
    try:
        run = Run(config.run_dir)
        _ = run.manifest
        run.require_complete(allow_incomplete=config.allow_incomplete, flag="--allow-incomplete")
        check_jsonl_tail(run.path / CONTINUATIONS, run.path)
        recs = [(i, c.to_dict()) for i, c in enumerate(run.continuations("all"))]
    except RunDirError as e:
        raise CacheError(str(e)) from None
    if not recs:
        raise CacheError(f"{str(run.path / CONTINUATIONS)!r} holds no continuations (no eligible baselines, or the "
                         f"run is still at the baseline stage); nothing to cache")
    if config.conditions != "all":
        recs = [(i, r) for i, r in recs if r.get("condition") == config.conditions]
        if not recs:
            raise CacheError(f"{str(run.path / CONTINUATIONS)!r} holds no {config.conditions} continuations")
    return run, recs


def _labels(run, name: str | None) -> tuple[dict[str, str | None], str]:
    if name is not None and name.lower() == "none":
        return {}, ""
    try:
        found, labels = run.labels(name)
    except RunDirError as e:
        raise CacheError(f"{e}, or pass --labelling none") from None
    return (labels, f"labels/{found}") if found else ({}, "")


def _check_output(out: Path, resume: bool) -> None:
    exists = out.exists() or parts_dir(out).exists()
    if exists and not resume:
        raise CacheError(f"{out} already exists; pass --resume to continue it, or --output-file another file")
    if out.is_dir():
        raise CacheError(f"--output-file {out} is a directory; give a file name such as {out / DEFAULT_OUTPUT}")
    parent = out.parent
    while not parent.exists() and parent != parent.parent:
        parent = parent.parent
    if not os.access(parent, os.W_OK):
        raise CacheError(f"cannot write {out}: {parent} is not writable; choose another --output-file")


def cache_activations(config: CacheConfig, lm: Any = None, *, max_batches: int | None = None,
                      on_batch: Callable[[int], None] | None = None) -> Path:
    """Cache the run's continuations into an activation store; returns its path.

    ``lm`` is an already-loaded :class:`loadbearing.engine.models.LoadedModel` (else the run's model is loaded); its
    weights hash must match the run's manifest. ``max_batches`` stops early leaving an unfinished store (tests
    simulate an interruption with it); ``on_batch(n_rows)`` is called after each committed batch.
    """
    engine, pos, shard = _validate(config)
    run, recs = _records(config)
    if shard is not None:
        recs = [(i, r) for i, r in recs if shard.holds(question_key_of(r))]
    label_map, label_source = _labels(run, config.labels)
    out = Path(config.output) if config.output else default_output(run.path, config.shard)
    _check_output(out, config.resume)
    try:
        if lm is None:
            lm = run.load_model(config.model, device=config.device)
        model_check = run.check_model(lm)
    except (RunDirError, ModelError) as e:
        raise CacheError(str(e)) from None
    layers_path, _ = decoder_layers(lm.model)
    lay = parse_layers(config.layers, n_layers=n_layers(lm.model), error=CacheError) or []
    d_model = model_width(lm.model)
    leaky = any(is_outcome_position(p) for p in pos)
    settings = {
        "layers": lay, "positions": pos, "engine": engine, "dtype": config.dtype, "batch_size": config.batch_size,
        "conditions": config.conditions, "labels": label_source or None,
        "allow_outcome_tokens": config.allow_outcome_tokens, "padding": "right", "layer_semantics": LAYER_SEMANTICS,
        "decoder_layers_path": layers_path, "model_check": model_check, "model_dtype": lm.dtype,
        "quantize": lm.quantize, "device": str(next(lm.model.parameters()).device), "packages": package_versions(),
        "shard": config.shard or None, **config.extra,
    }
    attrs = {
        "model_name": lm.name, "model_id": lm.model_id, "revision": lm.revision, "weights_hash": lm.weights_hash,
        "engine": engine, "source_run": str(run.path.resolve()),
        "source_manifest_sha256": file_sha256(run.path / MANIFEST),
        "source_continuations_sha256": file_sha256(run.path / CONTINUATIONS),
        "leaky": leaky, "settings": settings, "label_source": label_source, "decoder_layers_path": layers_path,
        "shard": config.shard or "",
    }
    tok = lm.tokenizer
    pad_id = tok.pad_token_id if tok.pad_token_id is not None else (tok.eos_token_id or 0)
    # prepare (and validate) every row before a file is written: bad input fails fast
    items = [prepare_item(r, tok, pos, label_map.get(r["id"]), source_index=i) for i, r in recs]
    try:
        lock = output_lock(out, command=f"python -m activations.cache {run.path}")
        lock.__enter__()
    except RunDirError as e:
        raise CacheError(str(e)) from None
    try:
        eng = make_engine(engine, lm, lay)
        try:
            writer = StoreWriter(out, layers=lay, positions=pos, d_model=d_model, dtype=config.dtype, attrs=attrs,
                                 resume=config.resume, expected_rows=len(items))
            try:
                done = writer.done_ids()
                todo = [it for it in items if it.row["continuation_id"] not in done]
                if writer.finished:
                    if todo:
                        raise CacheError(f"{out} is complete but the run now has {len(todo)} more continuations; "
                                         f"cache into a new --output-file")
                    return out
                bound_heap()  # large tensors in their own mappings: freed memory goes back (flat RSS in N)
                bar = _progress(len(items), len(items) - len(todo), config.progress, out)
                t0 = time.perf_counter()
                if max_batches is not None and max_batches <= 0:
                    return out
                # a batch out of accelerator memory runs again at half the size; only completed batches are written
                sizer = BatchSize(config.batch_size, what="caching activations", fix=OOM_FIX)
                n_done = 0
                for bi, (batch, acts) in enumerate(sizer.chunks(todo, lambda part: run_batch(eng, part, pad_id, pos))):
                    spans = {p: np.array([it.spans[p] for it in batch], dtype=np.int32) for p in pos}
                    writer.append([it.row for it in batch], acts, spans)
                    writer.set_attr("batching", sizer.record())
                    del acts
                    n_done += len(batch)
                    bar.update(len(batch))
                    if on_batch is not None:
                        on_batch(writer.n_rows)
                    _release_memory()
                    if max_batches is not None and bi + 1 >= max_batches and n_done < len(todo):
                        return out
                bar.close()
                writer.set_attr("cache_seconds_last_session", round(time.perf_counter() - t0, 3))
                writer.finish()
            finally:
                writer.close()
        finally:
            eng.close()
    finally:
        lock.__exit__(None, None, None)
    return out


def _release_memory() -> None:
    """After each batch: free what still holds its tensors (see :mod:`activations.memory`: peak RSS flat in N)."""
    release()


def _progress(total: int, initial: int, enabled: bool, out: Path):
    from tqdm.auto import tqdm  # deferred: tqdm is heavy to import

    return tqdm(total=total, initial=initial, disable=not enabled, desc=f"caching {out.name}", unit="row",
                file=sys.stderr)


# ---------------------------------------------------------------------------------------------------------
# CLI
# ---------------------------------------------------------------------------------------------------------
def build_parser() -> argparse.ArgumentParser:
    """The command's parser, built from :class:`CacheConfig`."""
    return parser_from_config(CacheConfig, prog="python -m activations.cache", groups=("inputs", _WHAT, _MODEL, "output"),
                              help_order=("layers", "positions", "allow_outcome_tokens", "engine", "model", "device"),
                              description="Cache the hidden states of a run's continuations (before the outcome) into "
                                          "an HDF5 store.")


def config_from_args(args: argparse.Namespace) -> CacheConfig:
    config: CacheConfig = config_from_parsed(CacheConfig, args)
    return config


def main(argv: Sequence[str] | None = None) -> int:
    config = config_from_args(build_parser().parse_args(argv))

    def body() -> None:
        print(format_summary(summarize(cache_activations(config))))

    return run_cli(body, interrupted_hint=f"resume with: python -m activations.cache "
                   f"{config.run_dir} --resume")


def config_dict(config: CacheConfig) -> dict[str, Any]:
    """The config as JSON-able values (for a study's manifest)."""
    return json.loads(json.dumps(asdict(config), default=str))


__all__ = ["CacheConfig", "CacheError", "cache_activations", "config_dict", "default_output", "format_summary",
           "is_complete", "main", "summarize"]

if __name__ == "__main__":
    sys.exit(main())
