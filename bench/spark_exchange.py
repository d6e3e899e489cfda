"""One level's exchange between fingerprint partitions on Spark, three ways, side by side.

    python bench/spark_exchange.py [--candidates 300000] [--width 45] [--partitions 2] [--runs 3]

The Spark engine's level is: each partition's task sends a block of candidate successors (packed
rows, fingerprints, parent fingerprints, keys) to every partition, and the next task
gathers its blocks into numpy arrays. This script times that exchange alone, on the
same synthetic candidates (`--candidates` per sending partition, rows `--width` bytes
wide), in this process's Spark `local[2]`:

- `rdd`: the engine's `exchange="shuffle"`: a pickled numpy block per destination through
  `RDD.partitionBy`;
- `files`: the engine's `exchange="files"` (`checker.spark_files`): a file of pickled blocks per
  destination in a directory, read by the destination's task (here two jobs, where the engine
  reads and writes in one task per level);
- `arrow`: one row per candidate with fixed-width columns (destination, fp, parent, key,
  step, row as binary) written as Arrow record batches by `mapInArrow`, moved by
  `repartition` on the destination column (Spark's own row shuffle), read back as
  Arrow batches by the next `mapInArrow` and turned into numpy arrays without a
  Python object per row.

Each path runs with `--candidates` and with none (the fixed cost of a level's stage); the
three take turns, run by run. `arrow` needs pyarrow and pandas (`mapInArrow`'s requirements)
besides pyspark, and is left out, with a note, without them.
"""

from __future__ import annotations

import argparse
import importlib.util
import os
import statistics
import sys
import time

ROOT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..")
sys.path.insert(0, ROOT)


def blocks(partition: int, count: int, width: int, partitions: int):
    """A sending task's candidates, one tuple of arrays per destination (seeded by the partition)."""
    import numpy as np

    rng = np.random.default_rng(partition)
    fps = rng.integers(0, 2**63, count, dtype=np.int64).astype(np.uint64)
    rows = rng.integers(0, 255, (count, width), dtype=np.uint8)
    parents = rng.integers(0, 2**63, count, dtype=np.int64).astype(np.uint64)
    keys = np.arange(count, dtype=np.int64)
    steps = np.zeros(count, np.int64)
    destinations = (fps % np.uint64(partitions)).astype(np.int64)
    for d in range(partitions):
        mine = destinations == d
        yield d, (rows[mine], fps[mine], parents[mine], keys[mine], steps[mine])


def by_rdd(sc, count: int, width: int, partitions: int) -> int:
    import numpy as np

    def send(index, _):
        return list(blocks(index, count, width, partitions))

    def gather(records):
        parts = [record for _, record in records]
        rows = np.concatenate([p[0] for p in parts]) if parts else np.zeros((0, width), np.uint8)
        fps = np.concatenate([p[1] for p in parts]) if parts else np.zeros(0, np.uint64)
        yield len(rows) + 0 * len(fps)

    rdd = sc.parallelize(range(partitions), partitions).mapPartitionsWithIndex(send)
    return sum(rdd.partitionBy(partitions, lambda d: d).mapPartitions(gather).collect())


def by_arrow(spark, count: int, width: int, partitions: int) -> int:
    import numpy as np

    schema = "destination int, fp long, parent long, key long, step long, row binary"

    def send(batches):
        import pyarrow as pa
        from pyspark import TaskContext

        for _ in batches:
            pass
        index = TaskContext.get().partitionId()
        for d, (rows, fps, parents, keys, steps) in blocks(index, count, width, partitions):
            n = len(fps)
            # Fixed-width rows as one Arrow binary column: offsets every `width` bytes, no object per row.
            offsets = pa.py_buffer((np.arange(n + 1, dtype=np.int32) * width).tobytes())
            column = pa.Array.from_buffers(pa.binary(), n, [None, offsets, pa.py_buffer(rows.tobytes())])
            yield pa.RecordBatch.from_arrays(
                [pa.array(np.full(n, d, np.int32)), pa.array(fps.view(np.int64)), pa.array(parents.view(np.int64)),
                 pa.array(keys), pa.array(steps), column],
                ["destination", "fp", "parent", "key", "step", "row"])

    def gather(batches):
        import pyarrow as pa

        total, parts = 0, []
        for batch in batches:
            rows = batch.column("row")
            data = np.frombuffer(rows.buffers()[2], np.uint8)
            start = rows.offset * width
            parts.append(data[start:start + len(batch) * width].reshape(len(batch), width))
            fps = batch.column("fp").to_numpy(zero_copy_only=False).view(np.uint64)
            total += len(fps)
        rows = np.concatenate(parts) if parts else np.zeros((0, width), np.uint8)
        yield pa.RecordBatch.from_arrays([pa.array([len(rows) + 0 * total], pa.int64())], ["n"])

    df = spark.range(0, partitions, numPartitions=partitions).mapInArrow(send, schema)
    out = df.repartition(partitions, "destination").mapInArrow(gather, "n long")
    return sum(row.n for row in out.collect())


