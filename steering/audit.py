"""Steering audit: per generation, which token positions received the vector, how often the hook fired per
token, and whether the KV cache was in use (what a user needs to trust a steering run; cf. steering-vectors
#50/#60, SAE-Reasoning #3, neuronpedia #163).

    from steering.audit import RowAudit
    a = RowAudit(); a.see(positions=[11, 12], ids=[...]) ...
    a.record(prompt_tokens=12, produced=5, layers=1, text=g.text, decode=tok.decode)   # the record's steer_audit

Every number is observed, never derived from the positions rule: the recorder sits on the real forward pass
(a forward pre-hook on the model reads each pass's position ids, attention mask, input ids and cache; a
forward hook beside the steering hook counts its firings). A steered generation's record
(``steering/generations.jsonl``) carries it as ``steer_audit``:

* ``positions``: half-open ``[start, end)`` spans of the row's token positions (0 = its first input token, no
  padding counted) whose residual got the vector; ``n_positions`` their count; ``prompt_tokens`` the input's
  length, so a position ``>= prompt_tokens`` is a generated token's. A position is counted once however many
  passes steered it (without the KV cache every pass re-feeds, and re-steers, the whole sequence).
* ``hook_fires``: how many times the steering hook added a vector to this row (every layer counted);
  ``hook_fires_per_token``: that over ``layers x tokens produced`` (1.0 when every produced token came from
  a steered pass; below 1 when prompt-lookup drafts verified several tokens in one pass, or when the first
  token was produced unsteered, ``--steer-positions generated``/``think``/``answer``).
* ``forward_passes``: the model passes this row took part in (shared prefixes not counted).
* ``kv_cache``: whether any of the row's passes read a non-empty KV cache.
* ``text_spans``: ``[start, end)`` character spans of the record's ``text`` whose tokens sat at steered
  positions (what the trace browser highlights). The last produced token is never fed back, so it is never
  inside a span.
"""
from __future__ import annotations

from collections.abc import Callable, Iterable
from typing import TYPE_CHECKING, Any

from loadbearing.thinking import PhaseScan, ThinkError, ThinkTags

if TYPE_CHECKING:
    from torch import Tensor


def spans(positions: Iterable[int]) -> list[list[int]]:
    """Sorted half-open ``[start, end)`` runs of the integer ``positions``."""
    out: list[list[int]] = []
    for p in sorted(set(int(x) for x in positions)):
        if out and out[-1][1] == p:
            out[-1][1] = p + 1
        else:
            out.append([p, p + 1])
    return out


class RowAudit:
    """What one row's passes did (filled by the hooks; :meth:`record` makes the record's ``steer_audit``)."""

    def __init__(self) -> None:
        self.positions: set[int] = set()
        self.ids: dict[int, int] = {}  # token id fed at each position (the latest pass wins)
        self.fires = 0
        self.passes = 0
        self.kv_cache = False

    def see(self, steered: Iterable[int], fed: dict[int, int] | None = None, cached: bool = False) -> None:
        """One pass: the row positions it steered, the tokens it fed (position -> id), whether it read a cache."""
        self.passes += 1
        self.positions.update(int(p) for p in steered)
        if fed:
            self.ids.update(fed)
        self.kv_cache = self.kv_cache or bool(cached)

    def record(self, *, prompt_tokens: int, produced: int, layers: int, text: str = "",
               decode: Callable[[list[int]], str] | None = None) -> dict[str, Any]:
        """The ``steer_audit`` of this row: ``produced`` tokens generated (end of turn included), ``layers``
        steered layers; ``decode`` (the tokenizer's) turns the fed generated tokens into ``text_spans``."""
        end = prompt_tokens + max(produced - 1, 0)  # positions of tokens that were fed back (the last one never is)
        kept = sorted(p for p in self.positions if p < end)
        out: dict[str, Any] = {
            "positions": spans(kept),
            "n_positions": len(kept),
            "prompt_tokens": int(prompt_tokens),
            "hook_fires": int(self.fires),
            "hook_fires_per_token": round(self.fires / (layers * produced), 4) if layers and produced else None,
            "forward_passes": int(self.passes),
            "kv_cache": bool(self.kv_cache),
        }
        if decode is not None:
            gen = [self.ids.get(p) for p in range(prompt_tokens, end)]
            if all(t is not None for t in gen):
                out["text_spans"] = _text_spans(kept, prompt_tokens, [int(t) for t in gen if t is not None], text,
                                                decode)
        return out


