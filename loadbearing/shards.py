"""Deterministic shards of a question sample, by question key (``--shard I/N`` on the stages).

    python -m behavioural.run --dataset gsm8k --strategy all --shard 0/4 --output-dir runs/g-0   # one of 4
    python -m behavioural.merge runs/g-0 runs/g-1 runs/g-2 runs/g-3 --output-dir runs/g          # = unsharded run

A question belongs to shard ``int(sha256(question_key)[:8], 16) % N``: the partition depends only on the
question's normalised text, never on sample order, batch size, machine or the other shards, so N processes
(a Slurm array job, or one process per GPU) each take one part and :mod:`behavioural.merge` puts the parts
back in the full sample's order.
"""
from __future__ import annotations

import hashlib
import re
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from typing import TypeVar

from loadbearing.errors import LoadBearingError

T = TypeVar("T")


class ShardError(LoadBearingError, ValueError):
    """A bad ``--shard`` value; the message names the fix."""


class MergeError(ShardError):
    """Shards (run directories or activation stores) that do not form one whole; the message names the part and
    the fix. The one merge error: ``python -m behavioural.merge`` and ``python -m activations.merge`` raise it."""


@dataclass(frozen=True)
class Shard:
    index: int  # 0-based
    count: int

    def __str__(self) -> str:
        return f"{self.index}/{self.count}"

    def holds(self, key: str) -> bool:
        return shard_of(key, self.count) == self.index


def parse_shard(spec: str | None) -> Shard | None:
    """``"I/N"`` (0 <= I < N) -> :class:`Shard`; None or "" -> None (no sharding)."""
    if spec is None or str(spec).strip() == "":
        return None
    m = re.fullmatch(r"\s*(\d+)\s*/\s*(\d+)\s*", str(spec))
    if not m:
        raise ShardError(f"--shard {spec!r} is not I/N; write e.g. --shard 0/4 (shards are numbered 0..N-1)")
    i, n = int(m.group(1)), int(m.group(2))
    if n < 1 or not 0 <= i < n:
        raise ShardError(f"--shard {spec!r}: need N >= 1 and 0 <= I < N (shards are numbered 0..N-1)")
    return Shard(i, n)


def shard_of(key: str, count: int) -> int:
    """The shard (0..count-1) that a question key belongs to."""
    return int(hashlib.sha256(key.encode("utf-8")).hexdigest()[:8], 16) % count


def select(items: Sequence[T], shard: Shard | None, key: Callable[[T], str]) -> list[T]:
    """The items of ``shard`` (all of them when ``shard`` is None), in their original order; ``key(item)``
    gives an item's question key."""
    if shard is None:
        return list(items)
    return [it for it in items if shard.holds(key(it))]


def check_complementary(shards: Iterable[Shard | None], names: Sequence[str]) -> int:
    """Refuse parts that are not exactly shards 0..N-1 of one N (:class:`MergeError`); returns N."""
    got = list(shards)
    if any(s is None for s in got):
        bad = [n for n, s in zip(names, got) if s is None]
        raise MergeError(f"{', '.join(bad)} {'is' if len(bad) == 1 else 'are'} not a shard (no --shard in the manifest); "
                         "merge only the parts of one sharded run")
    counts = {s.count for s in got if s is not None}
    if len(counts) != 1:
        raise MergeError(f"the parts come from different shard counts {sorted(counts)}; merge the parts of one run")
    n = counts.pop()
    idx = sorted(s.index for s in got if s is not None)
    missing = sorted(set(range(n)) - set(idx))
    dup = sorted({i for i in idx if idx.count(i) > 1})
    if missing or dup:
        what = (f"missing shard(s) {', '.join(f'{i}/{n}' for i in missing)}" if missing else "") + \
            ("; " if missing and dup else "") + (f"shard(s) given twice: {', '.join(f'{i}/{n}' for i in dup)}" if dup else "")
        raise MergeError(f"cannot merge: {what}; pass each of the {n} parts exactly once")
    return n


__all__ = ["MergeError", "Shard", "ShardError", "parse_shard", "shard_of", "select", "check_complementary"]
