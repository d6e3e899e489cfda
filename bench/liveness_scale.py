"""Liveness at scale: the whole check on the compiled engine's graph (checker/liveness_fast.py) for
a million states and more, with its CPU and wall seconds, its peak memory and the machine's load.

    python bench/liveness_scale.py [--preset seed --servers 3 --max-generation 3 --max-log 2 --max-crashes 1]
                                   [--reference]

One run, one process: the kernels are built or loaded, and a tiny check warms the graph's compiled loops,
before the clock starts. The check is `check_liveness` as `hwm check --liveness` runs it: the graph (the
compiled search without symmetry), the obligations, the SCCs per obligation key, the shortest lassos and
the witnesses. `--reference` runs it on the reference graph instead (only for graphs within its limit).
"""

from __future__ import annotations

import argparse
import os
import resource
import sys
import time

ROOT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..")
sys.path.insert(0, ROOT)

from bench.bounds import add_search_arguments, bounds_of, model_of  # noqa: E402
from bench.engines import uptime  # noqa: E402


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    add_search_arguments(parser, servers=3, max_log=2)
    parser.set_defaults(preset="seed", max_generation=3)
    parser.add_argument("--reference", action="store_true", help="run on the reference graph")
    args = parser.parse_args()
    from hwm.checker.auto_backend import prepare_fast
    from hwm.checker.liveness import COMPILED_MAX_STATES, check_liveness

    successors = "reference" if args.reference else "fast"
    prepare_fast()
    check_liveness(model_of("raft", servers=2, max_generation=1, max_log=1, max_crashes=0, network="rpc"), "raft",
                   successors=successors)  # the compiled loops built or loaded, untimed
    print(f"{args.preset} {bounds_of(args)} on the {successors} graph; {os.cpu_count()} cores; uptime: {uptime()}",
          flush=True)
    model = model_of(args.preset, **bounds_of(args))
    started, cpu = time.perf_counter(), time.process_time()
    report = check_liveness(model, args.preset, successors=successors,
                            max_states=COMPILED_MAX_STATES if not args.reference else None)
    wall, cpu = time.perf_counter() - started, time.process_time() - cpu
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    print(f"{report.states:,} concrete states, {report.transitions:,} transitions: {cpu:.1f} CPU s, {wall:.1f} s wall, "
          f"{report.states / cpu:,.0f} states per CPU s, peak {peak:,.0f} MB")
    for prop in report.properties:
        r = report.results[prop.name]
        print(f"  {prop.name:28} " + (f"violated (lasso {r.stem}+{r.cycle} steps)" if r.found else "holds"))
    print(f"uptime at the end: {uptime()}")


if __name__ == "__main__":
    main()
