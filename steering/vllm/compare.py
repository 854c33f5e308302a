"""Tracing a vLLM-vs-HF steered difference to floating-point order: the logits' top-2 margin where they part.

    from steering.vllm.compare import first_difference
    d = first_difference(lm, text, hf_text, vllm_ids, op="add", data=alpha * v, layer=15)
    d["index"], d["margin"], d["vllm_token_is_runner_up"]     # first differing token, top1 - top2 logit, True

Greedy decoding on two backends parts only where the model's top two logits are so close that a different
summation order flips them. The first differing token ``j`` is the first of vLLM's exact token ids whose text leaves HF's
generated text (HF's records hold text, not ids). This reruns the HF hook path
(:func:`steering.hooks.patch_vectors` / :func:`steering.ablation.patch_ablation`, ``prompt_len`` fixed, so the
same positions are steered) on the prompt and the common prefix ``vllm_ids[:j]``, and reports the top-1/top-2
logit margin there and whether vLLM's token is HF's runner-up (HF's own choice being its top-1). A small margin with the tokens
being the top two is a floating-point tie; anything else would be a bug.
"""
from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np

from loadbearing.engine.generation import encode
from steering.ablation import patch_ablation
from steering.hooks import patch_vectors


def first_difference(lm: Any, text: str, hf_text: str, vllm_ids: Sequence[int], *, op: str, data: Any,
                     layer: int, positions: str = "continuation") -> dict[str, Any]:
    """Where vLLM's steered generation of ``text`` (its token ids) leaves HF's (its text), and HF's top-2 logit
    margin there (``index`` None when vLLM's tokens spell a prefix of HF's text or all of it)."""
    import torch  # deferred: torch is heavy to import

    tok = lm.tokenizer
    ids = list(vllm_ids)
    j = next((i for i in range(len(ids)) if not hf_text.startswith(tok.decode(ids[: i + 1], skip_special_tokens=True))),
             None)
    out: dict[str, Any] = {"index": j, "margin": None, "vllm_token": None, "hf_top2": None,
                           "vllm_token_is_runner_up": None}
    if j is None:
        return out
    prompt = encode(tok, text)
    model = lm.model
    if op == "add":
        handle = patch_vectors(model, np.asarray(data, dtype=np.float32), layers=[layer], alpha=1.0,
                               positions=positions, prompt_len=len(prompt))
    else:
        handle = patch_ablation(model, np.asarray(data, dtype=np.float32), layers=[layer], positions=positions,
                                prompt_len=len(prompt))
    try:
        with torch.inference_mode():
            x = torch.tensor([prompt + ids[:j]], device=next(model.parameters()).device)
            logits = model(input_ids=x).logits[0, -1].float().cpu()
    finally:
        handle.remove()
    top = torch.topk(logits, 2)
    t1, t2 = int(top.indices[0]), int(top.indices[1])
    out.update(margin=float(top.values[0] - top.values[1]), vllm_token=ids[j], hf_top2=[t1, t2],
               vllm_token_is_runner_up=ids[j] == t2)
    return out


__all__ = ["first_difference"]
