"""Variants on the compiled backend: distinct states per second of a preset and of variants of it, on the
compiled kernels and on the reference backend, side by side.

    python bench/variant_speed.py [--runs 3] [--servers 4 --max-generation 2 --max-log 2 --max-crashes 1]

Rows: the raft preset (`--preset`); `Majority` (below: raft's own rules with Q2 said explicitly, so it
explores raft's states through the variant machinery); `RaftRulesWritten` (below: raft's six rules asked of
every state, each written out as the flags give it, so the preset's states again, every rule looked up in
its table on the kernels: checker/fast/rule_tables.py); `Flexible` (examples/variants/flexible.py, Q1 = N - 1,
Q2 = 2); `FlexibleTooSmall` (Q2 = 1, with an invariant and a witness of its own, which are Python
functions of the snapshot view: the compiled backend checks them in Python on each new state). Each on
the compiled backend (`fast`) and the reference one. The searches take turns run by run, so that a burst
of other load on a shared machine falls on every row alike; the table shows the median over the runs of
distinct states per CPU second of the search (set-up apart, the rules' tables included there; the report's
shortest traces, rebuilt on the model, included), each row's against the preset's on the compiled backend,
the compiled backend's against the reference one, and the medians of states per wall second.
Every row's distinct-state count must be the same on both backends, or the script fails.

Measured on 2 cores shared with other work (load average 1.1-1.3; CPU seconds move with the load far
less than wall seconds, which are shown last):

    python bench/variant_speed.py --runs 5
    servers=4 max_generation=2 max_log=2 max_crashes=1 network=rpc symmetry=on; median of 5 runs; 2 cores
    protocol                      states  compiled st/CPU s    vs raft  reference st/CPU s  compiled/ref  wall st/s: compiled, ref
    raft                          17,810             51,204      1.00x               5,141         10.0x             51,772, 5,146
    Majority (variant)            17,810             52,766      1.03x               4,568         11.6x             53,134, 4,278
    RaftRulesWritten (6 rules)    17,810             51,675      1.01x               4,729         10.9x             50,490, 4,732
    Flexible (variant)            16,970             61,192      1.20x               5,430         11.3x             59,348, 5,220
    FlexibleTooSmall (+2 own)     10,366             26,539      0.52x               4,600          5.8x             26,829, 4,272

A variant with constant rules runs as fast as its preset on the kernels: Majority explores the preset's
17,810 states at the same rate (runs of 0.26-0.42 CPU s for every compiled row; the spread of such short
runs is about 20%). So does one whose six rules asked of every state are tables: RaftRulesWritten at 1.01x
the preset (its tables, 594 answers at these bounds, take 1 ms to build; 27,899 at 5 servers, generation
4, log 3 take 24 ms; 453,250 at 3 servers, generation 4, log 4, 0.15 s). FlexibleTooSmall's two
properties of its own are Python, called on every new state unpacked: they cut the compiled rate to about
half the preset's, still about 6x the reference backend's.
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import time

ROOT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..")
sys.path.insert(0, ROOT)

from bench.bounds import add_search_arguments, bounds_of  # noqa: E402
from bench.engines import WARM_UP, uptime  # noqa: E402
from hwm.model.variant import Variant  # noqa: E402
from hwm.properties.quorum import index_held_by, majority  # noqa: E402
from hwm.properties.rules import up_to_date  # noqa: E402

FLEXIBLE = os.path.join(os.path.abspath(ROOT), "examples", "variants", "flexible.py")


class Majority(Variant):
    """Raft's own rules, Q2 said explicitly: the preset's search, through a variant."""

    base = "raft"

    def replication_quorum(self):
        return majority(self.servers)


class RaftRulesWritten(Variant):
    """Raft's six rules asked of every state, each written out as the flags give it: the preset's search,
    with every rule looked up in its table on the compiled backend (checker.fast.rule_tables)."""

    base = "raft"

    def quorum_index(self, match):
        return index_held_by(match, majority(self.servers))

    def may_commit(self, index, log, generation):
        return index <= len(log) and log[index - 1] == generation

    def grants_vote(self, candidate_log, voter_log):
        return up_to_date(candidate_log, voter_log)

    def accepts_append(self, log, prev_index, prev_generation):
        return len(log) >= prev_index and log[prev_index - 1] == prev_generation

    def restart_keeps(self, log, hwm, leader_hwm):
        return len(log)

    def readable(self, server, leading, log, hwm):
        return min(hwm, len(log))


def rows_of(preset: str) -> list[tuple[str, str]]:
    """(row name, protocol spec) of the protocols compared."""
    return [(preset, preset), ("Majority (variant)", f"{os.path.abspath(__file__)}:Majority"),
            ("RaftRulesWritten (6 rules)", f"{os.path.abspath(__file__)}:RaftRulesWritten"),
            ("Flexible (variant)", f"{FLEXIBLE}:Flexible"),
            ("FlexibleTooSmall (+2 own)", f"{FLEXIBLE}:FlexibleTooSmall")]


def search(spec: str, args, successors: str) -> tuple[int, float, float]:
    """(distinct states, wall seconds of the search, CPU seconds of this process over the search and the
    report's traces) of one check (set-up apart: the backend is built before the clock starts)."""
    from hwm.checker.engine import CheckOptions, Search
    from hwm.model.registry import build_model
    from hwm.model.state import Config
    from hwm.properties.protocol import resolve

    name, protocol = resolve(spec)
    options = CheckOptions(symmetry=not args.no_symmetry, successors=successors)
    search = Search(build_model(protocol, Config(**bounds_of(args))), options, [], name)
    started = time.process_time()
    report = search.run()
    return report.states, report.seconds, time.process_time() - started


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--runs", type=int, default=3)
    add_search_arguments(parser, servers=4, max_log=2)
    parser.set_defaults(max_generation=2)
    args = parser.parse_args()
    if args.runs < 1:
        parser.error("--runs must be at least 1")
    from hwm.checker.auto_backend import prepare_fast

    prepare_fast()  # built or loaded before any timing
    rows = [(name, spec, successors) for successors in ("fast", "reference") for name, spec in rows_of(args.preset)]
    config = " ".join(f"{k}={v}" for k, v in bounds_of(args).items())
    print(f"{config} symmetry={'off' if args.no_symmetry else 'on'}; median of {args.runs} runs; "
          f"{os.cpu_count()} cores; uptime: {uptime()}", flush=True)
    tiny = argparse.Namespace(**{**vars(args), **WARM_UP})
    for _, spec, successors in rows:  # each row's one-off costs (loading its variant, its first search) untimed
        search(spec, tiny, successors)
    runs: dict[tuple[str, str], list[tuple[int, float, float]]] = {(name, s): [] for name, _, s in rows}
    for run in range(args.runs):
        for name, spec, successors in rows:
            runs[name, successors].append(search(spec, args, successors))
        print(f"  run {run + 1} (CPU s): " + ", ".join(f"{n} {s} {r[-1][2]:.2f}" for (n, s), r in runs.items()),
              flush=True)
    for name, _ in rows_of(args.preset):
        counts = {r[0] for s in ("fast", "reference") for r in runs[name, s]}
        if len(counts) != 1:
            sys.exit(f"{name}: the backends disagree on the distinct-state count: {sorted(counts)}")
    # States per CPU second: on a shared machine the wall clock moves with the others' load far more.
    rate = {key: statistics.median(states / cpu for states, _, cpu in r) for key, r in runs.items()}
    wall = {key: statistics.median(states / seconds for states, seconds, _ in r) for key, r in runs.items()}
    first = rate[args.preset, "fast"]
    print()
    print(f"{'protocol':27} {'states':>8} {'compiled st/CPU s':>18} {'vs ' + args.preset:>10} "
          f"{'reference st/CPU s':>19} {'compiled/ref':>13} {'wall st/s: compiled, ref':>25}")
    for name, _ in rows_of(args.preset):
        fast, reference = rate[name, "fast"], rate[name, "reference"]
        walls = f"{wall[name, 'fast']:,.0f}, {wall[name, 'reference']:,.0f}"
        print(f"{name:27} {runs[name, 'fast'][0][0]:>8,} {fast:>18,.0f} {fast / first:>9.2f}x {reference:>19,.0f} "
              f"{fast / reference:>12.1f}x {walls:>25}")
    print(f"uptime at the end: {uptime()}")


if __name__ == "__main__":
    main()
