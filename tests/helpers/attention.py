"""A model whose attention is scripted, for the receiver-head and suppression tests."""
from __future__ import annotations

from pathlib import Path

import numpy as np
import torch

from behavioural.causal.attention import chain_tokens
from behavioural.causal.common import eligible_chains
from loadbearing.engine.models import LoadedModel
from loadbearing.runs import Run

K = 1  # the scripted models' later steps read step K


class ScriptedAttention(torch.nn.Module):
    """Attention by script: a token of step i > K attends (uniformly) to step K's tokens only, every other token to
    itself. Its logit 0 is 5 x the share of its scripted keys the mask leaves it, so masking a step changes exactly
    the tokens that read it. ``bounds`` maps an input (token ids) to its steps' token ranges."""

    def __init__(self, bounds: dict[tuple, list[tuple[int, int]]], impl: str = "eager", can_switch: bool = True):
        super().__init__()
        self.w = torch.nn.Parameter(torch.zeros(1))
        self.bounds, self.can_switch = bounds, can_switch
        self.config = type("C", (), {"_attn_implementation": impl})()

    def set_attn_implementation(self, impl: str) -> None:
        if not self.can_switch:
            raise ValueError("this model does not support setting its attention implementation")
        self.config._attn_implementation = impl

    def reads(self, seq: int, bounds: list[tuple[int, int]]) -> np.ndarray:
        r = np.eye(seq)
        for i, (a, b) in enumerate(bounds):
            if i > K:
                r[a:b] = 0
                r[a:b, bounds[K][0]:bounds[K][1]] = 1
        return r / r.sum(axis=1, keepdims=True)

    def forward(self, input_ids, attention_mask=None, output_attentions=False, use_cache=False):
        if use_cache:  # it keeps no cache: every pass is over the whole input
            return type("Out", (), {"logits": None, "past_key_values": None})()
        ids = tuple(input_ids[0].tolist())
        seq = len(ids)
        reads = self.reads(seq, self.bounds[ids])
        allowed = np.ones((seq, seq)) if attention_mask is None else (attention_mask[0, 0].numpy() > -1e30)
        kept = (reads * allowed).sum(axis=1)  # the share of the scripted attention the mask leaves
        logits = torch.zeros(1, seq, 16)
        logits[0, :, 0] = torch.tensor(5 * kept, dtype=torch.float32)
        attn = None
        if output_attentions:
            if self.config._attn_implementation != "eager":
                attn = (None,)
            else:
                attn = tuple(torch.tensor(reads, dtype=torch.float32)[None, None].repeat(1, 2, 1, 1) for _ in range(2))
        return type("Out", (), {"logits": logits, "attentions": attn})()


def scripted_lm(run: Path, tokenizer, **kw) -> LoadedModel:
    bounds = {}
    for c in eligible_chains(Run(run)):
        ids, b = chain_tokens(c, tokenizer)
        bounds[tuple(ids)] = b
    return LoadedModel(model=ScriptedAttention(bounds, **kw), tokenizer=tokenizer, name="scripted",
                       model_id="scripted", weights_hash="0" * 64)
