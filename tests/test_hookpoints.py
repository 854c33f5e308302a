"""loadbearing.engine.hookpoints: the block-output rule, and hooks that are removed on exit and on error while
the model's other hooks stay; on the tiny Llama, a layer hook reads exactly ``hidden_states[L]``."""
from __future__ import annotations

import pytest
import torch

from loadbearing.engine.hookpoints import Hooks, block_hidden, forward_hooks, layer_hooks, replace_hidden
from loadbearing.engine.layers import LayerError


class TupleBlock(torch.nn.Module):
    def forward(self, x):
        return (x * 2, "rest")


def test_block_output_rule_reads_and_replaces_tuple_and_tensor():
    h = torch.ones(1, 2, 3)
    assert block_hidden((h, None)) is h and block_hidden([h]) is h and block_hidden(h) is h
    new = torch.zeros_like(h)
    assert replace_hidden((h, "a", "b"), new) == (new, "a", "b")
    assert replace_hidden(h, new) is new


def test_hooks_removed_on_exit_and_on_error_and_user_hooks_kept():
    block = TupleBlock()
    mine = block.register_forward_hook(lambda m, a, o: None)  # the user's own hook
    with forward_hooks([(block, lambda m, a, o: replace_hidden(o, block_hidden(o) + 1))]) as hooks:
        assert len(hooks) == 1 and len(block._forward_hooks) == 2
        assert float(block(torch.ones(1))[0]) == 3.0
    assert list(block._forward_hooks) == [mine.id]
    with pytest.raises(RuntimeError, match="boom"), forward_hooks([(block, lambda m, a, o: None)]):
        raise RuntimeError("boom")
    assert list(block._forward_hooks) == [mine.id]
    h = Hooks()
    h.pre_forward(block, lambda m, a, k: None, with_kwargs=True)
    h.forward(block, lambda m, a, o: None)
    h.remove()
    h.remove()  # idempotent
    assert len(h) == 0 and not block._forward_pre_hooks and list(block._forward_hooks) == [mine.id]


def test_layer_hooks_read_hidden_states_and_a_bad_layer_leaves_no_hook(tiny_lm):
    model = tiny_lm.model
    ids = torch.tensor([[1, 2, 3, 4]])
    seen = {}
    n = len(model.model.layers)

    def grab(layer):
        return lambda m, a, o: seen.__setitem__(layer, block_hidden(o))

    mine = {L: grab(L) for L in range(n)}
    blocks = [model.get_input_embeddings(), *model.model.layers]

    def ours_left():  # transformers may keep hooks of its own on the blocks (output recording): only ours count
        return [h for b in blocks for h in b._forward_hooks.values() if h in mine.values() or h is print]

    with layer_hooks(model, mine), torch.no_grad():
        assert len(ours_left()) == n
        hs = model(input_ids=ids, output_hidden_states=True).hidden_states
    for L in range(n):  # the last block's hidden_states entry is after the final norm: compare below it
        assert torch.equal(seen[L], hs[L])
    assert not ours_left()
    with pytest.raises(LayerError, match="unknown layer"), layer_hooks(model, {0: mine[0], 99: print}):
        pass
    assert not ours_left()
