"""Residual-stream steering hooks: add dose-matched direction vectors during ``generate``.

    from steering.hooks import steer
    with steer(lm.model, basis, layers=[6], alpha=4.0):            # basis: [k, d_model], orthonormal rows
        out = lm.model.generate(**enc, max_new_tokens=64)
    with steer(lm.model, basis, layers=[6], alpha=[0.0, 2.0, 4.0]):  # one alpha per batch row
        ...
    handle = patch(lm.model, basis, layers=[6], alpha=4.0); ...; handle.remove()
    with steer(lm, probes.read_directions("runs/demo/probes"), k=4, alpha_rel=0.5):  # its selected layer, relative alpha

Where: layer ``L`` adds to the output of decoder block ``L-1`` (``L = 0``: the embedding output), so ``L``
names the same point as ``hidden_states[L]`` of a Hugging Face forward with ``output_hidden_states=True``
(for the last block, ``L = n_layers``, HF's ``hidden_states[L]`` is taken after the final norm; we add before
it, at the block's output; for models that rescale embeddings inside the model's forward, e.g. Gemma's
sqrt(d_model), ``L = 0`` is before that scaling).

What: ``alpha * v`` where ``v`` is the *dose-matched* combination of the directions
(:func:`steering.vectors.combine_directions`: the sum rescaled to the norm of one direction; ``dose="sum"``
reproduces the paper's unmatched sum). ``alpha`` is in residual-stream units, or relative to the layer's mean
residual norm (:func:`steering.norms.mean_resid_norm`; the sweep does this).

Per row: ``alpha`` may be a float or a sequence/tensor ``[batch]``; ``directions`` may be one basis shared by
all rows (``[d_model]`` or ``[k, d_model]``), or one basis per row (a ``[batch, k, d_model]`` array, or a list of
``batch`` arrays each ``[d_model]`` or ``[k_i, d_model]``, so rows can have different k). The lower-level
:func:`steer_vectors` takes the already-combined per-row vectors ``[batch, d_model]`` (or ``[d_model]``).

Which positions (``positions=``: ``"continuation"``, the default, ``"generated"`` or ``"all"``): the rule of
:mod:`steering.positions`, in the coordinates of the padded sequence ``model.generate`` builds.

The prefix length is learned from the first forward pass in the context (the prefill); it is the same with
and without the KV cache: with the cache, later passes carry ``past_key_values`` and their absolute positions
start at the cache length; without it, later passes re-feed the whole sequence, which is recognised because
it starts with the stored prefix (a new prompt of the same batch re-arms detection; :meth:`SteeringHandle.reset`
does it explicitly, and ``prompt_len=`` fixes it by hand). Pad positions (``attention_mask == 0``, e.g. left
padding) are never steered: a forward pre-hook (``with_kwargs=True``) on the model reads each pass's
``attention_mask`` and ``past_key_values``.

Hooks: the handle owns exactly the ``RemovableHandle`` objects it registered (registered inside ``try``,
removed in ``finally`` on error), and never touches other hooks on the model.
"""
from __future__ import annotations

import contextlib
from collections.abc import Callable, Iterable, Iterator, Sequence
from typing import TYPE_CHECKING, Any, TypeVar

import numpy as np

from loadbearing.engine.hookpoints import Hooks, block_hidden, replace_hidden
from loadbearing.engine.layers import LayerError, hidden_state_module, unwrap_model
from loadbearing.engine.layers import d_model as _d_model
from loadbearing.engine.layers import n_layers as _n_layers
from steering.audit import HandleWatch
from steering.errors import SteeringError
from steering.positions import POSITIONS, check_positions, first_steered
from steering.vectors import DOSES, as_tensor, combine_directions, row_vectors

if TYPE_CHECKING:
    from torch import Tensor
    from torch.nn import Module

__all__ = ["DOSES", "attach", "hook_layers", "POSITIONS", "SteeringError", "SteeringHandle", "combine_directions",
           "hook_module", "n_layers", "patch", "patch_vectors", "resolve", "steer", "steer_vectors", "d_model"]

