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
from hwm.bridge.servers.zookeeper import JAR
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
