"""The residual stream's mean norm at a steering hook point: what an alpha "relative to the mean norm" is scaled by.

    from steering.norms import mean_resid_norm
    mean_resid_norm(lm, texts, layer)           # last token of each text (where a continuation starts)
"""
from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from loadbearing.engine.hookpoints import block_hidden, forward_hooks
from steering.errors import SteeringError
from steering.hooks import hook_module


def mean_resid_norm(lm: Any, texts: Sequence[str], layer: int, *, batch_size: int = 8, positions: str = "last") -> float:
    """Mean L2 norm of the residual stream at ``layer`` (the steering hook point) over ``texts`` (tokenised with
    ``add_special_tokens=False``, as the run's records were).

    ``positions="last"`` (default): the last token of each text, where a continuation starts (and where the
    probes read their features); ``"all"``: every non-pad token. The two differ a lot on models with attention
    sinks: on SmolLM2-135M the first token's residual is hundreds of times larger than the rest, so the
    all-token mean is dominated by it and an alpha "relative to the mean norm" would be far too strong.
    """
    if positions not in ("last", "all"):
        raise SteeringError(f"unknown positions {positions!r} for mean_resid_norm; choose 'last' or 'all'")
    import torch  # deferred: torch is heavy to import

    model, tok = lm.model, lm.tokenizer
    mod = hook_module(model, layer)
    device = next(model.parameters()).device
    total, count = 0.0, 0
    captured: dict[str, Any] = {}

    def grab(module, args, output):
        captured["h"] = block_hidden(output)  # [batch, pos, d_model]

    with forward_hooks([(mod, grab)]):
        for b in range(0, len(texts), batch_size):
            enc = tok(list(texts[b : b + batch_size]), add_special_tokens=False, padding=True,
                      padding_side="left", return_tensors="pt").to(device)
            with torch.inference_mode():
                model(**enc)
            hid = captured["h"].float()  # [batch, pos, d_model]
            m = enc["attention_mask"].bool()  # [batch, pos]
            if positions == "last":  # left padding: the last column is every row's last token
                m = torch.zeros_like(m)
                m[:, -1] = True
            total += float(hid.norm(dim=-1)[m].sum())
            count += int(m.sum())
    if count == 0:
        raise SteeringError("no tokens to measure the residual norm on")
    return total / count
