"""The Spark engine: the local engine's breadth-first search, level by level on a cluster.

The state space is cut into `partitions` by fingerprint (`fp % partitions`). Each level
is one Spark stage of one task per partition (`checker.spark_levels.advance`): the task
gets its partition's visited set (sorted fingerprints with parent links), the candidate
successors every partition sent it and every partition's keys of the level above, all as
a few large binary records; it deduplicates, drops the visited candidates, expands the
rest with the successor backend the local engine calls (`checker.backend`;
`successors="fast"` for the compiled one, whose batches are uint8 rows end to end),
checks the properties (the backend's compiled checks where it has them) and sends the
successors on, one block per destination partition. The blocks travel one of three ways
(`exchange`): in resident stages (the default on `local[N]`: `_resident_task`), one
gang-scheduled stage of one task per slot runs many levels, each task keeping its
partitions' visited sets in memory and sending the others' blocks as files, the tasks
meeting after each level through the same directory; as files in a directory every
executor sees with a stage per level (`checker.spark_files`; no byte through the JVM);
or through Spark's shuffle (`RDD.partitionBy`; any cluster), where the driver runs each
level's map stage alone (`submitMapStage`: the next level reads its output where it
lies). The driver hears each task's `Summary` (new states, transitions, bounds hit, the
first discovery of each property) and never sees a state of a level run on Spark. The
first levels, small, run on the driver itself (`driver_level`), and with a stage per
level the last ones too.

Ties are broken as the local engine breaks them (`checker.engine`'s canonical order:
levels, then states in discovery order, then each state's transitions in action order):
each state carries a key that orders its level that way (`checker.spark_levels`), a
state reached several times keeps its smallest key (the local engine's parent and,
under symmetry, its member of the class), and per property the driver keeps the
discovery with the smallest key of the first level that has one. Traces are rebuilt from
parent links looked up on the partitions that hold them.

With the shuffle, every `checkpoint_every` levels run on Spark the level's records are reliably checkpointed: that cuts
the lineage (the older shuffles can be cleaned up) and survives a lost executor; between
checkpoints a lost executor's map output is recomputed from the lineage. A resident stage
runs at most `checkpoint_every` levels and leaves its records in files; a lost executor
fails it, and the driver launches it again from its first level (`_run_resident`).
docs/scaling.md has the costs.

The result equals the local engine's: distinct states, transitions, depth, bounds hit,
verdicts and the shortest traces themselves, step for step, for any partitioning.
"""

from __future__ import annotations

import os
import shutil
import tempfile
import time
from typing import Iterable

from hwm.model.actions import Model
import numpy as np

from hwm.checker.backend import make_backend
from hwm.checker.report import Discovery, ProgressFn, Report, Tracker, finish_report, path_to, used_symmetry
from hwm.checker.spark_session import get_spark, on_this_machine, ship_packages, ship_variant, variant_failure
from hwm.properties.catalogue import Property

__all__ = ["spark_bfs"]

DRIVER_LEVEL = 100_000  # candidate successors: a level with fewer runs on the driver (`spark_bfs`)
RESIDENT_DRIVER_LEVEL = 2_000  # the same with resident stages, whose levels cost milliseconds more than the work
DRIVER_VISITED = 10_000_000  # visited states (18 B each) the driver may take back for the last, small levels

_MASK = (1 << 64) - 1
_SIGN = 1 << 63


def to_signed(fp: int) -> int:
    """An unsigned 64-bit fingerprint as Spark's LongType (two's complement)."""
    return fp - (1 << 64) if fp >= _SIGN else fp


def to_unsigned(value: int) -> int:
    return value & _MASK


# ------------------------------------------------------------- the search
# A level's records travel as (partition, record) pairs through `RDD.partitionBy`, a few
# large records per partition (`checker.spark_levels`): the partition's visited set, the
# level above's keys from every partition, and one block of candidate successors from each
# partition that has some. Python objects per state never cross the JVM boundary.


def _partition_of(partition: int) -> int:
    """The records' keys are their partitions already."""
    return partition


def _records(records: list) -> list:
    """`flatMap`'s identity over a partition's list of records: a module-level function, which the
    executors import, where a lambda would be pickled with the closure of `spark_bfs`."""
    return records


