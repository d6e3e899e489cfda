"""A real 3-member ZooKeeper ensemble on loopback: appends as sequential znodes, reads with and
without a sync, the lin-kv register, a kill -9 and a restart on the data directory, a partition
that leaves a member without a session, and nothing left after. Skipped where Debian's zookeeper
or the kazoo client is not installed."""

from __future__ import annotations

import os

import pytest

from hwm.bridge.servers import server_named
from hwm.bridge.servers.adapter import Definite
from hwm.bridge.servers.lifecycle import ServerCluster
from hwm.bridge.servers.run import StatusChecks
from hwm.bridge.servers.zookeeper import JAR, srvr_status
from tests.servers.conftest import group_running, needs_partitions, tables

pytestmark = pytest.mark.network


def test_append_read_register_kill_restart_partition_and_nothing_left():
    if not os.path.exists(JAR):
        pytest.skip("zookeeper is not installed (apt-get install zookeeper; .ci/run does)")
    pytest.importorskip("kazoo", reason="the zookeeper adapter needs kazoo (pip install 'hwm[servers]')")
    needs_partitions()
    cluster = ServerCluster(server_named("zookeeper"), 3, prefix="127.0.28")
    with cluster:
        groups = [p.proc.pid for p in cluster.procs.values()]
        n1 = cluster.client("n1")
        assert [n1.append(10), n1.append(11)] == [1, 2]
        assert cluster.client("n2").read(2) == 11
        assert cluster.client("n3").read(2, serializable=True) in (11, None)  # its own copy: maybe behind
        assert cluster.client("n3").read(3) is None
        n1.put(0, 5)
        assert (n1.cas(0, 5, 6), n1.cas(0, 5, 7), cluster.client("n2").get(0)) == (True, False, 6)
        assert (n1.cas(1, 9, 3), n1.cas(1, 9, 3, create=True), n1.get(1)) == (False, True, 3)
        before = cluster.client("n1").status().committed_index
        cluster.kill("n1")
        cluster.restart("n1")
        cluster.wait_serving(60, ["n1"])
        assert cluster.client("n1").read(2) == 11  # on the same data directory
        assert cluster.client("n1").status().committed_index >= before
        cluster.partition([["n1"], ["n2", "n3"]])
        with pytest.raises(Definite):
            cluster.client("n1", timeout=1.0).append(12)  # no session without the majority
        cluster.wait_serving(30, ["n2"])
        assert cluster.client("n2").append(13) == 3
        cluster.heal()
        cluster.wait_serving(60, ["n1"])
        assert cluster.client("n1").read(3) == 13
        root, table = cluster.root, cluster.partitions.table
    assert not root.exists()
    assert f"inet {table}" not in tables()
    assert not any(group_running(g) for g in groups)


SRVR = "Zookeeper version: 3.8.0\nLatency min/avg/max: 0/0.0/0\nZxid: {zxid}\nMode: follower\nNode count: 5\n"


def test_a_new_epochs_first_zxid_is_no_commit_index_and_its_loss_to_a_power_failure_no_finding():
    # The stock ZooKeeper hunt with power failures during requests (seed 0): n3 showed 0x200000000, the
    # NEWLEADER of epoch 2 with no transaction in it, and came back from the power failure at epoch 1's
    # last, 0x100000006. Read as an index that was "HwmNeverTruncated"; no transaction was lost.
    checks = StatusChecks()
    for step, zxid in enumerate(("0x100000006", "0x200000000", "0x100000006")):
        status = srvr_status("n3", SRVR.format(zxid=zxid))
        checks.sample("n3", status, step, "a power failure")
    assert checks.findings == [] and srvr_status("n3", SRVR.format(zxid="0x200000000")).term == 2
    # A transaction of the epoch shown, then lost, still is one.
    checks.sample("n3", srvr_status("n3", SRVR.format(zxid="0x200000001")), 3, "a step")
    checks.sample("n3", srvr_status("n3", SRVR.format(zxid="0x100000006")), 4, "a power failure")
    assert [f.name for f in checks.findings] == ["HwmNeverTruncated"]
    with pytest.raises(Definite, match="n3: not serving"):
        srvr_status("n3", "This ZooKeeper instance is not currently serving requests\n")
