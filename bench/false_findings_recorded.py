"""False findings on recorded runs: `hwm cluster --record` runs of every system the TCP cluster runs,
each validated by `hwm validate` against the preset it ran.

    python bench/false_findings_recorded.py [--runs 50] [--systems raft,raft-noop,...] [--puts 4]
                                             [--dir PATH] [--keep]

Each run starts `hwm cluster --servers 3 --record DIR --restart-after 0.5` on fresh data, puts
`--puts` values through the library client (a put is answered once it is at or below the leader's
HWM), and, on every second run, kill -9s the leader (its pid from its data directory's LOCK file),
puts as many values again through the new leader, and waits until the restarted server has caught
up. Then SIGTERM stops the cluster and `hwm validate DIR --protocol P --json` judges the recording.
Every run is of hwm's own correct implementation, so every invalid verdict is a false finding.

Printed per system: runs (fault-free + with kill -9), events checked, false findings, seconds (and
the seconds in all); the first false finding of each system is printed with the directory it was
recorded in (kept), and so is each run the cluster did not finish (a put that failed: no verdict,
not counted).
BookKeeper's bookies record nothing (`hwm node` takes no `--record` under a bookkeeper preset), so
it has no row: `hwm validate` does not apply to it.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))  # for bench.cluster

from bench.cluster import HWM  # noqa: E402
from hwm.impl.client import Client, ClientError  # noqa: E402

# The safe presets of every system whose servers record themselves on the TCP cluster.
SYSTEMS = {"raft": "raft", "raft-durable-hwm": "raft-durable-hwm", "raft-noop": "raft-noop", "zab": "zab",
           "kafka": "kafka"}
SERVERS = 3


def consecutive_free_ports(count: int) -> int:
    """A base port such that base .. base+count-1 are free on 127.0.0.1 now, below the ephemeral range (a
    client connecting to a server not yet listening on an ephemeral port may connect to itself)."""
    try:
        low = int(Path("/proc/sys/net/ipv4/ip_local_port_range").read_text().split()[0])
    except (OSError, ValueError, IndexError):
        low = 32768
    for _ in range(200):
        base = random.randrange(10000, max(10001, low - count))
        sockets = []
        try:
            for port in range(base, base + count):
                sock = socket.socket()
                sockets.append(sock)
                sock.bind(("127.0.0.1", port))
            return base
        except OSError:
            continue
        finally:
            for sock in sockets:
                sock.close()
    raise RuntimeError("no run of free ports found")


def _wait(condition, timeout: float, what: str, pause: float = 0.05):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        value = condition()
        if value:
            return value
        time.sleep(pause)
    raise TimeoutError(f"timed out after {timeout:g} s waiting for {what}")


def _statuses(client: Client) -> dict:
    return {a.server: a.reply for a in client.status(timeout=1.0)}


def record_run(directory: Path, protocol: str, *, kill: bool, puts: int = 4, timeout: float = 60.0) -> Path:
    """One recorded run of `hwm cluster --protocol protocol` in `directory` (created); the recording's
    directory. Every process it starts is stopped on every way out."""
    directory.mkdir(parents=True, exist_ok=True)
    data, record = directory / "data", directory / "record"
    ports = SERVERS + 1  # a Kafka cluster's controller listens after the last server
    base = consecutive_free_ports(ports)
    addresses = {f"S{k + 1}": ("127.0.0.1", base + k) for k in range(SERVERS)}
    log = open(directory / "cluster.out", "w")
    cluster = subprocess.Popen(HWM + ["cluster", "--servers", str(SERVERS), "--data", str(data), "--record",
                                      str(record), "--protocol", protocol, "--base-port", str(base),
                                      "--restart-after", "0.5", "-q"],
                               stdout=log, stderr=subprocess.STDOUT, start_new_session=True)
    try:
        deadline = time.monotonic() + timeout
        with Client(addresses, timeout=20) as client:
            last = 0
            for k in range(puts):
                last = client.put(f"value {k}".encode())
            if kill:
                old = client.leader
                pid = int((data / old / "LOCK").read_text().rsplit("pid ", 1)[1].rstrip(")\n "))
                os.kill(pid, signal.SIGKILL)
                for k in range(puts):
                    last = client.put(f"after the kill {k}".encode())

                # The restarted server may lead again (Kafka's controller can elect it once more, its ISR
                # unchanged): caught up is every server holding and committing all, whatever its role.
                def caught_up():
                    now = _statuses(client)
                    return all(s is not None and s.last_index == s.hwm == last for s in now.values())
                _wait(caught_up, max(1.0, deadline - time.monotonic()), f"{old} to catch up")
        cluster.send_signal(signal.SIGTERM)
        cluster.wait(timeout=30)
        return record
    finally:
        if cluster.poll() is None:
            try:
                os.killpg(cluster.pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
            cluster.wait()
        log.close()


def validate(record: Path, protocol: str) -> dict:
    """`hwm validate record --protocol protocol --json`'s verdict on the one run."""
    done = subprocess.run(HWM + ["validate", str(record), "--protocol", protocol, "--json"],
                          capture_output=True, text=True, timeout=600)
    if done.returncode not in (0, 1):
        raise RuntimeError(f"hwm validate {record} exited {done.returncode}: {done.stderr}")
    [verdict] = [json.loads(line) for line in done.stdout.splitlines() if line.startswith("{")]
    return verdict


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--runs", type=int, default=50, help="recorded runs per system (every second one with a kill -9)")
    parser.add_argument("--systems", default=",".join(SYSTEMS))
    parser.add_argument("--puts", type=int, default=4)
    parser.add_argument("--dir", type=Path, default=None)
    parser.add_argument("--keep", action="store_true", help="keep every run's directory, not only the false findings'")
    args = parser.parse_args(argv)
    root = args.dir or Path(tempfile.mkdtemp(prefix="hwm-recorded-"))
    total_false = 0
    began = time.monotonic()
    print(f"{'system':<18} {'runs':>10} {'events':>8} {'false':>6} {'seconds':>8}")
    for system in args.systems.split(","):
        protocol = SYSTEMS.get(system, system)
        started = time.monotonic()
        runs = {False: 0, True: 0}
        events = false = 0
        first = None
        unrecorded: list[str] = []
        for n in range(args.runs):
            kill = n % 2 == 1
            directory = root / system / f"run{n:03d}"
            try:
                record = record_run(directory, protocol, kill=kill, puts=args.puts)
            except (ClientError, TimeoutError, OSError, subprocess.SubprocessError) as e:
                # Not a verdict: the cluster did not finish the run (kept, to look at its output).
                unrecorded.append(f"{directory}: {e}")
                continue
            verdict = validate(record, protocol)
            runs[kill] += 1
            events += verdict["events"]
            if not verdict["valid"]:
                false += 1
                first = first or (directory, verdict)
            elif not args.keep:
                shutil.rmtree(directory, ignore_errors=True)
        seconds = time.monotonic() - started
        total_false += false
        print(f"{system:<18} {runs[False]:>4}+{runs[True]:<3}k9 {events:>8} {false:>6} {seconds:>8.0f}", flush=True)
        if first is not None:
            print(f"  first false finding, kept in {first[0]}: {first[1]}", flush=True)
        for line in unrecorded:
            print(f"  not recorded (no verdict): {line}", flush=True)
    print("BookKeeper: no row (its bookies record nothing; hwm validate does not apply)")
    print(f"{time.monotonic() - began:.0f} s in all")
    return 1 if total_false else 0


if __name__ == "__main__":
    sys.exit(main())
