"""ZAB on the implementation (impl/zab.py, bridge/simcluster/zab.py): hand-built states, the synchronisation
phase, ZOOKEEPER-3911 on real replicas and storage, and the differential run against the model."""

from __future__ import annotations

import pytest
from hypothesis.stateful import run_state_machine_as_test

from hwm.bridge.conformance import RPC, Divergence, conformance_settings, hunt, machine_for
from hwm.bridge.simcluster import build_cluster
from hwm.bridge.simcluster.zab import ZabSimCluster
from hwm.impl import codec
from hwm.impl.core import LEADER, NotLeader, Replica
from hwm.impl.messages import AppendReply, AppendRequest, NewLeader, NewLeaderAck, VoteReply, ZabVoteRequest
from hwm.impl.storage import DiskStorage, MemoryStorage
from hwm.impl.wal import StorageError
from hwm.impl.zab import CURRENT_EPOCH_FILE, EpochStorage, NotEstablished, ZabDurable, ZabReplica, persist
from hwm.model.state import Config
from hwm.properties.protocol import PRESETS

ZAB = PRESETS["zab"].protocol
BUG = PRESETS["zab-ack-before-persist"].protocol
RPC3 = Config(servers=3)
PEERS = {"S1": ["S2", "S3"], "S2": ["S1", "S3"], "S3": ["S1", "S2"]}


def storage_holding(generations, *, generation=None, current_epoch=None) -> EpochStorage:
    """A closed EpochStorage whose durable log holds entries of these generations."""
    inner = MemoryStorage()
    inner.load()
    inner.append([(i + 1, g, f"e{i + 1}".encode()) for i, g in enumerate(generations)])
    inner.save_metadata(generation if generation is not None else max(generations, default=0), None, 0)
    inner.close()
    storage = EpochStorage(inner)
    if current_epoch is not None:
        storage.save_current_epoch(current_epoch)
    return storage


def established_cluster(protocol=ZAB) -> ZabSimCluster:
    """S1 leads epoch 1, S2 synchronised with it (a quorum), and 1@g1 is committed on both."""
    c = build_cluster(protocol, RPC3)
    assert isinstance(c, ZabSimCluster)
    assert c.elect("S1", ["S1", "S2"]) is None
    assert c.sync("S1", "S2") is None
    assert c.write("S1", "a") is None and c.replicate("S1", "S2") is None
    assert c["S1"].hwm == 1
    return c


# ------------------------------------------------------------------ phase 1 and 2 on real replicas
def test_a_prospective_leader_takes_no_write_and_broadcasts_nothing_until_a_quorum_acknowledged():
    c = build_cluster(ZAB, Config(servers=5))
    assert c.elect("S1", ["S1", "S2", "S3"]) is None
    leader = c["S1"]
    assert leader.role == LEADER and leader.prospective and leader.current_epoch == 1
    assert c.write("S1", "x") == ("S1 is a prospective leader: a quorum has not acknowledged its NEWLEADER "
                                  "yet (ZAB phase 2)")
    with pytest.raises(NotLeader):  # a client sees NotLeader (no hint): try again later
        leader.propose(b"x")
    assert c.replicate("S1", "S2") == ("S1 is a prospective leader: it broadcasts only after a quorum "
                                       "acknowledged its NEWLEADER (ZAB phase 2)")
    assert c.sync("S1", "S2") is None
    assert leader.prospective and leader.synced == {"S2"}  # 2 of 5: not yet
    assert c.sync("S1", "S2") == "S2 has already acknowledged S1's NEWLEADER"
    assert c.sync("S1", "S3") is None
    assert leader.established and c.write("S1", "x") is None
    assert c.replicate("S1", "S4") == "S4 has not synchronised with S1 (no NEWLEADER acknowledged)"
    assert c.replicate("S1", "S2") is None and leader.hwm == 0  # 2 of 5 hold 1@g1
    assert c.replicate("S1", "S3") is None and leader.hwm == 1


