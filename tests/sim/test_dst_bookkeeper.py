"""BookKeeper's bookies under the deterministic simulation (bridge/dst/bookkeeper.py): three
`BookieServer`s on simulated disks and network, the writer's adds and a final ledger recovery, with
crashes, power failures, outages, partitions and disk faults.

By default: a pinned schedule that catches the bookie whose journal never fsyncs (an acknowledged entry
lost in an outage) and that the real bookie passes, the same outcome twice; a pinned race of a
recovery with the writer's add that catches apache/bookkeeper issue 2614 (recovery reads that do not
fence) and that the fix passes; 4 derandomized schedules. `-m deep` draws 1,000 random ones (with
BookKeeper's recoveries, cuts and mends among the steps), searches for the planted bookie from scratch,
and searches the timing of the race for issue 2614.
"""

from __future__ import annotations

from collections import Counter

import pytest
from hypothesis import HealthCheck, Phase, given, settings

from hwm.bridge.dst import Schedule, Step, schedules
from hwm.bridge.dst.bookkeeper import (
    RECOVERY_RACE,
    bookkeeper_schedules,
    recovery_race_schedules,
    run_bookkeeper_schedule,
)
from hwm.impl.bookkeeper import RecoveryClient
from hwm.properties.protocol import BOOKKEEPER, PRESETS

WITHOUT_FENCING_READS = PRESETS["bookkeeper-recovery-without-fencing"].protocol

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


# Issue 2614's race (RECOVERY_RACE) at pauses that line it up: recovery closes the ledger empty at
# t = 0.67 s, S3's link to the writer comes back at 0.8 s.
RACE = Schedule(seed=0, steps=tuple(Step(pause, *step) for pause, step in
                                    zip((0, 0, 0, 50, 0, 100, 300, 350), RECOVERY_RACE)))


def test_a_recovery_racing_the_writer_loses_an_acknowledged_entry_only_without_fencing_reads():
    broken = run_bookkeeper_schedule(RACE, protocol=WITHOUT_FENCING_READS)
    assert any("entry 1 (b'v2'), acknowledged to the writer's client, is not in the closed ledger of 0 entries" in v
               for v in broken.violations), broken.report(RACE)
    assert any("recovery closes the ledger at entry 0" in e for e in broken.events)
    fixed = run_bookkeeper_schedule(RACE, protocol=BOOKKEEPER)  # the recovery read fences S3: the add is refused
    assert not fixed.violations and fixed.witnesses["adds acknowledged"] == 0, fixed.report(RACE)
    assert fixed.witnesses["adds not acknowledged"] == 1 and fixed.witnesses["ledgers closed"] == 1


def test_a_bookkeeper_schedule_needs_a_bookkeeper_protocol_and_a_known_plant():
    from hwm.properties.protocol import RAFT

    with pytest.raises(ValueError, match="runs bookkeeper presets, not raft"):
        run_bookkeeper_schedule(OUTAGE, protocol=RAFT)
    with pytest.raises(ValueError, match="plant: 'nope' is not one of"):
        run_bookkeeper_schedule(OUTAGE, plant="nope")


def run_bookkeeper_schedules(examples: int, derandomize: bool, strategy=None, protocol=BOOKKEEPER) -> Counter:
    seen: Counter = Counter()

    @settings(max_examples=examples, derandomize=derandomize, deadline=None, database=None,
              suppress_health_check=list(HealthCheck))
    @given(schedule=strategy if strategy is not None else schedules())
    def bookkeeper_keeps_every_promise(schedule: Schedule) -> None:
        outcome = run_bookkeeper_schedule(schedule, protocol=protocol)
        assert not outcome.violations, outcome.report(schedule)
        seen.update(outcome.witnesses)
        seen["schedules"] += 1

    bookkeeper_keeps_every_promise()
    return seen


def test_bookkeeper_under_derandomized_schedules():
    seen = run_bookkeeper_schedules(4, derandomize=True)
    assert seen["schedules"] == 4 and seen["ledgers closed"] == 4, dict(seen)


