"""The deterministic simulation per system: schedules per second, faults injected per 1,000 schedules.

    python bench/dst_systems.py [--schedules 200] [--system raft --system zab --system kafka]
                                [--disk prefix|reordering]

Raft and ZAB run the same derandomized schedules (`bridge.dst.schedules()`, Hypothesis is needed);
Kafka runs `bridge.dst.kafka.kafka_schedules()`, whose steps may also name its controller. Faults are
counted from the runs' witnesses: process crashes, power failures and outages, partitions, ENOSPC
and EIO, crashes during a persist and inside a system call, the controller's crashes, and which
files they hit.
"""

from __future__ import annotations

import argparse
import os
import sys
import time
from collections import Counter

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))

from hwm.bridge.dst import DISKS, run_schedule, schedules  # noqa: E402
from hwm.properties.protocol import KAFKA, RAFT, ZAB  # noqa: E402

SYSTEMS = {"raft": RAFT, "zab": ZAB, "kafka": KAFKA}
FAULTS = ("crashes", "outages", "partitions", "fault ENOSPC", "fault EIO", "crashes during a persist",
          "crashes inside a system call", "controller crashes", "controller partitions")


def measure(protocol, count: int, disk: str = "prefix") -> tuple[float, Counter, int]:
    from hypothesis import HealthCheck, given, settings

    from hwm.bridge.dst.kafka import kafka_schedules

    seen: Counter = Counter()
    violations = 0

    @settings(max_examples=count, derandomize=True, deadline=None, database=None,
              suppress_health_check=list(HealthCheck))
    @given(schedule=kafka_schedules() if protocol.system == "kafka" else schedules())
    def one(schedule) -> None:
        nonlocal violations
        outcome = run_schedule(schedule, protocol=protocol, disk=disk)
        seen.update(outcome.witnesses)
        seen["schedules"] += 1
        violations += bool(outcome.violations)

    start = time.perf_counter()
    one()
    return time.perf_counter() - start, seen, violations


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--schedules", type=int, default=200)
    parser.add_argument("--system", action="append", choices=sorted(SYSTEMS))
    parser.add_argument("--disk", choices=DISKS, default="prefix")
    args = parser.parse_args()
    for name in args.system or list(SYSTEMS):
        seconds, seen, violations = measure(SYSTEMS[name], args.schedules, args.disk)
        runs = seen["schedules"]
        kinds = [k for k in FAULTS if name == "kafka" or not k.startswith("controller")]
        per_thousand = {kind: 1000 * seen[kind] / runs for kind in kinds}
        files = {k.removeprefix("fault or crash in a call on "): v for k, v in seen.items()
                 if k.startswith("fault or crash in a call on ")}
        print(f"{name} ({args.disk} disk): {runs} schedules in {seconds:.1f}s = {runs / seconds:.1f} schedules/s; "
              f"violations: {violations}")
        print(f"  faults per 1,000 schedules: {sum(per_thousand.values()):,.0f} "
              f"({', '.join(f'{k} {v:,.0f}' for k, v in per_thousand.items())})")
        print(f"  distinct fault kinds seen: {sum(1 for k in kinds if seen[k])} of {len(kinds)}; "
              f"files hit by a fault or an in-call crash: {dict(sorted(files.items()))}")


if __name__ == "__main__":
    main()
