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

With `exchange="resident"` the tasks stay: one gang-scheduled (barrier) stage runs many
levels, each task keeps its partitions' visited sets and the records its own partitions
send each other in memory, and the files carry only what crosses to another task. The
tasks meet after each level through the same directory (`gather`): each publishes its
`Summary` records under `summaries/<launch>/level-<L>/<task>` and waits until every
task has (`launch` names one launch of the stage: a stage Spark reruns fails, and the
driver launches it again under a new name). Spark's own barrier
(`BarrierTaskContext.barrier`) would do the same but costs about a second a call; a
file and a poll cost milliseconds. The driver reads the same files (`gathered`) to
follow the levels while the stage runs.

The directory must be one that every executor and the driver see at the same path: a
local temporary directory on one machine (`local[N]`, a standalone cluster on one
host), a shared mount (NFS) on several.
"""

from __future__ import annotations

import os
import pickle
import shutil
import time
from typing import Iterable, Iterator

__all__ = ["write_records", "read_records", "drop_level", "drop_levels_after", "start_task", "gather", "gathered"]

POLL = 0.0005  # seconds between looks for the other tasks' summaries, doubling up to POLL_MAX
POLL_MAX = 0.002


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


def read_records(directory: str, level: int, partition: int, required: bool = True) -> Iterator:
    """Every record sent to `partition` for `level`, file by file (the senders' order does not change a result).

    Every partition gets at least its visited set, so a missing folder means the directory is not shared;
    a resident task (`required=False`) keeps its visited sets, and may have nothing from the others."""
    folder = _folder(directory, level, partition)
    try:
        names = sorted(name for name in os.listdir(folder) if not name.startswith("."))
    except FileNotFoundError:
        if not required:
            return
        raise RuntimeError(f"partition {partition} of level {level} found no records in {folder}: is the "
                           f"exchange directory shared by every executor and the driver?") from None
    for name in names:
        with open(os.path.join(folder, name), "rb") as f:
            yield from pickle.load(f)


def drop_level(directory: str, level: int) -> None:
    shutil.rmtree(os.path.join(directory, f"level-{level}"), ignore_errors=True)


def _summaries(directory: str, launch: str, level: int) -> str:
    return os.path.join(directory, "summaries", launch, f"level-{level}")


def start_task(directory: str, launch: str, task: int) -> None:
    """Claim `task` of the resident stage `launch`: a second run of it (Spark reruns a failed barrier stage
    whole) could pass a meeting on the first run's summaries, so it fails instead, and the driver launches
    the stage again under a new name (`checker.spark_engine._run_resident`)."""
    folder = os.path.join(directory, "summaries", launch)
    os.makedirs(folder, exist_ok=True)
    try:
        os.close(os.open(os.path.join(folder, f"started-{task}"), os.O_CREAT | os.O_EXCL | os.O_WRONLY))
    except FileExistsError:
        raise RuntimeError(f"task {task} of the resident stage {launch} ran twice") from None


def gather(directory: str, launch: str, level: int, task: int, tasks: int, value) -> list:
    """Publish this task's `value` for `level` and return every task's, by task, once all are there.
    A task publishes after writing its records, so the level's files are whole then."""
    folder = _summaries(directory, launch, level)
    os.makedirs(folder, exist_ok=True)
    temporary = os.path.join(folder, f".{task}.{os.getpid()}.tmp")
    with open(temporary, "wb") as f:
        pickle.dump(value, f, protocol=pickle.HIGHEST_PROTOCOL)
    os.replace(temporary, os.path.join(folder, str(task)))
    poll = POLL
    while (values := gathered(directory, launch, level, tasks)) is None:
        time.sleep(poll)  # a task that fails ends the whole barrier stage, this one included
        poll = min(2 * poll, POLL_MAX)
    return values


def gathered(directory: str, launch: str, level: int, tasks: int) -> list | None:
    """Every task's published value for `level`, by task, or None while some are missing."""
    folder = _summaries(directory, launch, level)
    try:
        if sum(1 for n in os.listdir(folder) if not n.startswith(".")) < tasks:
            return None
    except FileNotFoundError:
        return None
    values = []
    for t in range(tasks):
        with open(os.path.join(folder, str(t)), "rb") as f:
            values.append(pickle.load(f))
    return values


def drop_levels_after(directory: str, level: int) -> None:
    """Remove the records of every level deeper than `level`: what a failed resident stage left."""
    for name in os.listdir(directory):
        if name.startswith("level-") and int(name[len("level-"):]) > level:
            shutil.rmtree(os.path.join(directory, name), ignore_errors=True)
