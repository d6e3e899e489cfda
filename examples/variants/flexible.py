"""Flexible quorums (Howard, Malkhi and Spiegelman, "Flexible Paxos", 2016) as a rule hook of Raft: an
election needs Q1 servers, a high-water mark Q2. Every election quorum meets every replication quorum
when Q1 + Q2 > N, and read entries are safe; with Q1 + Q2 = N a new leader can be elected by servers
none of which holds a read entry. docs/variants.md walks through both."""

from hwm.model.variant import Variant


class Flexible(Variant):
    """Q1 = N - 1 and Q2 = 2: Q1 + Q2 = N + 1 > N."""

    base = "raft"

    def election_quorum(self):
        return self.servers - 1

    def replication_quorum(self):
        return 2


def one_leader_at_most_per_generation_is_live(view):
    """no two live leaders share a generation"""
    leaders = [s.generation for s in view.servers if s.alive and s.role == "leader"]
    if len(leaders) != len(set(leaders)):
        return f"two live leaders of generation {max(leaders, key=leaders.count)}"
    return None


def leader_commits_alone(view):
    """a leader's high-water mark covers an entry no follower stores"""
    for k, s in enumerate(view.servers):
        if s.role == "leader" and s.hwm and all(len(o.log) < s.hwm for j, o in enumerate(view.servers) if j != k):
            return f"S{k + 1} counts entry {s.hwm} as committed while it alone stores it"
    return None


class FlexibleTooSmall(Flexible):
    """Q1 = N - 1 and Q2 = 1: Q1 + Q2 = N, so an election quorum can miss the only copy of a read entry."""

    invariants = {"LiveLeadersDiffer": one_leader_at_most_per_generation_is_live}
    witnesses = {"LeaderCommitsAlone": leader_commits_alone}

    def replication_quorum(self):
        return 1
