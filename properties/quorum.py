"""The quorum arithmetic: one small module, shared by the model and the implementation."""

from __future__ import annotations

from typing import Sequence


def majority(servers: int) -> int:
    """How many servers make a quorum: floor(N/2) + 1."""
    return servers // 2 + 1


def quorum_index(rule: str, match_indexes: Sequence[int]) -> int:
    """The index the leader believes is stored on a quorum.

    `match_indexes` holds one entry per server, the leader's own last index included.
    """
    n = len(match_indexes)
    if rule == "majority":
        # The largest index that floor(N/2)+1 servers hold (etcd's quorum/majority.go CommittedIndex).
        return index_held_by(match_indexes, majority(n))
    if rule == "seed-index":
        # The seed: "serverLogIndexes.sort(Long::compareTo); return serverLogIndexes.get(noOfServers / 2);",
        # the index ceil(N/2) servers hold: for odd N the majority rule; for even N one server short.
        return index_held_by(match_indexes, n - n // 2)
    raise ValueError(f"unknown quorum rule {rule!r}")


def index_held_by(match_indexes: Sequence[int], needed: int) -> int:
    """The largest index that `needed` of the servers hold (0 when there are fewer servers): sort the
    match indexes descending and take position needed-1."""
    return sorted(match_indexes, reverse=True)[needed - 1] if 0 < needed <= len(match_indexes) else 0


def holders(match_indexes: Sequence[int], index: int) -> int:
    """How many servers hold `index` (have a match index at or above it)."""
    return sum(1 for m in match_indexes if m >= index)
