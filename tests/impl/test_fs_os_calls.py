"""`impl/fs.py`'s own promises, which only a power failure would otherwise show: every method of the
operating system's file system makes the `os` call of its name (an fsync that is not made is
invisible until the power goes), `make_directories` fsyncs the parent of every directory it
creates, and `replace_file` closes what it opens. (Mutants of impl/fs.py that the suite missed:
docs/mutation.md.)
"""

from __future__ import annotations

import errno
import os
import random

import pytest

from hwm.bridge.dst.disk import SimDisk
from hwm.impl import fs as impl_fs
from hwm.impl.fs import OS_FILESYSTEM, make_directories, replace_file


class _Recording:
    """Stands in for `os` behind OS_FILESYSTEM: records the calls, then makes them."""

    def __init__(self):
        self.calls: list[str] = []

    def __getattr__(self, name):
        real = getattr(os, name)
        if not callable(real):
            return real

        def call(*args, **kwargs):
            self.calls.append(name)
            return real(*args, **kwargs)

        return call


@pytest.fixture
def recorded(monkeypatch):
    recording = _Recording()
    monkeypatch.setattr(impl_fs, "os", recording)
    return recording.calls


def test_fsync_and_fsync_directory_make_the_os_calls(tmp_path, recorded):
    fd = OS_FILESYSTEM.open(str(tmp_path / "f"), os.O_RDWR | os.O_CREAT, 0o644)
    OS_FILESYSTEM.pwrite(fd, b"x", 0)
    del recorded[:]
    OS_FILESYSTEM.fsync(fd)
    assert recorded == ["fsync"]
    OS_FILESYSTEM.close(fd)
    del recorded[:]
    OS_FILESYSTEM.fsync_directory(str(tmp_path))
    assert recorded == ["open", "fsync", "close"]


def test_lock_is_exclusive_between_two_opens(tmp_path):
    first = OS_FILESYSTEM.open(str(tmp_path / "LOCK"), os.O_RDWR | os.O_CREAT, 0o644)
    second = OS_FILESYSTEM.open(str(tmp_path / "LOCK"), os.O_RDWR)
    try:
        OS_FILESYSTEM.lock(first)
        with pytest.raises(OSError) as refused:
            OS_FILESYSTEM.lock(second)
        assert refused.value.errno in (errno.EWOULDBLOCK, errno.EAGAIN)
    finally:
        OS_FILESYSTEM.close(first)
        OS_FILESYSTEM.close(second)


def test_make_directories_survives_a_power_failure_at_every_level():
    for seed in range(20):
        disk = SimDisk(random.Random(seed), ("/data",))
        make_directories(disk, "/data/a/b/c")
        disk.crash(power_loss=True)
        assert disk.isdir("/data/a/b/c"), f"seed {seed}: a directory make_directories created was lost"


def test_replace_file_closes_what_it_opens_and_is_durable():
    disk = SimDisk(random.Random(0), ("/data",))
    replace_file(disk, "/data/state", b"one")
    replace_file(disk, "/data/state", b"two")
    assert disk._fds == {}, "replace_file left descriptors open"
    disk.crash(power_loss=True)
    assert disk.read_file("/data/state") == b"two"
