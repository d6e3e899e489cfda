"""BookKeeper's ledger in its own terms: ensembles, write sets and ack quorums (model/bookkeeper.py).

The catalogue counts an entry as safe when a majority of all servers store it, which is BookKeeper's
rule too while every entry goes to every bookie (the default: E = every bookie, WQ = E, AQ = a
majority). With a write quorum smaller than the ensemble, or spare bookies, an entry lives on the
WQ bookies of its write set only, and it is safe when AQ of them store it: that many answers are
what the writer waits for before it confirms the entry, and recovery declares an entry missing only
when WQ - AQ + 1 bookies of its write set say they lack it, which a write set with AQ copies never
gives. `ledger_properties` restates the catalogue's properties that count copies (or walk logs,
which now have holes) in these terms; every other property is the catalogue's.

A bookie's log holds generation 1 (every entry is the writer's) where it stores the entry, and 0,
a hole, where it does not (an entry of another write set). The write set of an entry is read from
the ledger metadata the state holds (`ensembles[:stored]` after the first ensemble): an entry
written to a bookie the metadata does not name for it is lost to every reader and to recovery.
"""

from __future__ import annotations

from functools import partial
from typing import NamedTuple

from hwm.properties.acked import WITH_ACKED, acknowledged
from hwm.properties.catalogue import Finding, Property, _removed
from hwm.properties.snapshot import ClusterView, named, server_name

HOLE = 0  # an index of a bookie's log whose entry belongs to other bookies' write sets


class Ledger(NamedTuple):
    """One ledger's replication parameters: bookies (all of them, spares included), the ensemble
    size E, the write quorum WQ, the ack quorum AQ, and the first fragment's ensemble."""

    bookies: int
    ensemble_size: int
    write_quorum: int
    ack_quorum: int

    def first_ensemble(self) -> tuple[int, ...]:
        return tuple(range(self.ensemble_size))

    def fragments(self, changes: tuple) -> tuple:
        """The ledger's fragments, (first entry, ensemble), from the first ensemble's and `changes`."""
        return ((1, self.first_ensemble()),) + tuple(changes)

    @staticmethod
    def ensemble_at(fragments: tuple, entry: int) -> tuple[int, ...]:
        """The ensemble of the fragment that holds `entry`: the last one starting at or before it
        (a later fragment with the same first entry replaces an earlier one)."""
        found = fragments[0][1]
        for first, ensemble in fragments:
            if first <= entry:
                found = ensemble
        return found

    def write_set(self, fragments: tuple, entry: int) -> tuple[int, ...]:
        """Round-robin striping (DistributionSchedule): BookKeeper's entry e-1 (hwm's entry e, from 1)
        goes to the WQ bookies at positions (e-1) mod E, (e-1)+1 mod E, ... of its fragment's ensemble."""
        ensemble = self.ensemble_at(fragments, entry)
        return tuple(ensemble[(entry - 1 + i) % self.ensemble_size] for i in range(self.write_quorum))


def stored_fragments(ledger: Ledger, view) -> tuple:
    """The fragments the ledger metadata holds in `view` (a writer's change it failed to store is not one)."""
    return ledger.fragments(view.ensembles[: view.stored])


def copies(ledger: Ledger, view, entry: tuple[int, int], fragments: tuple | None = None) -> int:
    """How many bookies of `entry`'s write set store it (down or not: a bookie's journal is durable)."""
    index, generation = entry
    if fragments is None:
        fragments = stored_fragments(ledger, view)
    return sum(1 for k in ledger.write_set(fragments, index)
               if len(view.servers[k].log) >= index and view.servers[k].log[index - 1] == generation)


def _removed_entries(before, after):
    """`catalogue._removed` without holes: a hole filled or dropped is no entry removed."""
    return ((i, g) for i, g in _removed(before, after) if g != HOLE)


def _short(ledger: Ledger, left: int) -> str:
    return f"{left} of the {ledger.write_quorum} bookies of its write set store it (the ack quorum is {ledger.ack_quorum})"


def read_never_truncated(ledger: Ledger, before: ClusterView, after: ClusterView) -> Finding:
    if not before.reads:
        return None
    for k, (b, a) in enumerate(zip(before.servers, after.servers)):
        for entry in _removed_entries(b, a):
            if entry in before.reads:
                left = copies(ledger, after, entry)
                if left < ledger.ack_quorum:
                    return (f"{named(after, k)} removed entry {entry[0]}@g{entry[1]}, which a client has read; "
                            f"only {_short(ledger, left)}")
    return None


