"""Thought anchors' white-box methods on a run's eligible chains: receiver heads and attention suppression.

    from behavioural.causal.attention import AttentionConfig, run_receiver_heads, run_suppression
    run_receiver_heads(AttentionConfig(run_dir="runs/demo"))     # writes runs/demo/receiver_heads/
    run_suppression(AttentionConfig(run_dir="runs/demo"))        # writes runs/demo/suppression/

Each chain is read exactly as the model generated it: the baseline's prompt and its trace through the last
reasoning step, one forward pass, the steps' token ranges from the tokenizer's offsets. The arithmetic is
:mod:`behavioural.causal.receiver` (thought-anchors' formulas, file and line there).

* **receiver heads** (``receiver_heads``): the attention weights of every layer and head (read with eager
  attention: the model is switched to ``attn_implementation="eager"`` for the pass and back, because sdpa and
  flash kernels return no weights; a model that cannot switch is refused with the fix named), averaged into a
  step x step matrix per head, each step's vertical score (``proximity_ignore``, default 1, stated), the
  kurtosis across steps per head averaged over questions, the top heads (20 at most) and each step's
  receiver-head score.
* **attention suppression** (``suppression``): for each step j, the attention to step j's tokens is masked in
  every layer and head (a 4D additive mask: the causal mask plus the dtype's minimum on step j's key columns,
  for every query, as thought-anchors' hooks do); cell (i, j) is the mean over step i's tokens of
  ``log(KL(unmasked || masked) + 1e-9)`` of the next-token distributions at temperature 0.6. Cells with
  ``i < j`` read nothing of step j (causal) and sit at ``log(1e-9)``.
"""
from __future__ import annotations

import copy
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np

from behavioural.causal import receiver as rc
from behavioural.causal.common import (
    CausalConfig,
    CausalError,
    CausalStage,
    Chain,
    Engine,
    Job,
    command,
    count_or_all,
    drive,
    eligible_chains,
    is_stage_complete,
)
from loadbearing.cli import UsageError, check_number
from loadbearing.engine.sampling import row_seed
from loadbearing.runs import Run
from loadbearing.stage import option
from loadbearing.tables import render_table

if TYPE_CHECKING:
    import torch
    from torch import Tensor

RECEIVER, SUPPRESSION = "receiver_heads", "suppression"
VERSION = "1"


@dataclass(frozen=True, kw_only=True)
class AttentionConfig(CausalConfig):
    #: a seeded sample of at most this many eligible chains (None: all)
    max_questions: int | None = option(8, parse=count_or_all, metavar="N",
                                       help="a seeded sample of at most this many eligible chains (default 8; 0 = all)")
    sample_seed: int = 44
    #: receiver heads: rows at least this many steps below a step count toward its vertical score
    proximity_ignore: int = option(rc.PROXIMITY_IGNORE,
                                   help=f"receiver heads: rows at least this many steps later count (default "
                                        f"{rc.PROXIMITY_IGNORE}; thought-anchors' {rc.PAPER_PROXIMITY_IGNORE} suits "
                                        "chains of dozens of sentences)")
    top_k: int = option(rc.TOP_K, help="receiver heads kept")
    temperature: float = rc.TEMPERATURE
    batch_size: int = option(1, help="chains per forward pass", compare=False)


# ------------------------------------------------------------------------------------------------ reading
def chain_tokens(chain: Chain, tokenizer: Any) -> tuple[list[int], list[tuple[int, int]]]:
    """The chain's model input (prompt + trace through its last step) as token ids, and each step's
    ``[start, end)`` token range (the tokens whose first character lies in the step's characters)."""
    b = chain.baseline
    text = b.prompt + b.trace[: chain.trace.spans[-1][1]]
    enc = tokenizer(text, add_special_tokens=False, return_offsets_mapping=True)
    starts = [s for s, _ in enc["offset_mapping"]]
    bounds = []
    for s, e in chain.trace.spans:
        s, e = s + len(b.prompt), e + len(b.prompt)
        toks = [t for t, c in enumerate(starts) if s <= c < e]
        bounds.append((toks[0], toks[-1] + 1) if toks else (0, 0))
    return list(enc["input_ids"]), bounds


@contextmanager
def eager_attention(model: Any) -> Iterator[str]:
    """The model with eager attention for the block (restored after); yields the implementation it had."""
    cfg = getattr(model, "config", None)
    had = getattr(cfg, "_attn_implementation", None)
    if had in (None, "eager"):
        yield str(had or "eager")
        return
    try:
        model.set_attn_implementation("eager")
    except Exception as e:  # noqa: BLE001 - any refusal is the same user-facing problem
        raise CausalError(f"attention weights: the loaded model uses {had!r} attention, which returns none, and cannot "
                          f"switch to eager ({str(e).splitlines()[0][:120]}); load it with attn_implementation='eager'") from None
    try:
        yield str(had)
    finally:
        model.set_attn_implementation(had)


