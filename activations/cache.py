"""Cache the hidden states of a run's continuations into an HDF5 activation store.

    python -m activations.cache RUN_DIR [--layers all|LIST] [--positions prefix_last,edit_mean,edit_last]
        [--engine nnsight|transformer-lens|hf] [--dtype float16|float32] [--batch-size N] [--output FILE]
        [--resume] [--labels NAME] [--allow-outcome-tokens] [--conditions perturbed|control|all] [--model NAME]

Reads ``RUN_DIR/continuations.jsonl`` (and ``RUN_DIR/labels/<name>/labels.jsonl`` when present) and writes
``RUN_DIR/activations.h5`` (layout: :mod:`activations.store`).

What is cached, exactly:

* **Inputs** are rebuilt from each record's ``input_text`` alone - the exact text the model saw before it
  wrote the continuation (chat-templated prompt + assistant prefix) - tokenised once with
  ``add_special_tokens=False``; the token count must equal the record's ``input_tokens`` (refused otherwise,
  naming the row).
* **Layers** are indexed like HF ``hidden_states``: 0 = the residual stream entering block 0 (the
  embeddings), L = the residual stream after block L-1. The last index is the output of the last block
  *before* the final norm (HF's own ``hidden_states[-1]`` is after the norm; this store keeps the
  residual stream every layer lives in, which is what steering adds to).
* **Positions** (token offsets recorded per row in ``/spans/<position>``), all before the outcome:
  ``prefix_last`` - the last input token (default); ``edit_mean`` - mean over the tokens of the edited line
  (tokens whose character span overlaps ``edit_span``, found with the tokenizer's offset mapping);
  ``edit_last`` - the last of those tokens. ``continuation_mean`` (mean over the continuation's tokens,
  which contain the outcome) is allowed only with ``--allow-outcome-tokens`` and marks the store
  ``leaky=True``; the continuation is tokenised on its own and appended to the input tokens, so the
  other positions are unchanged.
* **One forward pass per batch** captures every requested layer; each layer's ``[batch, seq, d_model]``
  output is reduced to the requested positions as soon as it is produced (nnsight / transformer-lens
  engines), so only ``[batch, layers, positions, d_model]`` is held. Rows are right-padded with an
  attention mask (causal attention: real tokens never see the padding; position ids start at 0 as in
  generation). The ``hf`` engine (``output_hidden_states``) holds every layer for a batch; it is the
  reference the others are tested against.

The run's model is loaded from ``RUN_DIR/manifest.json`` (``model.name``/``revision``/``quantize``), or
``--model``; a model whose weights hash differs from the manifest's is refused. Rows are appended and
flushed per batch; an interrupted run is continued with ``--resume`` (stored continuation ids are skipped);
the store is marked complete only at the end.
"""
from __future__ import annotations

import argparse
import contextlib
import sys
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Callable, Sequence

import numpy as np

from activations.store import StoreError, StoreWriter, open_store

ENGINES = ("nnsight", "transformer-lens", "hf")
SAFE_POSITIONS = ("prefix_last", "edit_mean", "edit_last")
OUTCOME_POSITIONS = ("continuation_mean",)
POSITIONS = SAFE_POSITIONS + OUTCOME_POSITIONS
CONDITIONS = ("perturbed", "control", "all")
DEFAULT_OUTPUT = "activations.h5"
CONTINUATIONS = "continuations.jsonl"
MANIFEST = "manifest.json"
LAYER_SEMANTICS = (
    "HF hidden_states indexing: 0 = residual stream entering block 0 (embeddings), L = residual stream after "
    "block L-1; the last index is before the final norm"
)


class CacheError(StoreError):
    """Bad input to the caching stage; the message names the problem and the fix."""


# ---------------------------------------------------------------------------------------------------------
# inputs
# ---------------------------------------------------------------------------------------------------------
@dataclass
class Item:
    """One continuation prepared for the forward pass."""

    row: dict  # the store's row-table columns
    ids: list[int]  # tokens fed to the model
    spans: dict[str, tuple[int, int]]  # position -> [start, end) token offsets


