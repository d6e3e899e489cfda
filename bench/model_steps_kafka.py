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

Measured (a shared 2-core machine under a load of about 9, Python 3.11; wall-clock figures measure
the neighbours too). 1, `python bench/model_steps_kafka.py --seeds 2 --schedules 6` (the clean hunts):

    1. log    no --protocol     12 schedules  252 changes observed  0 ModelStep findings  hwm's CPU 1.8 s  wall 82.1 s
    1. log    --protocol kafka  12 schedules  252 changes observed  0 ModelStep findings  hwm's CPU 1.3 s  wall 61.7 s
    1. kafka  no --protocol     12 schedules  185 changes observed  0 ModelStep findings  hwm's CPU 0.9 s  wall 58.9 s
    1. kafka  --protocol kafka  12 schedules  185 changes observed  0 ModelStep findings  hwm's CPU 1.3 s  wall 71.5 s

hwm's CPU over a hunt varies more between runs than the validator costs, so the validator is also
timed alone on the observations of unstepped hunts (`validator_cpu`, 2 seeds x 5 schedules x 20 steps):

    1. log    3 nodes  10 runs  217 changes stepped again  0 ModelStep findings  validator CPU 0.18 s (0.8 ms per change)
    1. log    5 nodes  10 runs  314 changes stepped again  0 ModelStep findings  validator CPU 2.55 s (8.1 ms per change)
    1. kafka  3 nodes  10 runs  143 changes stepped again  0 ModelStep findings  validator CPU 0.07 s (0.5 ms per change)
    1. kafka  5 nodes  10 runs  210 changes stepped again  0 ModelStep findings  validator CPU 1.45 s (6.9 ms per change)

2, `--seeds 2 --hunt-schedules 8` (the kafka workload, 20 steps; about 10 minutes):

    2. hw-past-isr     without          caught by 1/2 seeds: median 8 schedules; first finding: CommittedOffsetsMonotonic x1
    2. hw-past-isr     with --protocol  caught by 2/2 seeds: median 7.5 schedules; first finding: ModelStep x2
    2. forget-epoch    without          caught by 0/2 seeds: never; first finding:
    2. forget-epoch    with --protocol  caught by 2/2 seeds: median 3 schedules; first finding: ModelStep x2
    2. poll-above-hwm  without          caught by 1/2 seeds: median 3 schedules; first finding: AckedAtOrBelowHwm x1
    2. poll-above-hwm  with --protocol  caught by 2/2 seeds: median 5.5 schedules; first finding: ModelStep x2

Without --protocol a forgotten epoch is never seen (the controller's LeaderAndIsr gives it back at
once); a HW past the ISR's minimum is seen by the history only when a later leader change makes a
committed offset go back, and the poll plant only through the acknowledgement of a send it also
lets a follower relay before its HW covers it (`AckedAtOrBelowHwm`, the catalogue on the node's
state, which a node that says its offsets are log indexes gets without --protocol too). Longer hunts with no ModelStep
finding (the same hunt() calls, `--protocol kafka`): 10 x 25 steps seed 5 log and seed 6 kafka,
3 nodes; 4 x 20 seed 11 log and 5 x 20 seed 4 kafka, 5 nodes.

Found and fixed by these hunts: 2 of 24 clean schedules of the kafka workload gave a false
ModelStep until a fetch response left the fetch it answered on its way to the leader (an ISR
expansion is counted with that fetch's offset); five nodes took 468 s for 2 schedules, and gave a
false ModelStep, until several followers' fetches could be one step and elections were searched
for only where a node shows a new epoch.
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from bench.model_steps import catches, stepped_runs  # noqa: E402
from hwm.bridge.maelstrom.hunt import hunt  # noqa: E402
from hwm.bridge.maelstrom.validation import ModelSteps  # noqa: E402

PLANT = ROOT / "tests" / "nodes" / "plant_kafka_node.py"
PLANTS = ("hw-past-isr", "forget-epoch", "poll-above-hwm")


def validator_cpu(preset: str, workload: str, seeds: int, schedules: int, steps: int, nodes: int) -> None:
    """The validator alone: the observations of unstepped hunts fed again to ModelSteps, CPU timed (the
    hunt's own CPU varies more from run to run than the validator costs)."""
    node = [sys.executable, "-m", "hwm.cli", "node", "--stdio", "--protocol", preset]
    runs = []
    for seed in range(seeds):
        hunt(node, workload=workload, nodes=nodes, clock="virtual", schedules=schedules, steps=steps, seed=seed,
             shrink=False, on_schedule=lambda report, result: runs.append(result.observations))
    changes, findings, began = 0, 0, time.process_time()
    for observations in runs:
        steps_of_run = ModelSteps(preset, [f"n{k}" for k in range(1, nodes + 1)])
        for seen in observations:
            changes += 1
            findings += steps_of_run.observed(seen) is not None
        findings += steps_of_run.finish() is not None
    cpu = time.process_time() - began
    print(f"1. {workload:<6} {nodes} nodes  {len(runs)} runs  {changes} changes stepped again  {findings} ModelStep "
          f"findings  validator CPU {cpu:.2f} s ({1000 * cpu / max(1, changes):.1f} ms per change)", flush=True)


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
        catches(plant, [sys.executable, str(PLANT), plant, "node", "--stdio", "--protocol", preset], "kafka", preset,
                seeds, schedules, steps)


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
        for nodes in (3, 5):
            validator_cpu(args.preset, workload, args.seeds, args.schedules, args.steps, nodes)
    planted(args.preset, args.seeds, args.hunt_schedules, args.steps)


if __name__ == "__main__":
    main()