def test_synchronisation_truncates_what_the_leader_lacks_and_commits_the_whole_history_at_once():
    def storages():
        # S1 and S2 hold 1@g1 2@g1 (epoch 1); S3 holds 1@g1 2@g2 and accepted epoch 2, whose leader
        # never reached a quorum.
        return {"S1": storage_holding((1, 1), generation=2, current_epoch=1),
                "S2": storage_holding((1, 1), generation=2, current_epoch=1),
                "S3": storage_holding((1, 2), generation=2, current_epoch=2)}

    c = build_cluster(ZAB, RPC3, storages=storages())
    # S3's currentEpoch is later: it refuses S1 although the logs are as long.
    assert c.elect("S1", ["S1", "S3"]) == ("S3 refuses the vote: its history is more up to date (currentEpoch 2, "
                                           "last zxid 2.2) than S1's (currentEpoch 1, last zxid 1.2)")
    c = build_cluster(ZAB, RPC3, storages=storages())
    assert c.elect("S1", ["S1", "S2"]) is None and c["S1"].generation == 3
    assert c["S1"].hwm == 0 and c.sync("S1", "S2") is None
    assert c["S1"].established and c["S1"].hwm == 2  # the history, committed by the NEWLEADER quorum
    assert c.sync("S1", "S3") is None
    # S3 was in epoch 2 < 3: it takes S1's history, and its 2@g2 is truncated, durably.
    assert c["S3"].log_generations() == (1, 1) and c["S3"].current_epoch == 3 and c["S3"].hwm == 2
    assert c.crash("S3") is None
    assert c.down_durable("S3").generations() == (1, 1) and c.down_durable("S3").current_epoch == 3


def test_a_follower_of_a_later_epoch_refuses_newleader_and_the_leader_steps_down():
    c = build_cluster(ZAB, RPC3)
    assert c.elect("S1", ["S1", "S2"]) is None and c.sync("S1", "S2") is None
    assert c.elect("S2", ["S2", "S3"]) is None and c["S3"].generation == 2
    assert c.sync("S1", "S3") is None  # the exchange happens: S3 answers with its epoch
    assert c["S1"].role != LEADER and c["S1"].generation == 2 and not c["S1"].established
    assert c.sync("S1", "S3") == "S1 is not a leader and sends no NEWLEADER"


def test_a_prospective_leader_of_five_sends_its_acknowledged_follower_nothing_until_established():
    """One ACK of NEWLEADER of the two a leader of five needs, then a heartbeat: hwm's node raised
    "S2 has already acknowledged S1's NEWLEADER" there and exited (`hwm test`, zab, 5 nodes)."""
    names = [f"S{k}" for k in range(1, 6)]
    r = {n: ZabReplica(n, [p for p in names if p != n], ZAB, EpochStorage(MemoryStorage()).load()) for n in names}
    r["S1"].campaign()
    for to, request in r["S1"].ready().messages:
        if to in ("S2", "S3"):
            r[to].step(request)
            for _, reply in r[to].ready().messages:
                r["S1"].step(reply)
    assert r["S1"].prospective
    to, new_leader = next((to, m) for to, m in r["S1"].ready().messages if isinstance(m, NewLeader))
    r[to].step(new_leader)
    (_, ack), = r[to].ready().messages
    r["S1"].step(ack)
    assert r["S1"].synced == {to} and r["S1"].prospective
    for _ in range(r["S1"].heartbeat_ticks):
        r["S1"].tick()
    sent = r["S1"].ready().messages
    assert to not in {peer for peer, _ in sent}
    # The others, not yet synchronised, are still asked to (an empty append, ignored, while one is in flight).
    assert {peer for peer, _ in sent} == set(names) - {"S1", to}


def test_votes_order_by_current_epoch_before_the_last_zxid():
    # The voter accepted epoch 3's history (which ends at 1@g1); the candidate has more entries of epoch
    # 1 and currentEpoch 1. Raft's rule (last generation, then length) would grant; ZAB's refuses.
    voter = ZabReplica("S2", PEERS["S2"], ZAB, ZabDurable(3, None, 0, ((1, b"a"),), 3))
    request = ZabVoteRequest(4, "S1", 2, 1, False, 1)
    voter.step(codec.decode_frame(codec.encode(request)))
    (to, reply), = voter.ready().messages
    assert (to, reply.granted) == ("S1", False)
    voter = ZabReplica("S2", PEERS["S2"], ZAB, ZabDurable(3, None, 0, ((1, b"a"),), 1))
    voter.step(request)
    assert voter.ready().messages[0][1].granted
    # A campaign's requests carry the currentEpoch.
    candidate = ZabReplica("S1", PEERS["S1"], ZAB, ZabDurable(1, None, 0, ((1, b"a"),), 1))
    candidate.campaign()
    assert {type(m) for _, m in candidate.ready().messages} == {ZabVoteRequest}


