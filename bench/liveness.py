"""Liveness check cost: concrete states, transitions and seconds per configuration.

    python bench/liveness.py [--runs 3]

Medians over the runs, each run a full `check_liveness` (graph build, SCCs per
obligation, shortest lassos, witnesses). The graph is concrete (no symmetry), so its
size is the local engine's with --no-symmetry.
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))

CONFIGS = [
    ("raft", dict(servers=3, max_generation=2, max_log=1, max_crashes=1)),
    ("seed", dict(servers=3, max_generation=2, max_log=1, max_crashes=1)),
    ("raft", dict(servers=3, max_generation=3, max_log=1, max_crashes=1)),
    ("raft", dict(servers=3, max_generation=2, max_log=2, max_crashes=1)),
    ("seed", dict(servers=3, max_generation=3, max_log=1, max_crashes=1)),
]


def main() -> None:
    from hwm.model.registry import build_model
    from hwm.checker.liveness import check_liveness
    from hwm.model.state import Config
    from hwm.properties.protocol import PRESETS

    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=3)
    args = parser.parse_args()
    print(f"{'preset':6} {'bounds':10} {'states':>8} {'transitions':>11} {'seconds':>8} {'states/s':>9}  violated")
    for preset, overrides in CONFIGS:
        config = Config(**overrides)
        times = []
        for _ in range(args.runs):
            started = time.perf_counter()
            report = check_liveness(build_model(PRESETS[preset].protocol, config), preset, max_states=100_000)
            times.append(time.perf_counter() - started)
        seconds = statistics.median(times)
        bounds = f"{config.servers},{config.max_generation},{config.max_log},{config.max_crashes}"
        violated = ", ".join(f"{n} {report.results[n].stem}+{report.results[n].cycle}" for n in report.violated)
        print(f"{preset:6} {bounds:10} {report.states:>8,} {report.transitions:>11,} {seconds:>8.2f} "
              f"{report.states / seconds:>9,.0f}  {violated or '-'}")


if __name__ == "__main__":
    main()
