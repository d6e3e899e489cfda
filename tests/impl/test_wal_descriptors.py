"""The write-ahead log's descriptors and arguments: a crash releases every descriptor it holds, a
truncation closes the write descriptor it replaces (a mutant that leaked one per truncation, and
one whose crash() kept them all, passed the suite), and a segment size is an int large enough for
a header and a record, each bound refused alone (docs/mutation.md). Descriptors are counted in
/proc/self/fd."""

from __future__ import annotations

import os

import pytest

from hwm.impl.wal import RECORD_HEADER, SEGMENT_HEADER, WriteAheadLog


def open_descriptors() -> int:
    return len(os.listdir("/proc/self/fd"))


def entries(first: int, last: int, generation: int = 1) -> list[tuple[int, int, bytes]]:
    return [(i, generation, b"v%d" % i) for i in range(first, last + 1)]


@pytest.mark.skipif(not os.path.isdir("/proc/self/fd"), reason="counts descriptors in /proc/self/fd")
def test_a_crash_releases_every_descriptor_and_truncations_leak_none(tmp_path):
    before = open_descriptors()
    wal = WriteAheadLog(tmp_path / "wal", segment_bytes=256)  # a few records per segment
    wal.append(entries(1, 20))
    wal.sync()
    during = open_descriptors()
    for round_ in range(10):  # cut into the last segment and write it again, ten times
        wal.truncate_from(18)
        wal.append(entries(18, 20, generation=2 + round_))
        wal.sync()
    assert open_descriptors() <= during + 1, "truncations left descriptors open"
    assert wal.entry(20) == (11, b"v20")
    wal.crash()
    assert open_descriptors() == before, "crash() kept descriptors open"
    with WriteAheadLog(tmp_path / "wal", segment_bytes=256) as again:
        assert again.last_index == 20


@pytest.mark.parametrize("segment_bytes", [SEGMENT_HEADER.size + RECORD_HEADER.size - 1, 0, "4096", 4096.0])
def test_a_segment_size_too_small_or_not_an_int_is_refused(tmp_path, segment_bytes):
    with pytest.raises(ValueError, match="segment_bytes must be an int >="):
        WriteAheadLog(tmp_path / "wal", segment_bytes=segment_bytes)
