"""Thought anchors' white-box arithmetic, on arrays: the step x step attention matrix, vertical scores, the
kurtosis of receiver heads, and the suppression cell (interp-reasoning/thought-anchors ``whitebox-analyses/``).

* :func:`step_attention` - token attention averaged into a step x step matrix: cell (i, j) is the mean of the
  token-attention block from step i's tokens (queries) to step j's tokens (keys)
  (``attention_analysis/attn_funcs.py:_compute_averaged_matrix`` l. 181-221).
* :func:`vertical_scores` - step j's vertical score: the mean of column j over the rows ``i >= j +
  proximity_ignore`` (the upper triangle and the band ``i - j < proximity_ignore`` set to NaN), with their
  receiver-head setting ``control_depth=False`` (``attn_funcs.py:get_vertical_scores`` l. 387-437,
  ``receiver_head_funcs.py:get_vert_score_wrapped`` l. 15-41). A step with no row that far below it has no
  score (NaN there, None in the files). Thought-anchors' ``proximity_ignore`` is 4, set for chains of dozens
  of sentences; on 3-10-line chains that leaves at most 6 scored steps, so this toolkit's default is
  :data:`PROXIMITY_IGNORE` = 1 (attention from every later step; stated in every summary).
* :func:`head_kurtosis` - per head, the kurtosis of the vertical scores across steps (``scipy.stats.kurtosis``,
  Fisher, ``bias=True``, NaNs omitted: ``receiver_head_funcs.py:get_3d_ar_kurtosis`` l. 65-70), averaged over
  questions; :func:`top_heads` - the ``top_k`` heads by that mean (``get_top_k_layer_head_kurts`` l. 105-121,
  their k = 20); :func:`receiver_scores` - a step's receiver-head score, the mean of its vertical scores over
  the top heads (``get_receiver_head_scores`` l. 243-253).
* :func:`log_kl` - the suppression cell: ``log(KL(P || Q) + 1e-9)`` of one position's next-token distributions
  at temperature 0.6, unmasked (P) against masked (Q) (``attn_supp_funcs.py:get_suppression_KL_matrix``
  l. 29-129 and ``calculate_kl_divergence_sparse``); they keep the top-p 0.9999 logits, this toolkit the full
  distribution (the mass left out is 1e-4).
"""
from __future__ import annotations

from collections.abc import Sequence

import numpy as np

PROXIMITY_IGNORE = 1
PAPER_PROXIMITY_IGNORE = 4
TOP_K = 20
TEMPERATURE = 0.6
EPS = 1e-9


def step_attention(attn: np.ndarray, bounds: Sequence[tuple[int, int]]) -> np.ndarray:
    """``[n, n]`` mean attention from step i's tokens to step j's (``attn``: ``[seq, seq]`` query x key)."""
    n = len(bounds)
    out = np.zeros((n, n), dtype=np.float64)
    last_r, last_c = attn.shape[0] - 1, attn.shape[1] - 1
    for i, (r0, r1) in enumerate(bounds):
        r0, r1 = min(r0, last_r), min(r1, last_r)
        if r0 >= r1:
            continue
        for j, (c0, c1) in enumerate(bounds):
            c0, c1 = min(c0, last_c), min(c1, last_c)
            if c0 >= c1:
                continue
            block = attn[r0:r1, c0:c1]
            if block.size:
                out[i, j] = float(np.mean(block))
    return out


def vertical_scores(avg: np.ndarray, proximity_ignore: int = PROXIMITY_IGNORE) -> np.ndarray:
    """``[n]``: each step's mean attention received from the steps at least ``proximity_ignore`` later."""
    m = np.array(avg, dtype=np.float64)
    m[np.triu_indices_from(m, k=1)] = np.nan
    m[np.triu_indices_from(m, k=-proximity_ignore + 1)] = np.nan
    n = m.shape[-1]
    out = np.full(n, np.nan)
    for j in range(n):
        col = m[j + proximity_ignore:, j]
        if np.any(~np.isnan(col)):
            out[j] = float(np.nanmean(col))
    return out


def head_kurtosis(verts: np.ndarray) -> np.ndarray:
    """``[layers, heads]`` kurtosis across steps of ``verts`` (``[layers, heads, n]``), NaNs omitted."""
    from scipy import stats  # deferred: scipy is heavy to import

    k = stats.kurtosis(verts, axis=2, fisher=True, bias=True, nan_policy="omit")
    return np.asarray(np.ma.filled(k, np.nan), dtype=np.float64)


def top_heads(mean_kurt: np.ndarray, top_k: int = TOP_K) -> list[tuple[int, int]]:
    """The ``top_k`` (layer, head) by mean kurtosis, highest first (NaN heads never chosen)."""
    flat = mean_kurt.flatten()
    valid = np.where(~np.isnan(flat))[0]
    if not len(valid):
        return []
    k = min(top_k, len(valid))
    vals = flat[valid]
    top = np.argpartition(vals, -k)[-k:]
    top = top[np.argsort(-vals[top], kind="stable")]
    return [(int(a), int(b)) for a, b in zip(*np.unravel_index(valid[top], mean_kurt.shape))]


def receiver_scores(verts: np.ndarray, heads: Sequence[tuple[int, int]]) -> np.ndarray:
    """``[n]``: the mean vertical score of each step over ``heads``."""
    if not heads:
        return np.full(verts.shape[-1], np.nan)
    return np.mean(np.stack([verts[layer, head, :] for layer, head in heads]), axis=0)


def log_kl(p_logits: np.ndarray, q_logits: np.ndarray, temperature: float = TEMPERATURE) -> np.ndarray:
    """``log(KL(softmax(p / T) || softmax(q / T)) + 1e-9)`` per row (``[pos, vocab]`` -> ``[pos]``)."""
    def logsoftmax(x: np.ndarray) -> np.ndarray:
        z = x / temperature
        z = z - z.max(axis=-1, keepdims=True)
        return z - np.log(np.exp(z).sum(axis=-1, keepdims=True))

    lp, lq = logsoftmax(np.asarray(p_logits, dtype=np.float64)), logsoftmax(np.asarray(q_logits, dtype=np.float64))
    kl = np.maximum(0.0, (np.exp(lp) * (lp - lq)).sum(axis=-1))
    return np.log(kl + EPS)


def nan_to_none(x: np.ndarray) -> list:
    """A float array as nested lists with None for NaN (JSON)."""
    return [nan_to_none(v) if isinstance(v, np.ndarray) else (None if np.isnan(v) else float(v)) for v in x]
