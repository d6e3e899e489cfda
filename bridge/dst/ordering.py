"""A small log with a header, to show what each simulated disk can and cannot catch.

`CountedLog` keeps fixed-size records after a header page that holds how many are valid (the
metadata) and trusts that count on recovery, with no checksum: the pattern of a superblock, a
segment index or a page table. Appending writes the record (the data), then the new count. Done
right, an fsync between the two is the barrier that keeps the count from reaching the disk before
the record does. The `metadata_before_data` plant drops that barrier, trusting the order of two
writes to one file, which a real file system does not keep.

`SimDisk` keeps a prefix of a file's unsynced operations, so it never loses the record while keeping
the count: the plant passes it. `ReorderingDisk` writes the header page back apart from the record's
page, and finds it. `run_schedule` is one schedule (appends, a crash inside some system call, a
power failure, recovery, the check); `schedules_until_found` counts schedules until one fails.
"""

from __future__ import annotations

import os
import random
import struct
from dataclasses import dataclass

from hwm.bridge.dst.disk import ReorderingDisk, SimDisk

__all__ = ["CountedLog", "run_schedule", "schedules_until_found", "DISKS", "PAGE_BYTES"]

PAGE_BYTES = 512  # the header is page 0; records start on page 1
RECORD = struct.Struct("<Q24s")  # 32 bytes: the record's number, its value
COUNT = struct.Struct("<Q")
PATH = "/data/counted.log"


class _PowerFails(Exception):
    """The machine loses power inside a system call."""


class CountedLog:
    def __init__(self, fs: SimDisk, metadata_before_data: bool = False):
        self.fs = fs
        self.metadata_before_data = metadata_before_data  # the plant: no barrier between record and count
        self.fd = fs.open(PATH, os.O_RDWR | os.O_CREAT, 0o644)
        fs.fsync_directory(os.path.dirname(PATH))
        self.count = self.recover(fs)[0] if fs.getsize(PATH) else 0

    def append(self, value: bytes) -> None:
        """Durable when it returns (the caller acknowledges then)."""
        self.fs.pwrite(self.fd, RECORD.pack(self.count + 1, value), PAGE_BYTES + self.count * RECORD.size)
        if not self.metadata_before_data:
            self.fs.fsync(self.fd)  # the record is on disk before any count that covers it
        self.fs.pwrite(self.fd, COUNT.pack(self.count + 1), 0)
        self.fs.fsync(self.fd)
        self.count += 1

    @staticmethod
    def recover(fs: SimDisk) -> tuple[int, list[tuple[int, bytes]]]:
        """(count, records) as the header says, trusted: no checksum."""
        data = fs.read_file(PATH)
        count = COUNT.unpack(data[:COUNT.size].ljust(COUNT.size, b"\0"))[0]
        records = []
        for k in range(count):
            raw = data[PAGE_BYTES + k * RECORD.size:][:RECORD.size].ljust(RECORD.size, b"\0")
            records.append(RECORD.unpack(raw))
        return count, records


DISKS = {
    "prefix": lambda rng: SimDisk(rng, ("/data",)),
    "reordering": lambda rng: ReorderingDisk(rng, ("/data",), page_bytes=PAGE_BYTES, sector_bytes=128),
}


@dataclass(frozen=True)
class Outcome:
    seed: int
    acknowledged: int
    recovered: list
    violation: str | None


def run_schedule(seed: int, disk: str, metadata_before_data: bool) -> Outcome:
    """Append up to 6 records; power fails inside a random write-like call; recover and check that
    every acknowledged record is back and every record the header counts is one that was written."""
    rng = random.Random(seed)
    fs = DISKS[disk](random.Random(rng.getrandbits(64)))
    log = CountedLog(fs, metadata_before_data)
    values = [b"value %d of seed %d" % (k, seed) for k in range(1, rng.randint(1, 6) + 1)]
    fs.inject(rng.randint(1, 4 * len(values)), _PowerFails())
    acknowledged = 0
    try:
        for value in values:
            log.append(value)
            acknowledged += 1
    except _PowerFails:
        pass
    fs.crash(power_loss=True)
    count, records = CountedLog.recover(fs)
    violation = None
    if count < acknowledged:
        violation = f"{acknowledged} records acknowledged, the header counts {count}"
    for k, (number, value) in enumerate(records):
        expected = (k + 1, values[k].ljust(24, b"\0")) if k < len(values) else None
        if (number, value) != expected:
            violation = (f"the header counts {count} records, but record {k + 1} reads {(number, value)!r}: "
                         "the count reached the disk before the record")
            break
    return Outcome(seed, acknowledged, records, violation)


def schedules_until_found(first_seed: int, disk: str, metadata_before_data: bool, limit: int) -> int | None:
    """How many schedules, from `first_seed` on, until one fails (None: none of `limit` did)."""
    for tried in range(1, limit + 1):
        if run_schedule(first_seed + tried - 1, disk, metadata_before_data).violation is not None:
            return tried
    return None