# ------------------------------------------------------------------------------------------------ model parts


def _unwrap(model: Any) -> Any:
    """Accept a LoadedModel, an HF model, or a wrapper :mod:`loadbearing.engine.layers` knows."""
    return unwrap_model(model)


def n_layers(model: Any) -> int:
    """Number of decoder blocks (hidden-states layers run 0..n_layers), by
    :func:`loadbearing.engine.layers.n_layers` (the one home of the layer convention)."""
    try:
        return _n_layers(model)
    except LayerError as e:
        raise SteeringError(str(e)) from None


def d_model(model: Any) -> int:
    """Residual-stream width (:func:`loadbearing.engine.layers.d_model`)."""
    try:
        return _d_model(model)
    except LayerError as e:
        raise SteeringError(str(e)) from None


def hook_module(model: Any, layer: int) -> Module:
    """The module whose output is ``hidden_states[layer]``'s hook point (embeddings for 0, block layer-1 else),
    by :func:`loadbearing.engine.layers.hidden_state_module`."""
    if isinstance(layer, bool) or not isinstance(layer, (int, np.integer)):
        raise SteeringError(f"unknown layer {layer!r}: pass an integer hidden-states layer index")
    try:
        return hidden_state_module(model, int(layer))
    except LayerError as e:
        raise SteeringError(str(e)) from None


# ------------------------------------------------------------------------------------------------ handle


