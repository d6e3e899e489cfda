"""The deterministic simulation per system: schedules per second, faults injected per 1,000 schedules.

    python bench/dst_systems.py [--schedules 200] [--system raft --system zab --system kafka --system bookkeeper]
                                [--disk prefix|reordering]

Raft and ZAB run the same derandomized schedules (`bridge.dst.schedules()`, Hypothesis is needed);
Kafka runs `bridge.dst.kafka.kafka_schedules()`, whose steps may also name its controller; BookKeeper
runs `bridge.dst.bookkeeper.bookkeeper_schedules()` (bookies, the writer and a recovery client that may
start while the writer still adds; its disks are the prefix disk). Faults are
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
from hwm.properties.protocol import BOOKKEEPER, KAFKA, RAFT, ZAB  # noqa: E402

SYSTEMS = {"raft": RAFT, "zab": ZAB, "kafka": KAFKA, "bookkeeper": BOOKKEEPER}
FAULTS = ("crashes", "outages", "partitions", "fault ENOSPC", "fault EIO", "crashes during a persist",
          "crashes inside a system call", "controller crashes", "controller partitions")
# BookKeeper's simulation names its faults by what the bookie lost (bridge/dst/bookkeeper.py).
BOOKKEEPER_FAULTS = ("crashes", "power failures", "fail-stops", "fault ENOSPC", "fault EIO")


def _faults(system: str) -> tuple[str, ...]:
    if system == "bookkeeper":
        return BOOKKEEPER_FAULTS
    return tuple(k for k in FAULTS if system == "kafka" or not k.startswith("controller"))


def measure(protocol, count: int, disk: str = "prefix") -> tuple[float, Counter, int]:
    from hypothesis import HealthCheck, given, settings

    from hwm.bridge.dst.bookkeeper import bookkeeper_schedules, run_bookkeeper_schedule
    from hwm.bridge.dst.kafka import kafka_schedules

    seen: Counter = Counter()
    violations = 0
    drawn = {"kafka": kafka_schedules, "bookkeeper": bookkeeper_schedules}.get(protocol.system, schedules)()

    @settings(max_examples=count, derandomize=True, deadline=None, database=None,
              suppress_health_check=list(HealthCheck))
    @given(schedule=drawn)
    def one(schedule) -> None:
        nonlocal violations
        if protocol.system == "bookkeeper":
            outcome = run_bookkeeper_schedule(schedule, protocol=protocol)
        else:
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
        kinds = _faults(name)
        per_thousand = {kind: 1000 * seen[kind] / runs for kind in kinds}
        files = {k.removeprefix("fault or crash in a call on "): v for k, v in seen.items()
                 if k.startswith("fault or crash in a call on ")}
        disk = "prefix" if name == "bookkeeper" else args.disk
        print(f"{name} ({disk} disk): {runs} schedules in {seconds:.1f}s = {runs / seconds:.1f} schedules/s; "
              f"violations: {violations}")
        print(f"  faults per 1,000 schedules: {sum(per_thousand.values()):,.0f} "
              f"({', '.join(f'{k} {v:,.0f}' for k, v in per_thousand.items())})")
        print(f"  distinct fault kinds seen: {sum(1 for k in kinds if seen[k])} of {len(kinds)}; "
              f"files hit by a fault or an in-call crash: {dict(sorted(files.items()))}")


if __name__ == "__main__":
    main()
