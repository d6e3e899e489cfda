"""The same exhaustive check on several engines, side by side: distinct states per second.

    python bench/engines.py [--runs 3] [--preset raft --servers 3 --max-generation 4 --max-log 2]
                            [--no-symmetry] [--local-workers 1,2] [--successors reference]
                            [--workers 1,2] [--exchange resident,files,shuffle]
                            [--skip local,spark-local,standalone,memory]

Engines: the local breadth-first engine with 1, 2, ... worker processes (`--local-workers`;
the first is the reference for the ratios; the worker counts take turns run by run); Spark on `local[2]` in this process; Spark on
a standalone cluster (a master and `--workers` one-core workers on 127.0.0.1, started
and stopped by this script, driven from a child process because a JVM holds one
Spark master; `--workers 1,2` starts one cluster per count, for the speed-up). Each engine runs the configuration `--runs` times; the table shows
the median and the ratio of its states/s to the local engine's. The Spark figures
exclude JVM and Python-worker start-up (one untimed warm-up check on a tiny
configuration runs first, every level on Spark) and, like the local engine's, trace reconstruction.
`--exchange resident,files,shuffle` gives one `local[2]` row per way a level's records reach the next
level (`spark_bfs(exchange=...)`). Under the table, per Spark row: the levels (those run on the
driver), the fixed cost per level (the mean of a tiny search's levels, all on Spark, a resident
stage's launch included, and the
intercept of seconds against transitions), the bytes the tasks send per transition, the visited
sets' bytes, the Python workers' memory growth per visited state (`spark_figures`) and the CPU
seconds of the levels' own work (the tasks, on the executors or the driver).
Every run must find the same distinct-state count, or the script fails.

CPU and the bound (local engine): per run, the CPU seconds of the search's own process
and of its workers (`os.times`, children joined by the search). CPU seconds depend far
less on the machine's load than wall seconds: the "bound" column is the speed-up the
worker count would give on free cores, the first local row's CPU over the row's CPU
(search process plus workers) spread evenly over min(workers, cores) cores. For Spark
`local[2]` rows: the driver's CPU and the JVM's with its Python daemon and workers (from
/proc), over 2 cores: what the run would reach on free cores, fixed costs aside.

Memory ("memory", one worker): the visited set's packed arrays per visited state, the
largest packed frontier, and the peak of all Python allocations during the search
(tracemalloc, which slows the run; per visited state).
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import time

ROOT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..")
sys.path.insert(0, ROOT)

from bench.bounds import add_search_arguments, bounds_of, model_of  # noqa: E402

WARM_UP = dict(preset="raft", servers=2, max_generation=2, max_log=1, max_crashes=1, network="rpc")


def run_local(args, workers: int = 1, runs: int | None = None) -> list[tuple[int, float, float, float]]:
    """(states, search seconds, CPU seconds of the search process, CPU seconds of its workers) per run."""
    from hwm.checker.engine import CheckOptions, Search

    options = CheckOptions(symmetry=not args.no_symmetry, workers=workers, successors=args.successors)
    results = []
    for _ in range(args.runs if runs is None else runs):
        search = Search(model_of(args.preset, **bounds_of(args)), options, [], args.preset)
        before = os.times()
        report = search.run()
        after = os.times()  # the pool's workers are joined by run(): their CPU is the children's
        own = after.user + after.system - before.user - before.system
        pool = max(0.0, after.children_user + after.children_system - before.children_user - before.children_system)
        # CPU seconds do not depend on the machine's load as wall seconds do: with the search
        # process's and the workers' apart, the speed-up free cores would give can be read off.
        print(f"    {workers} worker(s): backend set-up {search.setup_seconds:.2f} s (compilation or its cache), "
              f"search {report.seconds:.2f} s; CPU: search process {own:.2f} s, workers {pool:.2f} s", flush=True)
        results.append((report.states, report.seconds, own, pool))
    return results


def memory(args) -> dict:
    """Bytes per visited state: the visited set, the largest frontier, and everything Python allocated."""
    import tracemalloc

    from hwm.checker.engine import CheckOptions, Search, Visitor

    largest = [0]

    class Frontier(Visitor):
        def start(self, search):
            self.level, self.size = 0, 0

        def on_chunk(self, chunk, result):
            if chunk.depth != self.level:
                self.level, self.size = chunk.depth, 0
            self.size += chunk.new_states.nbytes() if hasattr(chunk.new_states, "nbytes") else 0
            largest[0] = max(largest[0], self.size)

    options = CheckOptions(symmetry=not args.no_symmetry, successors=args.successors)
    search = Search(model_of(args.preset, **bounds_of(args)), options, [Frontier()], args.preset)
    tracemalloc.start()
    search.run()
    _, peak = tracemalloc.get_traced_memory()
    tracemalloc.stop()
    states = len(search.visited)
    return {"states": states, "visited": search.visited.nbytes / states, "frontier": largest[0] / states,
            "peak": peak / states}


def tree_cpu(pid: int) -> float:
    """CPU seconds (user + system) of process `pid` and of its living descendants, from /proc (Linux);
    NaN elsewhere. For Spark `local[N]`: the JVM, its Python daemon and the Python workers it forked."""
    try:
        children: dict[int, list[int]] = {}
        ticks: dict[int, int] = {}
        for entry in os.listdir("/proc"):
            if not entry.isdigit():
                continue
            try:
                with open(f"/proc/{entry}/stat") as f:
                    fields = f.read().rsplit(")", 1)[1].split()
            except OSError:
                continue  # exited meanwhile
            children.setdefault(int(fields[1]), []).append(int(entry))
            ticks[int(entry)] = int(fields[11]) + int(fields[12])  # utime, stime
    except OSError:
        return float("nan")
    total, todo = 0, [pid]
    while todo:
        p = todo.pop()
        total += ticks.get(p, 0)
        todo += children.get(p, [])
    return total / os.sysconf("SC_CLK_TCK")


def run_spark(master: str, args, exchange: str) -> list[tuple[int, float, dict]]:
    """(states, search seconds, `spark_figures`) per run; the figures' "cpu" is (driver, JVM tree) CPU seconds
    (the JVM tree: the JVM, its Python daemon and workers; NaN for a cluster's executors elsewhere)."""
    from hwm.checker.spark_engine import spark_bfs
    from hwm.checker.spark_session import get_spark

    spark = get_spark(master)
    warm = dict(WARM_UP)
    # Every level on Spark (`driver_level=0`): the executors start their Python workers and load the kernels.
    spark_bfs(model_of(warm.pop("preset"), **warm), "warm-up", spark=spark, successors=args.successors,
              driver_level=0, exchange=exchange)
    fixed: list[float] = []  # seconds of levels with almost no work: the same tiny search, every level on Spark
    for _ in range(args.runs):
        stats = {}
        spark_bfs(model_of(WARM_UP["preset"], **{k: v for k, v in WARM_UP.items() if k != "preset"}), "fixed cost",
                  spark=spark, successors=args.successors, driver_level=0, exchange=exchange, stats=stats)
        # Every small level, the first too: a resident stage's launch is paid there, its meetings on the others.
        fixed += [lv["seconds"] for lv in stats["levels"] if lv["transitions"] < SMALL_LEVEL]
    runs = []
    jvm = spark.sparkContext._gateway.proc.pid if master.startswith("local") else None
    for _ in range(args.runs):
        stats: dict = {}
        before, jvm_before = os.times(), tree_cpu(jvm) if jvm else float("nan")
        report = spark_bfs(model_of(args.preset, **bounds_of(args)), args.preset, symmetry=not args.no_symmetry,
                           spark=spark, successors=args.successors, stats=stats, exchange=exchange)
        after, jvm_after = os.times(), tree_cpu(jvm) if jvm else float("nan")
        figures = spark_figures(report, stats)
        figures["fixed_small"], figures["small_levels"] = statistics.fmean(fixed), len(fixed)
        figures["cpu"] = (after.user + after.system - before.user - before.system, jvm_after - jvm_before)
        runs.append((report.states, report.seconds, figures))
    return runs


SMALL_LEVEL = 2_000  # transitions: a level this small is almost all fixed cost


def spark_figures(report, stats: dict) -> dict:
    """Per run: the fixed cost per level, bytes sent between partitions, the executors' memory.

    Fixed cost: over the levels run on Spark, the median seconds of those with fewer than SMALL_LEVEL
    transitions (their work is a few milliseconds; `run_spark` measures them on a tiny search whose levels
    all run on Spark, since a search's own small levels run on the driver), and the intercept of
    seconds ~ transitions.
    Bytes: the payload of the records the tasks send on (before Spark's pickling and compression),
    candidates alone and all records (the visited sets and the keys travel too), per transition; and the
    bytes of files written (the files and resident exchanges; resident tasks write only what crosses to
    another task, not counting each stage's hand-over of its visited sets).
    Memory: the visited sets' arrays per visited state, and the growth of the Python workers' peak
    resident memory over the run (their sum, per visited state).
    """
    import numpy as np

    on_spark = [lv for lv in stats["levels"] if lv["on_spark"]]  # the first levels run on the driver
    levels = on_spark[1:]  # the first Spark level also moves the driver's records to the executors
    small = [lv["seconds"] for lv in levels if lv["transitions"] < SMALL_LEVEL]
    seconds = np.array([lv["seconds"] for lv in levels])
    work = np.array([lv["transitions"] for lv in levels], dtype=float)
    intercept = float(np.polyfit(work, seconds, 1)[1]) if len(levels) > 3 else float("nan")
    transitions = max(1, report.transitions)
    first, last = on_spark[0]["workers"] if on_spark else {}, {}
    for lv in on_spark:
        last.update(lv["workers"])
    growth = sum(rss - first.get(pid, min(first.values())) for pid, rss in last.items()) if first else 0
    levels = stats["levels"]
    return {"levels": len(levels), "driver_levels": len(levels) - len(on_spark),
            "fixed_small": statistics.median(small) if small else float("nan"),
            "small_levels": len(small), "fixed_intercept": intercept,
            "candidate_bytes": sum(lv["candidate_bytes"] for lv in levels) / transitions,
            "record_bytes": sum(lv["record_bytes"] for lv in levels) / transitions,
            "written_bytes": sum(lv["written_bytes"] for lv in levels) / transitions,
            "visited_bytes": levels[-1]["visited_bytes"] / report.states,
            "worker_growth": growth / report.states, "workers": len(last),
            "tasks": statistics.median(lv["task_seconds"] for lv in on_spark) if on_spark else float("nan"),
            "task_cpu": sum(lv["task_cpu"] for lv in levels)}


def run_standalone(args, workers: int) -> list[tuple[int, float, dict]]:
    from hwm.checker.spark_session import standalone_cluster

    child = [sys.executable, os.path.abspath(__file__), "--driver-for", "MASTER", "--runs", str(args.runs),
             "--preset", args.preset, "--servers", str(args.servers), "--max-generation", str(args.max_generation),
             "--max-log", str(args.max_log), "--max-crashes", str(args.max_crashes), "--network", args.network,
             "--successors", args.successors, "--exchange", args.exchange.split(",")[0]]
    if args.no_symmetry:
        child.append("--no-symmetry")
    env = dict(os.environ, PYSPARK_PYTHON=sys.executable, SPARK_LOCAL_IP="127.0.0.1",
               PYTHONPATH=os.pathsep.join(filter(None, [os.path.abspath(ROOT), os.environ.get("PYTHONPATH")])))
    with standalone_cluster(workers=workers, cores=1, memory="1g") as master:
        child[child.index("MASTER")] = master
        done = subprocess.run(child, env=env, capture_output=True, text=True, timeout=3600)
    if done.returncode != 0:
        sys.exit(f"the standalone driver failed:\n{done.stderr[-3000:]}")
    return [tuple(run) for run in json.loads(done.stdout.strip().splitlines()[-1])]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--runs", type=int, default=3)
    add_search_arguments(parser, servers=3, max_log=2)
    parser.add_argument("--workers", default="2", help="standalone clusters' workers, one core each, e.g. 1,2")
    parser.add_argument("--local-workers", default="1,2", help="worker counts of the local engine, e.g. 1,2,4")
    parser.add_argument("--successors", default="reference", help="successor backend (local engine and Spark executors)")
    parser.add_argument("--exchange", default="resident",
                        help="Spark's exchanges between levels, of resident, files and shuffle, e.g. "
                             "resident,files (one local[2] row each; the standalone cluster, on this machine, "
                             "uses the first)")
    parser.add_argument("--skip", default="", help="comma-separated: local, spark-local, standalone, memory")
    parser.add_argument("--driver-for", help=argparse.SUPPRESS)  # the standalone child process
    args = parser.parse_args()
    if args.runs < 1:
        parser.error("--runs must be at least 1")

    if args.driver_for:
        print(json.dumps(run_spark(args.driver_for, args, args.exchange)))
        return

    skip = {s for s in args.skip.split(",") if s}
    local_workers = [int(w) for w in args.local_workers.split(",") if w]
    if not local_workers or min(local_workers) < 1:
        parser.error("--local-workers must list worker counts of at least 1")
    # The local engine's worker counts take turns, run by run, so that a burst of other load on a
    # shared machine falls on every worker count alike rather than on one row.
    local_runs: dict[int, list] = {w: [] for w in local_workers}
    engines = [(f"local, {w} worker{'s' if w > 1 else ''} ({args.successors})", lambda a, w=w: local_runs[w])
               for w in local_workers]
    cores = os.cpu_count() or 1
    standalone_workers = [int(w) for w in args.workers.split(",") if w]
    exchanges = [e for e in args.exchange.split(",") if e]
    if not exchanges or set(exchanges) - {"resident", "files", "shuffle"}:
        parser.error("--exchange lists some of resident, files and shuffle")
    engines += [(f"spark local[2] ({args.successors}, {e})", lambda a, e=e: run_spark("local[2]", a, e))
                for e in exchanges]
    engines += [(f"spark standalone ({w}x1 core, {args.successors}, {exchanges[0]})",
                 lambda a, w=w: run_standalone(a, w))
                for w in standalone_workers]
    keys = ["local"] * len(local_workers) + ["spark-local"] * len(exchanges) + ["standalone"] * len(standalone_workers)
    config = " ".join(f"{k}={v}" for k, v in bounds_of(args).items())
    print(f"{args.preset} {config} symmetry={'off' if args.no_symmetry else 'on'}; median of {args.runs} runs; "
          f"{os.cpu_count()} cores; uptime: {uptime()}", flush=True)
    if "local" not in skip:
        for _ in range(args.runs):
            for w in local_workers:
                local_runs[w] += run_local(args, w, runs=1)
    rows = []
    spark_rows = []
    states_seen = set()
    for key, (name, runner) in zip(keys, engines):
        if key in skip:
            continue
        started = time.perf_counter()
        runs = runner(args)
        states_seen.update(run[0] for run in runs)
        seconds = statistics.median(run[1] for run in runs)
        # Local runs: the median CPU of the search process and of the workers, and the cores they can use.
        cpu = (statistics.median(run[2] for run in runs), statistics.median(run[3] for run in runs),
               min(local_workers[len(rows)], cores)) if key == "local" else None  # local rows come first
        if key == "spark-local":  # the driver, and the JVM with its Python workers, on local[2]'s cores
            cpu = (statistics.median(run[2]["cpu"][0] for run in runs),
                   statistics.median(run[2]["cpu"][1] for run in runs), min(2, cores))
        rows.append((name, runs[0][0], seconds, runs[0][0] / seconds, cpu))
        took = "" if key == "local" else f" ({time.perf_counter() - started:.0f} s wall, start-up included)"
        print(f"  {name}: {[round(run[1], 2) for run in runs]} s per run{took}; uptime: {uptime()}", flush=True)
        if key != "local":
            spark_rows.append((name, [{k: v for k, v in run[2].items() if k != "cpu"} for run in runs]))
    if len(states_seen) != 1:
        sys.exit(f"engines disagree on the distinct-state count: {sorted(states_seen)}")
    reference = rows[0][3] if rows and rows[0][0].startswith("local") else None
    reference_cpu = sum(rows[0][4][:2]) if reference else None
    print()
    print(f"{'engine':34} {'states':>9} {'median s':>9} {'states/s':>9} {'vs first':>9} "
          f"{'CPU s (search + workers)':>25} {'bound':>6}")
    print(f"{'':34} {'':>9} {'':>9} {'':>9} {'':>9} {'(spark: driver + JVM tree)':>25}")
    for name, states, seconds, rate, cpu in rows:
        ratio = f"{rate / reference:.2f}x" if reference else "-"
        used, bound = "-", "-"
        if cpu is not None:
            own, pool, usable = cpu
            used = f"{own:.2f} + {pool:.2f}"
            bound = f"{reference_cpu / ((own + pool) / usable):.2f}x" if reference_cpu else "-"
        print(f"{name:34} {states:>9,} {seconds:>9.2f} {rate:>9,.0f} {ratio:>9} {used:>25} {bound:>6}")
    standalone = [(w, row[2]) for w, row in zip(standalone_workers, [r for r in rows if "standalone" in r[0]])]
    if len(standalone) > 1:  # the cluster's speed-up, from its fewest workers to each larger count
        (fewest, base), *more = standalone
        print("standalone speed-up: " + ", ".join(f"{fewest} -> {w} workers {base / s:.2f}x" for w, s in more))
    if spark_rows:
        print()
        print(f"{'spark (medians of the runs)':40} {'levels (driver)':>15} {'fixed s/level: small, fit':>26} {'task s':>7} "
              f"{'B sent/transition: cand., all, written':>39} {'visited B/state':>15} {'workers: mem B/state':>21} "
              f"{'levels CPU s':>12}")
    for name, figures in spark_rows:
        med = {k: statistics.median(f[k] for f in figures) for k in figures[0]}
        fixed = f"{med['fixed_small']:.3f} ({med['small_levels']:.0f}), {med['fixed_intercept']:.3f}"
        sent = f"{med['candidate_bytes']:.1f}, {med['record_bytes']:.1f}, {med['written_bytes']:.1f}"
        memory_text = f"{med['workers']:.0f}: {med['worker_growth']:.1f}"
        levels = f"{med['levels']:.0f} ({med['driver_levels']:.0f})"
        print(f"{name:40} {levels:>15} {fixed:>26} {med['tasks']:>7.3f} {sent:>39} "
              f"{med['visited_bytes']:>15.1f} {memory_text:>21} {med['task_cpu']:>12.2f}")
    if "memory" not in skip:
        m = memory(args)
        print(f"\nmemory per visited state ({m['states']:,} states, one worker): visited set {m['visited']:.1f} B, "
              f"largest packed frontier {m['frontier']:.1f} B, peak of all Python allocations {m['peak']:.0f} B")
    print(f"uptime at the end: {uptime()}")


def uptime() -> str:
    try:
        return subprocess.run(["uptime"], capture_output=True, text=True, timeout=10).stdout.strip()
    except OSError:
        return f"load average {os.getloadavg()[0]:.2f}"


if __name__ == "__main__":
    main()