def parse_layers(spec: str | Sequence[int] | None, n_layers: int) -> list[int]:
    """``"all"`` / ``None`` -> 0..n_layers; ``"0,5,-1"`` or ``"10-20"`` -> those HF hidden_states indices."""
    valid = f"valid layers are 0..{n_layers} (0 = embeddings, {n_layers} = last block), 'all', or e.g. '0,6,-1' / '10-20'"
    if spec is None or (isinstance(spec, str) and spec.strip().lower() == "all"):
        return list(range(n_layers + 1))
    parts: list = []
    if isinstance(spec, str):
        for tok in [t.strip() for t in spec.split(",") if t.strip()]:
            if "-" in tok[1:]:
                a, b = tok.split("-", 1) if not tok.startswith("-") else (None, None)
                try:
                    parts.extend(range(int(a), int(b) + 1))
                except (TypeError, ValueError):
                    raise CacheError(f"unknown layer {tok!r}; {valid}") from None
            else:
                try:
                    parts.append(int(tok))
                except ValueError:
                    raise CacheError(f"unknown layer {tok!r}; {valid}") from None
    else:
        parts = list(spec)
    out = []
    for x in parts:
        try:
            i = int(x)
        except (TypeError, ValueError):
            raise CacheError(f"unknown layer {x!r}; {valid}") from None
        j = i + n_layers + 1 if i < 0 else i
        if not 0 <= j <= n_layers:
            raise CacheError(f"unknown layer {x!r}; {valid}")
        if j not in out:
            out.append(j)
    if not out:
        raise CacheError(f"no layers given; {valid}")
    return sorted(out)


def parse_positions(spec: str | Sequence[str] | None, *, allow_outcome_tokens: bool = False) -> list[str]:
    if spec is None:
        return ["prefix_last"]
    names = [p.strip() for p in spec.split(",")] if isinstance(spec, str) else [str(p) for p in spec]
    names = [p for p in names if p]
    out = []
    for p in names:
        if p not in POSITIONS:
            raise CacheError(f"unknown position {p!r}; choose from {', '.join(SAFE_POSITIONS)} "
                             f"(or {', '.join(OUTCOME_POSITIONS)} with --allow-outcome-tokens)")
        if p in OUTCOME_POSITIONS and not allow_outcome_tokens:
            raise CacheError(
                f"position {p!r} averages over the continuation, which contains the outcome the probes predict "
                f"(label leakage); pass --allow-outcome-tokens to cache it anyway (the store is then marked leaky)"
            )
        if p not in out:
            out.append(p)
    if not out:
        raise CacheError(f"no positions given; choose from {', '.join(SAFE_POSITIONS)}")
    return out


def _token_offsets(tokenizer, text: str) -> tuple[list[int], list[tuple[int, int]]]:
    try:
        enc = tokenizer(text, add_special_tokens=False, return_offsets_mapping=True)
    except NotImplementedError:
        raise CacheError("the tokenizer gives no offset mapping (a slow tokenizer?); load a fast tokenizer") from None
    return list(enc["input_ids"]), [tuple(o) for o in enc["offset_mapping"]]