# ------------------------------------------------------------------ ZOOKEEPER-3911 on real storage
@pytest.mark.parametrize("protocol", [ZAB, BUG], ids=["zab", "zab-ack-before-persist"])
def test_zookeeper_3911_the_ack_of_newleader_before_the_entries_are_on_disk(protocol):
    """The catalogue's scenario, step by step on replicas: what S3's storage holds when it ACKs."""
    c = established_cluster(protocol)
    assert c.sync("S1", "S3") is None  # the DIFF brings 1@g1 to S3
    s3 = c["S3"]
    assert s3.log_generations() == (1,) and s3.current_epoch == 1
    on_disk = c.storages["S3"].inner._durable_log  # what a crash keeps
    if protocol.zab_ack_before_persist:
        assert s3.logged == 0 and on_disk == ()  # acknowledged, and only in memory
    else:
        assert s3.logged == 1 and on_disk == ((1, b"a"),)
    assert c.elect("S3", ["S1", "S3"]) is None  # S3's history is as recent as S1's
    assert c.sync("S3", "S1") is None and c["S3"].established
    assert c.snapshot().acked == {(1, 1)}  # the client of 1@g1 is told it is committed
    assert c.crash("S3") is None
    down = c.down_durable("S3")
    assert down.current_epoch == 2  # the epoch was written before the ACK, under either flag
    if protocol.zab_ack_before_persist:
        assert down.log == ()  # lost: 1@g1 is on S1 alone
        assert c.elect("S3", ["S2", "S3"]) == "S3 is down"
        # Back without 1@g1 but with currentEpoch 2, S3 wins S2's vote and S2 truncates 1@g1.
        assert c.restart("S3") is None and c.elect("S3", ["S2", "S3"]) is None
        assert c.sync("S3", "S2") is None and c["S3"].established and c["S2"].log_generations() == ()
    else:
        assert down.log == ((1, b"a"),)


def test_persist_logs_the_entries_held_in_memory_and_acks_them_to_the_established_leader():
    c = established_cluster(BUG)
    assert c.persist("S3") == "S3 has nothing in memory that is not on disk"
    assert c.write("S1", "b") is None and c["S1"].hwm == 1
    assert c.sync("S1", "S3") is None
    # The leader is established: the ACK of NEWLEADER counts only what S3 logged (nothing).
    assert c["S1"].match["S3"] == 0 and c["S1"].hwm == 1
    assert c.persist("S3") is None
    assert c.storages["S3"].inner._durable_log == ((1, b"a"), (1, b"b"))
    assert c["S1"].match["S3"] == 2 and c["S1"].hwm == 2  # the ACK of the logged proposals
    assert c.persist("S3") == "S3 has nothing in memory that is not on disk"


def test_a_crashed_follower_must_synchronise_again():
    c = established_cluster()
    assert c.crash("S2") is None and c.restart("S2") is None
    assert c.replicate("S1", "S2") == "S2 has not synchronised with S1 (no NEWLEADER acknowledged)"
    assert c.sync("S1", "S2") is None and c.replicate("S1", "S2") is None


# ------------------------------------------------------------------ the wire and the storage
def test_zab_messages_validate_their_fields():
    with pytest.raises(ValueError, match=r"ZabVoteRequest.current_epoch: 5 is newer"):
        ZabVoteRequest(4, "S1", 0, 0, False, 5)
    with pytest.raises(ValueError, match=r"NewLeader.entries\[1\]: generation 3"):
        NewLeader(2, "S1", ((1, b""), (3, b"")), 0)
    with pytest.raises(ValueError, match=r"NewLeaderAck.logged: 3 entries on disk, but the history holds only 2"):
        NewLeaderAck(1, "S2", 2, 3)
    frame = codec.encode(NewLeader(2, "S1", ((1, b"a"), (2, b"")), 1))
    assert codec.decode_frame(frame) == NewLeader(2, "S1", ((1, b"a"), (2, b"")), 1)
    bad = bytearray(codec.encode(NewLeaderAck(1, "S2", 2, 2)))
    bad[-1] = 3  # logged 3 > index 2
    with pytest.raises(codec.CodecError, match="NewLeaderAck.logged"):
        codec.decode_frame(bytes(bad))


def test_the_current_epoch_file_survives_a_restart_and_garbage_is_named(tmp_path):
    storage = EpochStorage(DiskStorage(tmp_path), tmp_path)
    assert storage.load().current_epoch is None
    storage.save_current_epoch(4)
    storage.close()
    assert (tmp_path / CURRENT_EPOCH_FILE).read_text() == "4\n"
    again = EpochStorage(DiskStorage(tmp_path), tmp_path)
    assert again.load().current_epoch == 4
    again.close()
    (tmp_path / CURRENT_EPOCH_FILE).write_text("four")
    with pytest.raises(StorageError, match=f"{CURRENT_EPOCH_FILE}: expected a non-negative integer"):
        EpochStorage(DiskStorage(tmp_path), tmp_path).load()


