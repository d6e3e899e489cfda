"""An unsynced truncation on the simulated disks: a power failure may keep it or lose it, on either
disk, and an fsync makes it stay. (A mutant of bridge/dst/disk.py that forgot to record it, so
that a power failure always lost it, passed the suite: docs/mutation.md.)"""

from __future__ import annotations

import os
import random

import pytest

from hwm.bridge.dst.disk import ReorderingDisk, SimDisk


def after_power_failure(disk_class, seed: int, sync_the_cut: bool) -> bytes:
    fs = disk_class(random.Random(seed), ("/data",))
    fd = fs.open("/data/f", os.O_RDWR | os.O_CREAT, 0o644)
    fs.pwrite(fd, b"x" * 100, 0)
    fs.fsync(fd)
    fs.fsync_directory("/data")
    fs.ftruncate(fd, 10)
    if sync_the_cut:
        fs.fsync(fd)
    fs.crash(power_loss=True)
    return fs.read_file("/data/f")


@pytest.mark.parametrize("disk_class", [SimDisk, ReorderingDisk])
def test_an_unsynced_truncation_is_sometimes_kept_and_sometimes_lost(disk_class):
    sizes = {len(after_power_failure(disk_class, seed, sync_the_cut=False)) for seed in range(30)}
    assert sizes == {10, 100}, sizes


@pytest.mark.parametrize("disk_class", [SimDisk, ReorderingDisk])
def test_an_fsynced_truncation_stays(disk_class):
    assert {after_power_failure(disk_class, seed, sync_the_cut=True) for seed in range(10)} == {b"x" * 10}
