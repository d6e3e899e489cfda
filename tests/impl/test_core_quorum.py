"""Quorums of five: a candidate needs three votes (its own and two), a pre-candidate three
pre-votes. Every other test runs three servers, where one granted vote is a quorum whether the
replica counts the cluster as 3 or as 1, so a replica that counted its peers minus one passed the
suite (docs/mutation.md)."""

from __future__ import annotations

from dataclasses import dataclass

from hwm.impl.core import CANDIDATE, Replica
from hwm.impl.messages import VoteReply
from hwm.properties.protocol import RAFT
from hwm.properties.snapshot import LEADER


@dataclass(frozen=True)
class Empty:
    """A durable state with nothing in it (a first start)."""

    generation: int = 0
    vote: str | None = None
    hwm: int = 0
    log: tuple = ()


PEERS = ("S2", "S3", "S4", "S5")


def test_a_candidate_among_five_becomes_leader_with_its_third_vote_not_before():
    replica = Replica("S1", PEERS, RAFT, Empty(), pre_vote=False)
    replica.campaign()
    assert replica.role == CANDIDATE
    replica.step(VoteReply(replica.generation, "S2", True))
    assert replica.role == CANDIDATE, "two votes of five are no quorum"
    replica.step(VoteReply(replica.generation, "S2", True))  # the same voter again is still two
    replica.step(VoteReply(replica.generation, "S4", False))
    assert replica.role == CANDIDATE
    replica.step(VoteReply(replica.generation, "S3", True))
    assert replica.role == LEADER


def test_a_pre_candidate_among_five_campaigns_with_its_third_pre_vote_not_before():
    replica = Replica("S1", PEERS, RAFT, Empty(), election_ticks=(1, 1), pre_vote=True)
    while replica._pre_votes is None:  # its election timer runs out: it asks for pre-votes
        replica.tick()
    asked = replica.generation + 1
    replica.step(VoteReply(asked, "S2", True, pre_vote=True))
    assert replica.role != CANDIDATE and replica.generation == asked - 1, "two pre-votes of five are no quorum"
    replica.step(VoteReply(asked, "S3", True, pre_vote=True))
    assert replica.role == CANDIDATE and replica.generation == asked