def test_the_epoch_is_durable_before_the_ack_is_sent():
    follower = ZabReplica("S2", PEERS["S2"], ZAB, ZabDurable(0, None, 0, ()))
    follower.step(NewLeader(1, "S1", ((1, b"a"),), 0))
    ready = follower.ready()
    assert ready.current_epoch == 1 and [m for _, m in ready.messages] == [NewLeaderAck(1, "S2", 1, 1)]
    storage = EpochStorage(MemoryStorage())
    storage.load()
    persist(ready, storage)
    storage.crash()
    assert storage.load() == ZabDurable(1, None, 0, ((1, b"a"),), 1)


def test_the_raft_core_refuses_a_zab_protocol_and_names_the_zab_replica():
    with pytest.raises(ValueError, match="ZabReplica runs zab"):
        Replica("S1", ["S2"], ZAB, ZabDurable(0, None, 0, ()))
    with pytest.raises(ValueError, match="ZabReplica runs zab; hwm.impl.core.Replica runs raft"):
        ZabReplica("S1", ["S2"], PRESETS["raft"].protocol, ZabDurable(0, None, 0, ()))


# ------------------------------------------------------------------ differential, per flag value
def without_properties(machine):
    """The machine checking agreement with the model only: a known-broken preset runs on past its bug."""
    init = machine.__init__

    def __init__(self):
        init(self)
        self.always = ()

    machine.__init__ = __init__
    return machine


@pytest.mark.parametrize("preset", ["zab", "zab-ack-before-persist"])
def test_the_implementation_follows_the_model_on_random_schedules(preset, tmp_path):
    machine = without_properties(machine_for(preset, RPC, out_dir=tmp_path))
    run_state_machine_as_test(machine, settings=conformance_settings(max_examples=60, derandomize=True))
    seen = set(machine.witnessed)
    assert {"sync", "replicate", "write", "crash", "restart", "truncation", "EntryRead"} <= seen, seen
    assert ("persist" in seen) == (preset == "zab-ack-before-persist")


@pytest.mark.deep
@pytest.mark.parametrize("preset", ["zab", "zab-ack-before-persist"])
@pytest.mark.parametrize("flags", [{}, {"noop_on_election": True}, {"hwm_durable": True},
                                   {"restart": "truncate-to-own-hwm"}, {"restart": "truncate-to-leader-hwm"},
                                   {"election": "any"}, {"append_check": "generation-mismatch"},
                                   {"commit": "any-generation"}, {"quorum": "seed-index"}],
                         ids=lambda flags: ",".join(f"{k}={v}" for k, v in flags.items()) or "preset")
@pytest.mark.parametrize("servers", [3, 4, 5])
def test_the_implementation_follows_the_model_on_random_schedules_deep(preset, flags, servers, tmp_path):
    """Every raft-family flag keeps its meaning on ZAB's replicas, under both values of ZAB's own."""
    from hwm.properties.protocol import resolve

    config = Config(servers=servers, max_generation=6, max_log=3, max_crashes=3)
    protocol = resolve({"preset": preset, "flags": flags})[1]
    machine = without_properties(machine_for(protocol, config, out_dir=tmp_path))
    run_state_machine_as_test(machine, settings=conformance_settings(max_examples=200, stateful_step_count=60))


def test_the_differential_run_notices_a_follower_that_ignores_the_flag(tmp_path):
    """Plant: a follower that logs before its ACK whatever the flag says (the fix, where the model
    has the bug): the leader counts its ACK for more than the model does."""

    class AlwaysLogs(ZabReplica):
        def __init__(self, *args, **kwargs):
            super().__init__(*args, **kwargs)
            self.ack_before_persist = False

    machine = without_properties(machine_for("zab-ack-before-persist", RPC, replica_factory=AlwaysLogs,
                                             out_dir=tmp_path))
    found = hunt(machine, 200)
    assert isinstance(found.failure, Divergence), found.failure


def test_the_differential_run_compares_what_a_snapshot_does_not_show(tmp_path):
    """Plant: a follower that does not write the currentEpoch it synchronised to. The snapshots
    agree at once; the ZAB state (`bridge.simcluster.zab.ZabView`) does not."""

    class ForgetsTheEpoch(ZabReplica):
        def _set_epoch(self, epoch):
            if self.role == LEADER:
                super()._set_epoch(epoch)

    machine = without_properties(machine_for("zab", RPC, replica_factory=ForgetsTheEpoch, out_dir=tmp_path))
    found = hunt(machine, 200)
    assert isinstance(found.failure, Divergence), found.failure
    assert "ZAB state differs" in str(found.failure) and "epochs: model" in str(found.failure)


