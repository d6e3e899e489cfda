"""The `eventually` properties: progress a user can count on, under fairness.

Each property is stated as its *obligations*: in a snapshot, every promise that is
still open, keyed by what it is about (which leader, which entry or follower) and
described in a sentence. The property is violated by an infinite fair run in which
one obligation (the same key) stays open in every state from some point on. Which
runs are fair is the checker's business (checker/liveness.py, docs/model.md).

Each property comes with a `sometimes` witness: a state where one of its obligations
is open. A check where no obligation ever opens is vacuous, and says so.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Callable, Hashable

from hwm.properties.catalogue import Property
from hwm.properties.snapshot import LEADER, ClusterView, server_name

Obligations = dict[Hashable, str]


@dataclass(frozen=True)
class LivenessProperty:
    name: str
    kind: str  # "eventually"
    meaning: str
    obligations: Callable[[ClusterView], Obligations]
    witness: Property  # a sometimes property: an obligation opens


def _leaders(view: ClusterView):
    for k, s in enumerate(view.servers):
        if s.alive and s.role == LEADER:
            yield k, s


def uncommitted_own_entries(view: ClusterView) -> Obligations:
    """Entries a live leader wrote in its own generation that are above its high-water mark."""
    open_ = {}
    for k, leader in _leaders(view):
        for index in range(leader.hwm + 1, len(leader.log) + 1):
            if leader.log[index - 1] == leader.generation:
                open_[("entry", k, leader.generation, index)] = (
                    f"{server_name(k)} leads generation {leader.generation} with its entry "
                    f"{index}@g{leader.generation} above its high-water mark {leader.hwm}")
    return open_


def followers_behind(view: ClusterView) -> Obligations:
    """Live followers whose high-water mark is below a live leader's."""
    open_ = {}
    for k, leader in _leaders(view):
        for j, follower in enumerate(view.servers):
            if j != k and follower.alive and follower.hwm < leader.hwm:
                open_[("follower", k, leader.generation, j)] = (
                    f"{server_name(j)}'s high-water mark {follower.hwm} is below the {leader.hwm} of "
                    f"{server_name(k)}, which leads generation {leader.generation}")
    return open_


def _witness(obligations: Callable[[ClusterView], Obligations]):
    def check(view: ClusterView):
        open_ = obligations(view)
        return open_[min(open_)] if open_ else None
    return check


LIVENESS: tuple[LivenessProperty, ...] = (
    LivenessProperty(
        "WrittenEventuallyCommitted", "eventually",
        "an entry a leader writes in its generation is eventually at or below its high-water mark, "
        "unless that leader stops leading",
        uncommitted_own_entries,
        Property("LeaderHoldsUncommittedEntry", "sometimes", "state",
                 "a live leader holds an entry of its generation above its high-water mark",
                 _witness(uncommitted_own_entries))),
    LivenessProperty(
        "FollowersCatchUp", "eventually",
        "every live follower's high-water mark eventually reaches its live leader's, unless that leader "
        "stops leading or the follower crashes",
        followers_behind,
        Property("FollowerBehind", "sometimes", "state",
                 "a live follower's high-water mark is below a live leader's",
                 _witness(followers_behind))),
)

LIVENESS_BY_NAME: dict[str, LivenessProperty] = {p.name: p for p in LIVENESS}
