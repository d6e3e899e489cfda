"""The reordering disk against the planted metadata-before-data bug (bridge/dst/ordering.py).

    python bench/reordering_disk.py [--seeds 20] [--limit 2000]

For each disk model (prefix: `SimDisk`; reordering: `ReorderingDisk`) and each of `--seeds` runs
(run k starts at seed k * 100000): how many schedules until the planted bug is found (median, min,
max, how many runs never found it within `--limit`), and schedules per second of the search.
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))

from hwm.bridge.dst.ordering import DISKS, run_schedule, schedules_until_found  # noqa: E402


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seeds", type=int, default=20)
    parser.add_argument("--limit", type=int, default=2000)
    args = parser.parse_args()
    for disk in DISKS:
        found = [schedules_until_found(k * 100000, disk, True, args.limit) for k in range(args.seeds)]
        hits = [n for n in found if n is not None]
        start = time.perf_counter()
        for seed in range(1000):
            run_schedule(seed, disk, True)
        rate = 1000 / (time.perf_counter() - start)
        summary = (f"median {statistics.median(hits):g}, min {min(hits)}, max {max(hits)}" if hits else "never found")
        print(f"{disk:>10}: schedules until found over {args.seeds} runs: {summary}; "
              f"missed in {len(found) - len(hits)} of {args.seeds} (limit {args.limit}); {rate:,.0f} schedules/s")


if __name__ == "__main__":
    main()