def test_over_time_a_leader_synchronises_whoever_answers_and_resends_newleader_to_the_silent_rarely():
    """The runtime's inputs (ticks, messages): a new leader sends NEWLEADER to every peer; S2 answers
    and then gets appends; S3 is down and is sent the history again only after a shortest election
    timeout of silence, not with every heartbeat."""
    leader = ZabReplica("S1", PEERS["S1"], ZAB, ZabDurable(0, None, 0, ()),
                        election_ticks=(10, 20), heartbeat_ticks=2, check_quorum=False)
    leader.campaign()
    leader.ready()
    leader.step(codec.decode_frame(codec.encode(VoteReply(1, "S2", True))))
    assert leader.prospective
    sent = [(to, type(m)) for to, m in leader.ready().messages]
    assert sent == [("S2", NewLeader), ("S3", NewLeader)]
    leader.step(NewLeaderAck(1, "S2", 0, 0))
    assert leader.established and leader.synced == {"S2"}
    leader.ready()
    sent = []
    for _ in range(40):
        leader.tick()
        messages = leader.ready().messages
        sent += [(to, type(m)) for to, m in messages]
        for to, m in messages:  # S2 answers every append
            if to == "S2" and isinstance(m, AppendRequest):
                leader.step(AppendReply(1, "S2", True, m.prev_index + len(m.entries)))
    to_s2 = {kind for to, kind in sent if to == "S2"}
    assert to_s2 == {AppendRequest}
    resent = sum(1 for to, kind in sent if (to, kind) == ("S3", NewLeader))
    heartbeats = sum(1 for to, kind in sent if to == "S3")
    assert heartbeats == 20 and 1 <= resent <= 4, (resent, heartbeats)


def test_a_durable_hwm_never_covers_entries_held_only_in_memory():
    """hwm_durable with ZOOKEEPER-3911: S2 takes 1@g2 and the HWM 1 in memory, and crashes. What it
    saved as its HWM covered only what it had logged: it comes back with hwm 0, as in the model."""
    from hwm.bridge.replay import replay_on_impl
    from hwm.checker.replay import replay_on_model
    from hwm.properties.snapshot import snapshot_of
    from hwm.properties.trace import Step, Trace

    steps = [("elect", "S1", ["S1", "S2"]), ("sync", "S1", "S3"), ("elect", "S3", ["S1", "S3"]),
             ("sync", "S3", "S1"), ("write", "S3"), ("replicate", "S3", "S1"), ("sync", "S3", "S2"),
             ("crash", "S1"), ("crash", "S2")]
    keys = {"elect": ("server", "voters"), "sync": ("leader", "follower"), "replicate": ("leader", "follower"),
            "write": ("server",), "crash": ("server",)}
    trace = Trace(protocol={"preset": "zab-ack-before-persist", "flags": {"hwm_durable": True}},
                  config=RPC.to_mapping(), property=None, expect="holds",
                  steps=[Step(a, {k: (tuple(v) if isinstance(v, list) else v) for k, v in zip(keys[a], rest)})
                         for a, *rest in steps])
    on_impl, on_model = replay_on_impl(trace), replay_on_model(trace)
    assert (on_impl.kind, on_impl.step, on_impl.property) == (on_model.kind, on_model.step, on_model.property)
    assert [snapshot_of(v) for _, v in on_impl.rows] == [snapshot_of(v) for _, v in on_model.rows]
    s2 = on_impl.rows[-1][1].servers[1]
    assert (s2.alive, s2.log, s2.hwm) == (False, (), 0)


def test_a_follower_silent_longer_than_the_longest_election_timeout_must_synchronise_again():
    """ZooKeeper's syncLimit: the established leader drops S2 from its synchronised followers once S2
    has answered nothing for more than the longest election timeout (20 ticks), and not before."""
    leader = ZabReplica("S1", PEERS["S1"], ZAB, ZabDurable(0, None, 0, ()),
                        election_ticks=(10, 20), heartbeat_ticks=2, check_quorum=False)
    leader.campaign()
    leader.ready()
    leader.step(VoteReply(1, "S2", True))
    leader.ready()
    leader.step(NewLeaderAck(1, "S2", 0, 0))
    assert leader.established and leader.synced == {"S2"}
    for _ in range(20):
        leader.tick()
        leader.ready()
    assert leader.synced == {"S2"}
    for _ in range(2):
        leader.tick()
        leader.ready()
    assert leader.synced == set()
