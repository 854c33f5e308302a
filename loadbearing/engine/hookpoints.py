"""Hook points: where a hidden state is read or edited, and forward hooks that are always removed.

    from loadbearing.engine.hookpoints import block_hidden, layer_hooks, replace_hidden
    def grab(module, args, output):
        seen.append(block_hidden(output))                     # [batch, pos, d_model]
    with layer_hooks(model, {4: grab}):                        # removed on exit, also when the body raises
        model(input_ids=ids)

Layer ``L`` is the hidden-state index (``hidden_states[L]``): the hook sits on
:func:`loadbearing.engine.layers.hidden_state_module` (the embeddings for 0, decoder block ``L - 1`` else).

The one rule for a block's output: a decoder block returns a tuple whose first element is the hidden state
(older transformers, most families) or the hidden-state tensor itself (newer ones; the embedding module
always); a wrapping library (nnsight, transformer-lens) may hand a list. :func:`block_hidden` reads the hidden
state, :func:`replace_hidden` builds the output a forward hook returns to replace it.

The one rule for hooks (as steering-vectors does it): a :class:`Hooks` owns exactly the ``RemovableHandle``s
it registered, ``remove()`` removes those and never touches the model's other hooks (pyvene clears a
module's hooks wholesale, the user's own included), and the context managers register inside ``try`` and
remove in ``finally``. Importing this module imports no torch.
"""
from __future__ import annotations

import contextlib
from collections.abc import Callable, Iterable, Iterator, Mapping
from typing import TYPE_CHECKING, Any

from loadbearing.engine.layers import hidden_state_module

if TYPE_CHECKING:
    from torch import Tensor
    from torch.nn import Module
    from torch.utils.hooks import RemovableHandle

Hook = Callable[..., Any]

__all__ = ["Hook", "Hooks", "block_hidden", "forward_hooks", "hook_points", "layer_hooks", "replace_hidden"]


def block_hidden(output: Any) -> Tensor:
    """The hidden state ``[batch, pos, d_model]`` in a block's (or the embeddings') forward output."""
    return output[0] if isinstance(output, (tuple, list)) else output


def replace_hidden(output: Any, new: Tensor) -> Tensor | tuple[object, ...]:
    """The forward output with its hidden state replaced by ``new`` (the same kind: tuple or tensor)."""
    if isinstance(output, tuple):
        return (new,) + tuple(output[1:])
    return new


def hook_points(model: Any, layers: Iterable[int]) -> list[Module]:
    """The module of each hidden-state layer (checked: an unknown layer is a ``LayerError``)."""
    return [hidden_state_module(model, int(layer)) for layer in layers]


class Hooks:
    """The forward (pre-)hooks one caller registered: ``remove()`` removes exactly those (idempotent); also a
    context manager that removes them on exit."""

    def __init__(self) -> None:
        self._handles: list[RemovableHandle] = []

    def forward(self, module: Module, hook: Hook) -> RemovableHandle:
        """Register ``hook(module, args, output)`` on ``module``; returns its ``RemovableHandle``."""
        handle = module.register_forward_hook(hook)
        self._handles.append(handle)
        return handle

    def pre_forward(self, module: Module, hook: Hook, *, with_kwargs: bool = False) -> RemovableHandle:
        """Register a forward pre-hook (``hook(module, args[, kwargs])``) on ``module``."""
        handle = module.register_forward_pre_hook(hook, with_kwargs=with_kwargs)
        self._handles.append(handle)
        return handle

    def remove(self) -> None:
        while self._handles:
            self._handles.pop().remove()

    def __len__(self) -> int:
        return len(self._handles)

    def __enter__(self) -> Hooks:
        return self

    def __exit__(self, *exc: Any) -> None:
        self.remove()


@contextlib.contextmanager
def forward_hooks(pairs: Iterable[tuple[Any, Hook]]) -> Iterator[Hooks]:
    """Register ``hook`` on ``module`` for each ``(module, hook)`` while the body runs; every hook registered
    is removed on exit, also when the body (or a later registration) raises."""
    hooks = Hooks()
    try:
        for module, hook in pairs:
            hooks.forward(module, hook)
        yield hooks
    finally:
        hooks.remove()


def layer_hooks(model: Any, hooks: Mapping[int, Hook]) -> contextlib.AbstractContextManager[Hooks]:
    """:func:`forward_hooks` at hidden-state layers: ``{layer: hook}``, each on that layer's hook point."""
    return forward_hooks((hidden_state_module(model, int(layer)), hook) for layer, hook in hooks.items())
