"""What the HF fast path (:mod:`loadbearing.engine.batching`) switches on while it decodes: K/V-copy-free attention,
append-in-place KV-cache layers and, on CPU, oneDNN-packed linear layers.

    from loadbearing.engine.fastpath import fast_decoding, new_cache
    with fast_decoding(model):
        cache = new_cache(model)        # DynamicCache whose full-attention layers append in place
        model(..., past_key_values=cache)

Three costs dominated a decode step of the HF backend on CPU (measured with ``torch.profiler`` on the embedded
model, 1-32 rows, ~250 cached tokens, see ``bench/bench_generation.py --profile``):

* **Masked grouped-query attention copied K and V.** ``transformers``' ``sdpa`` path passes ``enable_gqa``
  to ``scaled_dot_product_attention`` only when there is no attention mask; with padding (any batch of
  rows of different lengths) it expands K and V to every query head (``repeat_kv``), a copy of the whole
  cache per layer per step. :func:`folded_gqa_sdpa` instead folds each KV group's query heads into the query
  length axis - ``[b, kv_heads * rep, q, d]`` becomes ``[b, kv_heads, rep * q, d]`` - so every query row
  attends to its own group's K and V with no copy, under the same mask. It is registered as an attention
  implementation and switched on only inside :func:`fast_decoding` for models that use ``sdpa``.
* **Appending a token re-allocated the cache.** ``DynamicLayer.update`` is ``torch.cat([keys, new])``: the
  whole cache is copied every step. :class:`SpareLayer` keeps its keys/values as views into buffers with
  spare columns, so an append writes one column in place; the buffers are re-allocated (with new spare
  room) only when they are full or when the batch changes shape (rows leave or join).
* **Small-batch matrix products ran far below memory bandwidth.** A decode step streams every weight once;
  the default float32 GEMM (MKL) reached ~11 GB/s on this machine's small-``M`` products, about a third of
  its copy bandwidth, while oneDNN with a pre-packed weight reached ~26 GB/s (the 49k x 576 output layer:
  10.3 ms -> 4.4 ms at one row). :func:`packed_linears` swaps each plain float32 or bfloat16 ``nn.Linear`` on CPU for
  ``torch.ops.mkldnn._linear_pointwise`` over a weight packed once per model (kept with the model, so the
  cost is paid once, and the linear weights take twice their memory while the model lives; skipped when the
  copy would not fit comfortably in memory, or oneDNN is missing).

None of these changes what is computed - the same dot products over the same masked columns - only the
order of floating-point additions inside a matrix product, which ``tests/test_fastpath.py``,
``tests/test_batching.py`` and the generation benchmark check against the plain path (identical greedy
records).
"""
from __future__ import annotations

import contextlib
import os
import weakref
from collections.abc import Iterator

import torch
from transformers.cache_utils import DynamicCache, DynamicLayer

#: columns of room added past the current length whenever a layer's buffers are (re-)allocated
SPARE_COLUMNS = 64
ATTN_NAME = "loadbearing_folded_gqa_sdpa"
#: switched off by :func:`plain` (benchmarks and parity tests compare against the plain transformers path)
_ENABLED = True


@contextlib.contextmanager
def plain() -> Iterator[None]:
    """Inside the block :func:`fast_decoding` and :func:`new_cache` change nothing (the plain HF path)."""
    global _ENABLED
    before, _ENABLED = _ENABLED, False
    try:
        yield
    finally:
        _ENABLED = before