class SteeringHandle:
    """Owns the hooks one :func:`patch` call registered; ``remove()`` removes exactly those (idempotent).

    Also a context manager (``with patch(...) as h:``). Attributes: ``layers``, ``positions``, ``vectors``
    ([d_model] or [batch, d_model], float32), ``alpha`` (float or [batch]), ``prompt_len`` (learned from the
    prefill, or given), ``calls`` (forward passes seen), ``steered_positions`` (total positions steered).
    """

    def __init__(self, model: Any, vectors: Any, *, layers: Sequence[int], alpha: Any, positions: str,
                 prompt_len: int | None = None, tokenizer: Any = None) -> None:
        import torch  # deferred: torch is heavy to import

        self.model = model
        self.layers = [int(x) for x in layers]
        self.positions = positions
        self.vectors = vectors  # [d_model] or [batch, d_model]
        self.alpha: float | Tensor
        if isinstance(alpha, (int, float, np.floating, np.integer)):
            self.alpha = float(alpha)
        else:
            a = as_tensor(alpha)
            if a.ndim == 0:
                self.alpha = float(a)
            elif a.ndim == 1:
                self.alpha = a
            else:
                raise SteeringError(f"alpha must be a float or a [batch] sequence, got shape {tuple(a.shape)}")
        if vectors.ndim == 2 and isinstance(self.alpha, torch.Tensor) and len(self.alpha) != vectors.shape[0]:
            raise SteeringError(f"{len(self.alpha)} alphas for {vectors.shape[0]} per-row vectors")
        self._fixed_prompt_len = prompt_len
        self.prompt_len = prompt_len
        self._prefix_ids = None
        self._saw_cache = False
        self._delta_cache: dict = {}
        self._hooks = Hooks()
        self._mask: Tensor | None = None  # [batch, cur_len] bool for the current pass, set by the pre-hook
        self.calls = 0
        self.steered_positions = 0
        self._watch = HandleWatch(positions, tokenizer)  # the phase filter and the audit

    # -- lifecycle
    def reset(self) -> None:
        """Forget the learned prefix length (the next pass is a new prefill)."""
        self.prompt_len = self._fixed_prompt_len
        self._prefix_ids = None
        self._saw_cache = False

    def audit(self) -> list[dict[str, Any]]:  # per row of the prompt: what was steered (steering.audit)
        return self._watch.audit(len(self.layers))

    def remove(self) -> None:
        self._hooks.remove()
        self._mask = None

    @property
    def n_hooks(self) -> int:
        return len(self._hooks)

    def __enter__(self) -> SteeringHandle:
        return self

    def __exit__(self, *exc: Any) -> None:
        self.remove()

    # -- per pass bookkeeping
    def _delta(self, dtype, device, batch: int):
        """alpha * v as [batch or 1, 1, d_model] in the hidden dtype/device (cached)."""
        import torch  # deferred: torch is heavy to import

        key = (dtype, device, batch)
        got = self._delta_cache.get(key)
        if got is not None:
            return got
        v = self.vectors
        a = self.alpha
        if v.ndim == 2 and v.shape[0] != batch:
            raise SteeringError(f"steering has {v.shape[0]} per-row vectors but the batch has {batch} rows")
        if isinstance(a, torch.Tensor):
            if len(a) != batch:
                raise SteeringError(f"steering has {len(a)} per-row alphas but the batch has {batch} rows")
            delta = a[:, None] * (v if v.ndim == 2 else v[None])  # [batch, d_model]
        else:
            delta = a * (v if v.ndim == 2 else v[None])  # [batch or 1, d_model]
        delta = delta[:, None, :].to(device=device, dtype=dtype)  # [batch|1, 1, d_model]
        self._delta_cache[key] = delta
        return delta

    def _pre_forward(self, module, args, kwargs):
        """Model pre-hook: work out which positions of this pass are steered."""
        import torch  # deferred: torch is heavy to import

        self.calls += 1
        ids = kwargs.get("input_ids", args[0] if args else None)
        embeds = kwargs.get("inputs_embeds")
        ref = ids if ids is not None else embeds
        if ref is None:
            self._mask = None
            return None
        batch, cur = int(ref.shape[0]), int(ref.shape[1])
        device = ref.device
        past = kwargs.get("past_key_values")
        past_len = 0
        if past is not None:
            try:
                past_len = int(past.get_seq_length())
            except (AttributeError, TypeError):  # legacy tuple caches
                past_len = int(past[0][0].shape[-2]) if len(past) else 0
        if past_len > 0:
            self._saw_cache = True
        else:
            new_prompt = True
            if self._prefix_ids is not None and ids is not None and not self._saw_cache:
                p = self._prefix_ids
                if ids.shape[0] == p.shape[0] and cur > p.shape[1] and torch.equal(ids[:, : p.shape[1]], p):
                    new_prompt = False  # no-cache generation re-feeding prefix + generated tokens
            if new_prompt:
                if self._fixed_prompt_len is None:
                    self.prompt_len = cur
                self._prefix_ids = ids.detach().clone() if ids is not None else None
                self._saw_cache = False
                self._watch.new_prompt(batch)
        pos = torch.arange(past_len, past_len + cur, device=device)  # absolute positions of this pass
        am = kwargs.get("attention_mask")
        if am is not None and am.ndim == 2:
            valid = am[:, past_len : past_len + cur].to(torch.bool)  # [batch, cur]
            if valid.shape[1] != cur:  # mask covers only the current chunk
                valid = am[:, -cur:].to(torch.bool)
        else:
            valid = torch.ones(batch, cur, dtype=torch.bool, device=device)
        plen = self.prompt_len if self.prompt_len is not None else cur
        sel = pos >= first_steered(self.positions, plen)  # [cur]
        self._mask = self._watch.observe(valid & sel[None, :], ids, am, past_len, cur, valid)  # [batch, cur]
        return None

    def _edit(self, hidden: Any) -> Callable[[Tensor | None], Tensor]:
        """``edit(mask)``: the steered hidden states, at every position (``mask=None``) or at ``mask`` only (pads
        and the prefix stay exactly as they were)."""
        delta = self._delta(hidden.dtype, hidden.device, hidden.shape[0])  # [batch|1, 1, d_model]
        return lambda m: hidden + delta if m is None else hidden + delta * m[..., None].to(hidden.dtype)

    def _forward_hook(self, module, args, output):
        import torch  # deferred: torch is heavy to import

        hidden = block_hidden(output)  # [batch, pos, d_model]
        if not isinstance(hidden, torch.Tensor):
            return None
        edit = self._edit(hidden)
        mask = self._mask
        if mask is None or mask.shape != hidden.shape[:2]:
            # not called through the model's forward (or odd shapes): steer everything but nothing we can't see
            mask = torch.ones(hidden.shape[:2], dtype=torch.bool, device=hidden.device)
        n_steer = int(mask.sum())
        if n_steer == 0:
            return None
        self._watch.fired()
        new = edit(None if n_steer == mask.numel() else mask)  # decode steps: every row's one position is steered
        self.steered_positions += n_steer
        return replace_hidden(output, new)


