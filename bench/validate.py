"""Trace validation benchmark: events validated per second, runs per second on Spark against the
local engine, and the model coverage of simulated-cluster runs.

    python bench/validate.py [--events 100000] [--runs 1000] [--walks 200] [--spark-master local[2]]
                             [--skip cluster,spark,coverage] [--dir PATH]

1. cluster: three `hwm node --record` processes on 127.0.0.1; a client writes (and every tenth
   write reads back) until the recorded parts hold `--events` events, with a kill -9 of the leader
   and its restart every 2,000 writes; then `hwm validate` merges the parts and validates the run
   (the time of validation alone is reported, and the verdict, which must be valid).
2. spark: `--runs` recorded runs of the simulated cluster (random walks of raft's model at the
   tour's bounds, run on real replicas, 25 actions each) validated with coverage by the local
   engine and by Spark on `--spark-master`: runs/s each, and whether both tables agree.
3. coverage: for raft and kafka at the tour's bounds (3 servers, generation <= 4 (kafka 3), log <= 1,
   one crash), the share of reachable states and transitions that `--walks` simulated-cluster runs
   of the length the conformance tests use (40 actions) visit: a number to compare a campaign's with.
"""

from __future__ import annotations

import argparse
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))  # for bench.cluster

from bench.cluster import HWM, free_ports  # noqa: E402
from hwm.bridge.simcluster import build_cluster  # noqa: E402
from hwm.checker.coverage import reachable  # noqa: E402
from hwm.checker.model_events import random_actions  # noqa: E402
from hwm.checker.validate import Validator  # noqa: E402
from hwm.checker.validate_spark import coverage_table  # noqa: E402
from hwm.properties.events import load_runs  # noqa: E402
from hwm.impl.client import Client, format_address  # noqa: E402
from hwm.model.registry import build_model  # noqa: E402
from hwm.model.state import Config  # noqa: E402
from hwm.properties.protocol import resolve  # noqa: E402

TOUR = {"raft": {"servers": 3, "max_generation": 4, "max_log": 1, "max_crashes": 1},
        "kafka": {"servers": 3, "max_generation": 3, "max_log": 1, "max_crashes": 1}}


def count_events(directory: str) -> int:
    total = 0
    for name in os.listdir(directory):
        with open(os.path.join(directory, name), "rb") as f:
            total += sum(1 for _ in f) - 1
    return total


def record_cluster(directory: str, events: int) -> tuple[str, int]:
    """Run and record a 3-server cluster until its parts hold `events` events; (parts dir, writes)."""
    ports = free_ports(3)
    addresses = {f"S{k + 1}": ("127.0.0.1", p) for k, p in enumerate(ports)}
    parts = os.path.join(directory, "run")
    processes: dict[str, subprocess.Popen] = {}

    def start(server: str) -> None:
        peers = ",".join(f"{s}={format_address(a)}" for s, a in addresses.items() if s != server)
        processes[server] = subprocess.Popen(
            HWM + ["node", "--id", server, "--listen", format_address(addresses[server]), "--peers", peers,
                   "--data", os.path.join(directory, server), "--quiet",
                   "--record", os.path.join(parts, f"{server}.jsonl")], start_new_session=True)

    writes = 0
    try:
        for server in addresses:
            start(server)
        with Client(addresses, timeout=30) as client:
            while True:
                for _ in range(500):
                    index = client.put(f"value {writes}".encode())
                    writes += 1
                    if writes % 10 == 0:
                        client.get(index)
                    if writes % 2000 == 0:
                        leader = client.leader
                        os.killpg(processes[leader].pid, signal.SIGKILL)
                        processes[leader].wait()
                        client.put(b"after the kill")
                        start(leader)
                if count_events(parts) >= events:
                    break
    finally:
        for process in processes.values():
            if process.poll() is None:
                os.killpg(process.pid, signal.SIGKILL)
                process.wait()
    return parts, writes