class SpareLayer(DynamicLayer):
    """A full-attention ``DynamicLayer`` whose ``keys``/``values`` are views into buffers with spare columns.

    ``update`` writes new columns into the spare room when ``keys`` is still the view it handed out last;
    batch selection gathers the buffers themselves; anything else that replaced ``keys`` (padding, merging) is
    simply copied into fresh buffers on the next update, so every ``DynamicLayer`` operation keeps working.
    """

    _kbuf: torch.Tensor | None = None
    _vbuf: torch.Tensor | None = None
    _view: torch.Tensor | None = None
    _end = 0

    def _reallocate(self, extra: int) -> None:
        k, v = self.keys, self.values
        assert k is not None and v is not None
        b, h, n, d = k.shape
        cap = n + extra + SPARE_COLUMNS
        self._kbuf = k.new_empty((b, h, cap, d))
        self._vbuf = v.new_empty((b, v.shape[1], cap, v.shape[-1]))
        self._kbuf[:, :, :n].copy_(k)
        self._vbuf[:, :, :n].copy_(v)
        self._end = n
        self.keys, self.values = self._kbuf[:, :, :n], self._vbuf[:, :, :n]

    def update(self, key_states: torch.Tensor, value_states: torch.Tensor, *args, **kwargs
               ) -> tuple[torch.Tensor, torch.Tensor]:
        if not self.is_initialized or self.keys is None or self.keys.numel() == 0:
            if not self.is_initialized:
                self.lazy_initialization(key_states, value_states)
            self.keys, self.values = key_states, value_states
            self._reallocate(0)
        else:
            t = key_states.shape[-2]
            if self.keys is not self._view or self._kbuf is None or self._end + t > self._kbuf.shape[-2]:
                self._reallocate(t)
            kb, vb = self._kbuf, self._vbuf
            assert kb is not None and vb is not None
            start = self._end - self.keys.shape[-2]
            kb[:, :, self._end:self._end + t].copy_(key_states)
            vb[:, :, self._end:self._end + t].copy_(value_states)
            self._end += t
            self.keys, self.values = kb[:, :, start:self._end], vb[:, :, start:self._end]
        self._view = self.keys
        return self.keys, self.values

    def batch_select_indices(self, indices: torch.Tensor) -> None:
        """Keep (or repeat) batch rows: one gather of the buffers, spare room included, instead of a gather of
        the keys followed by a re-allocation on the next append."""
        if self.keys is not None and self.keys is self._view and self._kbuf is not None and self._vbuf is not None:
            start = self._end - self.keys.shape[-2]
            self._kbuf, self._vbuf = self._kbuf[indices], self._vbuf[indices]
            self.keys, self.values = self._kbuf[:, :, start:self._end], self._vbuf[:, :, start:self._end]
            self._view = self.keys
        else:
            super().batch_select_indices(indices)

    def crop_left(self, lead: int) -> None:
        """Drop the first ``lead`` columns (a view: the buffers keep their room)."""
        ours = self.keys is self._view
        assert self.keys is not None and self.values is not None
        self.keys, self.values = self.keys[:, :, lead:], self.values[:, :, lead:]
        if ours:  # still a view into this layer's buffers: the next append writes in place
            self._view = self.keys

    def reset(self) -> None:
        self._kbuf = self._vbuf = self._view = None
        self._end = 0
        super().reset()


def new_cache(model) -> DynamicCache:
    """A ``DynamicCache`` for ``model`` whose plain full-attention layers are :class:`SpareLayer` s."""
    cache = DynamicCache(config=model.config)
    layers = getattr(cache, "layers", None)
    if layers and _ENABLED:
        for i, layer in enumerate(layers):
            if type(layer) is DynamicLayer:
                layers[i] = SpareLayer()
    return cache


def folded_gqa_sdpa(module, query, key, value, attention_mask, dropout: float = 0.0, scaling=None,
                    is_causal=None, **kwargs):
    """``sdpa`` attention for grouped-query models that never copies K/V, masked or not (see module doc).

    Falls back to ``transformers``' own ``sdpa`` function when there is nothing to fold (no groups, no mask:
    that path already uses ``enable_gqa``) or when the call carries extras this function does not handle.
    """
    from transformers.integrations.sdpa_attention import sdpa_attention_forward  # deferred: transformers is heavy to import

    rep = getattr(module, "num_key_value_groups", 1)
    if (rep <= 1 or attention_mask is None or kwargs.get("position_bias") is not None
            or kwargs.get("cache") is not None or kwargs.get("output_attentions") or dropout
            or query.shape[1] != key.shape[1] * rep):
        return sdpa_attention_forward(module, query, key, value, attention_mask, dropout=dropout, scaling=scaling,
                                      is_causal=is_causal, **kwargs)
    b, hq, q, d = query.shape
    hkv, s = key.shape[1], key.shape[2]
    # query head j of group g is head g * rep + j (repeat_kv's order): [b, hkv, rep * q, d]
    fq = query.reshape(b, hkv, rep * q, d)
    m = attention_mask
    if m.shape[1] == 1:  # [b, 1, q, s] -> [b, 1, rep * q, s]: each folded row keeps its own query's mask row
        m = m.expand(m.shape[0], rep, q, s).reshape(m.shape[0], 1, rep * q, s) if q > 1 else m.expand(
            m.shape[0], 1, rep, s)
    else:  # per-head masks [b, hq, q, s] -> [b, hkv, rep * q, s]
        m = m.reshape(m.shape[0], hkv, rep * q, s)
    out = torch.nn.functional.scaled_dot_product_attention(fq, key, value, attn_mask=m, scale=scaling)
    return out.reshape(b, hq, q, d).transpose(1, 2).contiguous(), None


