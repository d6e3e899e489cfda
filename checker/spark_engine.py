"""The Spark engine: the local engine's breadth-first search, level by level on a cluster.

Each level is one round:

1. the frontier (a DataFrame of `fp`, `parent`, `state`, `rank`) is expanded partition by
   partition in Python, by the same successor backend the local engine calls
   (`checker.backend`; `successors="fast"` for the compiled one): every successor
   travels as its backend's bytes with its stable fingerprint, and the
   property catalogue is evaluated on the executors (state properties on each
   frontier state, step properties on each transition out of it);
2. the JVM deduplicates the successors (`groupBy(fp)`) and removes the visited ones
   with a left anti-join against the visited set; the survivors, sorted into the
   local engine's order and ranked, then hash-partitioned by fingerprint, are the
   next frontier and join the visited set. Visited fingerprints never come to Python.

Ties are broken as the local engine breaks them (`checker.engine`'s canonical order:
levels, then states in discovery order, then each state's transitions in action
order). Each frontier state carries its `rank`, an increasing number in that order;
each transition the key (its source's rank, its position among the source's
transitions). A state reached several times keeps the smallest key: the local
engine's parent and the bytes of its first occurrence (under symmetry, the member
of the class the local engine expands), and the next level's ranks follow the keys.
Per property the driver keeps the discovery of the lowest level with the smallest
key, the local engine's first, and rebuilds its trace from parent links looked up
level by level.
Fingerprints are unsigned 64-bit in Python and signed two's complement (LongType) in
Spark. Each level is locally checkpointed (its plan stays a leaf); the visited set is
reliably checkpointed every `checkpoint_every` levels. docs/scaling.md has the costs.

The result equals the local engine's: distinct states, transitions, depth, bounds hit,
verdicts and the shortest traces themselves, step for step, for any partitioning.
"""

from __future__ import annotations

import contextlib
import hashlib
import io
import json
import os
import re
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
import urllib.request
import zipfile
from pathlib import Path
from typing import Iterable, Iterator

from hwm.model.actions import Model
import numpy as np

from hwm.checker.backend import make_backend
from hwm.checker.report import Discovery, ProgressFn, Report, Tracker, finish_report, path_to
from hwm.properties.catalogue import Property

__all__ = ["SparkUnavailable", "get_spark", "spark_bfs", "standalone_cluster"]

INSTALL_JAVA = "install Java 17 (apt-get install openjdk-17-jre-headless)"
INSTALL_PYSPARK = "pip install 'hwm[spark]'"
CONNECT_TIMEOUT = 3.0  # seconds to reach a spark:// master's port
EXECUTOR_TIMEOUT = 60.0  # seconds for a standalone master to give us an executor

_MASK = (1 << 64) - 1
_SIGN = 1 << 63


class SparkUnavailable(RuntimeError):
    """Spark cannot run here; the message says what to install or start."""


def to_signed(fp: int) -> int:
    """An unsigned 64-bit fingerprint as Spark's LongType (two's complement)."""
    return fp - (1 << 64) if fp >= _SIGN else fp


def to_unsigned(value: int) -> int:
    return value & _MASK


# ------------------------------------------------------------------ sessions
def _spark_home() -> Path:
    import pyspark

    return Path(pyspark.__file__).parent


def _start_master_hint(host: str, port: int) -> str:
    spark_class = _spark_home() / "bin" / "spark-class" if _pyspark_present() else "spark-class"
    return (f"start one with `{spark_class} org.apache.spark.deploy.master.Master --host {host} --port {port}` "
            f"and a worker with `{spark_class} org.apache.spark.deploy.worker.Worker spark://{host}:{port}`")


def _pyspark_present() -> bool:
    try:
        import pyspark  # noqa: F401
    except ImportError:
        return False
    return True


def _java_version(java: str) -> int | None:
    """The major version `java -version` reports (8 for 1.8), None if unreadable."""
    try:
        out = subprocess.run([java, "-version"], capture_output=True, text=True, timeout=30)
    except (OSError, subprocess.TimeoutExpired):
        return None
    match = re.search(r'version "(\d+)(?:\.(\d+))?', out.stderr + out.stdout)
    if not match:
        return None
    major = int(match.group(1))
    return int(match.group(2) or 0) if major == 1 else major


