"""Probe inputs from an activation store: which rows, which labels, which groups; clear refusals.

:func:`load_probe_data` picks the labelled rows of the requested conditions and encodes the target:

* ``propagation``: C vs non-C from the ``label`` column, ``y = 1`` for C (class names ``["non-C", "C"]``).
* ``three_class``: A/B/C from ``label3`` (class names ``["A", "B", "C"]``).
* ``bypass``: A vs not-A (B or C) from ``label3``, ``y = 1`` for A (class names ``["non-A", "A"]``): the
  paper's "Binary bypass" task. Its repository labels a pair ``"bypass" if subtype == "TYPE_A" else
  "non_bypass"`` over the pairs with a three-class label, and its "Binary faithful" task ``"error_prop" if
  subtype == "TYPE_C" else "non_error_prop"`` - C against A and B, which is ``propagation`` here
  (r2m-ai/load-bearing-cot, ``experiments/probes/layer_sweep.py`` and ``experiments/probes/retrain_probes.py``).
  The paper's faithful task keeps only rows with a three-class label; ``propagation`` reads ``label``.

* ``repair_post_outcome``: B vs A among the non-C rows (``label3``; class names ``["A", "B"]``, ``y = 1`` for
  B), read only at a position of the continuation (``continuation_i``, cached with ``--token-positions
  continuation:N``). Repair happens in the continuation written after the edit, so these states come after
  the outcome: the probe *describes* where repair is visible, it does not *predict* it (its name says
  post-outcome; the results carry ``post_outcome``). It is the one target a leaky store serves without
  ``--allow-leaky``.

Every row also carries the binary C-vs-non-C label (``y_c``; from ``label``, else ``label3 == "C"``) that
the exported steering directions use, whatever the target. Rows without a label for the target are dropped
(unscored, never counted as a class). Hidden states are read one layer at a time (``ProbeData.X(layer)``).
"""
from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from loadbearing.errors import LoadBearingError
from loadbearing.options import parse_layers
from loadbearing.runs import question_key_of

TARGETS = ("propagation", "three_class", "bypass", "repair_post_outcome")
CLASSES = {"propagation": ["non-C", "C"], "three_class": ["A", "B", "C"], "bypass": ["non-A", "A"],
           "repair_post_outcome": ["A", "B"]}
#: the targets read after the outcome, at continuation positions only (descriptive, not for prediction)
POST_OUTCOME_TARGETS = ("repair_post_outcome",)


def is_post_outcome_read(target: str, position: str) -> bool:
    """A post-outcome target read where it must be: at a continuation position (``continuation_i``)."""
    return target in POST_OUTCOME_TARGETS and position.startswith("continuation_")


class ProbeError(LoadBearingError, ValueError):
    """Bad probe input; the message says what is wrong and how to fix it (one line)."""


@dataclass
class ProbeData:
    store: Any  # activations.ActivationStore (open), or anything with read(layer, position)
    target: str
    position: str
    layers: list[int]
    idx: np.ndarray  # store row indices used, ascending
    y: np.ndarray  # int class index into class_names
    class_names: list[str]
    y_c: np.ndarray  # 1 = C, 0 = non-C (for directions)
    questions: np.ndarray  # question key per row (object): ``question_key`` when the store has it, else question_id
    meta: Any  # pandas DataFrame of the used rows (reset index)
    conditions: str
    notes: list[str] = field(default_factory=list)
    group_key: str = "question_id"  # which row column ``questions`` came from

    @property
    def n(self) -> int:
        return len(self.idx)

    def X(self, layer: int) -> np.ndarray:
        """float32 [n, d_model] hidden states of ``layer`` at ``position`` for the used rows."""
        return self.store.read(layer, self.position)[self.idx]

    def groups(self, group: str) -> np.ndarray:
        if group == "question":
            _, g = np.unique(self.questions.astype(str), return_inverse=True)
            return g
        if group == "none":
            return np.arange(self.n)
        raise ProbeError(f"unknown --group {group!r}; choose 'question' (default) or 'none' (diagnostic only)")

    def class_counts(self) -> dict[str, dict[str, int]]:
        return {c: {"rows": int(np.sum(self.y == i)),
                    "questions": int(len(np.unique(self.questions[self.y == i].astype(str))))}
                for i, c in enumerate(self.class_names)}


