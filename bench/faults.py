"""Fault benchmark: leader kill -9, leader pause (SIGSTOP) and whole-cluster kill rounds on a local
3-process cluster with concurrent writers and readers.

    python bench/faults.py [--entries 1000,10000] [--kills 10] [--pauses 5] [--cluster-kills 3]
                           [--writers 3] [--dir PATH]

For each log length the three data directories are first filled with `--entries` identical entries
(written straight into the write-ahead logs, generation 1), so the rounds run on a long log without
waiting for it to be written. Then `hwm node` processes start, `--writers` threads put unique values
(each `impl.client.Client` with its own client id; a put is acknowledged when it returns an index)
and a reader thread reads committed indexes from every server in turn. Rounds, one after another:

- leader kill: kill -9 the leader; once a put is acknowledged, restart it on the same directory;
- pause: SIGSTOP the leader for one second, then SIGCONT;
- cluster kill: kill -9 all three, restart all three.

After each round the bench waits until every server is back: it follows a leader and its HWM has
reached what the cluster had committed before the fault ("rejoin", measured from the restart or the
SIGCONT). Only then does the next round start, so a round measures one fault: killing the next
leader while the last one is still starting (a process start and a log load take seconds on a busy
machine) would leave one server of three and measure that restart instead.

Unavailability of a round is the time from the fault to the next put acknowledged by any writer.
A round that passes SLOW seconds without one is diagnosed while it lasts: every running node is
sent SIGUSR1 (it logs its state: role, generation, last index, HWM, each follower's match and next
index and appends in flight, the pre-vote under way, its peer links) at SLOW s and again later, and
once the round ends every node's log since the fault is printed.
At the end every acknowledged put is read back at its index from the leader: a missing or different
value is a lost write. A contradicted read is an index read twice (any servers, any time) with
different values. Both must be 0.
"""

from __future__ import annotations

import argparse
import os
import random
import shutil
import signal
import statistics
import subprocess
import sys
import tempfile
import threading
import time

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

from bench.cluster import HWM, free_ports  # noqa: E402
from bench.wal_recovery import filesystem_of  # noqa: E402
from hwm.impl.client import Client, ClientError, format_address  # noqa: E402
from hwm.impl.runtime import encode_entry  # noqa: E402
from hwm.impl.storage import DiskStorage  # noqa: E402

SLOW = 2.0  # seconds without an acknowledged put after which a round is diagnosed
DUMP_AT = (SLOW, 5.0, 10.0, 20.0)  # seconds into a slow round when the nodes log their state