# ------------------------------------------------------------------------------------------------ entry points
H = TypeVar("H", bound=SteeringHandle)


def patch_vectors(model: Any, vectors: Any, *, layers: Iterable[int] | int, alpha: Any = 1.0, positions: str = "continuation",
                  prompt_len: int | None = None, tokenizer: Any = None) -> SteeringHandle:
    """Register hooks adding ``alpha * vectors`` ([d_model] shared, or [batch, d_model] per row) at ``layers``.

    Returns the :class:`SteeringHandle`; call ``remove()`` (or use it as a context manager) to undo.
    """
    tokenizer, model = tokenizer if tokenizer is not None else getattr(model, "tokenizer", None), _unwrap(model)
    layer_list, mods = hook_layers(model, layers, positions)
    v = as_tensor(vectors)
    width = d_model(model)
    if v.ndim not in (1, 2) or v.shape[-1] != width:
        raise SteeringError(f"steering vectors have shape {tuple(v.shape)} but the model's d_model is {width}; "
                            "use directions computed from this model's residual stream")
    return attach(SteeringHandle(model, v, layers=layer_list, alpha=alpha, positions=positions, prompt_len=prompt_len,
                                 tokenizer=tokenizer), mods)


def hook_layers(model: Any, layers: Iterable[int] | int, positions: str) -> tuple[list[int], list[Module]]:
    """(layers, their hook modules), checked (and ``positions`` with them)."""
    check_positions(positions)
    layer_list = [int(layers)] if isinstance(layers, (int, np.integer)) else [int(x) for x in layers]
    if not layer_list:
        raise SteeringError("no layers to steer; pass layers=[L, ...]")
    return layer_list, [hook_module(model, L) for L in layer_list]  # validates the layers


def attach(handle: H, mods: list[Any]) -> H:
    """Register ``handle``'s pre-hook on its model and its forward hook on ``mods`` (all removed on error)."""
    try:
        handle._hooks.pre_forward(handle.model, handle._pre_forward, with_kwargs=True)
        for m in mods:
            handle._hooks.forward(m, handle._forward_hook)
    except BaseException:
        handle.remove()
        raise
    return handle


def _numeric(x: Any) -> bool:
    """A tensor, a numeric array or number, or a non-empty list/tuple of those (per-row bases)."""
    import torch  # deferred: torch is heavy to import

    if isinstance(x, (list, tuple)):
        return bool(x) and all(_numeric(e) for e in x)
    return isinstance(x, torch.Tensor) or np.asarray(x).dtype.kind in "fiu" and not isinstance(x, (str, bytes, bool))


