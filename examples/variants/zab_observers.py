"""ZooKeeper's observers as a rule hook of ZAB: an observer receives the leader's proposals and
commits, but neither votes nor acknowledges, so it counts toward no quorum (`counts`). The leader
is elected, and established, by Q1 of the voting servers, and commits a proposal once Q2 of them
acknowledged it (docs/variants.md, "Other systems")."""

from hwm.model.variant import Variant


class Observer(Variant):
    """The last server is an observer: three of four servers vote and acknowledge (Q1 = Q2 = 2)."""

    base = "zab"

    def counts(self, server):
        return server != self.servers - 1


class ObserverAckedAlone(Observer):
    """As Observer, but the leader commits a proposal on its own acknowledgement (Q2 = 1): Q1 + Q2 is
    the number of voters, not more, so a new leader's quorum can miss a committed entry."""

    def replication_quorum(self):
        return 1
