"""BookKeeper's bookies under the deterministic simulation (bridge/dst/bookkeeper.py): three
`BookieServer`s on simulated disks and network, the writer's adds and a final ledger recovery, with
crashes, power failures, outages, partitions and disk faults.

By default: a pinned schedule that catches the bookie whose journal never fsyncs (an acknowledged entry
lost in an outage) and that the real bookie passes, the same outcome twice, and 4 derandomized schedules;
`-m deep` draws 1,000 random ones and searches for the planted bookie from scratch.
"""

from __future__ import annotations

from collections import Counter

import pytest
from hypothesis import HealthCheck, Phase, given, settings

from hwm.bridge.dst import Schedule, Step, schedules
from hwm.bridge.dst.bookkeeper import run_bookkeeper_schedule

# Two adds acknowledged on every bookie, then every machine loses power.
OUTAGE = Schedule(seed=0, steps=(Step(0, "put"), Step(0, "put"), Step(50, "outage", 0, 0)))


def test_the_bookie_that_never_fsyncs_loses_an_acknowledged_entry_and_the_real_one_does_not():
    planted = run_bookkeeper_schedule(OUTAGE, plant="bookie-no-fsync")
    assert any("acknowledged to the writer's client, is not in the closed ledger" in v
               for v in planted.violations), planted.report(OUTAGE)
    real = run_bookkeeper_schedule(OUTAGE)
    assert not real.violations, real.report(OUTAGE)
    assert real.witnesses["adds acknowledged"] == 2 and real.witnesses["ledgers closed"] == 1
    assert real.witnesses["power failures"] == 3 and real.witnesses["restarts"] == 3
    assert run_bookkeeper_schedule(OUTAGE).fingerprint == real.fingerprint  # deterministic


def test_a_bookkeeper_schedule_needs_a_bookkeeper_protocol_and_a_known_plant():
    from hwm.properties.protocol import RAFT

    with pytest.raises(ValueError, match="runs bookkeeper presets, not raft"):
        run_bookkeeper_schedule(OUTAGE, protocol=RAFT)
    with pytest.raises(ValueError, match="plant: 'nope' is not one of"):
        run_bookkeeper_schedule(OUTAGE, plant="nope")


def run_bookkeeper_schedules(examples: int, derandomize: bool) -> Counter:
    seen: Counter = Counter()

    @settings(max_examples=examples, derandomize=derandomize, deadline=None, database=None,
              suppress_health_check=list(HealthCheck))
    @given(schedule=schedules())
    def bookkeeper_keeps_every_promise(schedule: Schedule) -> None:
        outcome = run_bookkeeper_schedule(schedule)
        assert not outcome.violations, outcome.report(schedule)
        seen.update(outcome.witnesses)
        seen["schedules"] += 1

    bookkeeper_keeps_every_promise()
    return seen


def test_bookkeeper_under_derandomized_schedules():
    seen = run_bookkeeper_schedules(4, derandomize=True)
    assert seen["schedules"] == 4 and seen["ledgers closed"] == 4, dict(seen)


@pytest.mark.deep
def test_bookkeeper_under_random_schedules():
    seen = run_bookkeeper_schedules(1000, derandomize=False)
    # (An add waits for an ack quorum until the bookies are back, so every add ends acknowledged here.)
    for witness in ("adds acknowledged", "reads", "ledgers closed", "restarts", "crashes", "power failures",
                    "fail-stops", "fault ENOSPC", "fault EIO", "other writes torn in a crash"):
        assert seen[witness] > 0, f"no schedule exercised {witness!r}: {dict(seen)}"


@pytest.mark.deep
def test_a_search_finds_the_bookie_that_never_fsyncs():
    found: list[Schedule] = []

    @settings(max_examples=500, derandomize=True, deadline=None, database=None, phases=[Phase.generate],
              suppress_health_check=list(HealthCheck))
    @given(schedule=schedules())
    def search(schedule: Schedule) -> None:
        if not found and run_bookkeeper_schedule(schedule, plant="bookie-no-fsync").violations:
            found.append(schedule)

    search()
    assert found, "500 schedules missed the bookie whose journal never fsyncs"