def resolve(directions: Any, layers: Iterable[int] | int | None, alpha: Any, alpha_rel: Any, k: int | None
            ) -> tuple[Any, Iterable[int] | int, Any]:
    """(basis, layers, absolute alpha) from :func:`steer`'s arguments. A :class:`probes.directions.Directions`
    gives the basis of its one layer (default its selected layer; ``k`` rows) and the residual norm that
    ``alpha_rel`` multiplies; anything but a Directions or a numeric array is a TypeError."""
    # deferred: keeps probes (and 3 more modules) out of `python -m steering.patching`'s start-up
    from probes.directions import Directions

    if alpha is not None and alpha_rel is not None:
        raise SteeringError("pass alpha (absolute) or alpha_rel (relative to the layer's residual norm), not both")
    if isinstance(directions, Directions):
        L = directions.selected_layer if layers is None else layers
        got = [L] if L is None or isinstance(L, (int, np.integer)) else list(L)
        if len(got) != 1 or got[0] is None:
            raise SteeringError(f"pass one layer (layers=L) with a Directions ({directions.path} has {directions.layers}); "
                                "it holds one basis per layer, so nest steer() calls to steer several")
        L = int(got[0])
        if alpha_rel is not None:
            norm = directions.resid_norm.get(L)
            if not norm:
                raise SteeringError(f"{directions.path} records no residual norm for layer {L}; pass alpha= in "
                                    f"residual units (alpha_rel * mean_resid_norm(lm, texts, {L}))")
            a = np.asarray(alpha_rel, dtype=np.float64) * float(norm)
            alpha = float(a) if a.ndim == 0 else a
        return directions.basis(L, k), [L], 1.0 if alpha is None else alpha
    if not _numeric(directions):
        raise TypeError(f"steer() takes a probes.directions.Directions (probes.read_directions(PROBES_DIR)) or the "
                        f"directions as a numeric [d_model] / [k, d_model] array; got {type(directions).__name__}"
                        + (f" of dtype {directions.dtype}" if isinstance(directions, np.ndarray) else ""))
    if alpha_rel is not None or k is not None:
        raise SteeringError("alpha_rel= and k= need a probes.directions.Directions (it records the residual norm and "
                            "the basis); with an array pass alpha= in residual units and slice the rows yourself")
    if layers is None:
        raise SteeringError("no layers to steer; pass layers=[L, ...]")
    return directions, layers, 1.0 if alpha is None else alpha


def patch(model: Any, directions: Any, *, layers: Iterable[int] | int | None = None, alpha: Any = None,
          alpha_rel: Any = None, k: int | None = None, positions: str = "continuation", dose: str = "matched",
          prompt_len: int | None = None) -> SteeringHandle:
    """Like :func:`steer` but returns the handle directly (call ``handle.remove()``)."""
    basis, layers, alpha = resolve(directions, layers, alpha, alpha_rel, k)
    return patch_vectors(model, row_vectors(basis, dose), layers=layers, alpha=alpha, positions=positions,
                         prompt_len=prompt_len)


@contextlib.contextmanager
def steer_vectors(model: Any, vectors: Any, *, layers: Iterable[int] | int, alpha: Any = 1.0,
                  positions: str = "continuation", prompt_len: int | None = None) -> Iterator[SteeringHandle]:
    """Context-manager form of :func:`patch_vectors` (hooks removed on exit and on error)."""
    handle = None
    try:
        handle = patch_vectors(model, vectors, layers=layers, alpha=alpha, positions=positions, prompt_len=prompt_len)
        yield handle
    finally:
        if handle is not None:
            handle.remove()


@contextlib.contextmanager
def steer(model: Any, directions: Any, *, layers: Iterable[int] | int | None = None, alpha: Any = None,
          alpha_rel: Any = None, k: int | None = None, positions: str = "continuation", dose: str = "matched",
          prompt_len: int | None = None) -> Iterator[SteeringHandle]:
    """Add ``alpha * combine_directions(basis, dose)`` to the residual stream at ``layers`` while active.

    ``directions``: a :class:`probes.directions.Directions` (one layer: ``layers=L``, default its selected
    layer; ``k`` its first k basis rows, default all) or an array (see the module docstring for the shapes).
    ``alpha`` is in residual units (default 1.0); ``alpha_rel`` is relative to the layer's mean residual norm
    recorded in the Directions (the sweep's ``--alphas``), e.g.::

        dirs = probes.read_directions("runs/demo/probes")
        with steer(lm, dirs, k=4, alpha_rel=0.5):
            out = lm.model.generate(**enc, max_new_tokens=64)

    A wrong type of ``directions`` is a TypeError. Yields the :class:`SteeringHandle`; its hooks are removed
    on exit, also when the body raises.
    """
    handle = None
    try:
        handle = patch(model, directions, layers=layers, alpha=alpha, alpha_rel=alpha_rel, k=k, positions=positions,
                       dose=dose, prompt_len=prompt_len)
        yield handle
    finally:
        if handle is not None:
            handle.remove()