class _Summaries:
    """Accumulates the tasks' `Summary` records (pyspark's AccumulatorParam, duck-typed)."""

    def zero(self, value):
        return []

    def addInPlace(self, a, b):
        a.extend(b)
        return a


EXCHANGES = ("resident", "files", "shuffle")  # how a level's records reach the next level (`spark_bfs`)
FILE_EXCHANGES = ("resident", "files")  # the ones through files in a directory every executor sees
FILES = "files"  # `_search`'s `current` when the level's records are the file exchange's files
_backends: dict = {}  # per executor process: the backend of the last (model, symmetry, name)


def _executor_backend(model: Model, symmetry: bool, successors: str):
    """The backend for this model, built once per Python worker (the kernels load once)."""
    key = (type(model), model.protocol, model.config, symmetry, successors)
    if key not in _backends:
        _backends.clear()
        _backends[key] = make_backend(successors, model, symmetry)
    return _backends[key]


def _task(shared, level, summaries):
    """The function one level's tasks run on their partition's records."""
    from hwm.checker.spark_levels import advance

    def run(partition, records):
        model, symmetry, successors, properties = shared.value if hasattr(shared, "value") else shared
        backend = _executor_backend(model, symmetry, successors)
        out, summary = advance(partition, (record for _, record in records), backend,
                               {p.name: p for p in properties}, level)
        summaries.add([summary])
        return out
    return run


def _file_task(shared, level, directory: str):
    """The function one level's tasks run with the file exchange (`checker.spark_files`): their records are
    the files addressed to their partition; what they send on, files for the next level."""
    from hwm.checker.spark_files import read_records, write_records
    from hwm.checker.spark_levels import advance

    def run(partition, _):
        model, symmetry, successors, properties = shared.value if hasattr(shared, "value") else shared
        backend = _executor_backend(model, symmetry, successors)
        out, summary = advance(partition, read_records(directory, level.level, partition), backend,
                               {p.name: p for p in properties}, level)
        written = write_records(directory, level.level + 1, partition, out)
        return [summary._replace(written_bytes=written)]
    return run


def _slots(sc) -> int:
    """How many tasks the cluster runs at once now (a gang-scheduled stage may not have more); the default
    parallelism is no measure of it: a standalone cluster of one core says 2."""
    jsc = sc._jsc.sc()
    return max(1, jsc.maxNumConcurrentTasks(jsc.resourceProfileManager().defaultResourceProfile()))


def _goes_on(new: int, expand: bool) -> bool:
    """Whether the search goes on below a level with `new` states (the driver's decision, and each resident
    task's): not below an empty level, nor below the depth limit (`expand` False)."""
    return new > 0 and expand


def _back(done: Iterable, driver_level: int) -> bool:
    """Whether the level after these summaries' comes back to the driver: few candidates, and visited sets
    small enough to hold there."""
    done = list(done)
    return sum(s.candidates for s in done) <= driver_level and sum(s.visited for s in done) <= DRIVER_VISITED


