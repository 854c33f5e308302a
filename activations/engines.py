"""Engines of the activation cache: one forward pass per batch, each layer reduced to the requested positions.

    from activations.engines import make_engine, run_batch
    eng = make_engine("nnsight", lm, layers=[0, 6, 30])       # or "transformer-lens", "hf"
    acts = run_batch(eng, items, pad_id, ["prefix_last"])     # {position: float32 [b, n_layers, d_model]}
    eng.close()                                               # undoes every in-place change to lm.model

Layers are resolved through :mod:`loadbearing.engine.layers` (``decoder_layers``: the same search order for the
nnsight and transformer-lens engines and for steering), indexed like HF ``hidden_states`` with the last
index taken at the last block's output, before the final norm.

* ``nnsight``: ``LanguageModel`` over the loaded model; reads ``blocks[0].input`` and ``blocks[i].output``
  inside the trace, reduces each to the positions there, and stops after the last requested block.
* ``transformer-lens``: ``TransformerBridge`` hooks ``blocks.0.hook_in`` / ``blocks.{L-1}.hook_out``.
* ``hf``: reference engine: ``output_hidden_states=True`` on the base model (holds every layer of a
  batch), plus a forward hook on the last block for its pre-norm output.
"""
from __future__ import annotations

import contextlib
import logging
import warnings
from collections.abc import Callable, Iterator, Sequence
from typing import TYPE_CHECKING, Any

import numpy as np

from activations.inputs import CacheError, Item, pad_right
from loadbearing.engine.hookpoints import block_hidden, layer_hooks
from loadbearing.engine.layers import LayerError, d_model, decoder_layers, n_layers

if TYPE_CHECKING:
    from torch import Tensor

ENGINES = ("nnsight", "transformer-lens", "hf")
ENGINE_ALIASES = {"transformer_lens": "transformer-lens", "tl": "transformer-lens"}


class Reducer:
    """Reduces one layer's ``[batch, seq, d_model]`` to ``{position: [batch, d_model]}`` for a batch."""

    def __init__(self, spans: dict[str, list[tuple[int, int]]], seq_len: int, device: Any):
        import torch  # deferred: torch is heavy to import

        self.ops: dict[str, tuple[str, Any]] = {}
        for p, sp in spans.items():
            starts = torch.tensor([s for s, _ in sp], device=device)
            ends = torch.tensor([e for _, e in sp], device=device)
            if bool(((ends - starts) == 1).all()):
                self.ops[p] = ("index", starts)  # [b]
            else:
                ar = torch.arange(seq_len, device=device)
                w = ((ar[None, :] >= starts[:, None]) & (ar[None, :] < ends[:, None])).float()
                self.ops[p] = ("mean", w / w.sum(1, keepdim=True))  # [b, seq]

    def __call__(self, h: Any) -> dict[str, Tensor]:
        import torch  # deferred: torch is heavy to import

        out: dict[str, Tensor] = {}
        for p, (kind, t) in self.ops.items():
            if kind == "index":
                out[p] = h[torch.arange(h.shape[0], device=h.device), t].float()  # [b, d_model]
            else:
                out[p] = torch.einsum("bs,bsd->bd", t.to(h.dtype), h).float()  # [b, d_model]
        return out


@contextlib.contextmanager
def restored(model: Any) -> Iterator[None]:
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
    """One forward pass per batch: ``run`` returns ``{layer: {position: tensor [b, d_model]}}``."""

    name = "?"

    def __init__(self, lm: Any, layers: list[int]):
        self.lm = lm
        self.layers = layers
        try:
            self.layers_path, _ = decoder_layers(lm.model)
            self.n_layers, self.d_model = n_layers(lm.model), d_model(lm.model)
        except LayerError as e:
            raise CacheError(str(e)) from None

    def run(self, input_ids: Any, attention_mask: Any, reducer: Reducer) -> dict[int, dict[str, Tensor]]:
        raise NotImplementedError

    def close(self) -> None:
        pass


class HFEngine(Engine):
    """Reference engine: ``output_hidden_states=True`` on the base model (every layer of a batch held at
    once); the last layer is read by a hook at the last block's output (before the final norm)."""

    name = "hf"

    def run(self, input_ids, attention_mask, reducer):
        import torch  # deferred: torch is heavy to import

        model = self.lm.model
        base = getattr(model, "base_model", None) or model
        out: dict[int, dict[str, Tensor]] = {}
        last = self.n_layers

        def grab(module, args, output):
            out[last] = reducer(block_hidden(output))

        with layer_hooks(model, {last: grab} if last in self.layers else {}), torch.no_grad():
            hs = base(input_ids=input_ids, attention_mask=attention_mask, output_hidden_states=True,
                      use_cache=False).hidden_states  # n_layers+1 x [b, seq, d_model]
        if len(hs) != self.n_layers + 1:
            raise CacheError(f"model returned {len(hs)} hidden states, expected {self.n_layers + 1}")
        for layer in self.layers:
            if layer != last:
                out[layer] = reducer(hs[layer])
        del hs
        return out


