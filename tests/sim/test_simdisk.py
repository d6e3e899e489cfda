"""The simulated disk keeps apart what a real one keeps apart (bridge/dst/disk.py)."""

from __future__ import annotations

import errno
import os
import random

import pytest

from hwm.bridge.dst.disk import SimDisk
from hwm.impl.storage import DiskStorage

SEEDS = range(40)


def disk(seed: int) -> SimDisk:
    return SimDisk(random.Random(seed), ("/data",))


def write_file(fs: SimDisk, path: str, data: bytes, sync_file: bool, sync_directory: bool) -> None:
    fd = fs.open(path, os.O_RDWR | os.O_CREAT, 0o644)
    fs.pwrite(fd, data, 0)
    if sync_file:
        fs.fsync(fd)
    fs.close(fd)
    if sync_directory:
        fs.fsync_directory("/data")


def survivors(sync_file: bool, sync_directory: bool) -> set[bytes | None]:
    """What /data/f holds after a power failure, over many seeds (None: the file is gone)."""
    seen = set()
    for seed in SEEDS:
        fs = disk(seed)
        write_file(fs, "/data/f", b"0123456789", sync_file, sync_directory)
        fs.crash(power_loss=True)
        seen.add(fs.read_file("/data/f") if "f" in fs.listdir("/data") else None)
    return seen


def test_fsynced_file_and_directory_survive_a_power_failure():
    assert survivors(sync_file=True, sync_directory=True) == {b"0123456789"}


def test_a_file_whose_directory_was_not_fsynced_may_vanish():
    assert survivors(sync_file=True, sync_directory=False) == {b"0123456789", None}


def test_unsynced_bytes_may_be_lost_or_torn_in_a_power_failure():
    seen = survivors(sync_file=False, sync_directory=True)
    assert b"0123456789" in seen and b"" in seen
    assert any(s and len(s) < 10 for s in seen), seen  # torn at some byte


def test_a_process_crash_keeps_the_page_cache():
    fs = disk(0)
    write_file(fs, "/data/f", b"abc", sync_file=False, sync_directory=False)
    fs.crash(power_loss=False)
    assert fs.read_file("/data/f") == b"abc"


def test_an_injected_enospc_fails_that_call_and_tears_a_write():
    fs = disk(1)
    fd = fs.open("/data/f", os.O_RDWR | os.O_CREAT, 0o644)
    fs.inject(1, errno.ENOSPC)
    with pytest.raises(OSError) as raised:
        fs.pwrite(fd, b"0123456789", 0)
    assert raised.value.errno == errno.ENOSPC
    assert 0 < len(fs.read_file("/data/f")) < 10
    assert fs.stats["fault ENOSPC"] == 1
    fs.pwrite(fd, b"x", 0)  # one-shot: the next call succeeds


def test_the_lock_is_released_by_a_crash():
    fs = disk(2)
    first = DiskStorage("/data/S1", fs=fs)
    first.load()
    with pytest.raises(Exception, match="in use"):
        DiskStorage("/data/S1", fs=fs).load()
    fs.crash(power_loss=False)
    DiskStorage("/data/S1", fs=fs).load()


def test_a_lock_is_held_by_its_descriptor_alone_as_flock_is():
    """flock's rules: the holder locking again keeps it, another descriptor is refused, and a close
    of the holder releases it (another's close does not)."""
    fs = disk(3)
    fs.makedirs("/data/S1")
    holder, other = (fs.open("/data/S1/LOCK", os.O_RDWR | os.O_CREAT, 0o644) for _ in range(2))
    fs.lock(holder)
    fs.lock(holder)
    with pytest.raises(BlockingIOError):
        fs.lock(other)
    third = fs.open("/data/S1/LOCK", os.O_RDWR, 0o644)
    fs.close(third)
    with pytest.raises(BlockingIOError):
        fs.lock(other)
    fs.close(holder)
    fs.lock(other)


@pytest.mark.parametrize("seed", range(20))
def test_the_wal_keeps_every_synced_record_through_a_power_failure(seed):
    fs = disk(seed)
    storage = DiskStorage("/data/S1", segment_bytes=120, fs=fs)
    storage.load()
    storage.append([(i, 1, b"r%02d" % i) for i in range(1, 9)])
    storage.sync()
    storage.append([(i, 1, b"u%02d" % i) for i in range(9, 12)])
    storage.wal.flush()  # handed to the OS, not fsynced
    fs.crash(power_loss=True)
    recovered = DiskStorage("/data/S1", segment_bytes=120, fs=fs).load()
    assert recovered.log[:8] == tuple((1, b"r%02d" % i) for i in range(1, 9))
    assert recovered.log[8:] == tuple((1, b"u%02d" % i) for i in range(9, 9 + len(recovered.log) - 8))