def _device(model: Any) -> tuple[torch.dtype | None, torch.device | str]:
    p = next(model.parameters(), None) if hasattr(model, "parameters") else None
    return (p.dtype, p.device) if p is not None else (None, "cpu")


def forward(model: Any, ids: list[int], *, mask: Any = None, attentions: bool = False, past: Any = None) -> Any:
    """One forward pass over ``ids`` (after the cached ``past`` prefix, when given)."""
    import torch  # deferred: torch is heavy to import

    _, dev = _device(model)
    kw: dict[str, Any] = {"use_cache": past is not None}
    if past is not None:
        kw["past_key_values"] = copy.deepcopy(past)  # each pass extends its own copy of the prefix
    with torch.no_grad():
        out = model(input_ids=torch.tensor([ids], device=dev), attention_mask=mask, output_attentions=attentions, **kw)
    if attentions and (getattr(out, "attentions", None) is None or any(a is None for a in out.attentions)):
        raise CausalError("attention weights: the loaded attention implementation returned none; load the model with "
                          "attn_implementation='eager'")
    return out


def prefix_cache(model: Any, ids: list[int], start: int) -> Any:
    """The key/value cache of ``ids[:start]`` (the prompt and any lead before the first step), or None when the
    model keeps none; every pass over the chain continues from a copy of it, so the prompt is computed once."""
    import torch  # deferred: torch is heavy to import

    if start <= 0:
        return None

    _, dev = _device(model)
    with torch.no_grad():
        out = model(input_ids=torch.tensor([ids[:start]], device=dev), use_cache=True)
    return getattr(out, "past_key_values", None)


def suppression_mask(n_tokens: int, cols: tuple[int, int], dtype: Any, start: int = 0) -> Tensor:
    """``[1, 1, n - start, n]`` additive mask for the queries ``start..n-1`` over all ``n`` keys: causal, plus the
    dtype's minimum on key columns ``cols`` for every query (``start = 0``: the square mask)."""
    import torch  # deferred: torch is heavy to import

    lo = torch.finfo(dtype).min
    m = torch.triu(torch.full((n_tokens, n_tokens), lo, dtype=dtype), diagonal=1)
    if cols[0] < cols[1]:
        m[:, cols[0]:cols[1]] = lo
    return m[None, None, start:]


# ------------------------------------------------------------------------------------------------ stages
def sample_keys(run: Run, config: AttentionConfig) -> set[str] | None:
    if config.max_questions is None:
        return None
    keys = sorted({c.key for c in eligible_chains(run)}, key=lambda k: row_seed(config.sample_seed, f"question:{k}"))
    return set(keys[:config.max_questions])


def plan(config: AttentionConfig, chains: list[Chain], run: Run) -> list[Job]:
    keep = sample_keys(run, config)
    return [Job(c.baseline.question_id, c, {}) for c in chains if (keep is None or c.key in keep) and c.n >= 2]


def _chain_pass(model: Any, ids: list[int], bounds: list[tuple[int, int]]) -> tuple[int, Any]:
    """``(start, past)``: where the chain's passes begin (its first step's first token) and the prompt's cache;
    ``(0, None)`` for a model that keeps no cache (every pass is then over the whole input)."""
    start = bounds[0][0]
    past = prefix_cache(model, ids, start)
    return (start, past) if past is not None else (0, None)


def receiver_execute(config: AttentionConfig, jobs: list[Job], engine: Engine) -> list[dict[str, Any]]:
    model, tok = engine.lm.model, engine.lm.tokenizer
    rows = []
    with eager_attention(model) as had:
        for j in jobs:
            ids, bounds = chain_tokens(j.chain, tok)
            start, past = _chain_pass(model, ids, bounds)
            out = forward(model, ids[start:], attentions=True, past=past)
            part = np.stack([a[0].float().cpu().numpy() for a in out.attentions])  # [layers, heads, seq - start, seq]
            att = np.zeros((part.shape[0], part.shape[1], len(ids), len(ids)))
            att[:, :, start:, :] = part  # the prompt's own rows are never read (no step lies there)
            mats = np.stack([[rc.step_attention(att[la, h], bounds) for h in range(att.shape[1])]
                             for la in range(att.shape[0])])  # [layers, heads, n, n]
            verts = np.stack([[rc.vertical_scores(mats[la, h], config.proximity_ignore) for h in range(att.shape[1])]
                              for la in range(att.shape[0])])  # [layers, heads, n]
            rows.append({"id": j.id, **j.chain.meta(), "bounds": bounds, "n_tokens": len(ids),
                         "attn_implementation": had, "vertical_scores": rc.nan_to_none(verts),
                         "n_scored_steps": int(np.sum(~np.isnan(verts[0, 0]))),
                         "kurtosis": rc.nan_to_none(rc.head_kurtosis(verts)),
                         "mean_step_attention": rc.nan_to_none(mats.mean(axis=(0, 1)))})
    return rows


