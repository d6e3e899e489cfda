"""The sans-IO replica: one test per rule of the seed (and of each protocol flag), then a
differential test that drives the model and a cluster of replicas side by side.

The cluster is `bridge.simcluster.SimCluster` (real replicas, MemoryStorage, the codec on every
message), the one the conformance machine and `hwm replay --on impl` use. For the rule-by-rule tests
below, `Cluster` adds a router that keeps the messages a step produced in flight until a test
delivers them, where SimCluster drops what the model does not send.
"""

from __future__ import annotations

import os
from dataclasses import astuple, dataclass, replace

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from hwm.bridge.simcluster import SimCluster, build_cluster
from hwm.impl.core import (
    CANDIDATE,
    Entry,
    NotCommitted,
    NotLeader,
    Replica,
    ReplicaError,
    down_snapshot,
    persist,
)
from hwm.impl.messages import AppendReply, AppendRequest, HwmQuery, HwmReply, VoteReply, VoteRequest
from hwm.impl.storage import MemoryStorage
from hwm.model.raft import RaftModel
from hwm.model.state import Config, initial_state
from hwm.properties.protocol import FLAG_VALUES, PRESETS, RAFT, SEED, Protocol, flags_of, model_only, presets_of
from hwm.properties.snapshot import FOLLOWER, LEADER, snapshot_of


# ------------------------------------------------------------------ test doubles
@dataclass(frozen=True)
class FakeDurable:
    generation: int = 0
    vote: str | None = None
    hwm: int = 0
    log: tuple = ()


def storage_holding(generations) -> MemoryStorage:
    """A closed MemoryStorage whose durable log holds entries of `generations` (payloads b"<index>");
    its generation is the last one."""
    storage = MemoryStorage()
    storage.load()
    storage.append([(i + 1, g, str(i + 1).encode()) for i, g in enumerate(generations)])
    storage.sync()
    storage.save_metadata(max(generations, default=0), None, 0)
    storage.crash()
    return storage


class Cluster(SimCluster):
    """SimCluster with a router: messages not yet delivered stay in flight for the test to deliver."""

    def __init__(self, protocol=RAFT, n=3, logs=None, **options):
        """`logs` gives a server a log of entry generations on disk before it starts."""
        self.in_flight: list[tuple[str, str, object]] = []  # (from, to, message)
        self.committed: dict[str, list[Entry]] = {}
        super().__init__(protocol, Config(servers=n),
                         storages={name: storage_holding(g) for name, g in (logs or {}).items()}, **options)

    def _persist(self, replica, ready):
        super()._persist(replica, ready)
        self.committed.setdefault(replica.server_id, []).extend(ready.committed)

    # -- message routing: persist first, then put the messages in flight
    def flush(self, name):
        for to, message in self._flush(name):
            self.in_flight.append((name, to, message))

    def _settle(self):
        for name in self.alive():
            self.flush(name)

    def deliver(self, source=None, target=None, kind=None):
        """Deliver every in-flight message matching the filters (and what they cause, once)."""
        self._settle()
        batch = [(a, b, m) for a, b, m in self.in_flight
                 if (source is None or a == source) and (target is None or b == target)
                 and (kind is None or isinstance(m, kind))]
        self.in_flight = [x for x in self.in_flight if x not in batch]
        for a, b, message in batch:
            if self.replicas.get(b) is not None:
                self.replicas[b].step(message)
                self.flush(b)
        return batch

    def settle(self, rounds=20):
        """Deliver until nothing is in flight."""
        for _ in range(rounds):
            if not self.deliver():
                return
        raise AssertionError("messages still in flight")

    def drop_all(self):
        self._settle()
        self.in_flight = []

    # -- the model's actions (SimCluster's), asserting the implementation takes them
    def elect(self, name, voters):
        refused = super().elect(name, voters)
        self._settle()
        assert refused is None, f"{name} did not win: {refused}"

    def write(self, name, value=b"v"):
        refused = super().write(name, value)
        self._settle()
        assert refused is None, refused

    def replicate(self, leader, follower):
        refused = super().replicate(leader, follower)
        self._settle()
        assert refused is None, refused

    def crash(self, name):
        super().crash(name)
        self.in_flight = [x for x in self.in_flight if name not in x[:2]]

    def restart(self, name) -> Replica:
        assert super().restart(name) is None
        self._settle()
        return self[name]


def durable_log(c: Cluster, name):
    """What `name`'s storage holds durably: crash it and look at what a restart would recover."""
    c.crash(name)
    return c.down_durable(name).log


def protocol(**flags):
    return replace(RAFT, **flags)


# ------------------------------------------------------------------ the high-water mark
def test_hwm_is_the_index_at_quorum_of_the_followers_match_indexes():
    # "The high-water mark can be calculated by looking at the log indexes of all the followers
    # and the log of the leader itself, and picking up the index which is available on the
    # majority of the servers."
    c = Cluster(n=5)
    c.elect("S1", ["S1", "S2", "S3"])
    for _ in range(3):
        c.write("S1")
    c.replicate("S1", "S2")
    assert c["S1"].hwm == 0  # 2 of 5 hold entries 1-3
    c["S1"].propose(b"4")
    c.replicate("S1", "S3")  # S1 and S3 hold 1-4, S2 holds 1-3: index 3 is on 3 of 5
    assert c["S1"].match == {"S2": 3, "S3": 4, "S4": 0, "S5": 0}
    assert c["S1"].hwm == 3