def bench_cluster(directory: str, events: int) -> None:
    started = time.monotonic()
    parts, writes = record_cluster(directory, events)
    print(f"recorded {count_events(parts)} events of {writes} writes in {time.monotonic() - started:.0f} s")
    [(_, header, run)] = load_runs(sorted(__import__("pathlib").Path(parts).glob("*.jsonl")))
    validator = Validator(resolve("raft")[1], header)
    started, cpu = time.monotonic(), time.process_time()
    verdict = validator.validate(run)
    seconds, cpu = time.monotonic() - started, time.process_time() - cpu
    # CPU time too: on a shared machine the wall clock measures the neighbours as well.
    print(f"validated {verdict.events} events in {seconds:.1f} s ({cpu:.1f} s CPU): "
          f"{verdict.events / seconds:,.0f} events/s ({verdict.events / cpu:,.0f} per CPU second), "
          f"{'valid' if verdict.valid else 'INVALID'} ({verdict.steps} model steps explored)")
    if not verdict.valid:
        print(verdict.discrepancy.describe())


def simulated_runs(protocol_name: str, bounds: dict, count: int, length: int, directory: str) -> list[tuple[str, str]]:
    """`count` recordings of the simulated cluster running random walks of the model."""
    _, protocol = resolve(protocol_name)
    config = Config(**bounds)
    model = build_model(protocol, config)
    runs = []
    for seed in range(count):
        path = os.path.join(directory, f"{protocol_name}-{seed:05}.jsonl")
        cluster = build_cluster(protocol, config, record=path)
        for action in random_actions(model, length, seed):
            cluster.apply(action)
        cluster.recorder.close()
        with open(path) as f:
            runs.append((path, f.read()))
    return runs


def bench_spark(directory: str, count: int, master: str) -> None:
    from hwm.checker.spark_session import get_spark

    runs = simulated_runs("raft", TOUR["raft"], count, 25, directory)
    space = reachable(resolve("raft")[1], Config(**TOUR["raft"]))
    started = time.monotonic()
    local = coverage_table(runs, "raft", TOUR["raft"], space=space)
    local_seconds = time.monotonic() - started
    spark = get_spark(master)
    coverage_table(runs[:8], "raft", TOUR["raft"], engine="spark", spark=spark, space=space)  # warm the workers
    started = time.monotonic()
    distributed = coverage_table(runs, "raft", TOUR["raft"], engine="spark", spark=spark, space=space)
    spark_seconds = time.monotonic() - started
    print(f"{count} runs: local {count / local_seconds:,.1f} runs/s, Spark {master} {count / spark_seconds:,.1f} "
          f"runs/s; tables {'agree' if local.to_json() == distributed.to_json() else 'DIFFER'}")


def bench_coverage(directory: str, walks: int) -> None:
    for name, bounds in TOUR.items():
        runs = simulated_runs(name, bounds, walks, 40, directory)
        result = coverage_table(runs, name, bounds)
        transitions = sum(c for c, _ in result.transitions_covered.values())
        total = sum(r for _, r in result.transitions_covered.values())
        valid = sum(r["valid"] for r in result.runs)
        print(f"{name} at {Config(**bounds).describe()}: {walks} runs ({valid} valid) cover "
              f"{result.states_covered} of {result.states_reachable} states "
              f"({result.states_covered / result.states_reachable:.1%}) and {transitions} of {total} transitions "
              f"({transitions / total:.1%})")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--events", type=int, default=100_000)
    parser.add_argument("--runs", type=int, default=1000)
    parser.add_argument("--walks", type=int, default=200)
    parser.add_argument("--spark-master", default="local[2]")
    parser.add_argument("--skip", default="", help="comma-separated: cluster, spark, coverage")
    parser.add_argument("--dir", default=None)
    args = parser.parse_args()
    skip = set(filter(None, args.skip.split(",")))
    directory = args.dir or tempfile.mkdtemp(prefix="hwm-bench-validate-")
    os.makedirs(directory, exist_ok=True)
    try:
        if "cluster" not in skip:
            bench_cluster(os.path.join(directory, "cluster"), args.events)
        if "spark" not in skip:
            os.makedirs(os.path.join(directory, "spark"), exist_ok=True)
            bench_spark(os.path.join(directory, "spark"), args.runs, args.spark_master)
        if "coverage" not in skip:
            os.makedirs(os.path.join(directory, "coverage"), exist_ok=True)
            bench_coverage(os.path.join(directory, "coverage"), args.walks)
    finally:
        if args.dir is None:
            shutil.rmtree(directory, ignore_errors=True)


if __name__ == "__main__":
    main()