def prepare_item(rec: dict, tokenizer, positions: Sequence[str], label3: str | None = None) -> Item:
    """Rebuild one continuation's input tokens and the token spans of each position."""
    cid = rec.get("id")
    text = rec.get("input_text")
    if not isinstance(text, str) or not text:
        raise CacheError(f"continuation {cid!r} has no input_text; was continuations.jsonl written by behavioural.run?")
    ids, offsets = _token_offsets(tokenizer, text)
    n = len(ids)
    if n != rec.get("input_tokens"):
        raise CacheError(
            f"continuation {cid!r}: input_text tokenises to {n} tokens but the record says input_tokens="
            f"{rec.get('input_tokens')}; the tokenizer differs from the run's (wrong --model?) or the record was edited"
        )
    spans: dict[str, tuple[int, int]] = {}
    need_edit = any(p.startswith("edit_") for p in positions)
    if need_edit:
        es = rec.get("edit_span")
        if not es or len(es) != 2:
            raise CacheError(f"continuation {cid!r} has no edit_span; cannot place edit_* positions")
        a, b = int(es[0]), int(es[1])
        toks = [i for i, (s, e) in enumerate(offsets) if s < b and e > a and e > s]
        if not toks:
            raise CacheError(f"continuation {cid!r}: edit_span {[a, b]} covers no token of input_text")
        if toks != list(range(toks[0], toks[-1] + 1)):
            raise CacheError(f"continuation {cid!r}: edit_span tokens are not contiguous ({toks})")
        spans["edit_mean"] = (toks[0], toks[-1] + 1)
        spans["edit_last"] = (toks[-1], toks[-1] + 1)
    spans["prefix_last"] = (n - 1, n)
    if "continuation_mean" in positions:
        cont = rec.get("continuation") or ""
        cids = list(tokenizer(cont, add_special_tokens=False)["input_ids"])
        if not cids:
            raise CacheError(f"continuation {cid!r} has an empty continuation; cannot average over it")
        spans["continuation_mean"] = (n, n + len(cids))
        ids = ids + cids
    correct = rec.get("correct")
    row = {
        "continuation_id": cid,
        "question_id": rec.get("question_id"),
        "dataset": rec.get("dataset"),
        "task": rec.get("task"),
        "difficulty": rec.get("difficulty"),
        "strategy": rec.get("strategy"),
        "edit_position": rec.get("position"),
        "condition": rec.get("condition"),
        "label": rec.get("label"),
        "label3": label3,
        "correct": correct,
        "input_tokens": n,
    }
    return Item(row=row, ids=ids, spans={p: spans[p] for p in positions})


def find_labels(run_dir: Path, name: str | None) -> tuple[dict[str, str | None], str]:
    """``({continuation_id: "A"|"B"|"C"|None}, "labels/<name>")`` from a labelling, or ``({}, "")``.

    Read through :func:`behavioural.label.load_labels`: ``name=None`` picks the newest complete labelling;
    ``name="none"`` disables labels.
    """
    if name is not None and name.lower() == "none":
        return {}, ""
    from behavioural.label import load_labels
    from behavioural.rundir import RunDirError

    try:
        found, labels = load_labels(run_dir, name)
    except RunDirError as e:
        raise CacheError(f"{e}, or pass --labels none") from e
    if found is None:
        return {}, ""
    for cid, lab in labels.items():
        if lab not in ("A", "B", "C", None):
            raise CacheError(f"{run_dir / 'labels' / found / 'labels.jsonl'}: continuation {cid!r} has label {lab!r}; "
                             "expected A, B, C or null")
    return labels, f"labels/{found}"


def load_continuations(run_dir: Path, conditions: str = "all") -> list[dict]:
    from behavioural.rundir import read_jsonl

    if not run_dir.is_dir():
        raise CacheError(f"run directory {str(run_dir)!r} does not exist")
    p = run_dir / CONTINUATIONS
    if not p.is_file():
        raise CacheError(f"{str(p)!r} not found; is {str(run_dir)!r} a run directory? create one with python -m behavioural.run")
    recs = read_jsonl(p)
    if not recs:
        raise CacheError(f"{str(p)!r} holds no continuations (no eligible baselines, or the run is still at the "
                         f"baseline stage); nothing to cache")
    if conditions not in CONDITIONS:
        raise CacheError(f"unknown --conditions {conditions!r}; choose {', '.join(CONDITIONS)}")
    if conditions != "all":
        recs = [r for r in recs if r.get("condition") == conditions]
        if not recs:
            raise CacheError(f"{str(p)!r} holds no {conditions} continuations")
    seen = set()
    for r in recs:
        if r.get("id") in seen:
            raise CacheError(f"{str(p)!r}: duplicate continuation id {r.get('id')!r}")
        seen.add(r.get("id"))
    return recs


# ---------------------------------------------------------------------------------------------------------
# engines: each turns a batch into {position: [b, n_layers, d_model]} float32 numpy
# ---------------------------------------------------------------------------------------------------------
def _model_dims(model) -> tuple[int, int]:
    cfg = model.config
    cfg = cfg.get_text_config() if hasattr(cfg, "get_text_config") else cfg
    return int(cfg.num_hidden_layers), int(cfg.hidden_size)