def load_probe_data(store, *, target: str = "propagation", conditions: str = "perturbed", layers=None,
                    position: str = "prefix_last") -> ProbeData:
    """Select and encode the labelled rows of an open store (see the module docstring)."""
    if target not in TARGETS:
        raise ProbeError(f"unknown --target {target!r}; choose one of {', '.join(TARGETS)}")
    if conditions not in ("perturbed", "all"):
        raise ProbeError(f"unknown --conditions {conditions!r}; choose 'perturbed' or 'all'")
    if position not in store.positions:
        raise ProbeError(f"unknown --token-position {position!r}; this store has positions {store.positions}")
    if target in POST_OUTCOME_TARGETS and not is_post_outcome_read(target, position):
        cont = [p for p in store.positions if str(p).startswith("continuation_")]
        raise ProbeError(f"--target {target} is read after the outcome, at a continuation position; pass "
                         f"--token-position {cont[0] if cont else 'continuation_0'}"
                         + ("" if cont else " (re-cache with --token-positions continuation:N "
                            "--allow-outcome-tokens)"))
    layer_list = parse_layers(layers, available=store.layers, error=ProbeError) or []
    rows = store.rows
    src = store.attrs.get("label_source") or "unknown"
    if store.n_rows == 0:
        raise ProbeError(f"{store.path} has no rows; cache activations for labelled continuations first")
    cond = rows["condition"].fillna("").astype(str)
    keep = (cond == "perturbed") if conditions == "perturbed" else np.ones(len(rows), bool)
    if conditions == "perturbed" and not keep.any():
        raise ProbeError(f"{store.path} has no perturbed rows (conditions: {sorted(set(cond))}); "
                         f"pass --conditions all to use them")
    lab = rows["label"].fillna("").astype(str).to_numpy()
    lab3 = rows["label3"].fillna("").astype(str).to_numpy()
    col = "label" if target == "propagation" else "label3"
    vals = lab if target == "propagation" else lab3
    names = CLASSES[target]
    allowed = CLASSES["propagation" if target == "propagation" else "three_class"]
    bad = sorted(set(vals[keep & (vals != "")]) - set(allowed))
    if bad:
        raise ProbeError(f"unexpected {col} values {bad} in {store.path}; expected {allowed} or empty")
    use = np.asarray(keep & (vals != "") & ((vals != "C") if target in POST_OUTCOME_TARGETS else True))
    scope = "perturbed rows" if conditions == "perturbed" else "rows"
    if not use.any():
        hint = ("label the continuations, then re-cache" if target == "propagation" else
                "split non-C into A/B with the labelling stage and re-cache, or use --target propagation")
        raise ProbeError(f"{store.path} has no {col} on any of its {int(keep.sum())} {scope} "
                         f"(label_source={src!r}); {hint}")
    idx = np.flatnonzero(use)
    y_str = vals[idx] if target != "bypass" else np.where(vals[idx] == "A", "A", "non-A")
    y = np.array([names.index(v) for v in y_str], dtype=np.int64)
    present = [names[i] for i in np.unique(y)]
    if len(present) < 2:
        raise ProbeError(f"only class {present[0]!r} among the {len(idx)} labelled {scope} of {store.path}: a probe "
                         f"needs at least two classes ({' and '.join(names)}); cache a study that produces both "
                         f"(mix strategies/positions){'' if conditions == 'all' else ', or pass --conditions all'}")
    yc = np.where(lab[idx] != "", (lab[idx] == "C").astype(np.int64), (lab3[idx] == "C").astype(np.int64))
    q, group_key = _question_keys(rows, idx)
    if any(v == "" for v in q):
        raise ProbeError(f"{store.path}: some labelled rows have no question_id; grouped CV needs one per row "
                         f"(re-cache the activations)")
    meta = rows.iloc[idx].reset_index(drop=True)
    notes = []
    if len(present) < len(names):
        missing = sorted(set(names) - set(present))
        notes.append(f"classes {missing} absent; probing {present} only")
        keep_cls = [names.index(c) for c in present]
        remap = {old: new for new, old in enumerate(keep_cls)}
        y = np.array([remap[v] for v in y], dtype=np.int64)
        names = present
    return ProbeData(store=store, target=target, position=position, layers=layer_list, idx=idx, y=y,
                     class_names=list(names), y_c=yc, questions=q, meta=meta, conditions=conditions, notes=notes,
                     group_key=group_key)


def absent_classes(data: ProbeData) -> list[str]:
    """The classes of ``data.target`` with no labelled row (dropped by :func:`load_probe_data`, in its notes)."""
    return [c for c in CLASSES[data.target] if c not in data.class_names]


def _question_keys(rows: Any, idx: np.ndarray) -> tuple[np.ndarray, str]:
    """Each selected row's question (:func:`loadbearing.runs.question_key_of`: ``question_key``, the stable hash
    of the normalised question text, so twins are one question; else ``question_id``) and the column used."""
    def column(c: str) -> list[Any]:  # missing (None, NaN, "") -> None
        vals = rows[c].to_numpy(dtype=object)[idx] if c in rows.columns else [None] * len(idx)
        return [None if v is None or v != v or v == "" else v for v in vals]

    keys, ids = column("question_key"), column("question_id")
    q = np.array([question_key_of({"question_key": k, "question_id": i}) for k, i in zip(keys, ids)], dtype=object)
    with_key = sum(k is not None for k in keys)
    group_key = ("question_key" if with_key == len(idx) else "question_id" if with_key == 0
                 else "question_key, else question_id")
    return q, group_key


def check_folds(y, groups, folds: int, class_names, *, flag: str = "--folds") -> None:
    """Refuse a target with a class in fewer distinct groups (questions) than folds, naming the class."""
    y = np.asarray(y)
    groups = np.asarray(groups)
    if folds < 2:
        raise ProbeError(f"{flag} must be at least 2, got {folds}")
    n_groups = len(np.unique(groups))
    if n_groups < folds:
        raise ProbeError(f"only {n_groups} questions for {flag} {folds}; use {flag} {max(2, n_groups)} or fewer, "
                         f"or cache more questions")
    worst = None
    for i, c in enumerate(class_names):
        g = len(np.unique(groups[y == i]))
        if g < folds and (worst is None or g < worst[1]):
            worst = (c, g, int(np.sum(y == i)))
    if worst:
        c, g, n = worst
        fix = (f"use {flag} {g} or fewer" if g >= 2 else "no fold count can hold it out")
        raise ProbeError(f"class {c!r} occurs in only {g} question(s) ({n} rows), fewer than {flag} {folds}: every "
                         f"held-out fold needs it; {fix}, cache more questions that produce {c!r}, or choose "
                         f"another --target/--conditions")


def store_dir(path) -> Path:
    return Path(path).resolve().parent
