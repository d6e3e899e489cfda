"""The Spark engine's resident stages on many cores, without Spark: their tasks as plain processes.

    python bench/resident_scaling.py [--tasks 1,2,4,8,16] [--runs 3] [--servers 4 --max-generation 4
                                     --max-log 2] [--no-symmetry] [--most 16]

A resident stage (`spark_bfs(exchange="resident")`) costs Spark one launch per `--most`
levels (0.1–0.2 s on `local[2]`, `bench/engines.py`); between launches its tasks run
the engine's own code (`checker.spark_engine._resident_task`) and meet through files,
with no Spark scheduling at all. This script launches those very tasks as forked
processes, one per core, through a stand-in for the one Spark call a resident stage
makes (`parallelize(...).barrier().mapPartitionsWithIndex(...).collect()`), every level
from the root on (no level on the driver), and puts them side by side with the local
engine at the same number of workers: the scaling of the design on a machine with more
cores than Spark can be installed on here (PySpark is not needed). Spark's launches, and
the levels the engine runs on its driver, are not in these figures.

Every run must find the local engine's distinct-state count and transitions, or the script fails.
"""

from __future__ import annotations

import argparse
import multiprocessing
import os
import statistics
import sys
import tempfile
import time

ROOT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..")
sys.path.insert(0, ROOT)

from bench.bounds import add_search_arguments, bounds_of, model_of  # noqa: E402


class _Processes:
    """The one chain of Spark calls `_run_resident` makes, with a forked process per task."""

    def parallelize(self, data, slices):
        self.tasks = slices
        return self

    def barrier(self):
        return self

    def mapPartitionsWithIndex(self, function):
        self.function = function
        return self

    def collect(self):
        context = multiprocessing.get_context("fork")
        processes = [context.Process(target=_task, args=(self.function, t)) for t in range(self.tasks)]
        for p in processes:
            p.start()
        for p in processes:
            p.join()
        failed = [p.exitcode for p in processes if p.exitcode]
        if failed:
            raise RuntimeError(f"resident tasks exited with {failed}")
        return []


def _task(function, task: int) -> None:
    list(function(task, iter(())))


def resident_search(model, symmetry: bool, tasks: int, most: int) -> tuple[int, int, float]:
    """(states, transitions, seconds) of the whole search in resident stages of `tasks` processes."""
    import numpy as np

    from hwm.checker.spark_engine import _run_resident
    from hwm.checker.spark_files import write_records
    from hwm.checker.spark_levels import Candidates, Level, Visited, as_rows
    from hwm.checker.backend import make_backend

    backend = make_backend("fast", model, symmetry)
    properties = list(model.properties)
    shared = (model, symmetry, "fast", properties)
    partitions = tasks
    init = backend.initial()
    init_fp = int(backend.fingerprints(init)[0])
    totals = {"states": 0, "transitions": 0}
    with tempfile.TemporaryDirectory(prefix="hwm-resident-") as directory:
        started = time.perf_counter()
        # The hand-over the driver makes: level 0's records, every partition's empty visited set and the root.
        first = Candidates(as_rows(backend, init), np.array([init_fp], np.uint64), np.zeros(1, np.uint64),
                           np.zeros(1, np.int64), np.zeros(1, np.int64))
        for p in range(partitions):
            records = [Visited.empty()] + ([first] if init_fp % partitions == p else [])
            write_records(directory, 0, "driver", [(p, r) for r in records])
        found: set[str] = set()

        def account(level, expand, done, seconds, on_spark):
            new = sum(s.new for s in done.values())
            totals["transitions"] += sum(s.transitions for s in done.values())
            totals["states"] += new
            found.update(d[0] for s in done.values() for d in s.discoveries)
            return new > 0

        level = 0
        while True:
            spec = Level(level, partitions, tuple(p.name for p in properties if p.on == "state" and p.name not in found),
                         tuple(p.name for p in properties if p.on == "step" and p.name not in found), True)
            last, goes_on, _ = _run_resident(_Processes(), shared, spec, directory, tasks, None, most, account)
            if not goes_on:
                break
            level = last + 1
        return totals["states"], totals["transitions"], time.perf_counter() - started


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--tasks", default="1,2,4,8,16", help="task (and local worker) counts")
    parser.add_argument("--runs", type=int, default=3)
    add_search_arguments(parser, servers=4, max_log=2)
    parser.add_argument("--most", type=int, default=16, help="levels per resident stage (spark_bfs's checkpoint_every)")
    args = parser.parse_args()
    counts = [int(t) for t in args.tasks.split(",") if t]
    if not counts or min(counts) < 1 or args.runs < 1:
        parser.error("--tasks lists counts of at least 1, and --runs is at least 1")

    from hwm.checker.run import CheckRequest, run

    model = model_of(args.preset, **bounds_of(args))
    symmetry = not args.no_symmetry
    print(f"{args.preset} {' '.join(f'{k}={v}' for k, v in bounds_of(args).items())} "
          f"symmetry={'on' if symmetry else 'off'}; median of {args.runs} runs; "
          f"{os.cpu_count()} cores; load {os.getloadavg()[0]:.2f}", flush=True)
    # The kernels, built or loaded.
    run(CheckRequest(args.preset, symmetry=symmetry, successors="fast", max_depth=2), model=model)
    rows = []
    for n in counts:
        local, resident = [], []
        for _ in range(args.runs):  # the two take turns, so that a burst of load falls on both alike
            report = run(CheckRequest(args.preset, symmetry=symmetry, successors="fast", workers=n), model=model)
            local.append(report.seconds)
            states, transitions, seconds = resident_search(model, symmetry, n, args.most)
            if (states, transitions) != (report.states, report.transitions):
                sys.exit(f"{n} resident tasks found {states} states and {transitions} transitions; "
                         f"the local engine {report.states} and {report.transitions}")
            resident.append(seconds)
        rows.append((n, report.states, statistics.median(local), statistics.median(resident)))
        print(f"  {n:>3}: local {local}, resident {resident}; load {os.getloadavg()[0]:.2f}", flush=True)
    base_local, base_resident = rows[0][2], rows[0][3]
    print(f"\n{'tasks':>5} {'states':>11} {'local s':>8} {'speed-up':>8} {'resident s':>10} {'speed-up':>8} "
          f"{'resident/local':>14}")
    for n, states, local_s, resident_s in rows:
        print(f"{n:>5} {states:>11,} {local_s:>8.2f} {base_local / local_s:>7.2f}x {resident_s:>10.2f} "
              f"{base_resident / resident_s:>7.2f}x {local_s / resident_s:>13.2f}x")
    print(f"load at the end {os.getloadavg()[0]:.2f}")


if __name__ == "__main__":
    main()
