"""Acknowledged writes: the promise a client is given, which a read-only history cannot state.

A write is acknowledged when the system answers the client that it is durable: Raft, ZAB and
Kafka (acks=all) when the leader's high-water mark covers it, BookKeeper when the writer's
last-add-confirmed does. A state that tracks this keeps the ghost set `acked` of
`(index, generation)` entries; a state without it has acknowledged nothing.

The promise, for every one of these systems: an acknowledged entry stays in the committed
history, that is on a quorum of the servers (counting what a down server has on disk), for
ever. `CommittedOnQuorum` says the same of the entries under each server's current HWM only,
which a crash or a new leader may forget; `acked` remembers.
"""

from __future__ import annotations

from properties.catalogue import CATALOGUE, Finding, Property
from properties.quorum import majority
from properties.snapshot import ClusterView


def acknowledged(view: ClusterView) -> frozenset:
    return getattr(view, "acked", frozenset())


def acked_write_never_lost(view: ClusterView) -> Finding:
    acked = acknowledged(view)
    if not acked:
        return None
    servers = view.servers
    needed = majority(len(servers))
    for index, generation in sorted(acked):
        holders = sum(1 for s in servers if len(s.log) >= index and s.log[index - 1] == generation)
        if holders < needed:
            return (f"entry {index}@g{generation}, acknowledged to a client, is stored on only {holders} of "
                    f"{len(servers)} servers (a quorum is {needed})")
    return None


def write_acknowledged(view: ClusterView) -> Finding:
    acked = acknowledged(view)
    if acked:
        index, generation = max(acked)
        return f"a client's write {index}@g{generation} was acknowledged"
    return None


ACKED: tuple[Property, ...] = (
    Property("AckedWriteNeverLost", "always", "state",
             "a write acknowledged to a client is never lost from the committed history",
             acked_write_never_lost),
    Property("WriteAcknowledged", "sometimes", "state", "a client's write is acknowledged", write_acknowledged),
)

# The catalogue of a model whose states keep the `acked` ghost.
WITH_ACKED: tuple[Property, ...] = CATALOGUE + ACKED

# Every property a trace may name.
ALL_BY_NAME: dict[str, Property] = {p.name: p for p in WITH_ACKED}
