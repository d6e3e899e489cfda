"""ZAB's real replicas under the deterministic simulation (bridge/dst, `protocol=ZAB`).

The same nodes, network, disks and checks as tests/sim/test_dst.py, with ZAB's replica and its
currentEpoch file (impl/zab.py `EpochStorage`), written through impl/fs on the simulated disk, so
that faults, crashes inside a system call and power failures reach it too. By default: schedules
pinned because they fault or crash a node inside a call on the currentEpoch file, and a few dozen
derandomized ones; `-m deep` draws 2,000.
"""

from __future__ import annotations

from collections import Counter

import pytest
from hypothesis import HealthCheck, given, settings

from hwm.bridge.dst import Schedule, Step, run_schedule, schedules
from hwm.properties.protocol import ZAB

EPOCH_FILE_HIT = "fault or crash in a call on currentEpoch.tmp"

# Each faults the currentEpoch file as a new epoch is saved: EIO on its open (the node must stop),
# or the process dying inside one of its calls, then power failures and restarts.
EPOCH_FAULTED = (
    Schedule(seed=961, steps=(Step(135, "fault", 2, 1), Step(94, "crash", 1, 1))),
    Schedule(seed=767, steps=(Step(199, "crash", 1, 2), Step(184, "outage", 1, 2), Step(115, "put", 2, 5))),
    Schedule(seed=170347, steps=(Step(182, "fault", 0, 1), Step(126, "outage", 1, 6), Step(200, "heal", 2, 6),
                                 Step(174, "restart", 0, 7), Step(26, "isolate", 2, 0), Step(167, "crash", 2, 4),
                                 Step(137, "crash", 1, 4), Step(200, "crash", 1, 3))),
    Schedule(seed=767, steps=(Step(199, "crash", 1, 2), Step(184, "outage", 1, 2), Step(199, "crash", 1, 2))),
)


@pytest.mark.parametrize("schedule", EPOCH_FAULTED, ids=lambda s: f"seed{s.seed}-{len(s.steps)}steps")
def test_zab_keeps_every_promise_when_its_current_epoch_file_is_faulted(schedule):
    outcome = run_schedule(schedule, protocol=ZAB)
    assert not outcome.violations, outcome.report(schedule)
    assert outcome.witnesses[EPOCH_FILE_HIT] > 0, f"the schedule no longer reaches the currentEpoch file: " \
                                                   f"{dict(outcome.witnesses)}"


def run_zab_schedules(examples: int, derandomize: bool) -> Counter:
    seen: Counter = Counter()

    @settings(max_examples=examples, derandomize=derandomize, deadline=None, database=None,
              suppress_health_check=list(HealthCheck))
    @given(schedule=schedules())
    def zab_keeps_every_promise(schedule: Schedule) -> None:
        outcome = run_schedule(schedule, protocol=ZAB)
        assert not outcome.violations, outcome.report(schedule)
        seen.update(outcome.witnesses)
        seen["schedules"] += 1

    zab_keeps_every_promise()
    return seen


def test_zab_under_derandomized_schedules():
    seen = run_zab_schedules(25, derandomize=True)
    assert seen["schedules"] == 25 and seen["acknowledged puts"] > 0 and seen["restarts"] > 0, dict(seen)


@pytest.mark.deep
def test_zab_under_random_schedules():
    seen = run_zab_schedules(2000, derandomize=False)
    for witness in ("acknowledged puts", "reads", "restarts", "leader changes", "outages", "partitions",
                    "crashes during a persist", "crashes inside a system call", "fault ENOSPC", "fault EIO",
                    "fail-stop after a disk error", EPOCH_FILE_HIT, "other files that lost data in a crash"):
        assert seen[witness] > 0, f"no schedule exercised {witness!r}: {dict(seen)}"


def test_the_simulation_refuses_a_system_it_does_not_run():
    from hwm.properties.protocol import Protocol

    with pytest.raises(ValueError, match="runs raft, zab and kafka nodes, not bookkeeper"):
        run_schedule(EPOCH_FAULTED[0], protocol=Protocol(system="bookkeeper"))