def test_hwm_reaches_followers_with_the_next_append_or_heartbeat():
    # "The leader propagates the high-water mark to the followers either as part of the regular
    # HeartBeat or as separate requests. The followers then set their high-water mark accordingly."
    c = Cluster()
    c.elect("S1", ["S1", "S2"])
    c.write("S1")
    c.replicate("S1", "S2")
    assert (c["S1"].hwm, c["S2"].hwm) == (1, 0)  # S2 acknowledged before S1 knew the HWM
    c.drop_all()
    for _ in range(c["S1"].heartbeat_ticks):
        c["S1"].tick()
    heartbeats = {to: m for _, to, m in c.deliver(source="S1", kind=AppendRequest)}
    assert heartbeats["S2"] == AppendRequest(1, "S1", 1, 1, (), 1)  # nothing new, just the HWM
    assert c["S2"].hwm == 1


def test_follower_hwm_never_passes_what_it_acknowledged():
    c = Cluster()
    c.elect("S1", ["S1", "S2"])
    c.write("S1"); c.write("S1")
    c.replicate("S1", "S2")
    c.replicate("S1", "S2")
    assert c["S1"].hwm == 2 and c["S2"].hwm == 2
    c.replicate("S1", "S3")  # S3 learns min(leader hwm 2, its ack 2)
    assert c["S3"].hwm == 2
    c.write("S1")
    assert c["S1"].hwm == 2


def test_reads_above_the_hwm_are_refused():
    # "if (index > replicationState.getHighWaterMark()) throw new
    # IllegalArgumentException("Log entry not available")"
    c = Cluster()
    c.elect("S1", ["S1", "S2"])
    c.write("S1", b"a")
    c.write("S1", b"b")
    with pytest.raises(NotCommitted, match="not yet committed"):
        c["S1"].read(1)
    c.replicate("S1", "S2")
    assert c["S1"].read(2) == (1, b"b")
    assert [e.payload for e in c["S1"].read_committed()] == [b"a", b"b"]
    with pytest.raises(NotCommitted, match="Log entry not available"):
        c["S2"].read(1)  # S2's HWM is still 0
    with pytest.raises(NotCommitted):
        c["S1"].read(3)
    with pytest.raises(NotCommitted):
        c["S1"].read(0)


def test_committed_entries_are_handed_out_once_in_ready():
    c = Cluster()
    c.elect("S1", ["S1", "S2"])
    c.write("S1", b"a")
    c.write("S1", b"b")
    assert c.committed["S1"] == []
    c.replicate("S1", "S2")
    c.replicate("S1", "S3")
    c.write("S1", b"c")
    c.replicate("S1", "S2")
    assert c.committed["S1"] == [Entry(1, 1, b"a"), Entry(2, 1, b"b"), Entry(3, 1, b"c")]
    assert c.committed["S2"] == [Entry(1, 1, b"a"), Entry(2, 1, b"b")]  # S3's ack came later
    assert not c["S1"].has_ready()


def test_writes_go_to_the_leader_only():
    c = Cluster()
    with pytest.raises(NotLeader, match="no leader is known"):
        c["S1"].propose(b"x")
    c.elect("S1", ["S1", "S2"])
    c.replicate("S1", "S2")
    with pytest.raises(NotLeader) as refused:
        c["S2"].propose(b"x")
    assert refused.value.leader == "S1"


# ------------------------------------------------------------------ log truncation (the seed's example)
@pytest.mark.parametrize("append_check", ["previous-entry", "generation-mismatch"])
def test_seed_log_truncation_example(append_check):
    # "The leader successfully replicates three entries, but fails after adding entry4 to its own
    # log. One of the followers is elected as a new leader and accepts more entries from the
    # client. When the failed leader joins the cluster again, it has entry4 which is conflicting.
    # So it needs to truncate its log till entry3, and then add entry5."
    c = Cluster(protocol(append_check=append_check))
    c.elect("S1", ["S1", "S2"])
    for value in (b"entry1", b"entry2", b"entry3"):
        c.write("S1", value)
    c.replicate("S1", "S2")
    c.replicate("S1", "S3")
    c.write("S1", b"entry4")
    c.crash("S1")
    c.elect("S2", ["S2", "S3"])
    c.write("S2", b"entry5")
    c.replicate("S2", "S3")
    c.restart("S1")
    assert c["S1"].log_generations() == (1, 1, 1, 1)
    c.replicate("S2", "S1")
    assert [c["S1"].entry(i) for i in (1, 2, 3, 4)] == [
        (1, b"entry1"), (1, b"entry2"), (1, b"entry3"), (2, b"entry5")]
    assert durable_log(c, "S1") == ((1, b"entry1"), (1, b"entry2"), (1, b"entry3"), (2, b"entry5"))


# ------------------------------------------------------------------ flags
def test_quorum_seed_index_commits_on_half_of_four_servers_majority_does_not():
    # seed computeHighwaterMark: "serverLogIndexes.get(noOfServers / 2)" counts 2 of 4 servers.
    for rule, expected in (("seed-index", 1), ("majority", 0)):
        c = Cluster(protocol(quorum=rule), n=4)
        c.elect("S1", ["S1", "S2", "S3"])
        c.write("S1")
        c.replicate("S1", "S2")
        assert c["S1"].hwm == expected, rule


def test_figure8_commit_rule():
    # Index 1@g1 is on a quorum in a later generation: any-generation commits it by counting,
    # current-generation waits for an entry of the leader's own generation.
    results = {}
    for commit in ("current-generation", "any-generation"):
        c = Cluster(protocol(commit=commit))
        c.elect("S1", ["S1", "S2"])  # g1
        c.write("S1")  # 1@g1 on S1 only
        c.crash("S1"); c.restart("S1")
        c.elect("S1", ["S1", "S3"])  # g2, S1 [1] hwm 0
        c.replicate("S1", "S2")  # 1@g1 now on S1, S2: a quorum
        results[commit] = c["S1"].hwm
        c.write("S1")  # 2@g2
        c.replicate("S1", "S2")
        assert c["S1"].hwm == 2  # an own-generation entry commits everything before it
    assert results == {"current-generation": 0, "any-generation": 1}