def _text_spans(kept: list[int], prompt_tokens: int, gen: list[int], text: str,
                decode: Callable[[list[int]], str]) -> list[list[int]]:
    """Character spans of ``text`` held by the generated tokens at ``kept`` positions (decoding each span's
    boundaries only: the prefix of the generated tokens up to it)."""
    out = []
    for a, b in spans(p - prompt_tokens for p in kept if p >= prompt_tokens):
        c0 = min(len(decode(gen[:a])), len(text))
        c1 = min(len(decode(gen[:b])), len(text))
        if c1 > c0:
            out.append([c0, c1])
    return out


class PassWatch:
    """The fast path's recorder (:func:`steering.generate.generate_with_row_hook`): ``on_pass`` learns which input
    rows a pass computes, :meth:`pre` (a forward pre-hook on the model, ``with_kwargs=True``) reads the pass's
    inputs, narrows the row hook ``state`` to one phase when ``phase`` is set (True: think block, False: answer;
    :mod:`loadbearing.thinking`) and records the steered positions, :meth:`fired` (a forward hook beside the
    steering hook) counts its firings."""

    def __init__(self, state: Any, prompts: list[list[int]], phase: bool | None = None, tags: Any = None) -> None:
        self.state = state
        self.audits = [RowAudit() for _ in prompts]
        self.prompt_len = [len(p) for p in prompts]
        self.phase = phase
        self.scans: list[Any] = []
        if phase is not None:
            self.scans = [PhaseScan(tags) for _ in prompts]
            for sc, ids in zip(self.scans, prompts):
                sc.feed(0, ids)
        self.kind = "shared"
        self.rows: list[int] | None = None
        self._firing: list[int] = []

    def on_pass(self, kind: str, rows: list[int] | None) -> None:
        self.kind, self.rows = kind, rows

    def pre(self, module: Any, args: Any, kwargs: dict) -> None:
        import torch  # deferred: torch is heavy to import

        self._firing = []
        ids = kwargs.get("input_ids", args[0] if args else None)
        if self.rows is None or self.kind == "shared" or ids is None:
            return None
        b, cur = int(ids.shape[0]), int(ids.shape[1])
        pos = kwargs.get("position_ids")
        am = kwargs.get("attention_mask")
        past = kwargs.get("past_key_values")
        cached = past is not None and int(past.get_seq_length()) > 0
        real = am[:, -cur:].bool() if am is not None and am.ndim == 2 else torch.ones(b, cur, dtype=torch.bool)
        mode = self.state.mode
        if mode == "off":
            steer = torch.zeros(b, cur, dtype=torch.bool)
        elif mode == "last":
            steer = torch.zeros(b, cur, dtype=torch.bool)
            steer[:, -1] = True
        elif mode == "all":
            steer = real.cpu()
        else:
            steer = (self.state.mask.bool() & real).cpu()
        real_l, ids_l = real.cpu().tolist(), ids.cpu().tolist()
        pos_l = pos.cpu().tolist() if pos is not None else [list(range(cur))] * b
        if self.phase is not None and mode != "off":
            for i, r in enumerate(self.rows):
                cols = [c for c in range(cur) if real_l[i][c]]
                if not cols:
                    continue
                q0, sc = pos_l[i][cols[0]], self.scans[r]
                if self.kind == "prompt":  # the row's own input: its phases were read up front
                    ph = [sc.open[pos_l[i][c]] for c in cols]
                else:
                    ph = sc.feed(q0, [ids_l[i][c] for c in cols])
                for c, o in zip(cols, ph):
                    if o != self.phase:
                        steer[i, c] = False
            self.state.set("mask", None, steer.to(ids.device))
        steer_l = steer.tolist()
        for i, r in enumerate(self.rows):
            p = self.prompt_len[r]
            got = [pos_l[i][c] for c in range(cur) if steer_l[i][c]]
            fed = {pos_l[i][c]: ids_l[i][c] for c in range(cur) if real_l[i][c] and pos_l[i][c] >= p}
            self.audits[r].see(got, fed, cached)
            if got:
                self._firing.append(r)
        return None

    def fired(self, module: Any, args: Any, output: Any) -> None:
        for r in self._firing:
            self.audits[r].fires += 1
        return None