def _resident_task(shared, first, directory: str, launch: str, tasks: int, max_depth: int | None, most: int):
    """The function a resident stage's tasks run (`exchange="resident"`): task i owns the partitions
    p with p % tasks == i and runs their levels from `first` on, at most `most` of them, until one ends the
    search (the decision the driver takes too). The levels never come back to the driver: a level costs a
    resident stage a meeting of milliseconds, less than the driver would spend on all but the smallest.

    A partition's visited set, and what the task's partitions send each other, stay in memory; the
    records for other tasks' partitions go through `checker.spark_files`, and the tasks meet after each
    level there (`gather`). The last level's records all go to files, where the driver or the next stage
    reads them."""
    from hwm.checker.spark_files import drop_level, gather, read_records, start_task, write_records
    from hwm.checker.spark_levels import Level, advance

    def run(task, _):
        start_task(directory, launch, task)
        model, symmetry, successors, properties = shared.value if hasattr(shared, "value") else shared
        backend = _executor_backend(model, symmetry, successors)
        props = {p.name: p for p in properties}
        mine = range(task, first.partitions, tasks)
        inbox: dict[int, list] = {p: [] for p in mine}
        spec = first
        mark = time.perf_counter()
        for run_level in range(most):
            kept: dict[int, list] = {}  # sender: its (destination, record) pairs for this task's partitions
            summaries = []
            for p in mine:
                # A stage's first level reads every partition's visited set from the files: a directory the
                # tasks do not share fails there, by name; later levels may have nothing from the others.
                records = inbox[p] + list(read_records(directory, spec.level, p, required=not run_level))
                out, summary = advance(p, records, backend, props, spec)
                # The bytes written count what crosses to other tasks; a stage's last level also writes
                # what it kept (its visited sets, once a stage), after its summary has gone.
                written = write_records(directory, spec.level + 1, p, [(d, r) for d, r in out if d % tasks != task])
                kept[p] = [(d, r) for d, r in out if d % tasks == task]
                summaries.append(summary._replace(written_bytes=written))
            everyone = gather(directory, launch, spec.level, task, tasks, (summaries, time.perf_counter() - mark))
            mark = time.perf_counter()
            if task == 0 and run_level:  # every task has read this level; the first stays for a rerun stage
                drop_level(directory, spec.level)
            done = [s for ones, _ in everyone for s in ones]
            if not _goes_on(sum(s.new for s in done), spec.expand) or run_level == most - 1:
                for p in mine:
                    write_records(directory, spec.level + 1, p, kept[p])
                return []
            inbox = {p: [] for p in mine}
            for pairs in kept.values():
                for d, r in pairs:
                    inbox[d].append(r)
            found = {d[0] for s in done for d in s.discoveries}
            following = spec.level + 1
            spec = Level(following, spec.partitions, tuple(n for n in spec.state_props if n not in found),
                         tuple(n for n in spec.step_props if n not in found),
                         max_depth is None or following < max_depth, spec.count_states)
        return []
    return run


RESIDENT_LAUNCHES = 2  # launches of one resident stage before its failure ends the search


def _run_resident(sc, shared, first, directory: str, tasks: int, max_depth: int | None, most: int,
                  account) -> tuple[int, bool, int]:
    """Run levels from `first` in one resident stage (`_resident_task`), passing each finished level to
    `account(level, expand, done, seconds, on_spark)` as the tasks publish it; (the last level run, whether
    the search goes on below it, the launches it took).

    A failed stage is launched again from `first` (whose files stay until the stage is done), the deeper
    levels it wrote dropped; the levels already taken in are not taken in twice (they come out the same)."""
    import threading
    import uuid

    from hwm.checker.spark_files import drop_levels_after, gathered

    outcome: dict[int, bool] = {}  # the levels passed to `account`, and whether the search went on below
    for launches in range(1, RESIDENT_LAUNCHES + 1):
        launch = uuid.uuid4().hex
        failure: list[BaseException] = []

        def stage():
            try:
                sc.parallelize(range(tasks), tasks).barrier().mapPartitionsWithIndex(
                    _resident_task(shared, first, directory, launch, tasks, max_depth, most)).collect()
            except BaseException as e:  # noqa: BLE001 - raised again, or the stage launched again, by the driver
                failure.append(e)

        launched = time.perf_counter()
        thread = threading.Thread(target=stage, name="hwm-resident-stage", daemon=True)
        thread.start()
        level, ended = first.level, None
        while ended is None:
            alive = thread.is_alive()
            everyone = gathered(directory, launch, level, tasks)
            if everyone is None:
                if not alive:
                    break
                thread.join(0.01)
                continue
            done = {s.partition: s for ones, _ in everyone for s in ones}
            if level not in outcome:
                # A level's wall is its slowest task's; the first one's the driver's, from the stage's launch.
                seconds = time.perf_counter() - launched if level == first.level else max(w for _, w in everyone)
                outcome[level] = account(level, max_depth is None or level < max_depth, done, seconds, True)
            if not outcome[level] or level == first.level + most - 1:
                ended = (level, outcome[level], launches)
            level += 1
        thread.join()
        if not failure:
            if ended is None:
                raise RuntimeError(f"the resident stage from level {first.level} ended before level {level}")
            return ended
        if launches == RESIDENT_LAUNCHES:
            raise failure[0]
        drop_levels_after(directory, first.level)  # what the failed stage wrote; the next launch writes it again
    raise AssertionError("unreachable")