def by_files(sc, count: int, width: int, partitions: int, directory: str) -> int:
    import pickle

    import numpy as np

    def send(index, _):
        for d, block in blocks(index, count, width, partitions):
            path = os.path.join(directory, f"{d}-{index}")
            with open(path + ".tmp", "wb") as f:
                pickle.dump(block, f, protocol=pickle.HIGHEST_PROTOCOL)
            os.replace(path + ".tmp", path)
        return [0]

    def gather(index, _):
        parts = []
        for name in sorted(os.listdir(directory)):
            if name.startswith(f"{index}-") and not name.endswith(".tmp"):
                with open(os.path.join(directory, name), "rb") as f:
                    parts.append(pickle.load(f))
        rows = np.concatenate([p[0] for p in parts]) if parts else np.zeros((0, width), np.uint8)
        return [len(rows)]

    sc.parallelize(range(partitions), partitions).mapPartitionsWithIndex(send).collect()
    moved = sum(sc.parallelize(range(partitions), partitions).mapPartitionsWithIndex(gather).collect())
    for name in os.listdir(directory):
        os.remove(os.path.join(directory, name))
    return moved


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--candidates", type=int, default=300_000, help="per sending partition")
    parser.add_argument("--width", type=int, default=45, help="packed row bytes")
    parser.add_argument("--partitions", type=int, default=2)
    parser.add_argument("--runs", type=int, default=3)
    args = parser.parse_args()
    from hwm.checker.spark_session import get_spark

    spark = get_spark("local[2]", conf={"spark.sql.shuffle.partitions": str(args.partitions)})
    sc = spark.sparkContext
    import tempfile

    directory = tempfile.mkdtemp(prefix="hwm-exchange-")
    paths = {"rdd": lambda n: by_rdd(sc, n, args.width, args.partitions),
             "files": lambda n: by_files(sc, n, args.width, args.partitions, directory)}
    missing = [m for m in ("pyarrow", "pandas") if importlib.util.find_spec(m) is None]
    if missing:
        print(f"no arrow path: mapInArrow needs {' and '.join(missing)} (pip install pyarrow pandas)")
    else:
        paths["arrow"] = lambda n: by_arrow(spark, n, args.width, args.partitions)
    for path in paths.values():  # warm-up: Python workers, the JVM's code paths
        path(1000)
    times = {(name, n): [] for name in paths for n in (0, args.candidates)}
    for _ in range(args.runs):  # interleaved, so that load falls on both paths alike
        for name, path in paths.items():
            for n in (0, args.candidates):
                started = time.perf_counter()
                moved = path(n)
                times[name, n].append(time.perf_counter() - started)
                assert moved == n * args.partitions, (name, n, moved)
    print(f"{args.partitions} partitions, {args.candidates:,} candidates of {args.width} B per sender; "
          f"median of {args.runs}; load {os.getloadavg()[0]:.1f}")
    for name in paths:
        empty = statistics.median(times[name, 0])
        full = statistics.median(times[name, args.candidates])
        per = (full - empty) / (args.candidates * args.partitions) * 1e9
        print(f"  {name:6} fixed {empty:.3f} s; with candidates {full:.3f} s ({per:.0f} ns per candidate)")
    os.rmdir(directory)  # each files run removes what it wrote


if __name__ == "__main__":
    main()