class _Reducer:
    """Reduces one layer's ``[batch, seq, d_model]`` to ``{position: [batch, d_model]}`` for a batch."""

    def __init__(self, spans: dict[str, list[tuple[int, int]]], seq_len: int, device):
        import torch

        self.ops = {}
        for p, sp in spans.items():
            starts = torch.tensor([s for s, _ in sp], device=device)
            ends = torch.tensor([e for _, e in sp], device=device)
            if bool(((ends - starts) == 1).all()):
                self.ops[p] = ("index", starts)  # [b]
            else:
                ar = torch.arange(seq_len, device=device)
                w = ((ar[None, :] >= starts[:, None]) & (ar[None, :] < ends[:, None])).float()
                self.ops[p] = ("mean", w / w.sum(1, keepdim=True))  # [b, seq]

    def __call__(self, h) -> dict:
        import torch

        out = {}
        for p, (kind, t) in self.ops.items():
            if kind == "index":
                out[p] = h[torch.arange(h.shape[0], device=h.device), t].float()  # [b, d_model]
            else:
                out[p] = torch.einsum("bs,bsd->bd", t.to(h.dtype), h).float()  # [b, d_model]
        return out


def _first_tensor(x):
    return x[0] if isinstance(x, (tuple, list)) else x


def _decoder_layers(model):
    """The decoder block list of an HF causal LM (``model.model.layers`` and the common variants)."""
    base = getattr(model, "model", None) or getattr(model, "transformer", None) or model
    for attr in ("layers", "h", "blocks"):
        if hasattr(base, attr):
            return base, attr
    lm = getattr(base, "language_model", None)
    if lm is not None and hasattr(lm, "layers"):
        return lm, "layers"
    raise CacheError(f"cannot find the decoder layers of {type(model).__name__}; use --engine hf")


@contextlib.contextmanager
def _restored(model):
    """Undo in-place changes that wrapping libraries make to the caller's model: replaced child modules,
    instance attributes they add or replace on modules (nnsight installs a ``forward`` controller and a
    ``__nnsight__`` state on every module, "permanently"), and the attention implementation
    (TransformerBridge forces eager). Without this a second nnsight wrap after a restore finds stale state."""
    mods = list(model.modules())
    children = [(p, n, c) for p in mods for n, c in p._modules.items()]
    keys = [(m, set(m.__dict__), m.__dict__.get("forward"), "forward" in m.__dict__) for m in mods]
    attn = getattr(model.config, "_attn_implementation", None)
    try:
        yield
    finally:
        for p, n, c in children:
            if p._modules.get(n) is not c:
                p._modules[n] = c
        for m, before, fwd, had in keys:
            for k in set(m.__dict__) - before:
                del m.__dict__[k]
            if had:
                m.__dict__["forward"] = fwd
        if attn is not None and getattr(model.config, "_attn_implementation", None) != attn:
            try:
                model.set_attn_implementation(attn)
            except Exception:  # noqa: BLE001 - best effort on exotic models
                model.config._attn_implementation = attn


class Engine:
    name = "?"

    def __init__(self, lm, layers: list[int]):
        self.lm = lm
        self.layers = layers
        self.n_layers, self.d_model = _model_dims(lm.model)

    def run(self, input_ids, attention_mask, reducer: _Reducer) -> dict[int, dict]:
        """``{layer: {position: tensor [b, d_model]}}`` from one forward pass."""
        raise NotImplementedError

    def close(self) -> None:
        pass