def check_java() -> None:
    """SparkUnavailable unless a Java runtime recent enough for the installed PySpark exists."""
    java_home = os.environ.get("JAVA_HOME")
    java = str(Path(java_home) / "bin" / "java") if java_home else shutil.which("java")
    if not java or not os.access(java, os.X_OK):
        where = f"JAVA_HOME={java_home} has no bin/java" if java_home else "no `java` on PATH"
        raise SparkUnavailable(f"Spark needs a Java runtime and found none ({where}): {INSTALL_JAVA}")
    import pyspark

    needed = 17 if int(pyspark.__version__.split(".")[0]) >= 4 else 8
    version = _java_version(java)
    if version is not None and version < needed:
        raise SparkUnavailable(f"PySpark {pyspark.__version__} needs Java {needed} or newer, but {java} is "
                               f"Java {version}: {INSTALL_JAVA}")


def parse_master(master: str) -> list[tuple[str, int]]:
    """The (host, port) pairs of a spark:// URL (several for a ZooKeeper HA master); [] otherwise."""
    if not master.startswith("spark://"):
        return []
    pairs = []
    for part in master[len("spark://"):].split(","):
        host, _, port = part.rpartition(":")
        if not host or not port.isdigit():
            raise SparkUnavailable(f"cannot read master {master!r}: expected spark://HOST:PORT")
        pairs.append((host, int(port)))
    return pairs


def check_master(master: str, timeout: float = CONNECT_TIMEOUT) -> None:
    """SparkUnavailable unless some host:port of a spark:// master accepts a TCP connection."""
    pairs = parse_master(master)
    if not pairs:
        return
    errors = []
    for host, port in pairs:
        try:
            with socket.create_connection((host, port), timeout=timeout):
                return
        except socket.timeout:
            errors.append(f"{host}:{port} timed out after {timeout:g}s")
        except OSError as e:
            errors.append(f"{host}:{port} {e.strerror or e}")
    host, port = pairs[0]
    raise SparkUnavailable(f"no Spark master at {master} ({'; '.join(errors)}): {_start_master_hint(host, port)}")


_session = None  # the process's one SparkSession (a JVM holds one SparkContext)
_shipped: set[str] = set()  # applicationIds that already have our packages


def get_spark(master: str = "local[*]", *, conf: dict[str, str] | None = None,
              executor_timeout: float = EXECUTOR_TIMEOUT):
    """The process's SparkSession for `master`, created on first use and reused after.

    JVM start-up is slow, so one session serves every check of the process; a
    session's master cannot change, so asking for another master is an error.
    """
    global _session
    try:
        from pyspark.sql import SparkSession
    except ImportError as e:
        raise SparkUnavailable(f"PySpark is not installed ({e}): {INSTALL_PYSPARK}") from None
    check_master(master)
    if _session is not None and _session.sparkContext._jsc is not None:
        current = _session.sparkContext.master
        if current != master:
            raise SparkUnavailable(f"this process already runs Spark on {current}; a JVM holds one master, "
                                   f"so check against {master} from a new process")
        return _session
    check_java()
    # Executors must run the driver's Python (the model is pickled code) ...
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    os.environ.setdefault("PYSPARK_DRIVER_PYTHON", sys.executable)
    builder = (SparkSession.builder.master(master).appName("hwm")
               .config("spark.ui.enabled", "false")
               .config("spark.ui.showConsoleProgress", "false")
               .config("spark.sql.shuffle.partitions", "4")
               .config("spark.pyspark.python", os.environ["PYSPARK_PYTHON"]))
    if parse_master(master):
        builder = builder.config("spark.executor.memory", "512m")
    for key, value in (conf or {}).items():
        builder = builder.config(key, value)
    try:
        session = builder.getOrCreate()
    except Exception as e:  # py4j and JVM start-up failures arrive as many types
        raise SparkUnavailable(f"could not start Spark on {master}: {e}") from e
    session.sparkContext.setLogLevel("ERROR")
    if parse_master(master):
        _wait_for_executor(session, master, executor_timeout)
    _session = session
    return session


