"""A finished activation store's summary: its headline numbers, as report blocks and as one line of text.

    from activations.summary import summarize, format_summary
    print(format_summary(summarize("runs/demo/activations.h5")))
"""
from __future__ import annotations

import os
from collections.abc import Mapping
from typing import Any

from activations.reader import open_store
from loadbearing.report.blocks import Block, Paragraph, blocks_markdown, table
from loadbearing.results.stages import StoreSummary


def summarize(path: str | os.PathLike) -> StoreSummary:
    """The store's headline numbers (rows, layers, positions, engine, dtype, leakiness, label counts)."""
    with open_store(path) as st:
        rows = st.rows
        return {"path": str(path), "n_rows": st.n_rows, "layers": st.layers, "positions": st.positions,
                "d_model": st.d_model, "engine": st.attrs.get("engine"), "dtype": st.attrs.get("dtype"),
                "leaky": st.leaky, "decoder_layers_path": st.attrs.get("decoder_layers_path") or None,
                "n_questions": int(rows["question_key"].nunique()),
                "labels": {str(k): int(v) for k, v in rows["label"].fillna("unscored").value_counts().items()}}


def summary_blocks(summary: Mapping[str, Any]) -> tuple[Block, ...]:
    """The store's summary as report blocks: one table row (and a warning when it holds outcome tokens)."""
    lay = summary["layers"]
    layers = f"{lay[0]}..{lay[-1]} ({len(lay)})" if lay else "none"
    labels = ", ".join(f"{k} {v}" for k, v in sorted(summary["labels"].items()))
    t = table(("rows", "questions", "layers", "positions", "engine", "dtype", "labels"),
              [(summary["n_rows"], summary["n_questions"], layers, ", ".join(summary["positions"]), summary["engine"],
                summary["dtype"], labels)])
    return (t, Paragraph("**LEAKY**: the store holds outcome tokens.")) if summary["leaky"] else (t,)


def format_summary(summary: Mapping[str, Any], style: str = "text") -> str:
    """One paragraph (``text``) or a small table (``md``) describing a store."""
    lay = summary["layers"]
    layers = f"{lay[0]}..{lay[-1]} ({len(lay)})" if lay else "none"
    if style == "md":
        return blocks_markdown(summary_blocks(summary))
    return (f"wrote {summary['path']}: {summary['n_rows']} rows ({summary['n_questions']} questions), layers {layers}, "
            f"positions {', '.join(summary['positions'])}, engine {summary['engine']}, dtype {summary['dtype']}"
            + (", LEAKY (outcome tokens)" if summary["leaky"] else ""))


__all__ = ["format_summary", "summarize", "summary_blocks"]