def test_election_longest_log_voters_refuse_a_stale_candidate_any_grants():
    for election, wins in (("longest-log", False), ("any", True)):
        c = Cluster(protocol(election=election))
        c.elect("S1", ["S1", "S2", "S3"])
        c.write("S1")
        c.replicate("S1", "S2")  # S2 holds 1@g1, S3 holds nothing
        c.crash("S1")
        c["S3"].campaign()  # generation 2
        c.deliver(source="S3", target="S2")
        c.deliver(source="S2", target="S3")
        assert (c["S3"].role == LEADER) == wins, election
        assert c["S2"].generation == 2  # the voter adopts the generation either way


def test_up_to_date_compares_last_generation_before_length():
    c = Cluster(logs={"S2": (1, 1, 1), "S3": (2,)})
    c["S3"].campaign()
    c.deliver(source="S3", target="S2")
    c.deliver(source="S2", target="S3")
    assert c["S3"].role == LEADER  # last generation 2 beats a longer log of generation 1


@pytest.mark.parametrize("append_check, acknowledged", [("previous-entry", 1), ("generation-mismatch", 3)])
def test_append_check_decides_the_acknowledged_index(append_check, acknowledged):
    # The seed's follower "respond[s] to the leader with the index of the latest log entry they
    # have"; Raft acknowledges prev_index + len(entries).
    c = Cluster(protocol(append_check=append_check), logs={"S2": (1, 1, 1)})
    c["S2"].step(AppendRequest(2, "S1", 0, 0, ((1, b"1"),), 0))
    expected_log = (1, 1, 1)
    (to, reply), = c["S2"].ready().messages
    assert reply == AppendReply(2, "S2", True, acknowledged)
    assert c["S2"].log_generations() == expected_log


def test_previous_entry_refuses_a_gap_and_the_leader_backs_off_to_the_hint():
    c = Cluster()
    c.elect("S1", ["S1", "S2"])
    for _ in range(3):
        c.write("S1")
    c.replicate("S1", "S2")
    c.drop_all()
    c["S1"].next_index["S3"] = 4  # probe as if S3 had everything: the append starts after 3
    c["S1"].send_append("S3")
    c.deliver(source="S1", target="S3")
    refusal = [m for _, to, m in c.deliver(source="S3", target="S1")]
    # S3's log is empty: the hint says nothing can agree above index 0.
    assert refusal == [AppendReply(1, "S3", False, 3, 0, 0)]
    assert c["S1"].match["S3"] == 0
    c.flush("S1")
    [(_, _, retry)] = [x for x in c.in_flight if x[:2] == ("S1", "S3")]
    assert (retry.prev_index, len(retry.entries)) == (0, 3)  # straight to the hint, not 2, 1, 0
    c.settle()
    assert c["S3"].log_generations() == (1, 1, 1) and c["S1"].match["S3"] == 3


def test_generation_mismatch_truncates_from_the_first_differing_entry_and_keeps_the_rest():
    c = Cluster(protocol(append_check="generation-mismatch"), logs={"S2": (1, 1, 2, 2)})
    c["S2"].step(AppendRequest(3, "S1", 1, 1, ((1, b"b"), (3, b"e")), 0))
    assert c["S2"].log_generations() == (1, 1, 3)
    ready = c["S2"].ready()
    assert ready.truncate_from == 3 and ready.entries == (Entry(3, 3, b"e"),)
    assert ready.messages == (("S1", AppendReply(3, "S2", True, 3)),)


@pytest.mark.parametrize("rule, expected_log", [
    ("keep", (1, 1, 1)), ("truncate-to-own-hwm", ()), ("truncate-to-leader-hwm", (1, 1))])
def test_restart_rules(rule, expected_log):
    c = Cluster(protocol(restart=rule))
    c.elect("S3", ["S3", "S2"])
    c.write("S3")
    c.replicate("S3", "S2")  # 1@g1 on S2, S3: committed, S3's HWM is 1
    c.write("S3"); c.write("S3")  # 2, 3 only on S3
    c.crash("S3")
    c.elect("S2", ["S1", "S2"])  # generation 2
    c.write("S2")
    c.replicate("S2", "S1")  # S2's log [1, 2] is on S1 too: S2's HWM is 2
    c.restart("S3")
    # keep: [1, 1, 1]; truncate-to-own-hwm: the HWM was not durable, so 0;
    # truncate-to-leader-hwm: S2 (generation 2 >= 1) answers HWM 2.
    assert c["S3"].log_generations() == expected_log
    assert tuple(g for g, _ in durable_log(c, "S3")) == expected_log


def test_restart_to_leader_hwm_ignores_a_stale_leader_and_waits_for_answers():
    c = Cluster(protocol(restart="truncate-to-leader-hwm"))
    c.elect("S1", ["S1", "S2"])
    c.write("S1")
    c.replicate("S1", "S3")
    c.replicate("S1", "S2")
    c.crash("S3")
    c.elect("S2", ["S2", "S1"])  # g2; S1 is a follower now
    c.elect("S1", ["S1", "S2"])  # g3
    c.crash("S2")
    replica = c.start("S3")
    assert replica.rejoining
    (_, query), (_, query2) = replica.ready().messages
    assert isinstance(query, HwmQuery)
    replica.step(HwmReply(1, "S2", True, 0))  # a stale leader of generation 1 (own is 1: allowed)
    assert replica.rejoining  # waits for S1 as well
    replica.step(HwmReply(3, "S1", True, 1))
    assert not replica.rejoining and replica.log_generations() == (1,)


