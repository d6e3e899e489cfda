"""Real servers (`hwm test --server`): how fast a cluster starts and serves, and what a hunt costs.

    python bench/servers.py [--server etcd|zookeeper] [--operations 200] [--schedules 0]

1. Seconds until a fresh 3-member cluster serves, then `--operations` sequential appends, linearizable
   reads and serializable reads through one member's client (the adapter's, as the hunt uses it).
2. With `--schedules N`: a stock hunt of N schedules of up to 20 steps (kill, pause, partition):
   schedules per minute, operations per second, and the clean schedules counted.

Measured (a shared 2-core machine, November 2026, `python bench/servers.py --server etcd` and
`--server zookeeper`): etcd 3.4.23 serves 0.8 to 2.7 s after start, 90 to 150 appends/s, 230 to
440 linearizable and 410 to 480 serializable reads/s (the spread: other work on the machine); ZooKeeper 3.8.0 about 4 s, then 20 appends/s, 39
linearizable and 47 serializable reads/s (`--operations 50`): a session per operation (see
zookeeper.py) costs more than the operation. docs/real-servers.md has the hunts'.
"""

from __future__ import annotations

import argparse
import time

from hwm.bridge.servers import SERVERS, server_named
from hwm.bridge.servers.hunt import hunt_server
from hwm.bridge.servers.lifecycle import ServerCluster


def operations(name: str, count: int) -> None:
    began = time.monotonic()
    with ServerCluster(server_named(name), 3, prefix="127.0.61", partitions=False) as cluster:
        print(f"{name}: a 3-member cluster serves after {time.monotonic() - began:.1f} s")
        client = cluster.client("n1")
        for label, call in (("appends", lambda i: client.append(i)),
                            ("linearizable reads", lambda i: client.read(i + 1)),
                            ("serializable reads", lambda i: client.read(i + 1, serializable=True))):
            began = time.monotonic()
            for i in range(count):
                call(i)
            print(f"  {count} {label}: {count / (time.monotonic() - began):.0f}/s")


def hunt(name: str, schedules: int) -> None:
    report = hunt_server(server_named(name), schedules=schedules, steps=20, seed=0, prefix="127.0.62")
    minutes = report.seconds / 60
    print(f"  stock hunt: {report.schedules} schedules in {report.seconds:.0f} s ({report.schedules / minutes:.1f}/min), "
          f"{report.operations} operations ({report.answered_ok} ok, {report.operations / report.seconds:.1f}/s), "
          f"{report.schedules - len(report.failures)} clean")


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--server", choices=SERVERS, default="etcd")
    parser.add_argument("--operations", type=int, default=200)
    parser.add_argument("--schedules", type=int, default=0)
    args = parser.parse_args()
    operations(args.server, args.operations)
    if args.schedules:
        hunt(args.server, args.schedules)
