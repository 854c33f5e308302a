"""Synthetic activation stores for the probe tests."""
from __future__ import annotations

import numpy as np

from activations.store import StoreWriter

STRATS = ("arithmetic", "contradiction")
POSNS = ("early", "middle", "late")


def write_store(path, acts, labels, questions, *, label3=None, strategies=None, positions=None, conditions=None,
                layers=None, complete=True):
    """acts [n, L, d]; labels list of "C"/"non-C"/"" ; questions list of ids."""
    n, nl, d = acts.shape
    layers = list(range(nl)) if layers is None else layers
    rows = []
    for i in range(n):
        rows.append({
            "continuation_id": f"c{i}", "question_id": str(questions[i]), "dataset": "arith", "task": "s2_o5",
            "difficulty": "easy",
            "strategy": strategies[i] if strategies is not None else STRATS[i % 2],
            "edit_position": positions[i] if positions is not None else POSNS[i % 3],
            "condition": conditions[i] if conditions is not None else "perturbed",
            "label": labels[i], "label3": (label3[i] if label3 is not None else ""),
            "correct": {"C": 0, "non-C": 1}.get(labels[i], -1), "input_tokens": 50,
        })
    w = StoreWriter(path, layers=layers, positions=["prefix_last"], d_model=d,
                    attrs={"model_name": "synthetic", "label_source": "test", "settings": {"k": 1}})
    for s in range(0, n, 64):
        b = rows[s:s + 64]
        w.append(b, {"prefix_last": acts[s:s + len(b)]}, {"prefix_last": np.zeros((len(b), 2), np.int32)})
    if complete:
        w.finish()
    else:
        w.close()
    return path


def lab(y):
    return ["C" if v else "non-C" for v in y]