class NNsightEngine(Engine):
    """nnsight ``LanguageModel`` over the loaded model: reads ``layers[0].input`` and ``layers[i].output``,
    reduces each to the positions inside the trace, and stops after the last requested block."""

    name = "nnsight"

    def __init__(self, lm, layers):
        super().__init__(lm, layers)

        from nnsight import LanguageModel  # deferred: nnsight is heavy to import

        self._restore = restored(lm.model)
        self._restore.__enter__()
        try:
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")
                self.nl = LanguageModel(lm.model, tokenizer=lm.tokenizer)
            env = self.nl  # the same path inside the nnsight envoy tree
            for part in self.layers_path.split("."):
                env = getattr(env, part)
            self.blocks = env
        except BaseException:
            self.close()
            raise

    def run(self, input_ids, attention_mask, reducer):
        import torch  # deferred: torch is heavy to import

        out: dict[int, dict[str, Tensor]] = {}
        layers = self.layers
        blocks = self.blocks
        last = max(layers)
        with torch.no_grad():
            with self.nl.trace({"input_ids": input_ids, "attention_mask": attention_mask}, use_cache=False) as tracer:
                if 0 in layers:
                    out[0] = reducer(blocks[0].input)
                for i in range(max(last, 1)):
                    if i + 1 in layers:
                        out[i + 1] = reducer(block_hidden(blocks[i].output))
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

        from transformer_lens.model_bridge import TransformerBridge  # deferred: transformer_lens is heavy to import

        model = lm.model
        self._restore = restored(model)
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
        import torch  # deferred: torch is heavy to import

        out: dict[int, dict[str, Tensor]] = {}

        def grab(layer):
            def hook(x, hook):  # x: [b, seq, d_model]
                out[layer] = reducer(block_hidden(x))
                return x
            return hook

        hooks: list[tuple[str | Callable[..., Any], Callable[..., Any]]] = (
            [("blocks.0.hook_in", grab(0))] if 0 in self.layers else [])
        hooks += [(f"blocks.{layer - 1}.hook_out", grab(layer)) for layer in self.layers if layer > 0]
        stop = max(max(self.layers), 1)
        with torch.no_grad():
            self.br.run_with_hooks(input_ids, attention_mask=attention_mask, fwd_hooks=hooks, return_type=None,
                                   stop_at_layer=stop)
        return out

    def close(self):
        self._restore.__exit__(None, None, None)


def check_engine(name: str) -> str:
    """The canonical engine name, or a one-line error listing the choices."""
    name = ENGINE_ALIASES.get(name, name)
    if name not in ENGINES:
        raise CacheError(f"unknown engine {name!r}; choose one of {', '.join(ENGINES)}")
    return name


def make_engine(name: str, lm: Any, layers: list[int]) -> Engine:
    name = check_engine(name)
    if name == "nnsight":
        return NNsightEngine(lm, layers)
    if name == "transformer-lens":
        return TransformerLensEngine(lm, layers)
    return HFEngine(lm, layers)


def run_batch(engine: Engine, items: Sequence[Item], pad_id: int, positions: Sequence[str]) -> dict[str, np.ndarray]:
    """One forward pass over ``items`` (right-padded); returns ``{position: float32 [b, n_layers, d_model]}``."""
    import torch  # deferred: torch is heavy to import

    device = next(engine.lm.model.parameters()).device
    ids, mask = pad_right(items, pad_id)
    seq = ids.shape[1]
    reducer = Reducer({p: [it.spans[p] for it in items] for p in positions}, seq, device)
    got = engine.run(ids.to(device), mask.to(device), reducer)
    missing = [layer for layer in engine.layers if layer not in got]
    if missing:
        raise CacheError(f"engine {engine.name} captured no output for layers {missing}")
    return {p: torch.stack([got[layer][p] for layer in engine.layers], 1).cpu().numpy() for p in positions}


__all__ = ["ENGINES", "Engine", "HFEngine", "NNsightEngine", "Reducer", "TransformerLensEngine", "check_engine",
           "make_engine", "restored", "run_batch"]