def _share(sc, value):
    """A broadcast of the search's constants (model, properties), shipped once per executor, not per level;
    the value itself (pickled with each level's job) when plain pickle cannot carry it."""
    import pickle

    try:
        pickle.dumps(value, protocol=pickle.HIGHEST_PROTOCOL)
    except Exception:  # noqa: BLE001 - e.g. a property defined in a function: cloudpickle takes it
        return value
    return sc.broadcast(value)


def spark_bfs(model: Model, protocol_name: str, *, symmetry: bool = True, master: str = "local[*]",
              progress: ProgressFn | None = None, checkpoint_every: int = 16, spark=None,
              properties: Iterable[Property] | None = None, partitions: int | None = None,
              max_depth: int | None = None, checkpoint_dir: str | None = None,
              successors: str = "reference", stats: dict | None = None, count_states: bool = False,
              driver_level: int | None = None, exchange: str | None = None) -> Report:
    """Breadth-first search of the whole reachable state space on Spark (engine "spark").

    `spark` is an existing SparkSession (else `get_spark(master)`); `partitions` the
    number of fingerprint partitions (default: the default parallelism, at least 2);
    `checkpoint_every` how many levels run on Spark apart the level's records are reliably checkpointed
    into `checkpoint_dir` (the others are local checkpoints), or how many levels one resident stage runs
    at most; `checkpoint_dir` must be shared by all
    executors on a multi-machine cluster (default: a temporary directory, right for local
    and single-machine masters); `successors` the successor backend of the executors
    (`checker.backend`). Levels reached by at most `driver_level` candidate successors (the first
    few, and with a stage per level the last few once the visited sets are small enough to bring back:
    `DRIVER_VISITED`) run on the driver, in this process: a Spark stage would cost more (default
    `DRIVER_LEVEL`, `RESIDENT_DRIVER_LEVEL` for resident stages). `stats`, when given, is filled with
    per-level figures (seconds, transitions, bytes sent between partitions, visited-set bytes, the Python
    workers' peak memory); `count_states` counts the model's state objects the executors build (a test of
    the batch-only path).

    `exchange` is how a level's records reach the next level's tasks: "resident" (one gang-scheduled
    stage runs many levels; each task keeps its partitions' visited sets in memory and meets the others
    after each level through files: `checker.spark_files`), "files" (a stage per level; the records,
    visited sets too, as files between them) or "shuffle" (Spark's shuffle through the JVM, checkpointed
    every `checkpoint_every` levels; any cluster). The first two need a directory under `checkpoint_dir`
    that every executor and the driver see. Default: "resident" on `local[N]`, "shuffle" elsewhere.
    """
    if checkpoint_every < 1:
        raise ValueError(f"checkpoint_every must be at least 1, not {checkpoint_every}")
    if partitions is not None and partitions < 1:
        raise ValueError(f"partitions must be at least 1, not {partitions}")
    if exchange not in (None, *EXCHANGES):
        raise ValueError(f"exchange must be one of {', '.join(map(repr, EXCHANGES))}, not {exchange!r}")
    if exchange is None:
        exchange = "resident" if on_this_machine(spark.sparkContext.master if spark else master) else "shuffle"
    if exchange in FILE_EXCHANGES and checkpoint_dir is not None and "://" in checkpoint_dir:
        raise ValueError(f"exchange={exchange!r} needs a directory path every executor sees, not {checkpoint_dir}: "
                         f"give a shared mount as checkpoint_dir, or exchange='shuffle'")
    if driver_level is None:
        driver_level = RESIDENT_DRIVER_LEVEL if exchange == "resident" else DRIVER_LEVEL
    if spark is None:
        spark = get_spark(master)
    sc = spark.sparkContext
    if exchange == "resident" and sc.getConf().get("spark.dynamicAllocation.enabled", "false").lower() == "true":
        # A barrier stage needs its executors for its whole life; Spark refuses one under dynamic allocation.
        raise ValueError("exchange='resident' runs gang-scheduled stages, which Spark refuses under dynamic "
                         "allocation: set spark.dynamicAllocation.enabled=false, or use exchange='shuffle'")
    ship_packages(spark)
    ship_variant(spark, model.protocol)
    partitions = partitions or max(2, sc.defaultParallelism)
    own_dir = None
    if checkpoint_dir is None or "://" not in checkpoint_dir:  # a folder of this search's own, removed after it
        if checkpoint_dir is not None:
            os.makedirs(checkpoint_dir, exist_ok=True)
        own_dir = checkpoint_dir = tempfile.mkdtemp(prefix="hwm-spark-checkpoints-", dir=checkpoint_dir)
    sc.setCheckpointDir(checkpoint_dir)
    exchange_dir = tempfile.mkdtemp(prefix="hwm-exchange-", dir=checkpoint_dir) if exchange in FILE_EXCHANGES else None
    try:
        return _search(sc, model, protocol_name, symmetry, progress, checkpoint_every,
                       model.properties if properties is None else properties,
                       partitions, max_depth, successors, stats, count_states, driver_level, exchange,
                       exchange_dir)
    except Exception as e:  # noqa: BLE001 - a variant's error on an executor reaches here wrapped by Spark
        own = variant_failure(e)
        if own is None or own is e:
            raise
        raise own from None
    finally:
        if exchange_dir is not None:
            shutil.rmtree(exchange_dir, ignore_errors=True)
        if own_dir is not None:
            shutil.rmtree(own_dir, ignore_errors=True)


