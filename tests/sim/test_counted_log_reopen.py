"""bridge/dst/ordering.py's CountedLog reopened on its own file goes on from the count its header
holds (the schedules always start from an empty disk, so only this test reopens one)."""

from __future__ import annotations

import random

from hwm.bridge.dst.disk import SimDisk
from hwm.bridge.dst.ordering import RECORD, CountedLog


def test_a_reopened_counted_log_appends_after_the_records_its_header_counts():
    fs = SimDisk(random.Random(0), ("/data",))
    first = CountedLog(fs)
    first.append(b"one")
    first.append(b"two")
    again = CountedLog(fs)
    assert again.count == 2
    again.append(b"three")
    count, records = CountedLog.recover(fs)
    assert count == 3
    assert records == [(k, v.ljust(RECORD.size - 8, b"\0")) for k, v in enumerate((b"one", b"two", b"three"), 1)]
