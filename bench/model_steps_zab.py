"""`hwm test --protocol zab`: what stepping hwm's own ZAB node against ZAB's model costs, and whether it
finds anything in a correct node (every ModelStep finding here would be a false one).

    python bench/model_steps_zab.py [--seeds 2] [--schedules 8] [--steps 20] [--nodes 3] [--preset zab]

`hwm node --stdio --protocol PRESET` on `--schedules` Hypothesis schedules per seed and workload
(log, kafka; virtual clock), with and without `--protocol PRESET` on the same seeds: observed
changes stepped, ModelStep findings, and the CPU seconds of hwm's own process (the nodes are other
processes; the difference is the validator's, checker/observed_zab.py).

Measured (a shared 2-core machine under load, Python 3.11, `python bench/model_steps_zab.py`, defaults):

    log    no --protocol   16 schedules  252 changes observed  0 ModelStep findings  hwm's CPU 1.6 s  wall 38.2 s
    log    --protocol zab  16 schedules  252 changes observed  0 ModelStep findings  hwm's CPU 1.6 s  wall 42.9 s
    kafka  no --protocol   16 schedules  286 changes observed  0 ModelStep findings  hwm's CPU 1.3 s  wall 55.1 s
    kafka  --protocol zab  16 schedules  286 changes observed  0 ModelStep findings  hwm's CPU 1.6 s  wall 55.2 s

At most about 1 ms of hwm's CPU per observed change for the validator (within the noise on the log
workload). Longer hunts (the same hunt() calls, 3 nodes unless said) with no
ModelStep finding: zab, 20 schedules x 20 steps, seeds 3 and 7, each workload; zab, 15 x 30 seed 21
log; zab-ack-before-persist on its own preset, 20 x 20 seed 7 log and 15 x 20 seed 5 kafka; five
nodes, 10 x 25 seed 11 log and seed 4 kafka.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from bench.model_steps import stepped_runs  # noqa: E402


def clean(preset: str, workload: str, seeds: int, schedules: int, steps: int, nodes: int) -> None:
    node = [sys.executable, "-m", "hwm.cli", "node", "--stdio", "--protocol", preset]
    for protocol in (None, preset):
        ran, stepped, false, cpu, wall = stepped_runs(node, protocol, seeds, workload=workload, nodes=nodes,
                                                      clock="virtual", schedules=schedules, steps=steps)
        label = f"--protocol {preset}" if protocol else "no --protocol"
        print(f"{workload:<6} {label:<15} {ran} schedules  {stepped} changes observed  {len(false)} ModelStep findings  "
              f"hwm's CPU {cpu:.1f} s  wall {wall:.1f} s", flush=True)
        for text in false[:3]:
            print(f"     {text[:400]}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seeds", type=int, default=2)
    parser.add_argument("--schedules", type=int, default=8)
    parser.add_argument("--steps", type=int, default=20)
    parser.add_argument("--nodes", type=int, default=3)
    parser.add_argument("--preset", default="zab")
    args = parser.parse_args()
    for workload in ("log", "kafka"):
        clean(args.preset, workload, args.seeds, args.schedules, args.steps, args.nodes)


if __name__ == "__main__":
    main()