def test_a_rejoining_server_that_stands_before_any_answer_stops_waiting_for_them_first():
    # Its election timer ran out before any peer answered its HwmQuery (every peer down, say): it
    # stands as a server that has finished rejoining, keeping its log, not as one still waiting.
    c = Cluster(protocol(restart="truncate-to-leader-hwm"))
    c.elect("S1", ["S1", "S2"])
    c.write("S1")
    c.replicate("S1", "S3")
    c.crash("S3")
    replica = c.start("S3")
    assert replica.rejoining
    replica.pre_campaign()
    assert not replica.rejoining and replica.rejoin_answered == 0 and replica.log_generations() == (1,)


def test_restart_to_leader_hwm_keeps_the_log_when_the_leader_is_older():
    r = Replica("S3", ["S1", "S2"], protocol(restart="truncate-to-leader-hwm"),
                FakeDurable(5, None, 0, ((1, b"a"), (5, b"b"))))
    r.step(HwmReply(4, "S1", True, 0))
    r.step(HwmReply(5, "S2", False, 0))
    assert r.log_generations() == (1, 5)


def test_rejoin_times_out_when_peers_are_down():
    r = Replica("S3", ["S1", "S2"], protocol(restart="truncate-to-leader-hwm"),
                FakeDurable(1, None, 0, ((1, b"a"),)), election_ticks=(5, 9))
    r.step(HwmReply(1, "S1", True, 0))
    for _ in range(5):
        r.tick()
    assert not r.rejoining and r.log_generations() == ()


@pytest.mark.parametrize("durable", [False, True])
def test_hwm_durable(durable):
    c = Cluster(protocol(hwm_durable=durable))
    c.elect("S1", ["S1", "S2"])
    c.write("S1")
    c.replicate("S1", "S2")
    assert astuple(c.storages["S1"].metadata) == (1, "S1", 1 if durable else 0)
    c.crash("S1")
    assert down_snapshot(c.down_durable("S1"), c.protocol).hwm == (1 if durable else 0)
    assert c.restart("S1").hwm == (1 if durable else 0)


@pytest.mark.parametrize("noop", [False, True])
def test_noop_on_election(noop):
    c = Cluster(protocol(noop_on_election=noop))
    c.elect("S1", ["S1", "S2"])
    assert c["S1"].log_generations() == ((1,) if noop else ())
    assert durable_log(c, "S1") == (((1, b""),) if noop else ())


# ------------------------------------------------------------------ generations and votes
def test_leader_steps_down_on_a_higher_generation():
    c = Cluster()
    c.elect("S1", ["S1", "S2"])
    c.elect("S3", ["S2", "S3"])  # g2; S1 does not know yet
    assert c["S1"].role == LEADER
    c.write("S1")
    c.replicate("S1", "S2")  # S2 answers with generation 2
    assert (c["S1"].role, c["S1"].generation) == (FOLLOWER, 2)
    assert c["S2"].log_generations() == ()


def test_a_stale_reply_is_ignored():
    c = Cluster()
    c.elect("S1", ["S1", "S2"])
    c.write("S1")
    c["S1"].step(AppendReply(0, "S2", True, 1))
    assert c["S1"].match["S2"] == 0


def test_votes_once_per_generation_and_the_vote_survives_a_crash():
    c = Cluster()
    c["S1"].campaign()
    c["S2"].campaign()  # both ask for generation 1
    c.deliver(source="S1", target="S3")
    c.deliver(source="S2", target="S3")
    replies = [m for _, _, m in c.deliver(source="S3")]
    assert sorted((m.generation, m.granted) for m in replies) == [(1, False), (1, True)]
    assert c.storages["S3"].metadata.vote == "S1"
    c.crash("S3")
    c.restart("S3")
    c["S3"].step(VoteRequest(1, "S2", 0, 0))
    (_, reply), = c["S3"].ready().messages
    assert reply == VoteReply(1, "S3", False)


def test_candidate_adopts_a_higher_generation_and_the_retry_lands_above_it():
    # The model's atomic elect: generation = 1 + max(generation of candidate and voters).
    c = Cluster()
    c.elect("S2", ["S2", "S3"])
    c.elect("S3", ["S2", "S3"])
    c.elect("S2", ["S2", "S3"])  # S2, S3 at generation 3, S1 at 0
    c.elect("S1", ["S1", "S2"])
    assert (c["S1"].role, c["S1"].generation, c["S2"].generation) == (LEADER, 4, 4)


def test_a_candidate_that_reads_its_grants_late_leads_its_generation_until_it_hears_of_a_later_one():
    # What the validator's `elect-late` accepts (checker/observed.py): S1's grants of generation 1 wait
    # (S1 paused) while S2 leads generation 2; S1, having heard of no later generation, reads them and
    # leads 1 (Raft's election safety is one leader per generation), and steps down at its first contact
    # with generation 2.
    c = Cluster()
    c["S1"].campaign()
    c.deliver(source="S1", kind=VoteRequest)
    held = [x for x in c.in_flight if x[1] == "S1"]
    assert sorted((m.voter, m.generation, m.granted) for _, _, m in held) == [("S2", 1, True), ("S3", 1, True)]
    c.in_flight = [x for x in c.in_flight if x[1] != "S1"]
    c["S2"].campaign()
    c.deliver(source="S2", target="S3", kind=VoteRequest)
    c.deliver(source="S3", target="S2", kind=VoteReply)
    assert (c["S2"].role, c["S2"].generation) == (LEADER, 2)
    c.in_flight = held + c.in_flight  # S2's vote request and appends to S1 wait behind the grants
    c.deliver(target="S1", kind=VoteReply)
    assert (c["S1"].role, c["S1"].generation) == (LEADER, 1)
    c.deliver(source="S2", target="S1", kind=AppendRequest)
    assert (c["S1"].role, c["S1"].generation) == (FOLLOWER, 2)


