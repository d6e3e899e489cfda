"""The Spark engine's file exchange (`checker.spark_files`) without Spark: records written for a level
are read back whole by their partition, a task written twice leaves one file, and a partition that
finds no folder says that the directory must be shared."""

import os

import numpy as np
import pytest

from hwm.checker.spark_files import drop_level, read_records, write_records
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
