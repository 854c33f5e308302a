"""The semantic filter of resampling importance: does a rollout's new step differ in meaning from the original?

Thought anchors (interp-reasoning/thought-anchors, ``analyze_rollouts.py``: ``--sentence_model
all-MiniLM-L6-v2``, ``--similarity_threshold 0.8``) keeps the resamples whose new sentence has cosine
similarity < 0.8 with the removed one under a sentence embedder. Two methods here:

* ``"tfidf"`` (the default, and the stated lexical fallback: no sentence embedder can be had offline on these
  machines - ``sentence-transformers`` is not installed and no embedder is cached): cosine of TF-IDF
  vectors (scikit-learn ``TfidfVectorizer``, lower-cased; tokens are numbers, words and single symbols, so
  ``3 + 4 = 7`` and ``3 + 4 = 8`` differ in their last token). The IDF is fitted on the chain's own reasoning
  lines plus the new step: tokens every line shares (``=``, ``+``) weigh little, a number the chain never
  wrote weighs much. Each row's similarity depends only on its chain and its own new step (deterministic,
  resumable, independent of the other rollouts).
* ``"st:MODEL"``: a ``sentence-transformers`` model loaded offline (``local_files_only``); one clear error when
  the package or the model is missing.

A similarity threshold is on the same scale only within one method: the summary records which was used.
"""
from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from importlib.metadata import PackageNotFoundError, version
from typing import Any

from behavioural.causal.common import CausalError

DEFAULT_METHOD = "tfidf"
THRESHOLD = 0.8
TOKEN_PATTERN = r"(?u)\d+(?:\.\d+)?|[^\W\d_]+|[^\w\s]"


@dataclass
class Similarity:
    """``similarity(chain_lines, original, new) -> cosine`` by one method (see the module docstring)."""

    method: str = DEFAULT_METHOD
    model: Any = None  # the sentence-transformers model for "st:..."

    def __call__(self, chain_lines: Sequence[str], original: str, new: str) -> float:
        if not original.strip() or not new.strip():
            return 0.0  # an empty step shares no meaning with a written one
        if self.model is not None:
            import numpy as np  # deferred: numpy is heavy to import

            a, b = self.model.encode([original, new])
            na, nb = float(np.linalg.norm(a)), float(np.linalg.norm(b))
            return float(np.dot(a, b) / (na * nb)) if na and nb else 0.0
        return tfidf_cosine(chain_lines, original, new)

    def provenance(self, threshold: float) -> dict[str, Any]:
        if self.model is not None:
            return {"method": self.method, "threshold": threshold, "library": "sentence-transformers",
                    "version": _version("sentence-transformers")}
        return {"method": "tfidf", "threshold": threshold, "library": "scikit-learn", "version": _version("scikit-learn"),
                "token_pattern": TOKEN_PATTERN, "idf_corpus": "the chain's reasoning lines + the new step",
                "why": "lexical fallback: no sentence embedder is available offline here (the paper's is "
                       "all-MiniLM-L6-v2 via sentence-transformers); pass --similarity st:MODEL where one is"}


def tfidf_cosine(chain_lines: Sequence[str], original: str, new: str) -> float:
    """Cosine of the TF-IDF vectors of ``original`` and ``new`` (IDF over the chain's lines and ``new``)."""
    from sklearn.feature_extraction.text import TfidfVectorizer  # deferred: sklearn is heavy to import

    corpus = [*chain_lines, new]
    if original not in corpus:
        corpus.append(original)
    try:
        vec = TfidfVectorizer(lowercase=True, token_pattern=TOKEN_PATTERN).fit(corpus)
    except ValueError:  # no token at all (punctuation-free empty strings)
        return 0.0
    m = vec.transform([original, new])  # rows are L2-normalised
    return float((m[0].multiply(m[1])).sum())


def load_similarity(method: str) -> Similarity:
    """The filter for ``--similarity`` (``tfidf`` or ``st:MODEL``); refuses what cannot be had offline."""
    if method == "tfidf":
        return Similarity("tfidf")
    if method.startswith("st:") and len(method) > 3:
        name = method[3:]
        try:
            from sentence_transformers import SentenceTransformer  # deferred: an optional dependency
        except ImportError:
            raise CausalError(f"--similarity {method}: sentence-transformers is not installed; install it and cache "
                              f"{name!r}, or use --similarity tfidf (the lexical fallback)") from None
        try:
            model = SentenceTransformer(name, local_files_only=True)
        except (OSError, ValueError) as e:
            raise CausalError(f"--similarity {method}: cannot load {name!r} offline ({str(e).splitlines()[0][:160]}); "
                              "cache it first, or use --similarity tfidf") from None
        return Similarity(method, model)
    raise CausalError(f"--similarity {method!r}: choose tfidf or st:MODEL (a cached sentence-transformers model)")


def _version(dist: str) -> str | None:
    try:
        return version(dist)
    except PackageNotFoundError:
        return None