def _search(sc, model: Model, protocol_name: str, symmetry: bool, progress: ProgressFn | None,
            checkpoint_every: int, properties: Iterable[Property], partitions: int,
            max_depth: int | None, successors: str, stats: dict | None, count_states: bool,
            driver_level: int, exchange: str, exchange_dir: str | None) -> Report:
    """`exchange_dir` is the directory of the files between levels (None with Spark's shuffle)."""
    from pyspark import StorageLevel

    from hwm.checker.spark_files import drop_level, read_records, write_records
    from hwm.checker.spark_levels import Candidates, Level, Visited, advance, as_rows

    started = time.perf_counter()
    report = Report(protocol_name, model.config.to_mapping(), "spark", used_symmetry(model, symmetry),
                    successors=successors)
    tracker = Tracker(properties)
    backend = make_backend(successors, model, symmetry)  # here to fail early if it cannot run this model
    report.setup_seconds = time.perf_counter() - started  # the driver's compile or cache load
    started = time.perf_counter()
    init = backend.initial()
    init_fp = int(backend.fingerprints(init)[0])
    shared = _share(sc, (model, symmetry, successors, tracker.all))
    summaries = sc.accumulator([], _Summaries())
    by_name = {p.name: p for p in tracker.all}
    # Level 0's records: every partition's empty visited set and the initial state, sent to its partition.
    first = Candidates(as_rows(backend, init), np.array([init_fp], np.uint64), np.zeros(1, np.uint64),
                       np.zeros(1, np.int64), np.zeros(1, np.int64))
    inbox: dict[int, list] | None = {p: [Visited.empty()] for p in range(partitions)}  # levels on the driver
    inbox[init_fp % partitions].append(first)
    current = None  # the level's records on Spark (an RDD, or FILES), once the levels are too large for the driver
    back = False  # whether the next level's records come back to the driver
    on_spark = 0  # levels run on Spark so far
    states, transitions, depth, level = 0, 0, 0, 0
    bounds_hit: set[str] = set()
    # Resident tasks (`_run_resident`): as many as the cluster runs at once, each owning every tasks-th partition.
    resident = min(partitions, _slots(sc)) if exchange == "resident" else 0
    resident_launches = 0
    per_level: list[dict] = []
    anchor = None  # the level last checkpointed (cached until the next one is)

    def account(level: int, expand: bool, done: dict, seconds: float, on_spark: bool) -> bool:
        """Take in one finished level's summaries; whether the search goes on below it."""
        nonlocal states, transitions, depth
        new = sum(s.new for s in done.values())
        transitions += sum(s.transitions for s in done.values())
        for s in done.values():
            bounds_hit.update(s.bounds_hit)
        _record_discoveries(tracker, by_name, done.values())
        if stats is not None:
            per_level.append(_level_figures(sc, level, seconds, done.values(), on_spark))
        if new:
            states += new
            depth = level
            if progress is not None and level:
                elapsed = time.perf_counter() - started
                progress({"depth": depth, "states": states, "frontier": new,
                          "states_per_second": states / elapsed if elapsed > 0 else float("inf"), "elapsed": elapsed})
            report.complete = report.complete and expand
        return _goes_on(new, expand)

    while True:
        expand = max_depth is None or level < max_depth
        spec = Level(level, partitions, tuple(p.name for p in tracker.state_props),
                     tuple(p.name for p in tracker.step_props), expand, count_states)
        level_started = time.perf_counter()
        if current is not None and back:
            # The last levels are small again: their records come back to the driver (one job reads the
            # shuffle), which runs the rest as it ran the first levels, without a Spark stage per level.
            inbox = {p: [] for p in range(partitions)}
            if current is FILES:
                for p in range(partitions):
                    inbox[p] = list(read_records(exchange_dir, level, p))
                drop_level(exchange_dir, level)
            else:
                for p, record in current.collect():
                    inbox[p].append(record)
            current = None
        if inbox is not None and _candidates(inbox) <= driver_level:
            # A small level costs less here than a Spark stage: the same task, in this process.
            outbox: dict[int, list] = {p: [] for p in range(partitions)}
            done = {}
            for p in range(partitions):
                out, done[p] = advance(p, inbox[p], backend, by_name, spec)
                for destination, record in out:
                    outbox[destination].append(record)
            inbox = outbox
        elif exchange_dir is not None:
            if current is None:  # the hand-over: the driver's records become the level's files
                for p in range(partitions):
                    write_records(exchange_dir, level, "driver", [(p, r) for r in inbox[p]])
                inbox, current = None, FILES
            if resident:
                # One stage runs levels until one of them ends the search or is small enough to come back.
                last, goes_on, launches = _run_resident(sc, shared, spec, exchange_dir, resident, max_depth,
                                                        checkpoint_every, account)
                resident_launches += launches
                drop_level(exchange_dir, level)  # the stage's first level: kept until now for a rerun stage
                if not goes_on:
                    level = last
                    break
                level = last + 1
                continue
            # One stage, no shuffle: each task reads its partition's files and writes the next level's.
            results = sc.parallelize(range(partitions), partitions).mapPartitionsWithIndex(
                _file_task(shared, spec, exchange_dir)).collect()
            drop_level(exchange_dir, level)  # every task is done with them
            done = {s.partition: s for s in results}
            back = _back(done.values(), driver_level)
        else:
            if current is None:
                # Slice p of the list is partition p's records: no shuffle to put them in place.
                current = sc.parallelize([[(p, r) for r in inbox[p]] for p in range(partitions)],
                                         partitions).flatMap(_records)
                inbox = None
            following = current.mapPartitionsWithIndex(_task(shared, spec, summaries)).partitionBy(
                partitions, _partition_of)
            summaries.value = []
            on_spark += 1
            if on_spark % checkpoint_every == 0:  # the lineage grows by a stage per level run on Spark
                # A reliable copy of the level's records (in `checkpoint_dir`) cuts the lineage, so the
                # shuffles of the levels above can be cleaned up, and survives a lost executor.
                following.persist(StorageLevel.MEMORY_AND_DISK)  # else writing the copy would run the level again
                following.checkpoint()
                following._jrdd.count()
                if anchor is not None:
                    anchor.unpersist()
                anchor = following
                sc._jvm.System.gc()  # the driver's cleaner removes shuffles only once their objects are collected
            else:
                _run_map_stage(sc, following)
            done = {s.partition: s for s in summaries.value}  # a task run twice reports twice
            if len(done) != partitions:
                raise RuntimeError(f"level {level}: {len(done)} of {partitions} partitions reported")
            current = following
            back = _back(done.values(), driver_level)
        if not account(level, expand, done, time.perf_counter() - level_started, current is not None):
            break
        level += 1
    report.states = states
    report.transitions = transitions
    report.depth = depth
    report.bounds_hit = bounds_hit
    report.seconds = time.perf_counter() - started
    if stats is not None:
        stats.update(partitions=partitions, levels=per_level, resident_tasks=resident,
                     resident_launches=resident_launches,
                     states_built=sum(row["states_built"] for row in per_level))
    if current is None:  # the search ended on the driver
        def lookup(fps):
            found = {}
            for records in inbox.values():
                for record in records:
                    if isinstance(record, Visited):
                        found.update(record.lookup(fps))
            return found
    elif current is FILES:  # the last level's tasks wrote the visited sets for the level below it
        def lookup(fps):
            found = {}
            holders = sorted({fp % partitions for fp in fps})
            for part in sc.parallelize(holders, len(holders)).map(
                    _file_lookup(exchange_dir, level + 1, frozenset(fps))).collect():
                found.update(part)
            return found
    else:
        def lookup(fps):
            found = {}
            for part in sc.runJob(current, _lookup(frozenset(fps)), sorted({fp % partitions for fp in fps})):
                found.update(part)
            return found
    parents = _parent_chains(lookup, tracker, init_fp)
    if anchor is not None:
        anchor.unpersist()
    return finish_report(report, model, tracker, lambda fp: path_to(parents, fp), symmetry)


