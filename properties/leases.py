"""Reads from a leader's lease, and partitions: what `lease_reads` and `max_partitions` add to the
catalogue (model/partition.py).

A leader that serves reads from its lease answers from its own high-water mark without a round of
heartbeats (Raft thesis section 6.4.1). It may do so once it has committed an entry of its own
generation (section 6.4: only then does its HWM cover everything committed before it). The read is
linearizable only while no newer leader has committed anything: a client that read an entry and
then asks the lease holder must see that entry again. Check-quorum (section 6.2) makes a leader cut
off from a majority step down before a newer leader can be elected, which is what makes that so.
"""

from __future__ import annotations

from hwm.properties.catalogue import CATALOGUE, Finding, Property
from hwm.properties.quorum import majority
from hwm.properties.snapshot import LEADER, ClusterView, server_name


def holds_lease(server) -> bool:
    """A live leader with an entry of its own generation at or below its HWM (thesis section 6.4)."""
    if not server.alive or server.role != LEADER:
        return False
    readable = min(server.hwm, len(server.log))
    return any(server.log[i] == server.generation for i in range(readable))


def lease_read_never_stale(view: ClusterView) -> Finding:
    for k, s in enumerate(view.servers):
        if not holds_lease(s) or not view.reads:
            continue
        for index, generation in sorted(view.reads):
            if index > s.hwm or len(s.log) < index or s.log[index - 1] != generation:
                return (f"{server_name(k)} serves reads from its lease of generation {s.generation} up to its "
                        f"high-water mark {s.hwm}, without entry {index}@g{generation}, which a client has "
                        f"read: a stale read")
    return None


def cut_of(view: ClusterView) -> tuple:
    """Which servers a partition isolates (all False: no partition; a state without partitions: ())."""
    return getattr(view, "cut", ())


def lease_holder_partitioned(before: ClusterView, after: ClusterView) -> Finding:
    cut = cut_of(after)
    if not cut or cut == cut_of(before):
        return None
    needed = majority(len(after.servers))
    for k, s in enumerate(before.servers):
        if holds_lease(s):
            side = sum(1 for j, a in enumerate(after.servers) if a.alive and cut[j] == cut[k])
            if side < needed:
                return (f"a partition cuts {server_name(k)}, which holds a lease of generation {s.generation}, off "
                        f"from a majority ({side} of {len(after.servers)} servers on its side)")
    return None


LEASES: tuple[Property, ...] = (
    Property("LeaseReadNeverStale", "always", "state",
             "a leader that serves reads from its lease holds, at or below its high-water mark, every "
             "entry clients have read", lease_read_never_stale),
    Property("LeaseHolderPartitioned", "sometimes", "step",
             "a partition cuts a leader that holds a lease off from a majority", lease_holder_partitioned),
)

# The catalogue of a model whose leader serves reads from its lease.
WITH_LEASES: tuple[Property, ...] = CATALOGUE + LEASES
