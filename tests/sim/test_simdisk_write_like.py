"""Every call SimDisk's docstring names write-like can be the one `inject` fails: open for writing,
write, pwrite, fsync, ftruncate, unlink, replace and a directory's fsync (a disk that never failed a
rename passed the suite: docs/mutation.md); a read never is."""

from __future__ import annotations

import errno
import os
import random

import pytest

from hwm.bridge.dst.disk import SimDisk


def disk_with_a_file() -> tuple[SimDisk, int]:
    disk = SimDisk(random.Random(0), ("/data",))
    fd = disk.open("/data/f", os.O_RDWR | os.O_CREAT, 0o644)
    disk.write(fd, b"abc")
    return disk, fd


CALLS = {
    "open for writing": lambda disk, fd: disk.open("/data/g", os.O_WRONLY | os.O_CREAT, 0o644),
    "write": lambda disk, fd: disk.write(fd, b"d"),
    "pwrite": lambda disk, fd: disk.pwrite(fd, b"d", 0),
    "fsync": lambda disk, fd: disk.fsync(fd),
    "ftruncate": lambda disk, fd: disk.ftruncate(fd, 1),
    "unlink": lambda disk, fd: disk.unlink("/data/f"),
    "replace": lambda disk, fd: disk.replace("/data/f", "/data/h"),
    "directory fsync": lambda disk, fd: disk.fsync_directory("/data"),
}


@pytest.mark.parametrize("call", CALLS)
def test_each_write_like_call_fails_when_it_is_the_injected_one(call):
    disk, fd = disk_with_a_file()
    disk.inject(1, errno.EIO)
    with pytest.raises(OSError) as failed:
        CALLS[call](disk, fd)
    assert failed.value.errno == errno.EIO
    CALLS[call](disk, fd)  # the fault was used up


def test_reads_are_not_write_like():
    disk, fd = disk_with_a_file()
    disk.inject(1, errno.EIO)
    assert disk.read_file("/data/f") == b"abc" and disk.pread(fd, 3, 0) == b"abc"
    assert disk.open("/data/f", os.O_RDONLY) > 0 and disk.listdir("/data") == ["f"]
    with pytest.raises(OSError):
        disk.fsync(fd)  # the fault is still there for the first write-like call


@pytest.mark.parametrize("after", [1, 2, 3])
def test_inject_fails_exactly_the_nth_write_like_call_from_now(after):
    disk, fd = disk_with_a_file()
    disk.inject(after, errno.ENOSPC)
    for _ in range(after - 1):
        disk.pwrite(fd, b"x", 0)
    with pytest.raises(OSError) as failed:
        disk.pwrite(fd, b"y", 0)
    assert failed.value.errno == errno.ENOSPC
