"""Agreement between raters: Cohen's kappa (via scikit-learn, with counts) between labellers, annotators and
a judge's prompt variants."""
from __future__ import annotations

import itertools
import warnings
from collections.abc import Sequence
from typing import Any, TypedDict

from loadbearing.stats import rate

__all__ = ["Kappa", "VariantAgreement", "kappa", "variant_agreement"]


class Kappa(TypedDict):
    n: int
    kappa: float | None
    agreement: dict[str, Any]  # a rate (loadbearing.stats.rate)
    labels: list[str]


class VariantAgreement(TypedDict):
    n_items: int
    unanimous: dict[str, Any]
    unanimous_among_fully_parsed: dict[str, Any]
    per_variant: dict[str, dict[str, dict[str, Any]]]
    pairwise_kappa: list[dict[str, Any]]
    mean_pairwise_kappa: float | None
    n_pairs_with_kappa: int


def kappa(a: Sequence[Any], b: Sequence[Any]) -> Kappa:
    """Cohen's kappa between two raters over the items both rated (``None`` = not rated).

    Returns ``{"n", "kappa", "agreement": rate(...), "labels": sorted labels seen}``; ``kappa`` is null when
    no item is shared or when it is undefined (both raters used one and the same single label).
    """
    pairs = [(x, y) for x, y in zip(a, b) if x is not None and y is not None]
    n = len(pairs)
    agree = sum(x == y for x, y in pairs)
    labels = sorted({str(v) for p in pairs for v in p})
    k = None
    if n:
        from sklearn.metrics import cohen_kappa_score  # deferred: sklearn is heavy to import

        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            val = cohen_kappa_score([str(x) for x, _ in pairs], [str(y) for _, y in pairs])
        k = None if val != val else float(val)  # NaN -> null
    return {"n": n, "kappa": k, "agreement": rate(agree, n), "labels": labels}


def variant_agreement(items: Sequence[dict], variant_names: Sequence[str]) -> VariantAgreement:
    """Agreement across a judge's prompt variants: the A/B boundary's sensitivity to the prompt.

    ``items`` are the judge results of judged continuations (``{"variants": {name: {"noticed": ...}}}``).
    Reports each variant's parse rate and noticed rate, the fraction of items on which all variants gave
    the same parseable verdict (of all judged items, and of the items every variant parsed), and Cohen's
    kappa for every pair of variants.
    """
    rows = [[it["variants"].get(v, {}).get("noticed") for v in variant_names] for it in items if it.get("variants")]
    n = len(rows)
    full = [r for r in rows if all(x is not None for x in r)]
    unanimous = sum(1 for r in full if len(set(r)) == 1)
    per_variant = {}
    for j, v in enumerate(variant_names):
        col = [r[j] for r in rows]
        parsed = [x for x in col if x is not None]
        per_variant[v] = {"parsed": rate(len(parsed), n), "noticed": rate(sum(parsed), len(parsed))}
    pairs: list[dict[str, Any]] = []
    ks: list[float] = []
    for (i, a), (j, b) in itertools.combinations(enumerate(variant_names), 2):
        k = kappa([r[i] for r in rows], [r[j] for r in rows])
        pairs.append({"a": a, "b": b, **k})
        if k["kappa"] is not None:
            ks.append(k["kappa"])
    return {
        "n_items": n,
        "unanimous": rate(unanimous, n),
        "unanimous_among_fully_parsed": rate(unanimous, len(full)),
        "per_variant": per_variant,
        "pairwise_kappa": pairs,
        "mean_pairwise_kappa": (sum(ks) / len(ks)) if ks else None,
        "n_pairs_with_kappa": len(ks),
    }
