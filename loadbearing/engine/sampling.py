"""Seeded sampling (temperature, top-p) for the batched fast path, one random stream per row.

    from loadbearing.engine.generation import generate
    from loadbearing.engine.sampling import Sampling
    outs = generate(lm, [text] * 8, sampling=Sampling(temperature=0.6, top_p=0.95, seed=44))   # 8 rollouts

* **One ``torch.Generator`` per row**, seeded from ``(seed, row key)`` (:func:`row_seed`): a row draws exactly
  one uniform number per generated token from its own stream, so its tokens depend on its own context and
  key only - not on its batch neighbours, the batch size, the batch order, or how many rows finished before
  it (up to the floating-point noise of a batched forward, which greedy decoding has too). The row key is
  the caller's (``sample_keys``: e.g. a rollout's id) or, by default, the row's text and its occurrence
  number among identical texts in the call (so N copies of one prefix are N different rollouts, and
  rollout ``j`` of a prefix is the same whatever else is in the call).
* **Inverse-CDF draw**: probabilities ``softmax(logits / T)`` sorted by descending probability (the top
  :data:`NUCLEUS_CANDIDATES` when they hold the nucleus, else a stable sort of all of them); the nucleus is
  the smallest head whose mass reaches ``top_p`` (a token is kept when the mass *before* it is below
  ``top_p``; the most likely token always is), and the token is the first whose cumulative kept mass
  exceeds ``u * kept mass``, ``u ~ U[0, 1)`` from the row's stream: the nucleus rule of ``transformers``'
  ``TopPLogitsWarper`` (up to ties at its edge) and one draw per token.
* ``temperature == 0`` is greedy (argmax, no draw): the fast path's greedy records, byte for byte.
* Prompt-lookup drafts (:data:`loadbearing.engine.batching.LOOKAHEAD`) are switched **off** while sampling:
  a draft verified against a sample would consume the row's stream differently from plain decoding.
"""
from __future__ import annotations

import hashlib
import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

if TYPE_CHECKING:  # pragma: no cover
    import torch

#: top-p: the nucleus is searched among this many most likely tokens first (exact: when their mass does not
#: reach top_p the row sorts its whole distribution)
NUCLEUS_CANDIDATES = 64


@dataclass(frozen=True)
class Sampling:
    """Sampling settings; ``temperature == 0`` means greedy."""

    temperature: float = 1.0
    top_p: float = 1.0
    seed: int = 0

    def __post_init__(self) -> None:
        if not (isinstance(self.temperature, (int, float)) and math.isfinite(self.temperature)
                and self.temperature >= 0):
            raise ValueError(f"temperature must be a finite number >= 0, got {self.temperature!r}")
        if not (isinstance(self.top_p, (int, float)) and 0 < self.top_p <= 1):
            raise ValueError(f"top_p must be in (0, 1], got {self.top_p!r}")

    @property
    def greedy(self) -> bool:
        return self.temperature == 0

    def to_dict(self) -> dict[str, float | int | str]:
        return {"temperature": self.temperature, "top_p": self.top_p, "seed": self.seed,
                "method": "per-row torch.Generator(seed=sha256(seed, row key)); inverse-CDF top-p draw"}


def row_seed(seed: int, key: str) -> int:
    """The 63-bit seed of a row's stream: ``sha256(f"{seed}\\0{key}")`` (stable across runs and machines)."""
    return int.from_bytes(hashlib.sha256(f"{seed}\0{key}".encode()).digest()[:8], "big") >> 1


def default_keys(texts: Sequence[str]) -> list[str]:
    """A key per text: its occurrence number among identical texts, and the text's sha256."""
    seen: dict[str, int] = {}
    out = []
    for t in texts:
        j = seen.get(t, 0)
        seen[t] = j + 1
        out.append(f"{j}:{hashlib.sha256(t.encode()).hexdigest()}")
    return out


def draw(logits: torch.Tensor, generators: Sequence[torch.Generator], sampling: Sampling) -> torch.Tensor:
    """One token per row of ``logits`` ``[b, vocab]`` (row ``i`` draws from ``generators[i]``) -> ``[b]`` long."""
    import torch  # deferred: torch is heavy to import

    if sampling.greedy:
        return logits.argmax(dim=-1)
    probs = torch.softmax(logits.float() / float(sampling.temperature), dim=-1)  # [b, V]
    u = torch.stack([torch.rand((), generator=g, dtype=torch.float64) for g in generators]).to(probs.device)
    if sampling.top_p >= 1:  # the whole distribution, in token order
        return _inverse_cdf(probs, u)
    k = min(NUCLEUS_CANDIDATES, probs.shape[-1])
    top, ids = probs.topk(k, dim=-1)  # [b, k] descending
    # the nucleus lies inside the top k exactly when their mass reaches top_p; other rows sort everything
    inside = top.sum(dim=-1) >= sampling.top_p
    out = torch.empty(probs.shape[0], dtype=torch.long, device=probs.device)
    for sel, topk in ((inside, True), (~inside, False)):
        if not bool(sel.any()):
            continue
        sp, si = (top[sel], ids[sel]) if topk else probs[sel].sort(dim=-1, descending=True, stable=True)
        kept = sp * ((sp.cumsum(dim=-1) - sp) < sampling.top_p)  # mass of the more likely tokens < top_p
        out[sel] = si.gather(1, _inverse_cdf(kept, u[sel])[:, None])[:, 0]
    return out


def _inverse_cdf(p: torch.Tensor, u: torch.Tensor) -> torch.Tensor:
    """Index of the first column whose cumulative mass exceeds ``u * total`` (never a zero-mass tail)."""
    import torch  # deferred: torch is heavy to import

    cum = p.cumsum(dim=-1)  # [b, V]
    target = (u * cum[:, -1].double()).to(cum.dtype)[:, None]
    idx = torch.searchsorted(cum, target, right=True)
    last = (cum < cum[:, -1:]).sum(dim=-1, keepdim=True)  # the last column with mass (rounding never passes it)
    return torch.minimum(idx, last)[:, 0]


def chooser(sampling: Sampling, keys: Sequence[str]) -> Callable[[list[int], torch.Tensor], torch.Tensor]:
    """``choose(rows, logits) -> tokens`` for :func:`loadbearing.engine.decoding.decode_continuous`: row ``r``
    (an index into ``keys``) draws from its own stream, created on its first token."""
    import torch  # deferred: torch is heavy to import

    streams: dict[int, torch.Generator] = {}

    def stream(r: int) -> torch.Generator:
        g = streams.get(r)
        if g is None:
            g = streams[r] = torch.Generator(device="cpu")
            g.manual_seed(row_seed(sampling.seed, keys[r]))
        return g

    def choose(rows: list[int], logits: torch.Tensor) -> torch.Tensor:
        return draw(logits, [stream(r) for r in rows], sampling)

    return choose


__all__ = ["Sampling", "row_seed", "default_keys", "draw", "chooser"]
