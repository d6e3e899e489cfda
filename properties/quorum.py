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
        # The largest index that floor(N/2)+1 servers hold: sort descending and take
        # position majority-1 (etcd's quorum/majority.go CommittedIndex).
        return sorted(match_indexes, reverse=True)[majority(n) - 1]
    if rule == "seed-index":
        # The seed: "serverLogIndexes.sort(Long::compareTo); return serverLogIndexes.get(noOfServers / 2);"
        # For odd N this equals the majority rule; for even N it is held by only N/2 servers.
        return sorted(match_indexes)[n // 2]
    raise ValueError(f"unknown quorum rule {rule!r}")


def holders(match_indexes: Sequence[int], index: int) -> int:
    """How many servers hold `index` (have a match index at or above it)."""
    return sum(1 for m in match_indexes if m >= index)
