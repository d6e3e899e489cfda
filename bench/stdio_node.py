"""`hwm node --stdio` benchmark: committed appends per second on 3 node processes over pipes.

    python bench/stdio_node.py [--protocols raft,zab,kafka] [--appends 2000] [--window 1,16] [--runs 3] [--dir PATH]

Each run starts 3 fresh `hwm node --stdio` processes (real clock: their own timers), each in its
own data directory under --dir, and routes their lines itself as they come (this process is the
network: no delay, no loss). Once a node leads, it keeps `--window` `log_append` requests
outstanding on the leader until `--appends` are acknowledged (`log_append_ok`: the entry is at or
below the leader's high-water mark, on a quorum's disks), and records each one's latency. The table
shows, per protocol and window, the median over runs of appends/s, p50 and p99. fsync figures
depend on the disk under --dir (tmpfs makes fsync free): its filesystem is printed.
"""

from __future__ import annotations

import argparse
import json
import os
import select
import shutil
import statistics
import subprocess
import sys
import tempfile
import time

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

from bench.wal_recovery import filesystem_of  # noqa: E402

NODE_IDS = ["n1", "n2", "n3"]
HWM = [sys.executable, "-m", "hwm.cli"]


def run_once(protocol: str, appends: int, window: int, root: str) -> tuple[float, list[float]]:
    """(appends per second, latencies in seconds) of one run on a fresh cluster."""
    nodes = {}
    try:
        for node_id in NODE_IDS:
            data = os.path.join(root, node_id)
            os.makedirs(data)
            nodes[node_id] = subprocess.Popen(
                HWM + ["node", "--stdio", "--protocol", protocol], stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                stderr=subprocess.DEVNULL, cwd=data, env=dict(os.environ, HWM_DATA_DIR=data, HWM_NODE_ID=node_id))
        fds = {process.stdout.fileno(): node_id for node_id, process in nodes.items()}
        buffers = {node_id: b"" for node_id in nodes}

        def write(node_id: str, line: bytes) -> None:
            nodes[node_id].stdin.write(line)
            nodes[node_id].stdin.flush()

        def request(node_id: str, body: dict) -> None:
            write(node_id, json.dumps({"src": "c1", "dest": node_id, "body": body}).encode() + b"\n")

        for node_id in nodes:
            request(node_id, {"type": "init", "msg_id": 0, "node_id": node_id, "node_ids": NODE_IDS})
        sent: dict[int, float] = {}
        latencies: list[float] = []
        leader, msg_id, probe_at, started = None, 0, 0.0, None
        deadline = time.monotonic() + 60 + appends / 50
        while len(latencies) < appends:
            now = time.monotonic()
            if now > deadline:
                raise RuntimeError(f"{protocol}: only {len(latencies)} of {appends} appends acknowledged in time")
            if leader is None and now >= probe_at:  # find the leader: ask each node in turn
                msg_id += 1
                request(NODE_IDS[msg_id % 3], {"type": "log_append", "msg_id": msg_id, "value": msg_id})
                sent[msg_id] = now
                probe_at = now + 0.05
            while leader is not None and len(sent) < window and len(latencies) + len(sent) < appends:
                msg_id += 1
                request(leader, {"type": "log_append", "msg_id": msg_id, "value": msg_id})
                sent[msg_id] = time.monotonic()
            ready, _, _ = select.select(list(fds), [], [], 0.05)
            for fd in ready:
                node_id = fds[fd]
                data = os.read(fd, 1 << 20)
                if not data:
                    raise RuntimeError(f"{protocol}: {node_id} exited")
                buffers[node_id] += data
                *lines, buffers[node_id] = buffers[node_id].split(b"\n")
                for line in lines:
                    message = json.loads(line)
                    if message["dest"] in nodes:
                        write(message["dest"], line + b"\n")
                        continue
                    body = message["body"]
                    at = sent.pop(body.get("in_reply_to"), None)
                    if body["type"] == "log_append_ok" and at is not None:
                        if leader is None:
                            leader, started = node_id, time.monotonic()
                            sent.clear()  # the probes: not counted
                        else:
                            latencies.append(time.monotonic() - at)
                    elif body["type"] == "error" and leader == node_id and body["code"] == 11:
                        leader = None  # deposed: look again
        return len(latencies) / (time.monotonic() - started), latencies
    finally:
        for process in nodes.values():
            process.stdin.close()
        for process in nodes.values():
            try:
                process.wait(timeout=10)
            except subprocess.TimeoutExpired:
                process.kill()
                process.wait()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--protocols", default="raft,zab,kafka")
    parser.add_argument("--appends", type=int, default=2000)
    parser.add_argument("--window", default="1,16", help="appends kept outstanding, comma-separated")
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--dir", default=None, help="where the data directories go [default: a temporary one]")
    args = parser.parse_args()
    base = tempfile.mkdtemp(prefix="hwm-stdio-bench-", dir=args.dir)
    print(f"data under {base} ({filesystem_of(base)}); {args.appends} appends per run, median of {args.runs} runs")
    print(f"{'protocol':10} {'window':>6} {'appends/s':>10} {'p50 ms':>8} {'p99 ms':>8}")
    try:
        for protocol in args.protocols.split(","):
            for window in (int(w) for w in args.window.split(",")):
                rates, p50s, p99s = [], [], []
                for run in range(args.runs):
                    root = os.path.join(base, f"{protocol}-{window}-{run}")
                    rate, latencies = run_once(protocol, args.appends, window, root)
                    latencies.sort()
                    rates.append(rate)
                    p50s.append(latencies[len(latencies) // 2] * 1000)
                    p99s.append(latencies[min(len(latencies) - 1, len(latencies) * 99 // 100)] * 1000)
                    shutil.rmtree(root, ignore_errors=True)
                print(f"{protocol:10} {window:>6} {statistics.median(rates):>10.0f} {statistics.median(p50s):>8.2f} "
                      f"{statistics.median(p99s):>8.2f}", flush=True)
    finally:
        shutil.rmtree(base, ignore_errors=True)


if __name__ == "__main__":
    main()