def test_election_timeout_is_random_but_reproducible():
    def timeouts(seed):
        r = Replica("S1", ["S2", "S3"], RAFT, FakeDurable(), election_ticks=(10, 20), rng_seed=seed,
                    pre_vote=False)  # an isolated server: every timeout is a real campaign
        fired = []
        for t in range(200):
            r.tick()
            if r.role == CANDIDATE and r.generation > len(fired):
                fired.append(t)
        return fired
    assert timeouts(7) == timeouts(7)
    assert timeouts(7) != timeouts(8)
    first = timeouts(7)
    assert all(10 <= b - a <= 20 for a, b in zip([-1] + first, first))


def test_ticks_elect_a_leader_and_replicate():
    c = Cluster(election_ticks=(5, 15))
    for _ in range(40):
        for name in c.names:
            c[name].tick()
        c.settle()
    leaders = [n for n in c.names if c[n].role == LEADER]
    assert len(leaders) == 1
    leader = c[leaders[0]]
    leader.propose(b"x")
    c.settle()
    for _ in range(leader.heartbeat_ticks):
        leader.tick()
    c.settle()
    assert all(c[n].hwm == 1 and c[n].read(1)[1] == b"x" for n in c.names)


def test_single_server_cluster_commits_alone():
    r = Replica("S1", [], RAFT, FakeDurable())
    r.campaign()
    assert r.role == LEADER
    assert r.propose(b"a") == 1 and r.hwm == 1


def test_bad_inputs_are_refused_with_a_clear_error():
    r = Replica("S1", ["S2"], RAFT, FakeDurable())
    with pytest.raises(ReplicaError, match="not one of its peers"):
        r.step(VoteRequest(1, "S9", 0, 0))
    with pytest.raises(ValueError, match="peers"):
        Replica("S1", ["S1"], RAFT, FakeDurable())
    with pytest.raises(ValueError, match="election_ticks"):
        Replica("S1", [], RAFT, FakeDurable(), election_ticks=(5, 2))
    with pytest.raises(ValueError, match="entries\\[0\\]"):
        AppendRequest(1, "S2", 0, 0, ((2, b""),), 0)


def test_storage_twin_memory_storage_recovers_what_the_core_persisted():
    storage = MemoryStorage()
    r = Replica("S1", [], protocol(hwm_durable=True), storage.load())
    r.campaign()
    r.propose(b"a"); r.propose(b"b")
    persist(r.ready(), storage)
    storage.crash()
    durable = storage.load()
    assert (durable.generation, durable.vote, durable.hwm, durable.log) == (1, "S1", 2, ((1, b"a"), (1, b"b")))


# ------------------------------------------------------------------ directed traces, model and replicas side by side
def same_as_model(protocol_, trace, n=3, network="rpc", capacity=1) -> SimCluster:
    """Run model actions on the model and on replicas; assert equal snapshots after every step."""
    config = Config(servers=n, max_generation=20, max_log=20, max_crashes=20, network=network,
                    channel_capacity=capacity)
    model = RaftModel(protocol_, config)
    state = initial_state(config)
    c = build_cluster(protocol_, config)
    for k, action in enumerate(trace):
        reason = model.why_not(state, action)
        assert reason is None, f"step {k} {action} is not enabled in the model: {reason}"
        state = model.apply(state, action)
        assert c.apply(action) is None, f"step {k} {action}: the replicas refuse it"
        expected = snapshot_of(state)
        assert c.snapshot() == expected, f"after step {k} {action}:\nmodel {expected}\nimpl  {c.snapshot()}"
        assert c.model_channels() == state.channels, f"after step {k} {action}: channels differ"
    return c


E, W, R, C, X, RS = "elect", "write", "replicate", "crash", "restart", "read"


@pytest.mark.parametrize("commit, hwm", [("current-generation", 0), ("any-generation", 1)])
def test_quorum_index_past_the_leaders_own_log(commit, hwm):
    # generation-mismatch followers acknowledge their whole log, which may be longer than the
    # leader's: the quorum index then points past the leader's log. current-generation has no
    # entry there to check and waits; any-generation moves the HWM past the log (HwmWithinLog).
    flags = protocol(election="any", append_check="generation-mismatch", commit=commit)
    c = same_as_model(flags, [(E, 0, (0, 2)), (W, 0), (R, 0, 2), (E, 1, (0, 1)), (R, 1, 0), (R, 1, 2)])
    assert c["S2"].log_generations() == () and c["S2"].hwm == hwm


def test_restart_truncates_to_the_hwm_of_a_leader_of_the_same_generation():
    # S3 holds 1@g1, which the generation-2 leader S2 has not committed (HWM 0): the leader's
    # generation equals S3's, so S3 truncates its log to the leader's HWM.
    trace = [(E, 0, (0, 1)), (W, 0), (R, 0, 1), (C, 0), (E, 1, (1, 2)), (R, 1, 2), (C, 2), (X, 2)]
    c = same_as_model(PRESETS["raft-truncate-to-leader-hwm"].protocol, trace)
    assert c["S3"].log_generations() == ()