def _wait_for_executor(session, master: str, timeout: float) -> None:
    """A standalone master that has no free worker accepts the application and waits forever."""
    deadline = time.monotonic() + timeout
    while True:
        try:
            if len(session.sparkContext._jsc.sc().statusTracker().getExecutorInfos()) >= 2:
                return  # the driver is listed too
        except Exception:  # noqa: BLE001 - the context died: the master refused or never answered
            pass
        if time.monotonic() > deadline:
            session.stop()
            host, port = parse_master(master)[0]
            raise SparkUnavailable(
                f"the Spark master at {master} gave this application no executor within {timeout:g}s "
                f"(is it a Spark master, with a worker that has free cores and memory?): start a worker with "
                f"`{_spark_home() / 'bin' / 'spark-class'} org.apache.spark.deploy.worker.Worker "
                f"spark://{host}:{port}`")
        time.sleep(0.2)


def ship_packages(spark) -> None:
    """Executors import `hwm.checker`, `hwm.model` and `hwm.properties`: send them as one zip laid out
    as the installed package (`hwm/checker/...`), so it works on any cluster, with or without hwm."""
    sc = spark.sparkContext
    if sc.applicationId in _shipped:
        return
    root = Path(__file__).resolve().parent.parent
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w", zipfile.ZIP_DEFLATED) as z:
        z.write(root / "hwm" / "__init__.py", "hwm/__init__.py")
        for package in ("checker", "model", "properties"):
            for path in sorted((root / package).rglob("*.py")):  # subpackages too (checker/fast)
                z.write(path, "hwm/" + path.relative_to(root).as_posix())
    data = buffer.getvalue()
    target = Path(tempfile.mkdtemp(prefix="hwm-pyfiles-")) / f"hwm-{hashlib.sha256(data).hexdigest()[:12]}.zip"
    target.write_bytes(data)
    sc.addPyFile(str(target))
    _shipped.add(sc.applicationId)


# ------------------------------------------------------------- the search
# One row type leaves the executors: kind 0 is a successor (fp, parent, state), kind 1
# a property discovery (fp = target, parent = the step's source or null, name,
# finding), kind 2 a partition's tally (name = bounds hit, comma-separated; count =
# transitions). One pass of Python produces all three. Successors and discoveries carry
# their key in the local engine's order: `rank` (the frontier state's) and `step` (the
# transition's position among that state's, -1 for a state property).
SUCCESSOR, DISCOVERY, TALLY = 0, 1, 2


def _gen_schema():
    from pyspark.sql.types import (BinaryType, ByteType, LongType, StringType, StructField,
                                   StructType)

    return StructType([
        StructField("kind", ByteType(), False),
        StructField("fp", LongType(), True),
        StructField("parent", LongType(), True),
        StructField("state", BinaryType(), True),
        StructField("name", StringType(), True),
        StructField("finding", StringType(), True),
        StructField("count", LongType(), True),
        StructField("rank", LongType(), True),
        StructField("step", LongType(), True),
    ])


def _frontier_schema():
    from pyspark.sql.types import BinaryType, LongType, StructField, StructType

    return StructType([StructField("fp", LongType(), False), StructField("parent", LongType(), True),
                       StructField("state", BinaryType(), False), StructField("rank", LongType(), False)])


