"""bridge.simcluster: what the conformance machine and `hwm replay --on impl` run on."""

from __future__ import annotations

import pytest

from hwm.impl import codec as wire_codec
from hwm.bridge.simcluster import CLUSTERS, Read, SimCluster, build_cluster
from hwm.bridge.simcluster.bookkeeper import BookKeeperSimCluster
from hwm.bridge.simcluster.zab import ZabSimCluster
from hwm.model.state import Config
from hwm.properties.protocol import FLAG_VALUES, PRESETS, RAFT
from hwm.properties.snapshot import FOLLOWER, LEADER

RPC3 = Config(servers=3)
ASYNC3 = Config(servers=3, network="async", channel_capacity=1)


def cluster_with_a_committed_entry(config=RPC3) -> SimCluster:
    c = SimCluster(RAFT, config)
    assert c.elect("S1", ["S1", "S2"]) is None
    assert c.write("S1", "a") is None
    if config.network == "rpc":
        assert c.replicate("S1", "S2") is None
    else:
        assert c.send("S1", "S2") is None and c.deliver("S1", "S2") is None and c.deliver("S2", "S1") is None
    return c


def test_every_message_crosses_the_wire(monkeypatch):
    decoded = []
    real = wire_codec.decode_frame
    monkeypatch.setattr(wire_codec, "decode_frame", lambda frame: decoded.append(frame) or real(frame))
    c = cluster_with_a_committed_entry()
    assert c.rpc_messages == len(decoded) > 0  # votes, appends and replies, as frames
    c = cluster_with_a_committed_entry(ASYNC3)
    assert c.network.frames == 2  # the append and its reply travelled the channels as frames


def test_reads_are_real_client_reads_with_values():
    c = cluster_with_a_committed_entry()
    assert c.read("S1") is None
    assert c.history == [Read("S1", 1, 1, b"a")]
    assert c.snapshot().reads == {(1, 1)}
    assert c.value_disagreement() is None
    c.history.append(Read("S2", 1, 1, b"b"))
    assert c.value_disagreement() == "clients read two values at index 1: b'a'@g1 from S1 and b'b'@g1 from S2"


def test_refusals_name_the_implementations_reason():
    c = cluster_with_a_committed_entry()
    # S2 holds 1@g1, S3 nothing: Raft's voters refuse a candidate with a less up-to-date log.
    assert c.elect("S3", ["S2", "S3"]) == ("S2 refuses the vote: its log is more up to date (last generation 1, "
                                          "length 1) than S3's (last generation 0, length 0)")
    # The vote exchange did happen (impl.core.elect campaigns a few rounds): a refused step may still
    # change the cluster, which is why a replay stops at it.
    assert c["S2"].generation > 1
    assert c.write("S2", "x") == "S2 is not the leader; no leader is known"
    assert c.read("S3") == "Log entry not available: entry 1 is not yet committed (high-water mark 0 on S3)"
    assert c.replicate("S3", "S1") == "S3 is not a leader and sends no appends"
    assert c.elect("S1", ["S1", "S2"]) == "S1 already leads generation 1"  # it has not heard of generation 4
    assert c.elect("S2", ["S2"]) == "1 voters are not a quorum of 3 (need 2)"
    assert c.crash("S3") is None
    assert c.crash("S3") == "S3 is already down"
    assert c.read("S3") == "S3 is down"
    assert c.elect("S2", ["S2", "S3"]) == "S3 is down and cannot vote"
    assert c.restart("S1") == "S1 is not down"


def test_crash_and_restart_recover_what_storage_holds():
    c = cluster_with_a_committed_entry()
    before = c["S2"].snapshot()
    assert c.crash("S2") is None
    down = c.snapshot().servers[1]
    assert (down.alive, down.role, down.log, down.hwm, down.generation) == (False, FOLLOWER, (1,), 0, 1)
    assert c.restart("S2") is None
    assert c["S2"].snapshot() == before._replace(hwm=0)  # the HWM is not durable under raft
    assert c["S2"].entry(1) == (1, b"a")


def test_restart_rules_apply_on_rejoin():
    c = SimCluster(PRESETS["raft-truncate-to-own-hwm"].protocol, RPC3)
    c.elect("S1", ["S1", "S2"])
    c.write("S1", "a")
    c.replicate("S1", "S2")
    c.crash("S2")
    c.restart("S2")
    assert c["S2"].log_generations() == ()  # truncated to its own (volatile, so 0) HWM


def test_async_channels_are_fifo_bounded_and_emptied_by_a_crash():
    c = SimCluster(RAFT, Config(servers=3, network="async", channel_capacity=1))
    c.elect("S1", ["S1", "S2"])
    assert c.send("S1", "S2") is None
    assert c.send("S1", "S2") is None  # the channel is full: the network loses the second append
    assert c.network.lost == 1 and len(c.network.channels["S1", "S2"]) == 1
    assert c.model_channels()[1] == ((0, 1, 0, 0, (), 0),)  # S1->S2 holds one empty append
    assert c.drop("S1", "S3") == "channel S1->S3 is empty"
    c.crash("S2")
    assert c.network.channels["S1", "S2"] == []
    assert c.deliver("S1", "S2") == "channel S1->S2 is empty"


@pytest.mark.parametrize("leader", ["S1", "S2", "S3"])
def test_a_new_leader_is_the_only_leader_of_its_generation(leader):
    c = SimCluster(RAFT, RPC3)
    voters = sorted({leader, "S1" if leader != "S1" else "S2"})
    assert c.elect(leader, voters) is None
    assert [s.role for s in c.snapshot().servers].count(LEADER) == 1


def test_build_cluster_builds_each_systems_cluster_and_a_cluster_refuses_another_systems_protocol():
    assert set(CLUSTERS) == set(FLAG_VALUES["system"])  # every system has its cluster
    for system, cls in CLUSTERS.items():
        assert type(build_cluster(PRESETS[system].protocol, RPC3)) is cls
    # Built directly, a cluster of one system's replicas says which builds another's, in one line.
    with pytest.raises(ValueError, match=r"^SimCluster runs the raft system's replicas, not the zab system's: "
                                         r"build_cluster\(protocol, config\)"):
        SimCluster(PRESETS["zab"].protocol, RPC3)
    with pytest.raises(ValueError, match="^ZabSimCluster runs the zab system's replicas, not the raft system's"):
        ZabSimCluster(RAFT, RPC3)
    with pytest.raises(ValueError, match="^BookKeeperSimCluster runs the bookkeeper system's replicas, not the raft"):
        BookKeeperSimCluster(RAFT, RPC3)
    with pytest.raises(TypeError, match="^protocol: expected a properties.protocol.Protocol, got str$"):
        build_cluster("raft", RPC3)
