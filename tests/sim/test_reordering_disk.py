"""The reordering disk (bridge/dst/disk.py ReorderingDisk): what survives a power failure, and a
planted ordering bug (bridge/dst/ordering.py) that only it catches."""

from __future__ import annotations

import os
import random

import pytest

from hwm.bridge.dst.disk import ReorderingDisk, SimDisk
from hwm.bridge.dst.ordering import run_schedule, schedules_until_found
from hwm.impl.storage import DiskStorage
from hwm.impl.wal import CorruptLogError

PAGE, SECTOR = 64, 16
OLD, NEW = b"o" * (3 * PAGE), b"N" * (3 * PAGE)


def crashed(seed: int, disk_class=ReorderingDisk, sync_first=True) -> bytes:
    """/data/f after: OLD written and fsynced, NEW written over it (3 pages) unsynced, power failure."""
    rng = random.Random(seed)
    fs = disk_class(rng, ("/data",), page_bytes=PAGE, sector_bytes=SECTOR) if disk_class is ReorderingDisk \
        else disk_class(rng, ("/data",))
    fd = fs.open("/data/f", os.O_RDWR | os.O_CREAT, 0o644)
    fs.fsync_directory("/data")
    fs.pwrite(fd, OLD, 0)
    if sync_first:
        fs.fsync(fd)
    for page in range(3):  # one write per page, in order
        fs.pwrite(fd, NEW[page * PAGE:(page + 1) * PAGE], page * PAGE)
    fs.crash(power_loss=True)
    return fs.read_file("/data/f")


def pages(content: bytes) -> tuple[bytes, ...]:
    """Per page: o (old), N (new), or the sector mix, e.g. "oNoo"."""
    return tuple(bytes(content[p:p + PAGE][s] for s in range(0, PAGE, SECTOR)) for p in range(0, len(content), PAGE))


def test_fsync_is_a_barrier_synced_bytes_are_never_lost():
    for seed in range(60):
        content = crashed(seed)
        assert len(content) == len(OLD)
        assert set(content) <= set(OLD) | set(NEW)  # each byte old or new, nothing else


def test_a_later_page_survives_while_an_earlier_one_is_lost():
    outcomes = {pages(crashed(seed)) for seed in range(60)}
    assert any(page[0] == b"oooo" and page[2] == b"NNNN" for page in outcomes), outcomes
    prefix = {pages(crashed(seed, SimDisk)) for seed in range(60)}
    assert not any(page[0] == b"oooo" and page[2] == b"NNNN" for page in prefix)  # the prefix model never does


def test_a_page_may_be_torn_at_a_sector_boundary_only():
    contents = [crashed(seed) for seed in range(60)]
    mixed = [page for content in contents for page in pages(content) if page not in (b"oooo", b"NNNN")]
    assert mixed, "no page was torn in 60 power failures"
    for content in contents:  # a sector is written whole: all old or all new
        assert all(len(set(content[s:s + SECTOR])) == 1 for s in range(0, len(content), SECTOR)), content


def test_the_size_is_written_back_apart_from_the_pages():
    lengths, zero_pages = set(), 0
    for seed in range(60):
        content = crashed(seed, sync_first=False)  # the whole file is unsynced: old and new writes
        lengths.add(len(content))
        zero_pages += content[:PAGE] == bytes(PAGE)
    assert lengths == {0, 3 * PAGE} and zero_pages  # a file may keep its length over pages never written back


def test_the_page_size_must_fit_the_sectors():
    with pytest.raises(ValueError, match="page_bytes 100 must be a positive multiple of sector_bytes 64"):
        ReorderingDisk(random.Random(0), page_bytes=100, sector_bytes=64)


@pytest.mark.parametrize("disk", ["prefix", "reordering"])
def test_the_correct_counted_log_passes_either_disk(disk):
    assert schedules_until_found(0, disk, metadata_before_data=False, limit=150) is None


def test_the_prefix_disk_misses_the_planted_metadata_before_data_bug():
    assert schedules_until_found(0, "prefix", metadata_before_data=True, limit=150) is None


def test_the_reordering_disk_catches_the_planted_metadata_before_data_bug():
    found = schedules_until_found(0, "reordering", metadata_before_data=True, limit=150)
    assert found is not None, "150 schedules on the reordering disk missed the count written before its record"
    outcome = run_schedule(found - 1, "reordering", metadata_before_data=True)
    assert "reached the disk before the record" in outcome.violation
    assert run_schedule(found - 1, "reordering", metadata_before_data=False).violation is None