def test_a_striped_ledger_under_derandomized_schedules_with_recoveries():
    # bookkeeper-striped (E = 3, WQ = AQ = 2): holes in the journals; recoveries race the adds.
    seen = run_bookkeeper_schedules(3, derandomize=True, strategy=bookkeeper_schedules(),
                                    protocol=PRESETS["bookkeeper-striped"].protocol)
    assert seen["schedules"] == 3 and seen["ledgers closed"] == 3, dict(seen)


@pytest.mark.deep
def test_a_striped_ledger_under_random_schedules():
    seen = run_bookkeeper_schedules(300, derandomize=False, strategy=bookkeeper_schedules(),
                                    protocol=PRESETS["bookkeeper-striped"].protocol)
    for witness in ("adds acknowledged", "reads", "ledgers closed", "entries recovered beyond the last acknowledged"):
        assert seen[witness] > 0, f"no schedule exercised {witness!r}: {dict(seen)}"


@pytest.mark.deep
def test_bookkeeper_under_random_schedules():
    seen = run_bookkeeper_schedules(1000, derandomize=False, strategy=bookkeeper_schedules())
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


@pytest.mark.deep
def test_a_search_of_the_race_finds_issue_2614_and_never_fails_the_fix():
    found: list[Schedule] = []

    @settings(max_examples=200, derandomize=True, deadline=None, database=None, phases=[Phase.generate],
              suppress_health_check=list(HealthCheck))
    @given(schedule=recovery_race_schedules())
    def search(schedule: Schedule) -> None:
        if run_bookkeeper_schedule(schedule, protocol=WITHOUT_FENCING_READS).violations:
            found.append(schedule)
        fixed = run_bookkeeper_schedule(schedule, protocol=BOOKKEEPER)
        assert not fixed.violations, fixed.report(schedule)

    search()
    assert found, "200 timings of the race missed issue 2614"


def test_a_late_add_to_a_bookie_recovery_did_not_fence_is_no_violation():
    """Recovery fences S1 and S3 while S2 is down; the writer's add then reaches S2 after the close. S2 holds
    an entry beyond the closed ledger, which no reader reads (the model allows the same late add)."""
    schedule = Schedule(seed=84, steps=(Step(0, "recover", 0, 0), Step(0, "cut", 0, 0), Step(0, "crash", 1, 0),
                                        Step(0, "put", 0, 0), Step(5, "get", 0, 0)))
    outcome = run_bookkeeper_schedule(schedule, protocol=PRESETS["bookkeeper-striped"].protocol)
    assert outcome.violations == [] and outcome.witnesses["ledgers closed"] == 1


# The writer's add reaches S1 only (S2 and S3 cut from the writer); recovery then reads entry 1 from
# S1, after every LAC reported (0), and must write it back to an ack quorum before it closes.
RECOVERED = Schedule(seed=0, steps=(Step(0, "cut", 1, 0), Step(0, "cut", 2, 0), Step(0, "put", 0, 0),
                                    Step(50, "recover", 0, 0)))


def test_recovery_closes_only_once_its_recovery_adds_are_on_an_ack_quorum(monkeypatch):
    real = run_bookkeeper_schedule(RECOVERED)
    assert real.violations == [] and real.witnesses["ledgers closed"] == 1, real.report(RECOVERED)
    assert real.witnesses["entries recovered beyond the last acknowledged"] == 1
    # A recovery client that closes as soon as the entry after the last is missing (before any
    # recovery add is acknowledged) closes with entry 1 on S1 alone.
    monkeypatch.setattr(RecoveryClient, "unconfirmed", lambda self: [])
    planted = run_bookkeeper_schedule(RECOVERED)
    assert any("recovery closed the ledger at entry 1 while entry 1, which it read after the highest LAC reported "
               "(0), was on 1 bookie(s) of its write set ['S1', 'S2', 'S3'] (S1), fewer than the ack quorum of 2"
               in v for v in planted.violations), planted.report(RECOVERED)