def expand_partition(rows: Iterable, model: Model, symmetry: bool, state_props: list[Property],
                     step_props: list[Property], expand: bool = True,
                     successors: str = "reference") -> Iterator[tuple]:
    """One partition of the frontier: its successors, its discoveries and its tally.

    The successors come from the same backend the local engine uses
    (`checker.backend`, chosen by `successors`), one batch per partition. State
    properties are checked on the frontier's states (each state once, at its own
    level, as the local engine does), step properties on every transition out of
    them. `expand=False` only checks the states (the last level of a
    depth-limited search). Every successor and discovery carries its key in the local
    engine's order, (rank of its source, position among the source's transitions): a
    source's transitions are all in this partition, in action order, so positions in
    the partition's expansion order them. Successors are deduplicated within the
    partition first (about half the rows of a level are repeats), keeping the
    smallest key, as the JVM does across partitions; per property, the discovery
    with the smallest key is kept.
    """
    backend = _backend(model, symmetry, successors)
    rows = sorted(rows, key=lambda row: row.rank)  # in order, so a property's first finding ends its checks
    batch = backend.from_bytes([row.state for row in rows])
    signed = [row.fp for row in rows]
    ranks = [row.rank for row in rows]
    best: dict[str, tuple[tuple[int, int], int, int, str]] = {}  # name -> (key, target, source or -1, finding)
    states = backend.states(batch) if state_props or step_props else []
    for p in state_props:
        for rank, fp, state in zip(ranks, signed, states):
            if p.name in best and best[p.name][0] < (rank, -1):
                continue
            finding = p.check(state)
            if finding:
                best[p.name] = ((rank, -1), fp, -1, finding)
    if not expand:
        for name, ((rank, step), target, _, finding) in best.items():
            yield (DISCOVERY, target, None, None, name, finding, None, rank, step)
        yield (TALLY, None, None, None, "", None, 0, None, None)
        return
    expansion = backend.expand(batch)
    fps = expansion.fingerprints.tolist()
    parents = expansion.parents.tolist()
    if step_props:
        after = backend.states(expansion.successors)
        for t, (succ_fp, position) in enumerate(zip(fps, parents)):
            key = (ranks[position], t)
            for p in step_props:
                if p.name in best and best[p.name][0] < key:
                    continue
                finding = p.check(states[position], after[t])
                if finding:
                    best[p.name] = (key, to_signed(succ_fp), signed[position], finding)
    reached: dict[int, tuple[int, int]] = {}  # successor fingerprint -> (smallest key's rank, transition)
    for t, (succ_fp, position) in enumerate(zip(fps, parents)):
        key = (ranks[position], t)
        if succ_fp not in reached or key < reached[succ_fp]:
            reached[succ_fp] = key
    # Equal fingerprints may carry different members of one symmetry class: the bytes
    # shipped are the smallest key's, the member the local engine keeps and expands.
    first = sorted(t for _, t in reached.values())
    data_of = dict(zip(first, backend.to_bytes(backend.take(expansion.successors, np.array(first, dtype=np.int64)))))
    for succ_fp, (rank, t) in reached.items():
        yield (SUCCESSOR, to_signed(succ_fp), signed[parents[t]], data_of[t], None, None, None, rank, t)
    for name, ((rank, step), target, source, finding) in best.items():
        yield (DISCOVERY, target, None if step < 0 else source, None, name, finding, None,
               rank, step)
    yield (TALLY, None, None, None, ",".join(sorted(expansion.bounds_hit)), None, len(fps), None, None)


_backends: dict = {}  # per executor process: the backend of the last (model, symmetry, name)


def _backend(model: Model, symmetry: bool, successors: str):
    """The backend for this model, built once per Python worker (each task unpickles a new model)."""
    key = (type(model), model.protocol, model.config, symmetry, successors)
    if key not in _backends:
        _backends.clear()
        _backends[key] = make_backend(successors, model, symmetry)
    return _backends[key]