class HFEngine(Engine):
    """Reference engine: ``output_hidden_states=True`` (holds every layer of a batch), last layer pre-norm."""

    name = "hf"

    def run(self, input_ids, attention_mask, reducer):
        import torch

        model = self.lm.model
        base = getattr(model, "model", None)
        cfg = model.config
        had = "tie_last_hidden_states" in cfg.__dict__
        old = cfg.__dict__.get("tie_last_hidden_states")
        cfg.tie_last_hidden_states = False  # keep the last block's output, not the final-normed one
        try:
            with torch.no_grad():
                fwd = base if base is not None and hasattr(base, "embed_tokens") else model
                hs = fwd(input_ids=input_ids, attention_mask=attention_mask, output_hidden_states=True,
                         use_cache=False).hidden_states  # n_layers+1 x [b, seq, d_model]
        finally:
            if had:
                cfg.tie_last_hidden_states = old
            else:
                cfg.__dict__.pop("tie_last_hidden_states", None)
        if len(hs) != self.n_layers + 1:
            raise CacheError(f"model returned {len(hs)} hidden states, expected {self.n_layers + 1}")
        return {l: reducer(hs[l]) for l in self.layers}


class NNsightEngine(Engine):
    """nnsight ``LanguageModel`` over the loaded model: reads ``layers[0].input`` and ``layers[i].output``,
    reduces each to the positions inside the trace, and stops after the last requested block."""

    name = "nnsight"

    def __init__(self, lm, layers):
        super().__init__(lm, layers)
        import warnings

        from nnsight import LanguageModel

        self._restore = _restored(lm.model)
        self._restore.__enter__()
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            self.nl = LanguageModel(lm.model, tokenizer=lm.tokenizer)
        base, attr = _decoder_layers(lm.model)
        # the same path inside the nnsight envoy tree
        env = self.nl
        for part in self._path_to(lm.model, base):
            env = getattr(env, part)
        self.blocks = getattr(env, attr)

    @staticmethod
    def _path_to(root, target) -> list[str]:
        for name, mod in root.named_modules():
            if mod is target:
                return [p for p in name.split(".") if p]
        raise CacheError("decoder base module not found")

    def run(self, input_ids, attention_mask, reducer):
        import torch

        out: dict[int, dict] = {}
        layers = self.layers
        blocks = self.blocks
        last = max(layers)
        with torch.no_grad():
            with self.nl.trace({"input_ids": input_ids, "attention_mask": attention_mask}, use_cache=False) as tracer:
                if 0 in layers:
                    out[0] = reducer(blocks[0].input)
                for i in range(max(last, 1)):
                    if i + 1 in layers:
                        out[i + 1] = reducer(_first_tensor(blocks[i].output))
                tracer.stop()
        return out

    def close(self):
        self._restore.__exit__(None, None, None)


class TransformerLensEngine(Engine):
    """transformer-lens ``TransformerBridge`` over the loaded model: hooks ``blocks.0.hook_in`` (layer 0) and
    ``blocks.{L-1}.hook_out`` (layer L), reduced in the hook; stops after the last requested block. The
    bridge swaps the model's modules and attention implementation in place: both are restored on close."""

    name = "transformer-lens"

    def __init__(self, lm, layers):
        super().__init__(lm, layers)
        import logging
        import warnings

        from transformer_lens.model_bridge import TransformerBridge

        model = lm.model
        self._restore = _restored(model)
        self._restore.__enter__()
        attn = getattr(model.config, "_attn_implementation", None)
        device = str(next(model.parameters()).device)
        try:
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")
                logging.disable(logging.WARNING)
                try:
                    self.br = TransformerBridge.boot_transformers(
                        lm.local_dir or lm.model_id or lm.name, hf_model=model, tokenizer=lm.tokenizer, device=device,
                        dtype=next(model.parameters()).dtype)
                finally:
                    logging.disable(logging.NOTSET)
            if attn and getattr(model.config, "_attn_implementation", None) != attn:
                model.set_attn_implementation(attn)  # the bridge forces eager for pattern hooks we do not use
        except BaseException:
            self.close()
            raise

    def run(self, input_ids, attention_mask, reducer):
        import torch

        out: dict[int, dict] = {}

        def grab(layer):
            def hook(x, hook):  # x: [b, seq, d_model]
                out[layer] = reducer(_first_tensor(x))
                return x
            return hook

        hooks = [("blocks.0.hook_in", grab(0))] if 0 in self.layers else []
        hooks += [(f"blocks.{l - 1}.hook_out", grab(l)) for l in self.layers if l > 0]
        stop = max(max(self.layers), 1)
        with torch.no_grad():
            self.br.run_with_hooks(input_ids, attention_mask=attention_mask, fwd_hooks=hooks, return_type=None,
                                   stop_at_layer=stop)
        return out

    def close(self):
        self._restore.__exit__(None, None, None)