def hwm_never_truncated(ledger: Ledger, before: ClusterView, after: ClusterView) -> Finding:
    for k, (b, a) in enumerate(zip(before.servers, after.servers)):
        for entry in _removed_entries(b, a):
            if entry[0] <= b.hwm:
                return (f"{server_name(k)} removed entry {entry[0]}@g{entry[1]}, at or below its own "
                        f"high-water mark {b.hwm}")
    return None


def committed_on_quorum(ledger: Ledger, view: ClusterView) -> Finding:
    fragments = stored_fragments(ledger, view)
    checked: set[tuple[int, int]] = set()
    for k, s in enumerate(view.servers):
        for index in range(1, min(s.hwm, len(s.log)) + 1):
            entry = (index, s.log[index - 1])
            if entry[1] == HOLE or entry in checked:
                continue
            checked.add(entry)
            held = copies(ledger, view, entry, fragments)
            if held < ledger.ack_quorum:
                return (f"{named(view, k)} counts entry {index}@g{entry[1]} as committed (hwm={s.hwm}) "
                        f"but only {_short(ledger, held)}")
    return None


def acked_write_never_lost(ledger: Ledger, view: ClusterView) -> Finding:
    fragments = stored_fragments(ledger, view)
    for entry in sorted(acknowledged(view)):
        held = copies(ledger, view, entry, fragments)
        if held < ledger.ack_quorum:
            return (f"entry {entry[0]}@g{entry[1]}, acknowledged to a client, is stored on only {held} of the "
                    f"{ledger.write_quorum} bookies the ledger metadata names for it (the ack quorum is "
                    f"{ledger.ack_quorum})")
    return None


def log_matching(ledger: Ledger, view: ClusterView) -> Finding:
    servers = view.servers
    for a in range(len(servers)):
        for b in range(a + 1, len(servers)):
            la, lb = servers[a].log, servers[b].log
            both = [p for p in range(min(len(la), len(lb))) if la[p] != HOLE and lb[p] != HOLE]
            # The highest index where both hold the same entry; every entry both hold before it must agree.
            for q in reversed(range(len(both))):
                if la[both[q]] == lb[both[q]]:
                    if any(la[p] != lb[p] for p in both[:q]):
                        return (f"{server_name(a)} and {server_name(b)} share entry {both[q] + 1}@g{la[both[q]]} "
                                f"but their logs differ before it")
                    break
    return None


def uncommitted_truncated(ledger: Ledger, before: ClusterView, after: ClusterView) -> Finding:
    for k, (b, a) in enumerate(zip(before.servers, after.servers)):
        for entry in _removed_entries(b, a):
            if entry[0] > b.hwm and entry not in before.reads:
                return f"{server_name(k)} truncated uncommitted entry {entry[0]}@g{entry[1]}"
    return None


_IN_LEDGER_TERMS = {
    "ReadNeverTruncated": (read_never_truncated,
                           "no removal ever leaves an entry a client has read on fewer than AQ bookies of its write set"),
    "HwmNeverTruncated": (hwm_never_truncated, "no server removes an entry at or below its own high-water mark"),
    "CommittedOnQuorum": (committed_on_quorum,
                          "every entry at or below a server's high-water mark is stored on AQ bookies of its write set"),
    "AckedWriteNeverLost": (acked_write_never_lost,
                            "a write acknowledged to a client stays on AQ bookies of the write set the ledger "
                            "metadata names for it"),
    "LogMatching": (log_matching, "two logs holding the same (index, generation) agree on every entry both hold before it"),
    "UncommittedTruncated": (uncommitted_truncated, "a server truncates an entry above its high-water mark"),
}


def ledger_properties(ledger: Ledger) -> tuple[Property, ...]:
    """The BookKeeper model's catalogue (`WITH_ACKED`) with the properties above in the ledger's terms."""
    out = []
    for p in WITH_ACKED:
        if p.name in _IN_LEDGER_TERMS:
            check, meaning = _IN_LEDGER_TERMS[p.name]
            p = Property(p.name, p.kind, p.on, meaning, partial(check, ledger))
        out.append(p)
    return tuple(out)


__all__ = ["HOLE", "Ledger", "copies", "ledger_properties", "stored_fragments"]