class Cluster:
    """Three `hwm node` processes whose data directories already hold `entries` entries."""

    def __init__(self, directory: str, entries: int):
        self.directory = directory
        self.addresses = {f"S{k + 1}": ("127.0.0.1", p) for k, p in enumerate(free_ports(3))}
        for server in self.addresses:
            storage = DiskStorage(os.path.join(directory, server))
            storage.load()
            storage.save_metadata(1, None, 0)
            for start in range(1, entries + 1, 10_000):
                stop = min(entries + 1, start + 10_000)
                storage.append([(i, 1, encode_entry(f"preloaded {i}".encode())) for i in range(start, stop)])
            storage.close()
        self.processes: dict[str, subprocess.Popen] = {}
        for server in self.addresses:
            self.start(server)

    def start(self, server: str) -> None:
        peers = ",".join(f"{s}={format_address(a)}" for s, a in self.addresses.items() if s != server)
        argv = HWM + ["node", "--id", server, "--listen", format_address(self.addresses[server]),
                      "--peers", peers, "--data", os.path.join(self.directory, server)]
        with open(self.log_path(server), "ab") as log:
            self.processes[server] = subprocess.Popen(argv, start_new_session=True, stderr=log)

    def signal(self, server: str, signum: int) -> None:
        os.killpg(self.processes[server].pid, signum)

    def log_path(self, server: str) -> str:
        return os.path.join(self.directory, f"{server}.log")

    def log_sizes(self) -> dict[str, int]:
        return {s: os.path.getsize(self.log_path(s)) if os.path.exists(self.log_path(s)) else 0
                for s in self.addresses}

    def dump_states(self) -> None:
        """Every running node logs its state (SIGUSR1; a stopped one does when continued). A node
        still starting ignores it: main() ignores SIGUSR1, which the nodes inherit until they
        install their handler (its default action would kill them)."""
        for server, process in self.processes.items():
            if process.poll() is None:
                try:
                    self.signal(server, signal.SIGUSR1)
                except ProcessLookupError:
                    pass

    def logs_since(self, sizes: dict[str, int], limit: int = 60) -> str:
        """What each node logged after `sizes` (the last `limit` lines of each)."""
        parts = []
        for server, start in sizes.items():
            with open(self.log_path(server), "rb") as f:
                f.seek(start)
                lines = f.read().decode("utf-8", "replace").splitlines()
            shown = lines[-limit:]
            parts.append(f"    --- {server} ({len(lines)} lines{', last ' + str(limit) if len(lines) > limit else ''})")
            parts += [f"    {line}" for line in shown]
        return "\n".join(parts)

    def kill(self, server: str) -> None:
        self.signal(server, signal.SIGKILL)
        self.processes[server].wait()

    def leader(self, client: Client) -> str:
        return client.find_leader()

    def close(self) -> None:
        for process in self.processes.values():
            try:
                os.killpg(process.pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
            process.wait()


class Load:
    """Writer and reader threads; every acknowledgement and every read is recorded."""

    def __init__(self, addresses, writers: int):
        self.addresses = addresses
        self.acknowledged: dict[int, bytes] = {}
        self.ack_times: list[float] = []
        self.reads: dict[int, bytes] = {}
        self.contradicted = 0
        self.unknown = 0
        self.lock = threading.Lock()
        self.stopping = threading.Event()
        self.threads = [threading.Thread(target=self._write, args=(k,), daemon=True) for k in range(writers)]
        self.threads.append(threading.Thread(target=self._read, daemon=True))
        for thread in self.threads:
            thread.start()

    def _write(self, k: int) -> None:
        with Client(self.addresses, timeout=30, attempt_timeout=1.0) as client:
            n = 0
            while not self.stopping.is_set():
                value = f"writer {k} value {n}".encode()
                n += 1
                try:
                    index = client.put(value)
                except ClientError:
                    with self.lock:
                        self.unknown += 1
                    continue
                with self.lock:
                    self.acknowledged[index] = value
                    self.ack_times.append(time.monotonic())

    def _read(self) -> None:
        rng = random.Random(1)
        servers = list(self.addresses)
        with Client(self.addresses, timeout=2, attempt_timeout=0.5) as client:
            while not self.stopping.is_set():
                with self.lock:
                    known = list(self.acknowledged)
                if not known:
                    time.sleep(0.01)
                    continue
                index = rng.choice(known)
                try:
                    _, value = client.get(index, server=rng.choice(servers))
                except ClientError:
                    continue
                with self.lock:
                    seen = self.reads.setdefault(index, value)
                    if seen != value:
                        self.contradicted += 1

    def first_ack_after(self, moment: float, timeout: float = 60.0, on_slow=None) -> float:
        """Seconds from `moment` to the first acknowledgement after it; `on_slow()` is called at
        each of DUMP_AT seconds that passes without one."""
        deadline = time.monotonic() + timeout
        dumps = list(DUMP_AT)
        while time.monotonic() < deadline:
            with self.lock:
                later = [t for t in self.ack_times[-200:] if t > moment]
            if later:
                return min(later) - moment
            if on_slow is not None and dumps and time.monotonic() - moment >= dumps[0]:
                dumps.pop(0)
                on_slow()
            time.sleep(0.005)
        return float("inf")

    def stop(self) -> None:
        self.stopping.set()
        for thread in self.threads:
            thread.join(60)


def clock() -> str:
    """Wall-clock time with milliseconds, as the nodes' logs show it."""
    now = time.time()
    return time.strftime("%H:%M:%S", time.localtime(now)) + f".{int(now % 1 * 1000):03d}"


def percentile(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))] if ordered else float("nan")