def make_engine(name: str, lm, layers: list[int]) -> Engine:
    if name == "nnsight":
        return NNsightEngine(lm, layers)
    if name in ("transformer-lens", "transformer_lens", "tl"):
        return TransformerLensEngine(lm, layers)
    if name == "hf":
        return HFEngine(lm, layers)
    raise CacheError(f"unknown engine {name!r}; choose one of {', '.join(ENGINES)}")


def pad_right(items: Sequence[Item], pad_id: int):
    """Right-padded ``(ids, mask)`` tensors ``[b, seq]`` for a batch of prepared items."""
    import torch

    seq = max(len(it.ids) for it in items)
    ids = torch.full((len(items), seq), pad_id, dtype=torch.long)
    mask = torch.zeros((len(items), seq), dtype=torch.long)
    for i, it in enumerate(items):
        ids[i, : len(it.ids)] = torch.tensor(it.ids)
        mask[i, : len(it.ids)] = 1
    return ids, mask


def run_batch(engine: Engine, items: list[Item], pad_id: int, positions: Sequence[str]) -> dict[str, np.ndarray]:
    """One forward pass over ``items`` (right-padded); returns ``{position: float32 [b, n_layers, d_model]}``."""
    import torch

    device = next(engine.lm.model.parameters()).device
    ids, mask = pad_right(items, pad_id)
    seq = ids.shape[1]
    reducer = _Reducer({p: [it.spans[p] for it in items] for p in positions}, seq, device)
    got = engine.run(ids.to(device), mask.to(device), reducer)
    missing = [l for l in engine.layers if l not in got]
    if missing:
        raise CacheError(f"engine {engine.name} captured no output for layers {missing}")
    return {p: torch.stack([got[l][p] for l in engine.layers], 1).cpu().numpy() for p in positions}  # [b, L, d]


# ---------------------------------------------------------------------------------------------------------
# the stage
# ---------------------------------------------------------------------------------------------------------
def _manifest(run_dir: Path) -> dict:
    from behavioural.rundir import read_json

    p = run_dir / MANIFEST
    if not p.is_file():
        raise CacheError(f"{str(p)!r} not found; is {str(run_dir)!r} a run directory written by python -m behavioural.run?")
    return read_json(p)


def check_model(lm, manifest: dict) -> str:
    """Refuse a model whose weights hash differs from the run's; returns "verified" or "unverified"."""
    want = (manifest.get("model") or {}).get("weights_hash")
    have = lm.weights_hash
    if want and have and want != have:
        raise CacheError(
            f"mismatched model: the run was generated with weights {want[:16]}... "
            f"({(manifest.get('model') or {}).get('name')!r}) but the loaded model {lm.name!r} has {have[:16]}...; "
            f"cache with the run's model (omit --model)"
        )
    if want and not have:
        raise CacheError(f"mismatched model: the run records weights hash {want[:16]}... but the loaded model "
                         f"{lm.name!r} has none, so it cannot be verified; cache with the run's model (omit --model)")
    return "verified" if want and have else "unverified"


def load_run_model(manifest: dict, name: str | None = None):
    from behavioural.models import load_model

    m = manifest.get("model") or {}
    name = name or m.get("name")
    if not name:
        raise CacheError("the run's manifest names no model; pass --model")
    kw = {}
    if m.get("quantize"):
        kw["quantize"] = m["quantize"]
    if m.get("revision"):
        kw["revision"] = m["revision"]
    if m.get("device"):
        kw["device"] = m["device"]
    if m.get("dtype_requested"):
        kw["dtype"] = m["dtype_requested"]
    return load_model(name, **kw)