def test_restart_to_leader_hwm_lowers_a_durable_hwm_to_the_truncated_log():
    flags = replace(SEED, hwm_durable=True, noop_on_election=True)
    trace = [(E, 1, (0, 1)), (R, 1, 0), (E, 0, (0, 1)), (R, 0, 1), (C, 0), (E, 1, (1, 2)), (X, 0)]
    c = same_as_model(flags, trace)
    assert c["S1"].hwm <= c["S1"].last_index


def test_follower_hwm_is_bounded_by_what_it_acknowledged_not_by_its_log():
    # Raft keeps entries after the batch that do not conflict; they are not acknowledged, so the
    # leader's HWM does not cover them: hwm = max(hwm, min(leader_hwm, prev + len(entries))).
    r = Replica("S2", ["S1", "S3"], RAFT, FakeDurable(1, None, 0, ((1, b""),) * 3))
    r.step(AppendRequest(2, "S1", 0, 0, ((1, b""),), 3))
    assert r.hwm == 1 and r.log_generations() == (1, 1, 1)
    assert r.ready().messages == (("S1", AppendReply(2, "S2", True, 1)),)


def test_a_late_refusal_does_not_raise_the_match_index():
    # On the async network replies can describe an older append: back off to
    # min(match, index - 1), never above what is already known.
    c = Cluster()
    c.elect("S1", ["S1", "S2"])
    for _ in range(5):
        c.write("S1")
    c["S1"].match["S2"] = 2
    c["S1"].step(AppendReply(1, "S2", False, 5))
    assert c["S1"].match["S2"] == 2


def test_a_refusal_of_an_append_sent_before_the_leader_backed_off_is_stale():
    # next_index is 3 after a refusal made the leader back off; a refusal of the append it had sent
    # before, at prev_index 3, comes late. It says nothing new: the leader keeps probing from 3.
    c = Cluster()
    c.elect("S1", ["S1", "S2"])
    for _ in range(5):
        c.write("S1")
    c["S1"].match["S2"], c["S1"].next_index["S2"] = 1, 3
    c["S1"].step(AppendReply(1, "S2", False, 3, 0, 0))  # its hint: nothing agrees above 0
    assert (c["S1"].match["S2"], c["S1"].next_index["S2"]) == (1, 3)


def test_async_network_reply_reordering_matches_the_model():
    trace = [(E, 0, (0, 1)), (W, 0), ("send", 0, 1), (W, 0), ("send", 0, 1), ("deliver", 0, 1),
             ("deliver", 0, 1), ("deliver", 1, 0), ("deliver", 1, 0), (RS, 0)]
    c = same_as_model(RAFT, trace, network="async", capacity=2)
    assert c["S1"].hwm == 2 and c.reads == {(1, 1), (2, 1)}


def test_a_leader_backs_off_below_an_entry_a_restart_dropped():
    """Under truncate-to-own-hwm a restarted follower drops an entry it acknowledged: the leader's
    next append is refused at its match index and must back off below it, as the model does (the
    leader used to resend the same append until the driver gave up)."""
    trace = [("crash", 0), (E, 1, (1, 2)), ("restart", 0), (W, 1), ("replicate", 1, 2), ("crash", 0),
             ("read", 1), ("crash", 2), ("restart", 2), ("replicate", 1, 2)]
    c = same_as_model(PRESETS["raft-truncate-to-own-hwm"].protocol, trace)
    assert c["S2"].match["S3"] == 1 and c["S3"].last_index == 1


# ------------------------------------------------------------------ differential test against the model
# check_quorum and lease_reads are model-only (properties.protocol.model_only): the replicas keep their default.
flag_values = st.fixed_dictionaries({flag: st.sampled_from(FLAG_VALUES[flag]) for flag in flags_of("raft")
                                     if flag not in ("check_quorum", "lease_reads")})


def run_differential(protocol_, n, data, max_steps, network="rpc", capacity=1):
    config = Config(servers=n, max_generation=8, max_log=4, max_crashes=3, network=network,
                    channel_capacity=capacity)
    model = RaftModel(protocol_, config)
    state = initial_state(config)
    c = build_cluster(protocol_, config)
    trace = []
    for _ in range(data.draw(st.integers(1, max_steps), label="steps")):
        by_kind: dict[str, list] = {}
        for a in model.actions(state):
            by_kind.setdefault(a[0], []).append(a)
        if not by_kind:
            break
        # Kind first, then which one: otherwise the many voter sets make most steps elections.
        kind = data.draw(st.sampled_from(sorted(by_kind)), label="kind")
        action = data.draw(st.sampled_from(by_kind[kind]), label="action")
        trace.append(action)
        state = model.apply(state, action)
        where = f"{protocol_} after {trace}"
        try:
            refused = c.apply(action)
        except Exception as error:
            raise AssertionError(f"{where}: the replicas raised {error!r}") from error
        assert refused is None, f"{where}: the replicas refuse the last step: {refused}"
        expected = snapshot_of(state)
        assert c.snapshot() == expected, f"{where}:\nmodel {expected}\nimpl  {c.snapshot()}"
        assert c.model_channels() == state.channels, f"{where}: channels differ"


EXAMPLES = int(os.environ.get("HWM_DIFFERENTIAL_EXAMPLES", "40"))
PRESET_CASES = [(name, 3) for name in presets_of("raft") if not model_only(PRESETS[name].protocol)] + [
    ("raft-seed-quorum", 4), ("seed", 4)]


@pytest.mark.parametrize("preset, n", PRESET_CASES)
@settings(max_examples=EXAMPLES, deadline=None, derandomize=True, suppress_health_check=[HealthCheck.too_slow])
@given(data=st.data())
def test_replicas_match_the_model_on_the_rpc_network(preset, n, data):
    run_differential(PRESETS[preset].protocol, n, data, max_steps=30)