def run(directory: str, entries: int, kills: int, pauses: int, cluster_kills: int, writers: int) -> dict:
    cluster = Cluster(directory, entries)
    outage: dict[str, list[float]] = {"leader kill": [], "pause": [], "cluster kill": []}
    rejoin: dict[str, list[float]] = {kind: [] for kind in outage}

    def committed() -> int:
        """The highest HWM any server reports (what the cluster had committed, at least)."""
        return max((a.reply.hwm for a in admin.status(timeout=1.0) if a.reply is not None), default=0)

    def wait_rejoined(kind: str, servers, hwm: int, since: float, timeout: float = 60.0) -> None:
        """Until each of `servers` follows a leader with a HWM of at least `hwm`."""
        deadline = time.monotonic() + timeout
        waiting = set(servers)
        while waiting and time.monotonic() < deadline:
            for answer in admin.status(sorted(waiting), timeout=0.5):
                r = answer.reply
                if r is not None and r.leader is not None and r.hwm >= hwm:
                    waiting.discard(answer.server)
            if waiting:
                time.sleep(0.02)
        if waiting:
            print(f"  {clock()} {', '.join(sorted(waiting))} did not rejoin within {timeout:g} s", flush=True)
        rejoin[kind].append(time.monotonic() - since)

    def measure(kind: str, moment: float, sizes: dict[str, int], what: str) -> None:
        seconds = load.first_ack_after(moment, on_slow=cluster.dump_states)
        outage[kind].append(seconds)
        if seconds > SLOW:
            time.sleep(0.2)  # let the last state dumps reach the logs
            print(f"  SLOW {kind} round {len(outage[kind])}: {seconds:.2f} s without an acknowledged put "
                  f"after {what}; the nodes' logs since:\n{cluster.logs_since(sizes)}", flush=True)
    try:
        with Client(cluster.addresses, timeout=60) as admin:
            admin.find_leader()
            load = Load(cluster.addresses, writers)
            load.first_ack_after(0)
            try:
                for _ in range(kills):
                    leader = cluster.leader(admin)
                    time.sleep(0.3)  # some writes under this leader
                    sizes, hwm = cluster.log_sizes(), committed()
                    cluster.kill(leader)
                    moment = time.monotonic()
                    print(f"  {clock()} killed {leader}", flush=True)
                    measure("leader kill", moment, sizes, f"killing {leader}")
                    restarted = time.monotonic()
                    cluster.start(leader)
                    wait_rejoined("leader kill", [leader], hwm, restarted)
                for _ in range(pauses):
                    leader = cluster.leader(admin)
                    time.sleep(0.3)
                    sizes, hwm = cluster.log_sizes(), committed()
                    moment = time.monotonic()
                    cluster.signal(leader, signal.SIGSTOP)
                    print(f"  {clock()} paused {leader}", flush=True)
                    measure("pause", moment, sizes, f"pausing {leader}")
                    time.sleep(max(0.0, moment + 1.0 - time.monotonic()))
                    cluster.signal(leader, signal.SIGCONT)
                    wait_rejoined("pause", [leader], hwm, time.monotonic())
                for _ in range(cluster_kills):
                    time.sleep(0.3)
                    sizes, hwm = cluster.log_sizes(), committed()
                    for server in list(cluster.processes):
                        cluster.kill(server)
                    moment = time.monotonic()
                    print(f"  {clock()} killed every server", flush=True)
                    for server in list(cluster.processes):
                        cluster.start(server)
                    measure("cluster kill", moment, sizes, "killing every server")
                    wait_rejoined("cluster kill", list(cluster.processes), hwm, moment)
                time.sleep(0.5)
            finally:
                load.stop()
            # Every acknowledged put, read back at its index (one more put commits what the
            # current leader holds from earlier generations).
            admin.put(b"final")
            lost = 0
            for index, value in sorted(load.acknowledged.items()):
                try:
                    if admin.get(index)[1] != value:
                        lost += 1
                except ClientError:
                    lost += 1
    finally:
        cluster.close()
    return {"entries": entries, "acknowledged": len(load.acknowledged), "lost": lost,
            "contradicted": load.contradicted, "reads": len(load.reads), "unknown": load.unknown,
            "outage": outage, "rejoin": rejoin}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--entries", default="1000,10000", help="log lengths, comma-separated")
    parser.add_argument("--kills", type=int, default=10, help="leader kill -9 rounds per log length")
    parser.add_argument("--pauses", type=int, default=5, help="leader SIGSTOP rounds per log length")
    parser.add_argument("--cluster-kills", type=int, default=3, help="whole-cluster kill rounds per log length")
    parser.add_argument("--writers", type=int, default=3, help="concurrent writer threads")
    parser.add_argument("--keep", action="store_true", help="keep the data directories and node logs")
    parser.add_argument("--dir", default=None, help="where the data directories go [default: a temp dir]")
    args = parser.parse_args()
    signal.signal(signal.SIGUSR1, signal.SIG_IGN)  # inherited by the nodes: see Cluster.dump_states
    sizes = [int(x) for x in args.entries.split(",") if x.strip()]
    base = args.dir or tempfile.mkdtemp(prefix="hwm-faults-")
    print(f"data under {base} ({filesystem_of(base)}); {os.cpu_count()} cores; load {os.getloadavg()[0]:.1f}")
    print(f"{'entries':>8} {'unavailability after':>24} {'rounds':>6} {'median s':>9} {'p99 s':>7} {'max s':>7}")
    failed = False
    for size in sizes:
        directory = os.path.join(base, f"{size}")
        shutil.rmtree(directory, ignore_errors=True)
        os.makedirs(directory)
        result = run(directory, size, args.kills, args.pauses, args.cluster_kills, args.writers)
        rows = [(kind, times) for kind, times in result["outage"].items()]
        rows += [(f"rejoin after {kind}", times) for kind, times in result["rejoin"].items()]
        for kind, times in rows:
            if times:
                print(f"{size:>8} {kind:>24} {len(times):>6} {statistics.median(times):>9.2f} "
                      f"{percentile(times, 0.99):>7.2f} {max(times):>7.2f}", flush=True)
        print(f"{size:>8} acknowledged {result['acknowledged']}, lost {result['lost']}, contradicted reads "
              f"{result['contradicted']} (of {result['reads']} indexes read), puts without an answer {result['unknown']}; "
              f"load {' '.join(f'{x:.2f}' for x in os.getloadavg())}", flush=True)
        failed = failed or result["lost"] or result["contradicted"]
        if not args.keep:
            shutil.rmtree(directory, ignore_errors=True)
    sys.exit(1 if failed else 0)


if __name__ == "__main__":
    main()
