"""`hwm test --protocol kafka`: what stepping hwm's own Kafka broker against Kafka's model costs, and what
it finds that the history checks do not.

    python bench/model_steps_kafka.py [--seeds 2] [--schedules 8] [--steps 20] [--hunt-schedules 10] [--preset kafka]

1. False findings and cost: `hwm node --stdio --protocol PRESET` (the controller in the first node)
   on `--schedules` Hypothesis schedules per seed and workload (log, kafka; virtual clock), with and
   without `--protocol PRESET` on the same seeds: observed changes stepped, ModelStep findings (any
   is a false one), and the CPU seconds of hwm's own process (the nodes are other processes; the
   difference is the validator's, checker/observed_kafka.py, with the sends and polls checked on the
   kafka workload).
2. For each divergence planted in the broker (tests/nodes/plant_kafka_node.py: a HW past the ISR's
   smallest log end offset, an epoch forgotten on restart, polls served above the HW), over `--seeds`
   seeded hunts of up to `--hunt-schedules` schedules (no shrinking, the kafka workload): schedules
   until the first failing one, with and without --protocol, and which finding came first.

Measured (a shared 2-core machine under load, Python 3.11, `python bench/model_steps_kafka.py --seeds 2
--schedules 6 --hunt-schedules 8`; wall-clock figures measure the neighbours too):

    RESULTS
"""

from __future__ import annotations

import argparse
import statistics
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from bench.model_steps import stepped_runs  # noqa: E402
from hwm.bridge.maelstrom.hunt import hunt  # noqa: E402

PLANT = ROOT / "tests" / "nodes" / "plant_kafka_node.py"
PLANTS = ("hw-past-isr", "forget-epoch", "poll-above-hwm")


def clean(preset: str, workload: str, seeds: int, schedules: int, steps: int) -> None:
    node = [sys.executable, "-m", "hwm.cli", "node", "--stdio", "--protocol", preset]
    for protocol in (None, preset):
        ran, stepped, false, cpu, wall = stepped_runs(node, protocol, seeds, workload=workload, clock="virtual",
                                                      schedules=schedules, steps=steps)
        label = f"--protocol {preset}" if protocol else "no --protocol"
        print(f"1. {workload:<6} {label:<17} {ran} schedules  {stepped} changes observed  {len(false)} ModelStep "
              f"findings  hwm's CPU {cpu:.1f} s  wall {wall:.1f} s", flush=True)
        for text in false[:3]:
            print(f"     {text[:400]}")


def planted(preset: str, seeds: int, schedules: int, steps: int) -> None:
    for plant in PLANTS:
        command = [sys.executable, str(PLANT), plant, "node", "--stdio", "--protocol", preset]
        for protocol in (None, preset):
            found, first = [], {}
            for seed in range(seeds):
                report = hunt(command, workload="kafka", schedules=schedules, steps=steps, seed=seed,
                              protocol=protocol, shrink=False)
                if report.first_failure_at is not None:
                    found.append(report.first_failure_at)
                    findings = report.failures[0].findings  # the earliest by step (None: at the end)
                    name = min(findings, key=lambda f: (f.step is None, f.step or 0)).name if findings else "protocol"
                    first[name] = first.get(name, 0) + 1
            label = "with --protocol" if protocol else "without"
            median = f"median {statistics.median(found):g} schedules" if found else "never"
            print(f"2. {plant:<15} {label:<16} caught by {len(found)}/{seeds} seeds: {median}; first finding: "
                  + ", ".join(f"{k} x{v}" for k, v in sorted(first.items())), flush=True)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seeds", type=int, default=2)
    parser.add_argument("--schedules", type=int, default=8)
    parser.add_argument("--steps", type=int, default=20)
    parser.add_argument("--hunt-schedules", type=int, default=10)
    parser.add_argument("--preset", default="kafka")
    args = parser.parse_args()
    for workload in ("log", "kafka"):
        clean(args.preset, workload, args.seeds, args.schedules, args.steps)
    planted(args.preset, args.seeds, args.hunt_schedules, args.steps)


if __name__ == "__main__":
    main()
