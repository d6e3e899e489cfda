"""The Spark engine's file exchange: a level's records as files in a directory every executor reads.

With `exchange="files"` (`checker.spark_engine.spark_bfs`) the records of a level
(`checker.spark_levels`: visited sets, level keys, candidate blocks) do not travel
through Spark's shuffle, where the JVM copies, serialises and writes every byte it is
handed. Each task writes, per destination partition, one file of its records for the
next level (pickled numpy arrays, written under a temporary name and renamed, so a
task run twice leaves one whole file); the next level's task of that partition reads
the files addressed to it. Spark schedules the tasks (one stage per level, no
shuffle) and carries only their `Summary` back.

Layout: `<directory>/level-<L>/<partition>/<sender>`, where `sender` is a partition
number or `driver` (the hand-over of the levels run on the driver). A level's files
stay until the level after it has run, so a task Spark runs again (a lost executor, a
speculative copy) finds its inputs and rewrites the same outputs.

The directory must be one that every executor and the driver see at the same path: a
local temporary directory on one machine (`local[N]`, a standalone cluster on one
host), a shared mount (NFS) on several.
"""

from __future__ import annotations

import os
import pickle
import shutil
from typing import Iterable, Iterator

__all__ = ["write_records", "read_records", "drop_level"]


def _folder(directory: str, level: int, partition: int) -> str:
    return os.path.join(directory, f"level-{level}", str(partition))


def write_records(directory: str, level: int, sender: int | str, out: Iterable[tuple[int, object]]) -> int:
    """Write `(destination, record)` pairs as one file per destination for `level`; the bytes written."""
    by_destination: dict[int, list] = {}
    for destination, record in out:
        by_destination.setdefault(destination, []).append(record)
    written = 0
    for destination, records in by_destination.items():
        folder = _folder(directory, level, destination)
        os.makedirs(folder, exist_ok=True)
        path = os.path.join(folder, str(sender))
        temporary = os.path.join(folder, f".{sender}.{os.getpid()}.tmp")
        with open(temporary, "wb") as f:
            pickle.dump(records, f, protocol=pickle.HIGHEST_PROTOCOL)
            written += f.tell()
        os.replace(temporary, path)
    return written


def read_records(directory: str, level: int, partition: int) -> Iterator:
    """Every record sent to `partition` for `level`, file by file (the senders' order does not change a result).

    Every partition gets at least its visited set, so a missing folder means the directory is not shared."""
    folder = _folder(directory, level, partition)
    try:
        names = sorted(name for name in os.listdir(folder) if not name.startswith("."))
    except FileNotFoundError:
        raise RuntimeError(f"partition {partition} of level {level} found no records in {folder}: is the "
                           f"exchange directory shared by every executor and the driver?") from None
    for name in names:
        with open(os.path.join(folder, name), "rb") as f:
            yield from pickle.load(f)


def drop_level(directory: str, level: int) -> None:
    shutil.rmtree(os.path.join(directory, f"level-{level}"), ignore_errors=True)