def suppression_execute(config: AttentionConfig, jobs: list[Job], engine: Engine) -> list[dict[str, Any]]:
    import torch  # deferred: torch is heavy to import

    model, tok = engine.lm.model, engine.lm.tokenizer
    dtype, dev = _device(model)
    rows = []
    for j in jobs:
        ids, bounds = chain_tokens(j.chain, tok)
        start, past = _chain_pass(model, ids, bounds)
        base = forward(model, ids[start:], past=past).logits[0].float().cpu().numpy()  # [seq - start, vocab]
        n = len(bounds)
        cell = np.full((n, n), np.nan)
        for k, cols in enumerate(bounds):
            mask = suppression_mask(len(ids), cols, dtype or torch.float32, start).to(dev)
            masked = forward(model, ids[start:], mask=mask, past=past).logits[0].float().cpu().numpy()
            lk = rc.log_kl(base, masked, config.temperature)  # [seq - start]
            for i, (r0, r1) in enumerate(bounds):
                if r0 < r1:
                    cell[i, k] = float(np.mean(lk[r0 - start:r1 - start]))
        rows.append({"id": j.id, **j.chain.meta(), "bounds": bounds, "n_tokens": len(ids),
                     "matrix": rc.nan_to_none(cell)})
    return rows


def _arr(x: list) -> np.ndarray:
    """Nested JSON lists (None for NaN) back to a float array."""
    return np.array(x, dtype=float)


def receiver_summarise(config: AttentionConfig, rows: list[dict], chains: list[Chain], run: Run) -> dict[str, Any]:
    if not rows:
        return {"n_sampled_questions": 0, "questions": [], "top_heads": [], "proximity_ignore": config.proximity_ignore}
    kurts = np.stack([_arr(r["kurtosis"]) for r in rows])  # [q, layers, heads]
    with np.errstate(all="ignore"):
        mean_k = np.nanmean(kurts, axis=0) if np.any(~np.isnan(kurts)) else np.full(kurts.shape[1:], np.nan)
    heads = rc.top_heads(mean_k, config.top_k)
    questions = []
    for r in rows:
        score = rc.receiver_scores(_arr(r["vertical_scores"]), heads)
        ok = ~np.isnan(score)
        questions.append({k: r[k] for k in ("question_id", "question_key", "dataset", "task", "difficulty", "n_lines")}
                         | {"receiver_score": rc.nan_to_none(score),
                            "top_step": int(np.nanargmax(score)) if ok.any() else None,
                            "mean_step_attention": r["mean_step_attention"]})
    return {"definition": "receiver score of a step = mean over the top heads (by kurtosis of vertical scores across "
                          "steps, averaged over questions) of the step's vertical score (attention from steps >= "
                          "proximity_ignore later)", "proximity_ignore": config.proximity_ignore,
            "paper_proximity_ignore": rc.PAPER_PROXIMITY_IGNORE, "top_k": config.top_k,
            "attn_implementation_read": "eager", "top_heads": [{"layer": a, "head": b, "mean_kurtosis": float(mean_k[a, b])}
                                                               for a, b in heads],
            "n_sampled_questions": len(rows), "questions": questions,
            "n_scored_steps": sorted({int(r.get("n_scored_steps", 0)) for r in rows}),
            "kurtosis_note": "the kurtosis across steps needs several scored steps: with 2 it is always -2 and with 3 "
                             "it takes few values, so on short chains the top heads are weakly identified"}


def suppression_summarise(config: AttentionConfig, rows: list[dict], chains: list[Chain], run: Run) -> dict[str, Any]:
    questions = []
    for r in rows:
        m = _arr(r["matrix"])
        n = m.shape[0]
        effect = [float(np.nanmean(m[j + 1:, j])) if j + 1 < n and np.any(~np.isnan(m[j + 1:, j])) else None
                  for j in range(n)]
        got = [e for e in effect if e is not None]
        questions.append({k: r[k] for k in ("question_id", "question_key", "dataset", "task", "difficulty", "n_lines")}
                         | {"matrix": r["matrix"], "step_effect": effect,
                            "top_step": effect.index(max(got)) if got else None})
    return {"definition": "cell (i, j) = mean over step i's tokens of log(KL(unmasked || step j masked) + 1e-9), next-"
                          "token distributions at T; step effect of j = mean of its column below the diagonal",
            "temperature": config.temperature, "n_sampled_questions": len(rows), "questions": questions}