def _run_map_stage(sc, shuffled) -> None:
    """Run the tasks that write `shuffled`'s input (one level), and no more: the next level reads their
    output where it lies. One stage per level: a job that counted or cached the records would add one."""
    values = shuffled._jrdd.rdd()  # pyspark's partitionBy: the values of a JVM ShuffledRDD
    dependency = values.dependencies().head().rdd().dependencies().head()
    sc._jsc.sc().submitMapStage(dependency).get()


def _candidates(inbox: dict[int, list]) -> int:
    from hwm.checker.spark_levels import Candidates

    return sum(len(r.fps) for records in inbox.values() for r in records if isinstance(r, Candidates))


def _level_figures(sc, level: int, seconds: float, summaries, on_spark: bool) -> dict:
    summaries = list(summaries)
    storage = sum(info.memSize() + info.diskSize() for info in sc._jsc.sc().getRDDStorageInfo())  # checkpoints
    return {"level": level, "on_spark": on_spark, "seconds": seconds, "new": sum(s.new for s in summaries),
            "transitions": sum(s.transitions for s in summaries),
            "candidate_bytes": sum(s.candidate_bytes for s in summaries),
            "record_bytes": sum(s.record_bytes for s in summaries),
            "written_bytes": sum(s.written_bytes for s in summaries),
            "visited": sum(s.visited for s in summaries),
            "visited_bytes": sum(s.visited_bytes for s in summaries),
            "task_seconds": max(s.seconds for s in summaries), "task_cpu": sum(s.cpu_seconds for s in summaries),
            "storage_bytes": storage,
            "states_built": sum(s.states_built for s in summaries),
            "workers": {s.worker: s.peak_rss for s in summaries}}