def spark_bfs(model: Model, protocol_name: str, *, symmetry: bool = True, master: str = "local[*]",
              progress: ProgressFn | None = None, checkpoint_every: int = 4, spark=None,
              properties: Iterable[Property] | None = None, partitions: int | None = None,
              max_depth: int | None = None, checkpoint_dir: str | None = None,
              successors: str = "reference") -> Report:
    """Breadth-first search of the whole reachable state space on Spark (engine "spark").

    `spark` is an existing SparkSession (else `get_spark(master)`); `partitions` the
    number of fingerprint partitions (default: the default parallelism, at least 2);
    `checkpoint_dir` must be shared by all executors on a multi-machine cluster
    (default: a temporary directory, right for local and single-machine masters);
    `successors` the successor backend of the executors (`checker.backend`).
    """
    if checkpoint_every < 1:
        raise ValueError(f"checkpoint_every must be at least 1, not {checkpoint_every}")
    if spark is None:
        spark = get_spark(master)
    ship_packages(spark)
    sc = spark.sparkContext
    partitions = partitions or max(2, sc.defaultParallelism)
    own_dir = None
    if checkpoint_dir is None:
        own_dir = checkpoint_dir = tempfile.mkdtemp(prefix="hwm-spark-checkpoints-")
    sc.setCheckpointDir(checkpoint_dir)
    # With as many shuffle partitions as fingerprint partitions, every level and the
    # visited set (a union of levels) are hash-partitioned alike, so the anti-join
    # shuffles only the new successors, never the visited set. Adaptive execution
    # would re-plan each level (and first shuffle the visited set to measure it).
    tuned = {"spark.sql.shuffle.partitions": str(partitions), "spark.sql.adaptive.enabled": "false"}
    saved = {key: spark.conf.get(key, None) for key in tuned}
    for key, value in tuned.items():
        spark.conf.set(key, value)
    try:
        return _search(spark, model, protocol_name, symmetry, progress, checkpoint_every,
                       model.properties if properties is None else properties,
                       partitions, max_depth, successors)
    finally:
        for key, value in saved.items():
            if value is None:
                spark.conf.unset(key)
            else:
                spark.conf.set(key, value)
        if own_dir is not None:
            shutil.rmtree(own_dir, ignore_errors=True)


def _search(spark, model: Model, protocol_name: str, symmetry: bool, progress: ProgressFn | None,
            checkpoint_every: int, properties: Iterable[Property], partitions: int,
            max_depth: int | None, successors: str = "reference") -> Report:
    from pyspark import StorageLevel
    from pyspark.sql import functions as F

    keep = StorageLevel.MEMORY_AND_DISK
    started = time.perf_counter()
    report = Report(protocol_name, model.config.to_mapping(), "spark", symmetry, successors=successors)
    tracker = Tracker(properties)
    backend = make_backend(successors, model, symmetry)  # here to fail early if it cannot run this model
    report.setup_seconds = time.perf_counter() - started  # the driver's compile or cache load
    init = backend.initial()
    init_bytes = backend.to_bytes(init)[0]
    init_fp = int(backend.fingerprints(init)[0])
    levels: dict[str, int] = {}  # property name -> level of the state its trace is rebuilt to

    # Every level is materialised once and becomes a leaf of the next level's plan:
    # without that cut the plan of level L would embed level L-1's twice (once in the
    # frontier, once in the visited set) and grow exponentially.
    frontier = (spark.createDataFrame([(to_signed(init_fp), None, init_bytes, 0)], _frontier_schema())
                .repartition(partitions, "fp").localCheckpoint(eager=True))
    level_fps = [frontier.select("fp", "parent", F.lit(0).alias("level"))]
    visited = level_fps[0]
    states, transitions, depth = 1, 0, 0
    bounds_hit: set[str] = set()
    schema = _gen_schema()
    while True:
        state_props = [p for p in tracker.state_props if p.name not in tracker.found]
        step_props = [p for p in tracker.step_props if p.name not in tracker.found]
        if max_depth is not None and depth >= max_depth:
            report.complete = False
            if state_props:  # the deepest level's states are checked, not expanded
                rows = frontier.select("fp", "state", "rank").rdd.mapPartitions(
                    _bind(model, symmetry, state_props, [], expand=False, successors=successors)).collect()
                _record_discoveries(tracker, levels, [_side_row(*r) for r in rows], depth)
            break
        level = depth + 1
        expand = _bind(model, symmetry, state_props, step_props, successors=successors)
        generated = spark.createDataFrame(frontier.select("fp", "state", "rank").rdd.mapPartitions(expand), schema,
                                          verifySchema=False)
        generated = generated.persist(keep)
        new = (generated.filter(F.col("kind") == SUCCESSOR)
               .groupBy("fp")
               # The smallest key (source rank, position) is the local engine's first
               # occurrence: its parent, and its member of a symmetry class.
               .agg(F.min(F.struct("rank", "step", "parent", "state")).alias("first"))
               .join(visited.select("fp"), "fp", "left_anti")
               # The next level's ranks, in key order: ids increase along a sorted frame.
               .orderBy("first.rank", "first.step")
               .select("fp", "first.parent", "first.state", F.monotonically_increasing_id().alias("rank"))
               .repartition(partitions, "fp")
               .localCheckpoint(eager=True))
        found_new = new.count()
        side = generated.filter(F.col("kind") != SUCCESSOR).collect()
        generated.unpersist()
        for row in side:
            if row.kind == TALLY:
                transitions += row["count"]
                bounds_hit.update(b for b in row.name.split(",") if b)
        _record_discoveries(tracker, levels, side, depth)
        if found_new == 0:
            break
        depth = level
        states += found_new
        frontier = new
        level_fps.append(new.select("fp", "parent", F.lit(level).alias("level")))
        visited = _union(level_fps)
        if level % checkpoint_every == 0:
            # A reliable copy of the visited set: compacts the union of levels into one
            # leaf; the levels' local blocks are then unreferenced and Spark's cleaner
            # frees them.
            visited = visited.checkpoint(eager=True)
            level_fps = [visited]
        if progress is not None:
            elapsed = time.perf_counter() - started
            progress({"depth": depth, "states": states, "frontier": found_new,
                      "states_per_second": states / elapsed if elapsed > 0 else float("inf"), "elapsed": elapsed})
    report.states = states
    report.transitions = transitions
    report.depth = depth
    report.bounds_hit = bounds_hit
    report.seconds = time.perf_counter() - started
    parents = _parent_chains(visited, tracker, levels, init_fp)
    return finish_report(report, model, tracker, lambda fp: path_to(parents, fp), symmetry)