class HandleWatch:
    """:class:`steering.hooks.SteeringHandle`'s recorder and phase filter (``model.generate`` with or without
    the KV cache): the handle's pre-hook hands it each pass's steering mask, it narrows it to one phase and
    records what it steers, in row coordinates (the index among the row's non-pad tokens)."""

    def __init__(self, positions: str, tokenizer: Any = None) -> None:
        from steering.errors import SteeringError  # deferred: import cycle steering -> steering.hooks -> steering.audit
        from steering.positions import phase_of  # deferred: import cycle steering -> steering.hooks -> steering.audit

        self.audits: list[RowAudit] = []
        self.phase = phase_of(positions)
        self.tags = None
        self.scans: list[Any] = []
        self._firing: list[int] = []
        if self.phase is not None:
            try:
                self.tags = ThinkTags.of(tokenizer)
            except ThinkError as e:
                raise SteeringError(str(e)) from None

    def new_prompt(self, batch: int) -> None:
        self.audits = [RowAudit() for _ in range(batch)]
        self.scans = [PhaseScan(self.tags) for _ in range(batch)] if self.tags is not None else []

    def observe(self, mask: Any, ids: Any, am: Any, past_len: int, cur: int, valid: Any) -> Tensor:
        """The pass's ``[batch, cur]`` steering ``mask``, narrowed to the phase; records the steered positions."""
        import torch  # deferred: torch is heavy to import

        batch = int(valid.shape[0])
        if len(self.audits) != batch:
            self.new_prompt(batch)
        if am is not None and am.ndim == 2:  # row coordinates: the index among the row's real tokens
            rc = am.long().cumsum(1) - 1
            rc = rc[:, past_len : past_len + cur] if rc.shape[1] >= past_len + cur else rc[:, -cur:]
        else:
            rc = torch.arange(past_len, past_len + cur, device=valid.device)[None].expand(batch, -1)
        rcl, vl = rc.tolist(), valid.tolist()
        if self.scans and ids is not None:
            mask = mask.clone()
            idl = ids.tolist()
            for b, sc in enumerate(self.scans):
                cols = [c for c in range(cur) if vl[b][c]]
                if cols:
                    for c, o in zip(cols, sc.feed(rcl[b][cols[0]], [idl[b][c] for c in cols])):
                        if o != self.phase:
                            mask[b, c] = False
        ml = mask.tolist()
        self._firing = []
        for b, a in enumerate(self.audits):
            got = [rcl[b][c] for c in range(cur) if ml[b][c]]
            a.see(got, None, past_len > 0)
            if got:
                self._firing.append(b)
        return mask

    def fired(self) -> None:
        for b in self._firing:
            self.audits[b].fires += 1

    def audit(self, layers: int) -> list[dict[str, Any]]:
        """Per row: ``positions`` (spans), ``n_positions``, ``hook_fires``, ``hook_fires_per_token`` (over
        ``layers x passes``: one token is produced per pass), ``forward_passes``, ``kv_cache``."""
        n = max(layers, 1)
        return [{"positions": spans(a.positions), "n_positions": len(a.positions), "hook_fires": a.fires,
                 "hook_fires_per_token": round(a.fires / (n * a.passes), 4) if a.passes else None,
                 "forward_passes": a.passes, "kv_cache": a.kv_cache} for a in self.audits]


__all__ = ["HandleWatch", "PassWatch", "RowAudit", "spans"]
