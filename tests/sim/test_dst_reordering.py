"""The real runtime's crash/restart schedules on the reordering disk (bridge/dst/disk.py
`ReorderingDisk`, `run_schedule(..., disk="reordering")`): a power failure keeps any subset of a
file's unsynced pages, torn at sectors, instead of a prefix of its writes.

By default: two schedules pinned because a power failure tears a log segment's unsynced page at a
sector, keeping a later record's bytes while losing an earlier one's (what the write-ahead log used
to refuse to recover from: both fail without its synced index), and the first
15 derandomized schedules of tests/sim/test_dst.py's strategy; `-m deep` draws 3,000 random ones.
"""

from __future__ import annotations

from collections import Counter

import pytest
from hypothesis import HealthCheck, given, settings

from hwm.bridge.dst import Schedule, Step, run_schedule, schedules

TORN_AT_A_SECTOR = "log pages torn at a sector in a crash"

PINNED = (
    Schedule(seed=2753, steps=(
        Step(151, "put", 0, 4), Step(76, "power", 2, 7), Step(79, "restart", 1, 6), Step(80, "get", 2, 7),
        Step(200, "power", 2, 1), Step(0, "put", 0, 1), Step(42, "put", 0, 1), Step(33, "put", 1, 6))),
    Schedule(seed=177367, steps=(
        Step(46, "crash", 1, 2), Step(86, "fault", 2, 4), Step(86, "fault", 2, 4), Step(156, "put", 2, 7),
        Step(17, "outage", 0, 1), Step(68, "power", 2, 4), Step(196, "outage", 1, 1), Step(31, "outage", 2, 4))),
)


@pytest.mark.parametrize("schedule", PINNED, ids=lambda s: f"seed{s.seed}")
def test_a_log_whose_unsynced_pages_survived_out_of_order_restarts_and_keeps_every_promise(schedule):
    outcome = run_schedule(schedule, disk="reordering")
    assert not outcome.violations, outcome.report(schedule)
    assert outcome.witnesses[TORN_AT_A_SECTOR] and outcome.witnesses["torn tail dropped on recovery"], \
        f"the schedule no longer tears a log's page: {dict(outcome.witnesses)}"


def run_reordering_schedules(examples: int, derandomize: bool) -> Counter:
    seen: Counter = Counter()

    @settings(max_examples=examples, derandomize=derandomize, deadline=None, database=None,
              suppress_health_check=list(HealthCheck))
    @given(schedule=schedules())
    def keeps_every_promise(schedule: Schedule) -> None:
        outcome = run_schedule(schedule, disk="reordering")
        assert not outcome.violations, outcome.report(schedule)
        seen.update(outcome.witnesses)
        seen["schedules"] += 1

    keeps_every_promise()
    return seen


def test_the_runtime_on_a_reordering_disk_under_derandomized_schedules():
    seen = run_reordering_schedules(15, derandomize=True)
    assert seen["schedules"] == 15 and seen["acknowledged puts"] > 0 and seen["restarts"] > 0, dict(seen)
    assert seen["other pages torn at a sector in a crash"] > 0, dict(seen)


@pytest.mark.deep
def test_the_runtime_on_a_reordering_disk_under_random_schedules():
    seen = run_reordering_schedules(3000, derandomize=False)
    for witness in ("acknowledged puts", "reads", "restarts", "leader changes", "torn tail dropped on recovery",
                    TORN_AT_A_SECTOR, "crashes during a persist",
                    "crashes inside a system call", "fault ENOSPC", "fault EIO"):
        assert seen[witness] > 0, f"no schedule exercised {witness!r}: {dict(seen)}"


def test_the_simulation_refuses_a_disk_it_does_not_have():
    with pytest.raises(ValueError, match="'ordered' is not one of prefix, reordering"):
        run_schedule(PINNED[0], disk="ordered")