@settings(max_examples=4 * EXAMPLES, deadline=None, derandomize=True, suppress_health_check=[HealthCheck.too_slow])
@given(flags=flag_values, n=st.sampled_from([3, 4]), data=st.data())
def test_replicas_match_the_model_under_any_flags(flags, n, data):
    run_differential(Protocol(**flags), n, data, max_steps=30)


@settings(max_examples=4 * EXAMPLES, deadline=None, derandomize=True, suppress_health_check=[HealthCheck.too_slow])
@given(flags=flag_values, capacity=st.sampled_from([1, 2]), data=st.data())
def test_replicas_match_the_model_on_the_async_network(flags, capacity, data):
    run_differential(Protocol(**flags), 3, data, max_steps=40, network="async", capacity=capacity)


@pytest.mark.deep
@settings(max_examples=3000, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(flags=flag_values, n=st.sampled_from([3, 4, 5]), network=st.sampled_from(["rpc", "async"]),
       data=st.data())
def test_replicas_match_the_model_deep(flags, n, network, data):
    run_differential(Protocol(**flags), n, data, max_steps=80, network=network, capacity=2)


# ------------------------------------------------------------------ catch-up cost
def _catch_up(n: int, catch_up: str = "probe", latency: int = 3, payload: int = 100,
              give_up_entries: int = 10**9) -> dict[str, int]:
    """A new leader with `n` entries catches up an empty follower (S3) and one whose tail diverged
    (S2), over a network that delivers each message `latency` ticks after it was sent while the
    leader heartbeats every tick. Returns the appends and entries sent to S3, and the rounds."""
    log = tuple((1, bytes(payload)) for _ in range(n)) + ((3, bytes(payload)),) * 10
    logs = {"S1": FakeDurable(3, None, 0, log),
            "S2": FakeDurable(2, None, 0, log[: n // 2] + ((2, bytes(payload)),) * 50),
            "S3": FakeDurable(0, None, 0, ())}
    replicas = {name: Replica(name, [p for p in logs if p != name], RAFT, durable, heartbeat_ticks=1,
                              election_ticks=(20, 40), max_append_bytes=64 * 1024, max_in_flight=4,
                              catch_up=catch_up)
                for name, durable in logs.items()}
    leader = replicas["S1"]
    leader.campaign()
    wire: list[tuple[int, str, object]] = []  # (due tick, to, message)
    sent = {"appends": 0, "entries": 0}
    for now in range(10_000):
        for name, replica in replicas.items():
            for to, message in replica.ready().messages:
                if to == "S3" and isinstance(message, AppendRequest) and message.entries:
                    sent["appends"] += 1
                    sent["entries"] += len(message.entries)
                wire.append((now + latency, to, message))
        due = [x for x in wire if x[0] <= now]
        wire = [x for x in wire if x[0] > now]
        for _, to, message in due:
            replicas[to].step(message)
        leader.tick()
        if all(r.log_generations() == leader.log_generations() for r in replicas.values()) \
                or sent["entries"] > give_up_entries:
            return dict(sent, rounds=now)
    raise AssertionError(f"no catch-up in 10,000 ticks: {sent}")


@pytest.mark.parametrize("n", [2_000, 8_000])
def test_catch_up_sends_each_entry_about_once_whatever_the_log_length(n):
    """A 64 KiB batch holds 585 entries of 100 bytes. The appends a follower needs are
    bounded by its entries / batch + a constant (probes, the pipeline's tail), not by how long
    the catch-up takes: replies and heartbeats send nothing more while 4 appends are in flight."""
    result = _catch_up(n)
    batches = -(-(n + 10) // 585)
    assert result["appends"] <= batches + 4, result
    assert result["entries"] <= (n + 10) + 4 * 585, result
    assert result["rounds"] <= 2 * 3 * (batches + 4), result  # round trips of 6 ticks


def test_resending_from_the_match_index_is_what_the_limits_prevent():
    # The same catch-up with every heartbeat resending everything after the match index (the
    # seed leader's way, kept for the model's async network): many times the entries needed.
    result = _catch_up(2_000, catch_up="match", give_up_entries=3 * 2_010)
    assert result["entries"] > 3 * 2_010, result


def test_a_stale_acknowledgement_never_lowers_the_match_index():
    c = Cluster()
    c.elect("S1", ["S1", "S2"])
    for _ in range(5):
        c.write("S1")
    c.replicate("S1", "S2")
    assert c["S1"].match["S2"] == 5
    c["S1"].step(AppendReply(1, "S2", True, 3))  # the answer to an older, shorter append
    assert c["S1"].match["S2"] == 5


# ------------------------------------------------------------------ pre-vote and check-quorum
def _pumped_cluster(**options) -> dict[str, Replica]:
    replicas = {name: Replica(name, [p for p in ("S1", "S2", "S3") if p != name], RAFT, FakeDurable(),
                              election_ticks=(10, 20), heartbeat_ticks=2, rng_seed=k, **options)
                for k, name in enumerate(("S1", "S2", "S3"))}
    replicas["S1"].campaign()
    return replicas


def _pump(replicas: dict[str, Replica], cut_off: str | None = None, ticks: int = 1) -> None:
    """Tick every replica and deliver everything; `cut_off` hears nothing and reaches no one."""
    for _ in range(ticks):
        for replica in replicas.values():
            replica.tick()
        for _ in range(10):
            moved = False
            for name, replica in replicas.items():
                for to, message in replica.ready().messages:
                    if cut_off not in (name, to):
                        replicas[to].step(message)
                        moved = True
            if not moved:
                break


@pytest.mark.parametrize("pre_vote", [True, False])
def test_a_server_back_from_a_partition_does_not_depose_a_healthy_leader(pre_vote):
    replicas = _pumped_cluster(pre_vote=pre_vote)
    _pump(replicas)
    assert replicas["S1"].role == LEADER and replicas["S1"].generation == 1
    _pump(replicas, cut_off="S3", ticks=100)  # S3 times out again and again, alone
    _pump(replicas, ticks=5)  # ... and comes back
    if pre_vote:
        # Its pre-votes were refused by servers that hear the leader: nobody's generation moved.
        assert replicas["S1"].role == LEADER and {r.generation for r in replicas.values()} == {1}
    else:
        # Without pre-vote it raised its generation while cut off and deposed the leader.
        assert replicas["S3"].generation > 1 and replicas["S1"].generation > 1


@pytest.mark.parametrize("check_quorum", [True, False])
def test_a_leader_that_hears_no_quorum_steps_down(check_quorum):
    replicas = _pumped_cluster(check_quorum=check_quorum)
    _pump(replicas)
    leader = replicas["S1"]
    for _ in range(25):  # longer than the longest election timeout, hearing nobody
        leader.tick()
        leader.ready()
    assert (leader.role == LEADER) is not check_quorum


def test_describe_shows_what_decides_the_next_step():
    """What `kill -USR1` logs for a stalled node: a leader's view of each follower, a follower's
    election under way."""
    c = Cluster(n=3)
    c.elect("S1", ["S1", "S2"])
    c.write("S1")
    c.replicate("S1", "S2")
    leader = c["S1"].describe()
    assert (leader["role"], leader["generation"], leader["last_index"], leader["hwm"]) == ("leader", 1, 1, 1)
    assert leader["followers"]["S2"]["match"] == 1 and leader["followers"]["S3"]["match"] == 0
    assert set(leader["followers"]["S3"]) == {"match", "next", "in_flight", "confirmed", "quiet", "silent"}
    # S2 answered with progress (its append's acknowledgement), S3 never did: a person reads which
    # follower the leader pipelines to.
    assert leader["followers"]["S2"]["confirmed"] is True and leader["followers"]["S3"]["confirmed"] is False
    follower = c["S3"]
    follower.pre_campaign()
    state = follower.describe()
    assert state["role"] == "follower" and state["pre_votes"] == ["S3"] and "followers" not in state
    assert follower.pre_voting and not c["S2"].pre_voting


def test_a_voter_that_hears_its_leader_refuses_a_pre_vote_and_grants_it_once_the_leader_is_silent():
    """PreVote's lease (thesis 9.6): a voter within an election timeout of hearing its leader refuses
    even an up-to-date candidate of a later generation; after a silence it grants, and neither moves
    its generation."""
    replicas = _pumped_cluster(pre_vote=True)
    _pump(replicas)
    voter = replicas["S2"]
    assert replicas["S1"].role == LEADER and voter.generation == 1

    def answer() -> VoteReply:
        voter.step(VoteRequest(2, "S3", voter.last_index, voter.last_generation, True))
        [reply] = [message for to, message in voter.ready().messages if to == "S3"]
        return reply

    assert not answer().granted and voter.generation == 1
    for _ in range(25):  # longer than the longest election timeout, hearing nobody
        voter.tick()
        voter.ready()
    assert answer().granted and voter.generation == 1


def test_an_append_carries_no_more_payload_and_overhead_than_max_append_bytes():
    """max_append_bytes bounds an append's entries, each counted as its payload plus the codec's
    overhead per entry (at least one entry goes, however large)."""
    from hwm.impl.core import ENTRY_OVERHEAD_BYTES
    from hwm.impl.messages import AppendRequest

    limit = 2 * (10 + ENTRY_OVERHEAD_BYTES) + 5  # room for two 10-byte entries, not three
    c = Cluster(max_append_bytes=limit)
    c.elect("S1", ["S1", "S2"])
    for k in range(6):
        c["S1"].propose(b"%010d" % k)
    sizes = []
    for _ in range(60):
        c["S1"].tick()  # appends go out with the leader's heartbeats here
        for _, _, message in c.deliver():
            if isinstance(message, AppendRequest) and message.entries:
                sizes.append(len(message.entries))
                assert sum(len(p) + ENTRY_OVERHEAD_BYTES for _, p in message.entries) <= limit, message
    assert max(sizes) == 2, sizes  # the batches are as full as the limit allows
    assert all(c[n].read(6)[1] == b"%010d" % 5 for n in ("S1", "S2"))


def test_a_follower_silent_since_the_election_gets_the_entries_again_after_a_shortest_election_timeout():
    """The new leader's first append to S3 is lost and S3 never answers: S1 sends it heartbeats, and
    only once S3 has been quiet for election_ticks[0] ticks (counted from the election) does it take
    what was in flight as lost and send the entries again."""
    from hwm.impl.messages import AppendRequest

    c = Cluster(election_ticks=(6, 12), heartbeat_ticks=1)
    c.elect("S1", ["S1", "S2"])
    c.settle()
    c["S1"].propose(b"x")
    carried = []
    for tick in range(1, 10):
        c["S1"].tick()
        c._settle()
        carried += [tick for a, b, m in c.in_flight if (a, b) == ("S1", "S3") and isinstance(m, AppendRequest)
                    and m.entries]
        c.in_flight = [x for x in c.in_flight if x[1] != "S3"]  # S3 hears nothing
        c.deliver()  # S2 answers: S1 keeps its quorum
    assert carried == [6]