# 400: a new segment whose length survived over a zero header; 100,000: a bad record, then a valid one.
# Both are unsynced damage, which the WAL cuts off (it refused them before it kept a synced index).
@pytest.mark.parametrize("segment_bytes", [400, 100_000])
def test_the_wal_recovers_from_a_power_failure_on_a_reordering_disk(segment_bytes):
    torn, lengths = 0, set()
    for seed in range(40):
        fs = ReorderingDisk(random.Random(seed), ("/data",), page_bytes=PAGE, sector_bytes=SECTOR)
        storage = DiskStorage("/data/S1", segment_bytes=segment_bytes, fs=fs)
        storage.load()
        storage.append([(i, 1, b"r%02d" % i) for i in range(1, 9)])
        storage.sync()
        storage.append([(i, 1, b"u%02d" % i) for i in range(9, 16)])
        storage.wal.flush()  # handed to the OS, not fsynced
        fs.crash(power_loss=True)
        again = DiskStorage("/data/S1", segment_bytes=segment_bytes, fs=fs)
        recovered = again.load()
        assert recovered.log[:8] == tuple((1, b"r%02d" % i) for i in range(1, 9))
        assert recovered.log[8:] == tuple((1, b"u%02d" % i) for i in range(9, 9 + len(recovered.log) - 8))
        torn += again.wal.torn_tail is not None
        lengths.add(len(recovered.log))
    assert torn and len(lengths) >= 2, (torn, lengths)  # the power failures did damage the unsynced tail


def test_a_synced_record_damaged_on_a_reordering_disk_is_still_refused():
    fs = ReorderingDisk(random.Random(7), ("/data",), page_bytes=PAGE, sector_bytes=SECTOR)
    storage = DiskStorage("/data/S1", fs=fs)
    storage.load()
    storage.append([(i, 1, b"r%02d" % i) for i in range(1, 9)])
    storage.sync()
    storage.crash()
    fs.crash(power_loss=True)
    [segment] = [name for name in fs.listdir("/data/S1/wal") if name.endswith(".log")]
    path = "/data/S1/wal/" + segment
    fd = fs.open(path, os.O_RDWR)
    last = fs.pread(fd, 1, fs.getsize(path) - 1)
    fs.pwrite(fd, bytes([last[0] ^ 1]), fs.getsize(path) - 1)  # the last synced record's payload: a bad disk
    fs.close(fd)
    with pytest.raises(CorruptLogError, match="at or below the synced index 8"):
        DiskStorage("/data/S1", fs=fs).load()


@pytest.mark.parametrize("disk", [SimDisk, ReorderingDisk])
def test_a_cut_below_the_synced_index_survives_a_power_failure_right_after_it(disk):
    # Eight records synced (the synced index says 8), then a cut from 4 applied and nothing synced
    # after it. A power failure keeps the cut (it is fsynced); the synced index it lowered to 3 must
    # be kept as well, or recovery reads 8 over a log of 3 and refuses it as missing fsynced records.
    # Each seed loses a random part of what was not fsynced; were the lowered index written without
    # an fsync, seeds 5 and 7 (SimDisk) and 1, 2 and 7 (ReorderingDisk) would lose it.
    for seed in range(8):
        fs = disk(random.Random(seed), ("/data",), **({"page_bytes": PAGE, "sector_bytes": SECTOR}
                                                      if disk is ReorderingDisk else {}))
        storage = DiskStorage("/data/S1", fs=fs)
        storage.load()
        storage.append([(i, 1, b"r%02d" % i) for i in range(1, 9)])
        storage.sync()
        storage.truncate_from(4)
        storage.wal.flush()
        fs.crash(power_loss=True)
        assert DiskStorage("/data/S1", fs=fs).load().log == tuple((1, b"r%02d" % i) for i in range(1, 4)), seed


def test_schedules_until_found_tries_exactly_its_limit():
    # Seed 0's tenth schedule is the first to catch the planted ordering bug. A search that tried one
    # schedule too few or too many passed the suite (docs/mutation.md).
    assert schedules_until_found(0, "reordering", True, 10) == 10
    assert schedules_until_found(0, "reordering", True, 9) is None
