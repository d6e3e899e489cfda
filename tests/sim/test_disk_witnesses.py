"""The simulation's witnesses count what happened, not more: the reordering disk counts a file that
kept a later page and lost an earlier one only when it did, and Kafka's controller is counted as
crashed only when a step crashed it. (Mutants that counted them always passed: docs/mutation.md.)"""

from __future__ import annotations

import os
import random

from hwm.bridge.dst import Schedule, Step, run_schedule
from hwm.bridge.dst.disk import ReorderingDisk
from hwm.properties.protocol import KAFKA

WITNESS = "other files that kept a later page and lost an earlier one"


def test_kept_a_later_page_and_lost_an_earlier_one_is_counted_only_when_it_happened():
    counted = []
    for seed in range(40):
        fs = ReorderingDisk(random.Random(seed), ("/data",), page_bytes=16, sector_bytes=16)
        fd = fs.open("/data/f", os.O_RDWR | os.O_CREAT, 0o644)
        fs.fsync_directory("/data")
        fs.pwrite(fd, b"o" * 32, 0)
        fs.fsync(fd)
        fs.pwrite(fd, b"N" * 32, 0)  # two pages, unsynced
        fs.crash(power_loss=True)
        content = fs.read_file("/data/f")
        happened = content[:16] == b"o" * 16 and content[16:] == b"N" * 16
        counted.append((happened, fs.stats[WITNESS]))
    assert {c for c in counted} == {(True, 1), (False, 0)}, counted


def test_the_controller_is_not_counted_as_crashed_when_no_step_crashed_it():
    outcome = run_schedule(Schedule(seed=3, steps=(Step(50, "put", 0),)), protocol=KAFKA)
    assert not outcome.violations and outcome.witnesses["acknowledged puts"], outcome.report
    assert outcome.witnesses["controller crashes"] == 0, dict(outcome.witnesses)


def test_pages_that_survived_out_of_order_are_counted_only_when_they_did():
    witness = "other files whose unsynced pages survived out of order"
    counted = []
    for seed in range(40):
        fs = ReorderingDisk(random.Random(seed), ("/data",), page_bytes=16, sector_bytes=16)
        fd = fs.open("/data/f", os.O_RDWR | os.O_CREAT, 0o644)
        fs.fsync_directory("/data")
        fs.pwrite(fd, b"o" * 32, 0)
        fs.fsync(fd)
        fs.pwrite(fd, b"A" * 16, 0)  # first the first page,
        fs.pwrite(fd, b"B" * 16, 16)  # then the second: unsynced, in this order
        fs.crash(power_loss=True)
        content = fs.read_file("/data/f")
        counted.append((content[:16], content[16:], fs.stats[witness]))
    # Counted in some crash that kept the later write; never when the later write was lost. (A page
    # may also show its next version through an interrupted write-back, which counts as lost.)
    assert any(n == 1 for first, second, n in counted if second == b"B" * 16), counted
    in_order = [n for first, second, n in counted if second == b"o" * 16]
    assert in_order and set(in_order) == {0}, counted
