"""Every preset on both successor backends: distinct states per second of the reference backend and the
compiled one, side by side, at the tour's bounds and at one larger bound, so that a regression of either
backend on any preset shows in one run.

    python bench/backend_speed.py [--runs 3] [--only raft,zab] [--servers 4] [--reference-states 20000]
                                  [--compiled-states 200000]

Rows: each preset at its tour bounds (`checker.verdict.tour_config` of the defaults: what `hwm check`
without `--protocol` checks it at), then at those bounds with one more log entry (`max_log + 1`), symmetry
on, as the tour runs (`--servers` sets the servers of every row, e.g. BookKeeper's four bookies). The
searches take turns run by run, so a burst of other load on a shared machine falls on every row alike;
each cell is the median over the runs of distinct states per CPU second of the search (set-up apart: the kernels are built or loaded, and each row's model searched once at tiny bounds,
before any clock starts). At the larger bound each backend stops after a number of states
(`--reference-states`, `--compiled-states`: the reference backend is 10-40x slower, and some presets
reach millions of states there); such a rate is that of the first levels, marked `*`. A preset the compiled backend has no form of shows `-` with the reason below the
table. Distinct-state counts of complete searches must agree between the backends, or the script fails.
The machine's load average is printed before and after: on 2 shared cores CPU seconds move with the
others' load far less than wall seconds.

Measured (`--runs 1`, load average 15-24, 1,424 s wall; the whole table in docs/scaling.md): the compiled
backend at 37,000-191,000 states per CPU second, the reference one at 2,700-9,400, 8-32x apart on every
preset the compiled backend had a form of; BookKeeper's ledger presets since (`--runs 3`, with and without
`--servers 4`, load average 1.6-2.0): 155,000-318,000 against 8,100-12,300, 16-33x.
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import time
from dataclasses import replace

ROOT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..")
sys.path.insert(0, ROOT)

from bench.engines import uptime  # noqa: E402


def configs(only: list[str] | None, servers: int | None = None) -> list[tuple[str, str, object]]:
    """(preset, bounds label, Config) per row: the tour's bounds (with `servers` where given), then one more
    log entry."""
    from hwm.checker.verdict import tour_config
    from hwm.model.state import Config
    from hwm.properties.protocol import PRESETS

    rows = []
    for preset in PRESETS:
        if only and preset not in only:
            continue
        tour = tour_config(preset, Config())
        if servers:
            tour = replace(tour, servers=servers)
        rows.append((preset, "tour", tour))
        rows.append((preset, "log+1", replace(tour, max_log=tour.max_log + 1)))
    return rows


def search(preset: str, config, successors: str, max_states: int | None) -> tuple[int, bool, float, float]:
    """(distinct states, complete, CPU seconds, wall seconds) of one search, set-up apart."""
    from hwm.checker.engine import CheckOptions, Search
    from hwm.model.registry import build_model
    from hwm.properties.protocol import PRESETS

    options = CheckOptions(symmetry=True, successors=successors, max_states=max_states)
    search = Search(build_model(PRESETS[preset].protocol, config), options, [], preset)
    started = time.process_time()
    report = search.run()
    return report.states, report.complete, time.process_time() - started, report.seconds


def describe(config) -> str:
    bounds = f"{config.servers},{config.max_generation},{config.max_log},{config.max_crashes}"
    return bounds + (f",p{config.max_partitions}" if getattr(config, "max_partitions", 0) else "")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--only", default=None, help="comma-separated presets (default: every preset)")
    parser.add_argument("--servers", type=int, default=None, help="servers of every row (default: the tour's)")
    parser.add_argument("--reference-states", type=int, default=20_000,
                        help="states after which the reference backend stops at the larger bound")
    parser.add_argument("--compiled-states", type=int, default=200_000,
                        help="states after which the compiled backend stops at the larger bound")
    args = parser.parse_args()
    if args.runs < 1:
        parser.error("--runs must be at least 1")
    if min(args.reference_states, args.compiled_states) < 1:
        parser.error("--reference-states and --compiled-states must be at least 1")
    from hwm.checker.auto_backend import prepare_fast
    from hwm.checker.fast import unsupported
    from hwm.model.registry import build_model
    from hwm.model.state import Config
    from hwm.properties.protocol import PRESETS

    only = args.only.split(",") if args.only else None
    unknown = sorted(set(only or ()) - set(PRESETS))
    if unknown:
        parser.error(f"--only: no preset named {', '.join(unknown)}")
    rows = configs(only, args.servers)
    prepare_fast()  # built or loaded before any timing
    print(f"symmetry on; median of {args.runs} runs; at log+1 stopped after {args.reference_states:,} states "
          f"(reference), {args.compiled_states:,} (compiled); {os.cpu_count()} cores; uptime: {uptime()}", flush=True)
    why_not = {}
    for preset, _, config in rows:
        why = unsupported(build_model(PRESETS[preset].protocol, config))
        if why:
            why_not[preset] = why
    # Each row's one-off costs (its model's first search) untimed.
    tiny = Config(2, 1, 1, 0)
    for preset in dict.fromkeys(p for p, _, _ in rows):
        for successors in ("reference", *(() if preset in why_not else ("fast",))):
            try:
                search(preset, replace(tiny, max_partitions=0), successors, 100)
            except ValueError:  # a model that needs more servers (a BookKeeper ledger): warmed by its first run
                pass
    runs: dict[tuple, list] = {}
    for run in range(args.runs):
        started = time.perf_counter()
        for preset, label, config in rows:
            for successors in ("fast", "reference"):
                if successors == "fast" and preset in why_not:
                    continue
                limit = None if label == "tour" else args.reference_states if successors == "reference" \
                    else args.compiled_states
                runs.setdefault((preset, label, successors), []).append(search(preset, config, successors, limit))
        print(f"  run {run + 1}: {time.perf_counter() - started:.0f} s wall; uptime: {uptime()}", flush=True)
    print()
    print(f"{'preset':38} {'bounds':10} {'states':>10} {'compiled st/CPU s':>18} {'reference st/CPU s':>19} "
          f"{'compiled/ref':>13}")
    for preset, label, config in rows:
        reference = runs[preset, label, "reference"]
        compiled = runs.get((preset, label, "fast"))
        rate = {name: statistics.median(states / max(cpu, 1e-9) for states, _, cpu, _ in r)
                for name, r in (("reference", reference), ("fast", compiled)) if r}
        if compiled:
            counts = {r[0] for r in compiled if r[1]} | {r[0] for r in reference if r[1]}
            if len(counts) > 1:
                sys.exit(f"{preset} at {describe(config)}: the backends disagree on the distinct-state count: "
                         f"{sorted(counts)}")
        complete = [r for r in (compiled or []) + reference if r[1]]
        states = f"{complete[0][0]:,}" if complete else f"{max(r[0] for r in (compiled or reference)):,}+"
        cut = "" if reference[0][1] else "*"
        fast = f"{rate['fast']:,.0f}" + ("" if compiled[0][1] else "*") if compiled else "-"
        ratio = f"{rate['fast'] / rate['reference']:.1f}x" if compiled else "-"
        print(f"{preset:38} {describe(config):10} {states:>10} {fast:>18} {rate['reference']:>18,.0f}{cut:1} "
              f"{ratio:>13}")
    for preset, why in why_not.items():
        print(f"  {preset}: {why}")
    print("* the rate over the first levels: the search stopped at its state limit")
    print(f"uptime at the end: {uptime()}")


if __name__ == "__main__":
    main()