def cache_activations(
    run_dir: str | Path,
    lm=None,
    *,
    layers: str | Sequence[int] | None = "all",
    positions: str | Sequence[str] | None = ("prefix_last",),
    engine: str = "nnsight",
    dtype: str = "float32",
    batch_size: int = 8,
    output: str | Path | None = None,
    resume: bool = False,
    labels: str | None = None,
    allow_outcome_tokens: bool = False,
    conditions: str = "all",
    model: str | None = None,
    progress: bool = True,
    max_batches: int | None = None,
    on_batch: Callable[[int], None] | None = None,
) -> Path:
    """Cache the run's continuations into an activation store; returns its path.

    ``lm`` is an already-loaded :class:`behavioural.models.LoadedModel` (else the run's model is loaded);
    its weights hash must match the run's manifest. ``max_batches`` stops early leaving an incomplete store
    (used by tests to simulate an interruption); ``on_batch(n_rows)`` is called after each flushed batch.
    """
    from behavioural.rundir import file_sha256, package_versions

    run_dir = Path(run_dir)
    if engine not in ENGINES and engine not in ("transformer_lens", "tl"):
        raise CacheError(f"unknown engine {engine!r}; choose one of {', '.join(ENGINES)}")
    engine = "transformer-lens" if engine in ("transformer_lens", "tl") else engine
    if dtype not in ("float16", "float32"):
        raise CacheError(f"unknown dtype {dtype!r}; choose float16 or float32")
    if batch_size < 1:
        raise CacheError(f"--batch-size must be >= 1, got {batch_size}")
    pos = parse_positions(positions, allow_outcome_tokens=allow_outcome_tokens)
    recs = load_continuations(run_dir, conditions)
    manifest = _manifest(run_dir)
    out = Path(output) if output else run_dir / DEFAULT_OUTPUT
    if out.exists() and not resume:
        raise CacheError(f"{out} already exists; pass --resume to continue it, or --output another file")
    if lm is None:
        lm = load_run_model(manifest, model)
    model_check = check_model(lm, manifest)
    n_layers, d_model = _model_dims(lm.model)
    lay = parse_layers(layers, n_layers)
    label_map, label_source = find_labels(run_dir, labels)
    leaky = any(p in OUTCOME_POSITIONS for p in pos)
    settings = {
        "layers": lay,
        "positions": pos,
        "engine": engine,
        "dtype": dtype,
        "batch_size": batch_size,
        "conditions": conditions,
        "labels": label_source or None,
        "allow_outcome_tokens": allow_outcome_tokens,
        "padding": "right",
        "layer_semantics": LAYER_SEMANTICS,
        "model_check": model_check,
        "model_dtype": lm.dtype,
        "quantize": lm.quantize,
        "device": str(next(lm.model.parameters()).device),
        "packages": package_versions(),
    }
    attrs = {
        "model_name": lm.name,
        "model_id": lm.model_id,
        "revision": lm.revision,
        "weights_hash": lm.weights_hash,
        "engine": engine,
        "source_run": str(run_dir.resolve()),
        "source_manifest_sha256": file_sha256(run_dir / MANIFEST),
        "source_continuations_sha256": file_sha256(run_dir / CONTINUATIONS),
        "leaky": leaky,
        "settings": settings,
        "label_source": label_source,
    }
    pad_id = lm.tokenizer.pad_token_id if lm.tokenizer.pad_token_id is not None else (lm.tokenizer.eos_token_id or 0)
    # prepare (and validate) every row before the model runs or a file is written: bad input fails fast
    items = [prepare_item(r, lm.tokenizer, pos, label_map.get(r["id"])) for r in recs]
    eng = make_engine(engine, lm, lay)
    try:
        writer = StoreWriter(out, layers=lay, positions=pos, d_model=d_model, dtype=dtype, attrs=attrs,
                             resume=resume, expected_rows=len(recs))
        try:
            if resume:
                for k in ("source_manifest_sha256", "source_continuations_sha256"):
                    writer.set_attr(k, attrs[k])
            done = writer.done_ids()
            todo = [it for it in items if it.row["continuation_id"] not in done]
            bar = _progress(len(recs), len(recs) - len(todo), progress, out)
            t0 = time.perf_counter()
            for bi, start in enumerate(range(0, len(todo), batch_size)):
                if max_batches is not None and bi >= max_batches:
                    return out
                batch = todo[start : start + batch_size]
                acts = run_batch(eng, batch, pad_id, pos)
                spans = {p: np.array([it.spans[p] for it in batch], dtype=np.int32) for p in pos}
                writer.append([it.row for it in batch], acts, spans)
                bar.update(len(batch))
                if on_batch is not None:
                    on_batch(writer.n_rows)
            bar.close()
            writer.set_attr("cache_seconds_last_session", round(time.perf_counter() - t0, 3))
            writer.finish()
        finally:
            writer.close()
    finally:
        eng.close()
    return out


