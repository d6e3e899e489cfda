"""Real servers, unchanged, under hwm's faults and checks (`hwm test --server etcd`).

- `adapter`    the contract an adapter fulfils: how to start member i, a client, a status probe;
- `etcd`       etcd 3.4 and a client of its JSON gateway;
- `zookeeper`  ZooKeeper 3.8 and kazoo, its client (`zookeeper:forceSync=no`: planted, it acknowledges
               before its log is fsynced);
- `powerfs`    the data directories' filesystem, which drops what was not fsynced when power fails;
- `lifecycle`  the cluster of processes: start, wait until it serves, faults, cleanup on every path;
- `netfilter`  partitions between members' loopback addresses, an nftables table per run;
- `run`        one schedule against a cluster, its history and status samples checked;
- `hunt`       Hypothesis's schedules, and shrinking that counts a failure only when it recurs.
"""

SERVERS = ("etcd", "zookeeper", "zookeeper:forceSync=no")  # the last planted: it acknowledges before fsync


def server_named(name: str):
    """The adapter for `name` (one of SERVERS)."""
    if name == "etcd":
        from hwm.bridge.servers.etcd import Etcd
        return Etcd()
    if name == "zookeeper":
        from hwm.bridge.servers.zookeeper import ZooKeeper
        return ZooKeeper()
    if name == "zookeeper:forceSync=no":
        from hwm.bridge.servers.zookeeper import ZooKeeper
        return ZooKeeper({"forceSync": "no"})
    raise ValueError(f"unknown server {name!r}; servers are {', '.join(SERVERS)}")