def _record_discoveries(tracker: Tracker, by_name: dict, summaries) -> None:
    """Keep, per property not found yet, the level's discovery with the smallest key (the local engine's first)."""
    best: dict[str, tuple] = {}
    for s in summaries:
        for name, key, step, target, source, finding in s.discoveries:
            if name not in tracker.found and (name not in best or (key, step) < best[name][0]):
                best[name] = ((key, step), target, source, finding)
    for name, (_, target, source, finding) in best.items():
        tracker.record(Discovery(by_name[name], target, source, finding))


def _lookup(fps: frozenset):
    from hwm.checker.spark_levels import Visited

    def run(records):
        for _, record in records:
            if isinstance(record, Visited):
                yield record.lookup(fps)
    return run


def _file_lookup(directory: str, level: int, fps: frozenset):
    from hwm.checker.spark_files import read_records
    from hwm.checker.spark_levels import Visited

    def run(partition):
        found = {}
        for record in read_records(directory, level, partition):
            if isinstance(record, Visited):
                found.update(record.lookup(fps))
        return found
    return run


def _parent_chains(lookup, tracker: Tracker, init_fp: int) -> dict[int, int | None]:
    """Parent links of every state on a discovery's chain: one lookup per step up the chains (on Spark,
    a small job on the partitions that hold the fingerprints asked for; the visited sets stay there)."""
    parents: dict[int, int | None] = {init_fp: None}
    wanted = {d.target if d.before is None else d.before for d in tracker.found.values()} - parents.keys()
    while wanted:
        found = lookup(wanted)
        missing = wanted - found.keys()
        if missing:
            raise RuntimeError(f"fingerprints {sorted(missing)} are not in the visited set")
        for fp, (parent, level) in found.items():
            parents[fp] = None if level == 0 else parent
        wanted = {p for p in parents.values() if p is not None} - parents.keys()
    return parents