def _progress(total: int, initial: int, enabled: bool, out: Path):
    from tqdm.auto import tqdm

    return tqdm(total=total, initial=initial, disable=not enabled, desc=f"caching {out.name}", unit="row",
                file=sys.stderr)


# ---------------------------------------------------------------------------------------------------------
# CLI
# ---------------------------------------------------------------------------------------------------------
def build_parser() -> argparse.ArgumentParser:
    ap = argparse.ArgumentParser(
        prog="python -m activations.cache",
        description="Cache the hidden states of a run's continuations (before the outcome) into an HDF5 store.",
    )
    ap.add_argument("run_dir", help="run directory written by python -m behavioural.run (reads continuations.jsonl)")
    ap.add_argument("--layers", default="all",
                    help="HF hidden_states indices: 'all' (default), a list '0,6,12,-1' or a range '10-20' "
                         "(0 = embeddings, L = after block L-1)")
    ap.add_argument("--positions", default="prefix_last",
                    help=f"comma-separated token positions: {', '.join(SAFE_POSITIONS)} (default prefix_last); "
                         f"{', '.join(OUTCOME_POSITIONS)} needs --allow-outcome-tokens")
    ap.add_argument("--engine", default="nnsight", choices=ENGINES,
                    help="nnsight (default), transformer-lens (TransformerBridge) or hf (output_hidden_states)")
    ap.add_argument("--dtype", default="float32", choices=("float16", "float32"), help="stored dtype (default float32)")
    ap.add_argument("--batch-size", type=int, default=8, help="rows per forward pass (default 8); memory scales with it")
    ap.add_argument("--output", default=None, help=f"store path (default RUN_DIR/{DEFAULT_OUTPUT})")
    ap.add_argument("--resume", action="store_true", help="continue an interrupted store (stored rows are skipped)")
    ap.add_argument("--labels", default=None,
                    help="labelling under RUN_DIR/labels/ for the A/B/C label3 column (default: the most recent; "
                         "'none' for no label3)")
    ap.add_argument("--allow-outcome-tokens", action="store_true",
                    help="allow the continuation_mean position (averages over outcome tokens: label leakage); "
                         "marks the store leaky")
    ap.add_argument("--conditions", default="all", choices=CONDITIONS,
                    help="which continuations to cache (default all: perturbed and control)")
    ap.add_argument("--model", default=None,
                    help="model to load instead of the manifest's (its weights hash must still match the run's)")
    ap.add_argument("--quiet", action="store_true", help="no progress bar")
    return ap


def main(argv: Sequence[str] | None = None) -> int:
    from behavioural.models import ModelError
    from behavioural.rundir import RunDirError

    args = build_parser().parse_args(argv)
    try:
        out = cache_activations(
            args.run_dir, layers=args.layers, positions=args.positions, engine=args.engine, dtype=args.dtype,
            batch_size=args.batch_size, output=args.output, resume=args.resume, labels=args.labels,
            allow_outcome_tokens=args.allow_outcome_tokens, conditions=args.conditions, model=args.model,
            progress=not args.quiet,
        )
    except (StoreError, ModelError, RunDirError) as e:
        print(f"error: {e}", file=sys.stderr)
        return 2
    with open_store(out) as st:
        print(f"wrote {out}: {st.n_rows} rows, layers {st.layers[0]}..{st.layers[-1]} ({len(st.layers)}), "
              f"positions {', '.join(st.positions)}, engine {st.attrs['engine']}, dtype {st.attrs['dtype']}"
              + (", LEAKY (outcome tokens)" if st.leaky else ""))
    return 0


if __name__ == "__main__":
    sys.exit(main())