def _register() -> None:
    from transformers import AttentionInterface  # deferred: transformers is heavy to import
    from transformers.masking_utils import ALL_MASK_ATTENTION_FUNCTIONS, sdpa_mask  # deferred: transformers is heavy to import

    AttentionInterface.register(ATTN_NAME, folded_gqa_sdpa)
    ALL_MASK_ATTENTION_FUNCTIONS.register(ATTN_NAME, sdpa_mask)


#: packed weights per model (dropped with the model); name -> ((data_ptr, dtype, shape, version), packed weight)
_PACKED: weakref.WeakKeyDictionary = weakref.WeakKeyDictionary()
#: pack only when the packed copy takes at most this fraction of the memory available now
PACK_MEMORY_FRACTION = 0.25


def _available_bytes() -> int:
    try:
        with open("/proc/meminfo") as f:
            for line in f:
                if line.startswith("MemAvailable:"):
                    return int(line.split()[1]) * 1024
    except OSError:
        pass
    return (os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_AVPHYS_PAGES")) if hasattr(os, "sysconf") else 0


def _packable(model) -> list[tuple[str, torch.nn.Linear]]:
    """Plain float32/bfloat16 ``nn.Linear`` modules on CPU (not subclasses: quantised layers keep their own
    kernels)."""
    if not _ENABLED or not torch.backends.mkldnn.is_available():
        return []
    return [(n, m) for n, m in model.named_modules() if type(m) is torch.nn.Linear
            and m.weight.device.type == "cpu" and m.weight.dtype in (torch.float32, torch.bfloat16)]


@contextlib.contextmanager
def packed_linears(model) -> Iterator[bool]:
    """Run ``model``'s float32/bfloat16 CPU linear layers through oneDNN with pre-packed weights inside the block.

    Yields whether packing is on. The packed weights are cached per model and re-packed when a weight changes
    (its version counter moves); forward hooks on the layers still run; every layer's own ``forward`` is
    restored on exit.
    """
    mods = _packable(model)
    if not mods:
        yield False
        return
    cache = _PACKED.setdefault(model, {})
    need = sum(m.weight.numel() * m.weight.element_size() for n, m in mods if n not in cache)
    if need and need > PACK_MEMORY_FRACTION * _available_bytes():
        yield False
        return
    patched: list[torch.nn.Linear] = []
    try:
        for name, mod in mods:
            w = mod.weight
            ver = (w.data_ptr(), w.dtype, tuple(w.shape), w._version)  # a new, cast or edited weight: re-pack
            got = cache.get(name)
            if got is None or got[0] != ver:
                with torch.no_grad():
                    got = (ver, torch.ops.mkldnn._reorder_linear_weight(w.detach(), None))
                cache[name] = got
            mod.forward = _packed_forward(got[1], mod.bias)  # type: ignore[method-assign]
            patched.append(mod)
    except RuntimeError:  # an oneDNN build without these ops: run the plain layers
        for mod in patched:
            del mod.forward
        yield False
        return
    try:
        yield True
    finally:
        for mod in patched:
            del mod.forward


def _packed_forward(weight, bias):
    def forward(x: torch.Tensor) -> torch.Tensor:
        return torch.ops.mkldnn._linear_pointwise(x, weight, bias, "none", [], "")

    return forward


@contextlib.contextmanager
def fast_decoding(model) -> Iterator[None]:
    """Inside the block: :func:`folded_gqa_sdpa` when ``model`` runs ``sdpa``, and :func:`packed_linears`."""
    configs = [c for c in {id(c): c for c in _configs(model)}.values() if _ENABLED
               and getattr(c, "_attn_implementation", None) == "sdpa"]
    if configs:
        _register()
    try:
        for c in configs:
            c._attn_implementation = ATTN_NAME
        with packed_linears(model):
            yield
    finally:
        for c in configs:
            c._attn_implementation = "sdpa"


def _configs(model) -> list:
    """The model's config and the sub-module configs its attention layers read."""
    found = [model.config]
    for mod in model.modules():
        cfg = getattr(mod, "config", None)
        if cfg is not None and cfg is not model.config:
            found.append(cfg)
    return found
