"""`hwm test --protocol P`: what stepping each observed change against the model costs and finds.

    python bench/model_steps.py [--seeds 3] [--schedules 40] [--clean-schedules 20]

1. False findings and cost: examples/nodes/log_node.py (correct) on `--clean-schedules` Hypothesis
   schedules per seed of the log workload, under its preset (raft-noop,hwm_durable=true): how many
   observed changes were stepped, how many ModelStep findings (any is a false one), and the CPU
   seconds of hwm's own process with and without --protocol on the same seeds (the nodes are
   other processes; the difference is the validator's).
2. For each mistake of examples/nodes/naive_node.py, over `--seeds` seeded hunts of up to
   `--schedules` schedules (no shrinking): schedules until the first failing one, with and without
   --protocol, and which finding came first (the earliest by step).

Measured (a shared 2-core machine under a load of about 18, Python 3.11, `python bench/model_steps.py
--seeds 3 --schedules 30 --clean-schedules 15`; wall-clock figures measure the neighbours too):

    1. log_node.py  no --protocol                          45 schedules  969 changes observed  0 ModelStep findings  hwm's CPU 3.4 s  wall 43.6 s
       log_node.py  --protocol raft-noop,hwm_durable=true  45 schedules  969 changes observed  0 ModelStep findings  hwm's CPU 8.5 s  wall 84.7 s
    2. ack-on-write         without          caught by 2/3 seeds: median 5 schedules; first finding: AckedAtOrBelowHwm x2
       ack-on-write         with --protocol  caught by 2/3 seeds: median 5 schedules; first finding: AckedAtOrBelowHwm x2
       poll-above-hwm       without          caught by 0/3 seeds: never
       poll-above-hwm       with --protocol  caught by 3/3 seeds: median 5 schedules; first finding: ModelStep x3
       truncate-to-own-hwm  without          caught by 0/3 seeds: never
       truncate-to-own-hwm  with --protocol  caught by 3/3 seeds: median 10 schedules; first finding: ModelStep x3

After a late append was computed from the one replication it needs (not every step of the former
leader's state), 2 seeds x 10 schedules, 484 changes: hwm's CPU 1.5 s without --protocol, 3.1 s with
it, about 3 ms of validation per observed change (a few model states stay possible per change:
the voter sets an election may have had, replies not yet applied).
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from hwm.bridge.maelstrom.hunt import hunt  # noqa: E402

NODES = Path(__file__).resolve().parents[1] / "examples" / "nodes"
CORRECT = [sys.executable, str(NODES / "log_node.py")]
PRESET = {"preset": "raft-noop", "flags": {"hwm_durable": True}}
MISTAKES = ("ack-on-write", "poll-above-hwm", "truncate-to-own-hwm")


def stepped_runs(node: list[str], protocol, seeds: int, **hunt_options) -> tuple[int, int, list[str], float, float]:
    """Hunts over `seeds` with shrinking off: (schedules run, changes observed, ModelStep findings'
    texts, hwm's CPU seconds, wall seconds)."""
    stepped, false, cpu, wall, ran = 0, [], 0.0, 0.0, 0

    def count(report, result):
        nonlocal stepped
        stepped += len(result.observations)
        false.extend(str(f) for f in result.findings if f.name == "ModelStep")

    for seed in range(seeds):
        began, began_cpu = time.monotonic(), time.process_time()
        report = hunt(node, seed=seed, protocol=protocol, shrink=False, on_schedule=count, **hunt_options)
        cpu += time.process_time() - began_cpu
        wall += time.monotonic() - began
        ran += report.schedules
    return ran, stepped, false, cpu, wall


def clean(seeds: int, schedules: int) -> None:
    for protocol in (None, PRESET):
        ran, stepped, false, cpu, wall = stepped_runs(CORRECT, protocol, seeds, workload="log",
                                                      schedules=schedules, steps=30)
        label = "--protocol raft-noop,hwm_durable=true" if protocol else "no --protocol"
        print(f"1. log_node.py  {label:<38} {ran} schedules  {stepped} changes observed  "
              f"{len(false)} ModelStep findings  hwm's CPU {cpu:.1f} s  wall {wall:.1f} s")
        for text in false[:3]:
            print(f"     {text[:300]}")


def catches(bug: str, command: list[str], workload: str, preset: str, seeds: int, schedules: int,
            steps: int = 30) -> None:
    """Hunt `command` without and with `--protocol preset` under each seed; print how many seeds catch the
    bug, the median schedule that does, and which finding comes first."""
    for protocol in (None, preset):
        found, first = [], {}
        for seed in range(seeds):
            report = hunt(command, workload=workload, schedules=schedules, steps=steps, seed=seed, protocol=protocol,
                          shrink=False)
            if report.first_failure_at is not None:
                found.append(report.first_failure_at)
                findings = report.failures[0].findings  # the earliest by step (None: at the end)
                name = min(findings, key=lambda f: (f.step is None, f.step or 0)).name if findings else "protocol"
                first[name] = first.get(name, 0) + 1
        label = "with --protocol" if protocol else "without"
        median = f"median {statistics.median(found):g} schedules" if found else "never"
        print(f"2. {bug:<20} {label:<16} caught by {len(found)}/{seeds} seeds: {median}; first finding: "
              + ", ".join(f"{k} x{v}" for k, v in sorted(first.items())), flush=True)


def mistakes(seeds: int, schedules: int) -> None:
    for mistake in MISTAKES:
        catches(mistake, [sys.executable, str(NODES / "naive_node.py"), "--mistakes", mistake], "log", PRESET,
                seeds, schedules)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seeds", type=int, default=3)
    parser.add_argument("--schedules", type=int, default=40)
    parser.add_argument("--clean-schedules", type=int, default=20)
    args = parser.parse_args()
    clean(args.seeds, args.clean_schedules)
    mistakes(args.seeds, args.schedules)


if __name__ == "__main__":
    main()
