"""Kafka's brokers and controller under the deterministic simulation (bridge/dst/kafka.py,
`run_schedule(..., protocol=KAFKA)`): the same checks as raft's and ZAB's, with the controller's own
crashes (inside a save of its partition-state file too), disk faults and partitions.

By default: a schedule that catches the controller that sends its decision before saving it (the
mutant the default suite used to miss) and that the real controller passes, and 4 derandomized
schedules; `-m deep` draws 2,000 random ones and searches for the planted controller from scratch.
"""

from __future__ import annotations

from collections import Counter

import pytest
from hypothesis import HealthCheck, given, settings

from hwm.bridge.dst import Schedule, Step, run_schedule
from hwm.bridge.dst.kafka import CONTROLLER_STEP, kafka_schedules
from hwm.properties.protocol import KAFKA

# S1's disk fails its next write, the controller's its next one (the save of epoch 1, after the
# planted controller already told S1 it leads epoch 1), then every machine loses power: the restarted
# controller knows no epoch 1 and gives it to S2 as well.
SAVE_FAILS = Schedule(seed=10060, steps=(Step(0, "fault", 0, 0), Step(40, "fault", CONTROLLER_STEP, 0),
                                         Step(200, "outage", 1, 0)))


def test_the_controller_that_sends_before_saving_is_caught_and_the_real_one_is_not():
    planted = run_schedule(SAVE_FAILS, plant="controller-sends-first", protocol=KAFKA)
    assert any("both became leader of generation 1" in v for v in planted.violations), planted.report(SAVE_FAILS)
    real = run_schedule(SAVE_FAILS, protocol=KAFKA)
    assert not real.violations, real.report(SAVE_FAILS)
    assert real.witnesses["controller fail-stop after a disk error"] and real.witnesses["controller restarts"]


def run_kafka_schedules(examples: int, derandomize: bool) -> Counter:
    seen: Counter = Counter()

    @settings(max_examples=examples, derandomize=derandomize, deadline=None, database=None,
              suppress_health_check=list(HealthCheck))
    @given(schedule=kafka_schedules())
    def kafka_keeps_every_promise(schedule: Schedule) -> None:
        outcome = run_schedule(schedule, protocol=KAFKA)
        assert not outcome.violations, outcome.report(schedule)
        seen.update(outcome.witnesses)
        seen["schedules"] += 1

    kafka_keeps_every_promise()
    return seen


def test_kafka_under_derandomized_schedules():
    seen = run_kafka_schedules(4, derandomize=True)
    assert seen["schedules"] == 4 and seen["acknowledged puts"] > 0, dict(seen)
    assert seen["controller crashes"] > 0 and seen["controller restarts"] > 0, dict(seen)


@pytest.mark.deep
def test_kafka_under_random_schedules():
    seen = run_kafka_schedules(2000, derandomize=False)
    for witness in ("acknowledged puts", "reads", "restarts", "leader changes", "outages", "partitions",
                    "crashes during a persist", "crashes inside a system call", "fault ENOSPC", "fault EIO",
                    "fail-stop after a disk error", "controller crashes", "controller restarts",
                    "controller crashes inside a save", "controller fail-stop after a disk error",
                    "controller partitions", "fault or crash in a call on partition-state.json.tmp",
                    "controller partition-state file torn", "controller partition-state file lost",
                    "controller partition-state file eio", "controller refused a damaged partition-state file"):
        assert seen[witness] > 0, f"no schedule exercised {witness!r}: {dict(seen)}"


@pytest.mark.deep
def test_a_search_finds_the_controller_that_sends_before_saving():
    from hypothesis import Phase

    found: list[Schedule] = []

    @settings(max_examples=500, derandomize=True, deadline=None, database=None, phases=[Phase.generate],
              suppress_health_check=list(HealthCheck))
    @given(schedule=kafka_schedules())
    def search(schedule: Schedule) -> None:
        if not found and run_schedule(schedule, plant="controller-sends-first", protocol=KAFKA,
                                      first_violation=True).violations:
            found.append(schedule)

    search()
    assert found, "500 schedules missed the controller that sends its decision before saving it"


def test_a_simulated_run_logs_nothing_of_its_nodes_and_controller_and_leaves_their_loggers_as_found(caplog):
    """Thousands of schedules run in one process: the brokers' and the controller's log lines (a disk
    error, a refused request) are the simulation's to count, not the test output's."""
    import logging

    caplog.set_level(logging.DEBUG)
    node, controller = logging.getLogger("hwm.node"), logging.getLogger("hwm.controller")
    assert not node.disabled and not controller.disabled
    run_schedule(SAVE_FAILS, protocol=KAFKA)  # the controller's disk fails: it logs that, and stops
    assert [r for r in caplog.records if r.name.startswith(("hwm.node", "hwm.controller"))] == []
    assert not node.disabled and not controller.disabled
