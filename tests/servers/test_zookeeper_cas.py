"""The ZooKeeper adapter's cas against a znode that changes between its read and its conditional set
(ZooKeeper's own rule: a set with a version that is no longer the node's fails with BadVersion), on a
stand-in for kazoo's client that keeps one znode, so the race is the test's to place. The real
server's cas is in test_zookeeper.py."""

from __future__ import annotations

from types import SimpleNamespace

import pytest

from hwm.bridge.servers.zookeeper import ZooKeeperClient

errors = pytest.importorskip("kazoo.exceptions", reason="the zookeeper adapter needs kazoo (pip install 'hwm[servers]')")


class OneZnode:
    """kazoo's calls the adapter makes, on one register /kv/0; `between` runs after each read."""

    def __init__(self, value: int, between=None):
        self.value, self.version, self.between = value, 0, between

    def create(self, path, data=b""):
        if path != "/kv":
            raise AssertionError(path)
        raise errors.NodeExistsError()

    def sync(self, path):
        pass

    def get(self, path):
        data, stat = str(self.value).encode(), SimpleNamespace(version=self.version)
        if self.between is not None:
            self.between(self)
        return data, stat

    def set(self, path, data, version=-1):
        if version not in (-1, self.version):
            raise errors.BadVersionError()
        self.value, self.version = int(data), self.version + 1


def cas_on(znode: OneZnode, source: int, target: int) -> bool:
    client = ZooKeeperClient.__new__(ZooKeeperClient)
    client._session = lambda writes, act: act(znode, errors)
    return client.cas(0, source, target)


def another_client_writes(value: int):
    def write(znode):
        znode.between = None
        znode.set("/kv/0", str(value).encode())
    return write


def test_a_cas_succeeds_where_the_value_it_compared_is_still_the_nodes():
    znode = OneZnode(5)
    assert cas_on(znode, 5, 6) is True and znode.value == 6


def test_a_cas_fails_where_another_write_came_between_its_read_and_its_set():
    znode = OneZnode(5, between=another_client_writes(7))
    assert cas_on(znode, 5, 6) is False and znode.value == 7


def test_a_cas_fails_where_the_value_differs():
    znode = OneZnode(4)
    assert cas_on(znode, 5, 6) is False and znode.value == 4