def _fmt_row(v: list) -> str:
    return " ".join("  n/a" if x is None else f"{x:+.2f}" for x in v)


def receiver_format(summary: dict[str, Any], style: str = "text") -> str:
    head = (f"Receiver heads (thought anchors): {summary['n_sampled_questions']} chains read with eager attention; "
            f"vertical score = attention a step receives from steps >= {summary['proximity_ignore']} later "
            f"(thought-anchors use {summary.get('paper_proximity_ignore', 4)} on long chains); top "
            f"{len(summary['top_heads'])} heads by mean kurtosis across steps: "
            + ", ".join(f"L{h['layer']}H{h['head']} ({h['mean_kurtosis']:.2f})" for h in summary["top_heads"][:8])
            + f"; scored steps per chain {summary.get('n_scored_steps')} ({summary.get('kurtosis_note', '')})")
    rows = [[q["question_id"], q["n_lines"], _fmt_row(q["receiver_score"]), "" if q["top_step"] is None else q["top_step"]]
            for q in summary["questions"]]
    return head + ("\n" if style == "text" else "\n\n") + render_table(
        ["question", "steps", "receiver score per step", "top step"], rows, style)


def suppression_format(summary: dict[str, Any], style: str = "text") -> str:
    head = (f"Attention suppression (thought anchors): {summary['n_sampled_questions']} chains; step j masked in every "
            f"layer and head; effect of j = mean log KL (T={summary['temperature']}) of the later steps' next-token "
            "distributions against the unmasked run (log(1e-9) = -20.7: no change)")
    rows = [[q["question_id"], q["n_lines"], _fmt_row(q["step_effect"]), "" if q["top_step"] is None else q["top_step"]]
            for q in summary["questions"]]
    return head + ("\n" if style == "text" else "\n\n") + render_table(
        ["question", "steps", "effect of masking each step", "top step"], rows, style)


def format_summary(summary: dict[str, Any], style: str = "text") -> str:
    """Either stage's summary as tables (by its ``stage`` field)."""
    fmt = suppression_format if summary.get("stage") == SUPPRESSION else receiver_format
    return fmt(summary, style)


RECEIVER_DRIVER = CausalStage(RECEIVER, VERSION, plan, receiver_execute, receiver_summarise, receiver_format)
SUPPRESSION_DRIVER = CausalStage(SUPPRESSION, VERSION, plan, suppression_execute, suppression_summarise,
                                 suppression_format)


def check_config(config: AttentionConfig) -> None:
    check_number(config.proximity_ignore, "--proximity-ignore", minimum=1)
    check_number(config.top_k, "--top-k", minimum=1)
    check_number(config.temperature, "--temperature", minimum=1e-6)
    if config.max_questions is not None and config.max_questions < 1:
        raise UsageError(f"--max-questions must be >= 1, got {config.max_questions} (omit it for all)")


def run_receiver_heads(config: AttentionConfig, lm: Any = None, *, echo: Any = print) -> dict[str, Any]:
    """Run (or resume) the receiver-head stage on ``config.run_dir``; returns its summary."""
    check_config(config)
    return drive(RECEIVER_DRIVER, config, lm=lm, echo=echo)


def run_suppression(config: AttentionConfig, lm: Any = None, *, echo: Any = print) -> dict[str, Any]:
    """Run (or resume) the attention-suppression stage on ``config.run_dir``; returns its summary."""
    check_config(config)
    return drive(SUPPRESSION_DRIVER, config, lm=lm, echo=echo)


def is_complete(path: str | Path, name: str = RECEIVER) -> bool:
    """True when ``path`` (the run directory or the stage's directory) holds a finished ``name`` stage."""
    return is_stage_complete(path, name)


#: the two stages (their commands, ``python -m behavioural.causal.receiver_heads`` / ``behavioural.causal.suppression``, are built
#: from :class:`AttentionConfig`)
RECEIVER_STAGE = command(RECEIVER, AttentionConfig, run_receiver_heads, receiver_format,
                         "Receiver heads: which steps do the model's broadcasting heads attend to (white-box)?")
SUPPRESSION_STAGE = command(SUPPRESSION, AttentionConfig, run_suppression, suppression_format,
                            "Attention suppression: which steps does masking change the later steps' predictions for?")
