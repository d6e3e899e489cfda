"""The Spark engine's file exchange (`checker.spark_files`) without Spark: records written for a level
are read back whole by their partition, a task written twice leaves one file, a partition that
finds no folder says that the directory must be shared, and resident tasks meet there."""

import os
import threading
import time

import numpy as np
import pytest

from hwm.checker.spark_files import (drop_level, drop_levels_after, gather, gathered, read_records, start_task,
                                     write_records)
from hwm.checker.spark_levels import LevelKeys, Visited


def test_records_reach_their_partition_whole(tmp_path):
    visited = Visited(np.array([3, 9], np.uint64), np.array([0, 3], np.uint64), np.array([0, 1], np.uint16))
    keys = LevelKeys(1, np.array([5, 7], np.int64))
    out = [(0, visited), (0, keys), (1, keys)]
    write_records(str(tmp_path), 4, 1, out)
    write_records(str(tmp_path), 4, 1, out)  # a task Spark ran again: the same file, rewritten
    write_records(str(tmp_path), 4, "driver", [(1, LevelKeys(0, np.zeros(0, np.int64)))])
    first = list(read_records(str(tmp_path), 4, 0))
    assert [type(r) for r in first] == [Visited, LevelKeys]
    assert first[0].fps.tolist() == [3, 9] and first[0].parents.tolist() == [0, 3]
    assert [r.partition for r in read_records(str(tmp_path), 4, 1)] == [1, 0]
    assert sorted(os.listdir(tmp_path / "level-4" / "0")) == ["1"]  # no temporary file left
    drop_level(str(tmp_path), 4)
    assert not (tmp_path / "level-4").exists()


def test_a_partition_without_its_folder_names_the_shared_directory(tmp_path):
    with pytest.raises(RuntimeError, match=r"partition 2 of level 5 found no records in .*level-5/2: is the "
                                           r"exchange directory shared by every executor and the driver\?"):
        list(read_records(str(tmp_path), 5, 2))


def test_a_resident_task_may_have_no_folder(tmp_path):
    assert list(read_records(str(tmp_path), 5, 2, required=False)) == []


def test_resident_tasks_meet_once_all_have_published(tmp_path):
    directory, tasks = str(tmp_path), 3
    got: dict[int, list] = {}

    last = threading.Event()  # the last task arrives only when the test lets it

    def task(t):
        if t == tasks - 1:
            last.wait(timeout=10)
        got[t] = gather(directory, "launch", 4, t, tasks, ("summary", t))

    assert gathered(directory, "launch", 4, tasks) is None
    threads = [threading.Thread(target=task, args=(t,)) for t in range(tasks)]
    for thread in threads:
        thread.start()
    time.sleep(0.06)  # tasks 0 and 1 have published (or soon will); none leaves before the last arrives
    assert gathered(directory, "launch", 4, tasks) is None and not got
    last.set()
    for thread in threads:
        thread.join(timeout=10)
    expected = [("summary", t) for t in range(tasks)]
    assert got == {t: expected for t in range(tasks)}
    assert gathered(directory, "launch", 4, tasks) == expected  # the driver reads the same
    assert gathered(directory, "another launch", 4, tasks) is None  # a launch meets only its own tasks


def test_a_resident_task_run_twice_fails(tmp_path):
    start_task(str(tmp_path), "launch", 1)
    start_task(str(tmp_path), "launch", 0)
    with pytest.raises(RuntimeError, match="task 1 of the resident stage launch ran twice"):
        start_task(str(tmp_path), "launch", 1)
    start_task(str(tmp_path), "the next launch", 1)


def test_a_failed_stage_leaves_only_its_first_level(tmp_path):
    for level in (3, 4, 5, 12):
        write_records(str(tmp_path), level, 0, [(0, LevelKeys(0, np.zeros(0, np.int64)))])
    drop_levels_after(str(tmp_path), 4)
    assert sorted(os.listdir(tmp_path)) == ["level-3", "level-4"]