def _union(frames: list):
    result = frames[0]
    for df in frames[1:]:
        result = result.union(df)
    return result


def _bind(model: Model, symmetry: bool, state_props: list[Property], step_props: list[Property],
          expand: bool = True, successors: str = "reference"):
    def run(rows):
        return expand_partition(rows, model, symmetry, state_props, step_props, expand, successors)
    return run


def _side_row(kind, fp, parent, state, name, finding, count, rank, step):
    """A plain tuple from `expand_partition` as the attribute-access row `collect` gives."""
    from pyspark.sql import Row

    return Row(kind=kind, fp=fp, parent=parent, state=state, name=name, finding=finding, count=count, rank=rank,
               step=step)


def _record_discoveries(tracker: Tracker, levels: dict[str, int], rows: list, level: int) -> None:
    """Keep, per property not found yet, the discovery with the smallest key (the local engine's first).

    `level` is the frontier's: a state property's target and a step's source are on it.
    """
    best: dict[str, tuple[tuple[int, int], int, int, str]] = {}
    for row in rows:
        if row.kind != DISCOVERY or row.name in tracker.found:
            continue
        key = (row.rank, row.step)
        if row.name not in best or key < best[row.name][0]:
            best[row.name] = (key, to_unsigned(row.fp), -1 if row.parent is None else to_unsigned(row.parent),
                              row.finding)
    by_name = {p.name: p for p in tracker.all}
    for name, (_, target, source, finding) in best.items():
        tracker.found[name] = Discovery(by_name[name], target, None if source < 0 else source, finding)
        levels[name] = level


