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

from hwm.properties.catalogue import CATALOGUE, Finding, Property
from hwm.properties.leases import LEASES
from hwm.properties.quorum import majority
from hwm.properties.snapshot import LEADER, ClusterView, out_of, server_name
from hwm.properties.step_down import LEADER_STEPS_DOWN


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
                    f"{out_of(view)} (a quorum is {needed})")
    return None


def write_acknowledged(view: ClusterView) -> Finding:
    acked = acknowledged(view)
    if acked:
        index, generation = max(acked)
        return f"a client's write {index}@g{generation} was acknowledged"
    return None


def acknowledged_write_kept(before: ClusterView, after: ClusterView) -> Finding:
    """Kafka's acks=all promise: an acknowledged write survives every clean leader election."""
    acked = acknowledged(before)
    if not acked:
        return None
    for k, (b, a) in enumerate(zip(before.servers, after.servers)):
        if a.role == LEADER and a.alive and (b.role != LEADER or b.generation != a.generation or not b.alive):
            for index, generation in sorted(acked):
                if len(a.log) < index or a.log[index - 1] != generation:
                    return (f"{server_name(k)} became leader of generation {a.generation} without entry "
                            f"{index}@g{generation}, which a producer was told is written")
    return None


ACKED: tuple[Property, ...] = (
    Property("AckedWriteNeverLost", "always", "state",
             "a write acknowledged to a client is never lost from the committed history",
             acked_write_never_lost),
    Property("WriteAcknowledged", "sometimes", "state", "a client's write is acknowledged", write_acknowledged),
)

# Kafka's leader-side statement of acks=all (its model elects by a controller, so the
# statement is about who may lead, like ReadNeverLost for reads).
ACKED_LEADERS = Property("AcknowledgedWriteKept", "always", "step",
                         "every leader elected after an acknowledgement (acks=all) holds the acknowledged entry",
                         acknowledged_write_kept)

# The catalogue of a model whose states keep the `acked` ghost, and Kafka's.
WITH_ACKED: tuple[Property, ...] = CATALOGUE + ACKED
KAFKA_PROPERTIES: tuple[Property, ...] = CATALOGUE + (ACKED[0], ACKED_LEADERS, ACKED[1])
# The catalogue of ZAB's model under check_quorum (properties/step_down.py: its witness).
WITH_STEP_DOWN: tuple[Property, ...] = WITH_ACKED + (LEADER_STEPS_DOWN,)

# Every property a trace may name.
def _all_by_name() -> dict[str, Property]:
    return {p.name: p for p in KAFKA_PROPERTIES + LEASES + (LEADER_STEPS_DOWN,)}


ALL_BY_NAME: dict[str, Property] = _all_by_name()
