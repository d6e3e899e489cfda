"""Partitions (model/partition.py, model/kafka_partition.py, model/zab_partition.py): states and seconds
of one exhaustive check per configuration, symmetry on and off, with the local engine and the reference
backend in this process.

    python bench/partitions.py [--quick]

The rows: every preset the tour partitions, at the tour's bounds for it (the lease presets: generation
<= 2, log <= 2, no crash, one partition; kafka-without-controller-fencing and zab-step-down: generation
<= 2, log <= 1, no crash, one partition), the safe kafka and zab presets at those bounds, then (not
with --quick) the lease presets with a crash, the Kafka pair with a second entry, the ZAB pair with a
second entry and a crash, and raft at the default bounds without and with one partition (what a partition costs the
state space). docs/systems.md quotes them.
"""

from __future__ import annotations

import argparse
import os
import sys
import time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))

from hwm.checker.run import CheckRequest, run  # noqa: E402
from hwm.checker.verdict import DEFAULT_CONFIG, tour_config  # noqa: E402
from hwm.model.registry import build_model  # noqa: E402
from hwm.model.state import Config  # noqa: E402
from hwm.properties.protocol import PRESETS  # noqa: E402

LEASES = ("raft-lease-reads", "raft-lease-reads-without-check-quorum")
STEP_DOWN = ("kafka-without-controller-fencing", "zab-step-down")
# The safe preset beside each: what the step-down rule costs or saves in states.
SAFE_BESIDE = {"kafka-without-controller-fencing": "kafka", "zab-step-down": "zab"}


def rows(quick: bool) -> list[tuple[str, Config]]:
    out = [(name, tour_config(name, DEFAULT_CONFIG)) for name in LEASES + STEP_DOWN]
    out += [(SAFE_BESIDE[name], tour_config(name, DEFAULT_CONFIG)) for name in STEP_DOWN]
    if not quick:
        out += [(name, Config(max_generation=2, max_log=2, max_crashes=1, max_partitions=1)) for name in LEASES]
        # A second entry (and for ZAB a crash too; Kafka's space with both takes minutes without symmetry).
        out += [(name, Config(max_generation=2, max_log=2, max_crashes=0, max_partitions=1))
                for name in ("kafka-without-controller-fencing", "kafka")]
        out += [(name, Config(max_generation=2, max_log=2, max_crashes=1, max_partitions=1))
                for name in ("zab-step-down", "zab")]
        out += [("raft", Config()), ("raft", Config(max_partitions=1))]
    return out


def measure(name: str, config: Config, symmetry: bool) -> tuple[int, float, list[str]]:
    started = time.perf_counter()
    report = run(CheckRequest(name, symmetry=symmetry), model=build_model(PRESETS[name].protocol, config))
    return report.states, time.perf_counter() - started, sorted(report.violated)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="the tour's rows only")
    args = parser.parse_args()
    print(f"{'preset':40} {'bounds':58} {'states':>8} {'s':>6} {'states (off)':>12} {'s':>6}  violated")
    for name, config in rows(args.quick):
        on, on_s, violated = measure(name, config, True)
        off, off_s, _ = measure(name, config, False)
        bounds = config.describe().replace("servers=3 ", "").replace(" network=rpc", "")
        print(f"{name:40} {bounds:58} {on:>8,} {on_s:>6.1f} {off:>12,} {off_s:>6.1f}  {', '.join(violated) or '-'}",
              flush=True)


if __name__ == "__main__":
    main()
