"""Cluster benchmark: committed writes per second and commit latency on a local 3-process cluster.

    python bench/cluster.py [--writes 1000] [--clients 1,4,16] [--runs 3] [--value-bytes 100] [--dir PATH]

Each run starts a fresh cluster of `hwm node` processes (fsync on: every Ready that appends is
fsynced before its messages go out) on 127.0.0.1, waits for a leader, then for each client count
writes `--writes` values in total through `impl.client.Client` (one client per thread, each writing
its share sequentially) and records every put's latency (request sent -> index returned, i.e. the
entry is at or below the leader's high-water mark). The table shows the median over runs of
writes/s, p50 and p99. fsync figures depend on the disk under --dir (tmpfs makes fsync free), so the
directory and its filesystem are printed.
"""

from __future__ import annotations

import argparse
import os
import shutil
import signal
import socket
import statistics
import subprocess
import sys
import tempfile
import threading
import time

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

from bench.wal_recovery import filesystem_of  # noqa: E402
from hwm.impl.client import Client, format_address  # noqa: E402

HWM = [sys.executable, "-c", "from hwm.cli import main; main(prog_name='hwm')"]


def free_ports(count: int) -> list[int]:
    sockets = [socket.socket() for _ in range(count)]
    try:
        for sock in sockets:
            sock.bind(("127.0.0.1", 0))
        return [sock.getsockname()[1] for sock in sockets]
    finally:
        for sock in sockets:
            sock.close()


class LocalCluster:
    def __init__(self, directory: str, servers: int, protocol: str):
        from hwm.properties.protocol import resolve

        ports = free_ports(servers + 1)
        self.addresses = {f"S{k + 1}": ("127.0.0.1", p) for k, p in enumerate(ports[:servers])}
        self.processes = []
        controller: list[str] = []
        if resolve(protocol)[1].system == "kafka":
            # Kafka's brokers need their controller (hwm controller), started first.
            address = format_address(("127.0.0.1", ports[servers]))
            brokers = ",".join(f"{s}={format_address(a)}" for s, a in self.addresses.items())
            self.processes.append(subprocess.Popen(
                HWM + ["controller", "--listen", address, "--brokers", brokers, "--data",
                       os.path.join(directory, "controller"), "--protocol", protocol, "--quiet"],
                start_new_session=True))
            controller = ["--controller", address]
        for server, address in self.addresses.items():
            peers = ",".join(f"{s}={format_address(a)}" for s, a in self.addresses.items() if s != server)
            argv = HWM + ["node", "--id", server, "--listen", format_address(address), "--peers", peers,
                          "--data", os.path.join(directory, server), "--protocol", protocol, "--quiet"] + controller
            self.processes.append(subprocess.Popen(argv, start_new_session=True))

    def close(self) -> None:
        for process in self.processes:
            if process.poll() is None:
                process.send_signal(signal.SIGTERM)
        for process in self.processes:
            try:
                process.wait(10)
            except subprocess.TimeoutExpired:
                os.killpg(process.pid, signal.SIGKILL)
                process.wait()


def write_load(addresses, writes: int, clients: int, value: bytes) -> tuple[float, list[float]]:
    """(seconds, latencies) for `writes` puts spread over `clients` threads."""
    latencies: list[list[float]] = [[] for _ in range(clients)]
    errors: list[BaseException] = []
    start = threading.Barrier(clients + 1)

    def worker(k: int) -> None:
        with Client(addresses, timeout=30) as client:
            client.find_leader()
            share = writes // clients + (k < writes % clients)
            try:
                start.wait()
                for _ in range(share):
                    began = time.perf_counter()
                    client.put(value)
                    latencies[k].append(time.perf_counter() - began)
            except BaseException as error:  # reported by the caller
                errors.append(error)

    threads = [threading.Thread(target=worker, args=(k,)) for k in range(clients)]
    for thread in threads:
        thread.start()
    start.wait()
    began = time.perf_counter()
    for thread in threads:
        thread.join()
    elapsed = time.perf_counter() - began
    if errors:
        raise errors[0]
    return elapsed, [x for part in latencies for x in part]


def percentile(values: list[float], fraction: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(fraction * len(ordered)))]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--writes", type=int, default=1000, help="writes per client count and run")
    parser.add_argument("--clients", default="1,4,16", help="comma-separated client counts")
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--servers", type=int, default=3)
    parser.add_argument("--value-bytes", type=int, default=100)
    parser.add_argument("--protocol", default="raft")
    parser.add_argument("--dir", default=None, help="where the servers' data goes [default: a temp dir]")
    args = parser.parse_args(argv)
    client_counts = [int(c) for c in args.clients.split(",")]
    base = tempfile.mkdtemp(prefix="hwm-bench-", dir=args.dir)
    print(f"directory   {base} ({filesystem_of(base)}), fsync on")
    print(f"cluster     {args.servers} processes on 127.0.0.1, protocol {args.protocol}, "
          f"{args.value_bytes} B values, {args.writes} writes per client count, {args.runs} runs, "
          f"{os.cpu_count()} cores, load average {os.getloadavg()[0]:.1f}")
    value = b"v" * args.value_bytes
    results: dict[int, list[tuple[float, float, float]]] = {c: [] for c in client_counts}
    try:
        for run in range(args.runs):
            directory = os.path.join(base, f"run{run}")
            cluster = LocalCluster(directory, args.servers, args.protocol)
            try:
                with Client(cluster.addresses, timeout=30) as client:
                    client.find_leader()
                    client.put(b"warm-up")
                for clients in client_counts:
                    elapsed, latencies = write_load(cluster.addresses, args.writes, clients, value)
                    results[clients].append((args.writes / elapsed, percentile(latencies, 0.5) * 1000,
                                             percentile(latencies, 0.99) * 1000))
                    rate, p50, p99 = results[clients][-1]
                    print(f"  run {run + 1}: {clients:>2} client(s)  {rate:8,.0f} writes/s  "
                          f"p50 {p50:6.2f} ms  p99 {p99:6.2f} ms", file=sys.stderr)
            finally:
                cluster.close()
    finally:
        shutil.rmtree(base, ignore_errors=True)
    print()
    print(f"{'clients':>7}  {'writes/s':>10}  {'p50 ms':>8}  {'p99 ms':>8}   (median of {args.runs} runs)")
    for clients, rows in results.items():
        rate = statistics.median(r[0] for r in rows)
        p50 = statistics.median(r[1] for r in rows)
        p99 = statistics.median(r[2] for r in rows)
        print(f"{clients:>7}  {rate:>10,.0f}  {p50:>8.2f}  {p99:>8.2f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
