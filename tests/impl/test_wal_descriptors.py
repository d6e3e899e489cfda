"""The write-ahead log's descriptors and arguments: a crash releases every descriptor it holds, a
truncation closes the write descriptor it replaces (a mutant that leaked one per truncation, and
one whose crash() kept them all, passed the suite), reading more segments than it keeps open
evicts the least recently used descriptor (not the one just opened), a segment size is an int
large enough for a header and a record, each bound refused alone, and `entries` refuses an end
past last_index + 1 (docs/mutation.md). Descriptors are counted in /proc/self/fd."""

from __future__ import annotations

import os

import pytest

from hwm.impl.wal import _READ_FDS_CACHED, RECORD_HEADER, SEGMENT_HEADER, WriteAheadLog


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


def test_reading_more_segments_than_it_keeps_open_reads_every_one(tmp_path):
    with WriteAheadLog(tmp_path / "wal", segment_bytes=64) as wal:  # one record per segment
        wal.append(entries(1, 2 * _READ_FDS_CACHED + 3))
        wal.sync()
        assert len(wal.segment_paths()) > _READ_FDS_CACHED + 1
    with WriteAheadLog(tmp_path / "wal", segment_bytes=64) as wal:  # reads go through cached descriptors
        last = wal.last_index
        assert wal.entries(1, last + 1) == [(1, b"v%d" % i) for i in range(1, last + 1)]
        assert [wal.entry(i) for i in range(last, 0, -1)] == [(1, b"v%d" % i) for i in range(last, 0, -1)]


def test_entries_refuses_an_end_past_the_last_index_plus_one(tmp_path):
    with WriteAheadLog(tmp_path / "wal") as wal:
        wal.append(entries(1, 3))
        assert wal.entries(1, 4) == [(1, b"v1"), (1, b"v2"), (1, b"v3")]
        for start, end in ((1, 5), (0, 2), (3, 2)):
            with pytest.raises(ValueError, match=r"entries: need 1 <= start <= end <= last_index \+ 1 = 4"):
                wal.entries(start, end)
