"""Real servers, unchanged, under hwm's faults and checks (`hwm test --server etcd`).

- `adapter`    the contract an adapter fulfils: how to start member i, a client, a status probe;
- `etcd`       etcd 3.4 and a client of its JSON gateway;
- `zookeeper`  ZooKeeper 3.8 and kazoo, its client (`zookeeper:forceSync=no`: planted, it acknowledges
               before its log is fsynced);
- `powerfs`    the data directories' filesystem, which drops what was not fsynced when power fails;
- `lifecycle`  the cluster of processes: start, wait until it serves, faults, cleanup on every path;
- `netfilter`  partitions between members' loopback addresses, an nftables table per run;
- `run`        one schedule against a cluster, its history and status samples checked;
- `hunt`       Hypothesis's schedules, and shrinking that counts a failure only when it recurs;
- `registry`   the servers by name (`SERVERS`, `server_named`).
"""

from hwm.bridge.servers.registry import SERVERS, server_named

__all__ = ["SERVERS", "server_named"]