def _parent_chains(visited, tracker: Tracker, levels: dict[str, int], init_fp: int) -> dict[int, int | None]:
    """Parent links of every state on a discovery's chain, fetched level by level.

    One small filtered lookup per level: the visited set itself stays in the JVM.
    """
    from pyspark.sql import functions as F

    parents: dict[int, int | None] = {init_fp: None}
    wanted: dict[int, set[int]] = {}
    for name, d in tracker.found.items():
        fp = d.target if d.before is None else d.before
        if fp != init_fp:
            wanted.setdefault(levels.get(name, 0), set()).add(fp)
    while wanted:
        level = max(wanted)
        fps = wanted.pop(level) - parents.keys()
        if not fps or level == 0:
            continue
        rows = (visited.filter((F.col("level") == level) & F.col("fp").isin([to_signed(f) for f in fps]))
                .select("fp", "parent").collect())
        for row in rows:
            parent = to_unsigned(row.parent)
            parents[to_unsigned(row.fp)] = parent
            if parent not in parents:
                wanted.setdefault(level - 1, set()).add(parent)
        missing = fps - parents.keys()
        if missing:
            raise RuntimeError(f"fingerprints {sorted(missing)} are not in the visited set at level {level}")
    return parents


# ------------------------------------------------ a standalone cluster on this machine
def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _cluster_status(webui_port: int) -> dict:
    with urllib.request.urlopen(f"http://127.0.0.1:{webui_port}/json/", timeout=2) as response:
        return json.load(response)


@contextlib.contextmanager
def standalone_cluster(workers: int = 2, cores: int = 1, memory: str = "1g", timeout: float = 90.0,
                       log_dir: str | None = None) -> Iterator[str]:
    """A Spark standalone master and `workers` workers on 127.0.0.1; yields the master URL.

    For tests and benchmarks: the processes run from the installed PySpark, each in
    its own process group, and are killed (with their executors) on exit.
    """
    check_java()
    if not _pyspark_present():
        raise SparkUnavailable(f"PySpark is not installed: {INSTALL_PYSPARK}")
    spark_class = str(_spark_home() / "bin" / "spark-class")
    logs = Path(log_dir or tempfile.mkdtemp(prefix="hwm-standalone-"))
    logs.mkdir(parents=True, exist_ok=True)
    env = dict(os.environ, SPARK_HOME=str(_spark_home()), SPARK_LOCAL_IP="127.0.0.1",
               PYSPARK_PYTHON=sys.executable, SPARK_WORKER_DIR=str(logs / "work"))
    # Like workers on other machines, these see no checkout: the engine ships its code.
    env.pop("PYTHONPATH", None)
    port, webui = free_port(), free_port()
    master = f"spark://127.0.0.1:{port}"
    processes: list[subprocess.Popen] = []

    def launch(name: str, args: list[str]) -> None:
        out = open(logs / f"{name}.log", "wb")
        processes.append(subprocess.Popen([spark_class, *args], env=env, stdout=out, stderr=subprocess.STDOUT,
                                          stdin=subprocess.DEVNULL, start_new_session=True))
        out.close()

    try:
        launch("master", ["org.apache.spark.deploy.master.Master", "--host", "127.0.0.1", "--port", str(port),
                          "--webui-port", str(webui)])
        for k in range(workers):
            launch(f"worker{k + 1}", ["org.apache.spark.deploy.worker.Worker", master, "--host", "127.0.0.1",
                                      "--cores", str(cores), "--memory", memory,
                                      "--webui-port", str(free_port())])
        deadline = time.monotonic() + timeout
        alive = 0
        while True:
            for p in processes:
                if p.poll() is not None:
                    raise SparkUnavailable(f"a standalone process exited with {p.returncode}; logs in {logs}")
            try:
                status = _cluster_status(webui)
                alive = sum(1 for w in status.get("workers", []) if w.get("state") == "ALIVE")
            except OSError:
                pass
            if alive >= workers:
                break
            if time.monotonic() > deadline:
                raise SparkUnavailable(f"{alive} of {workers} workers registered with {master} within "
                                       f"{timeout:g}s; logs in {logs}")
            time.sleep(0.5)
        yield master
    finally:
        for p in reversed(processes):
            with contextlib.suppress(ProcessLookupError):
                os.killpg(p.pid, signal.SIGTERM)
        for p in processes:
            try:
                p.wait(timeout=15)
            except subprocess.TimeoutExpired:
                with contextlib.suppress(ProcessLookupError):
                    os.killpg(p.pid, signal.SIGKILL)
                p.wait(timeout=5)
