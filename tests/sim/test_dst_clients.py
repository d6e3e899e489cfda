"""Several clients at once under the deterministic simulation (`run_schedule(..., clients=3)`): each
put step's `arg` picks one of three sessions, so puts of different sessions are in flight together,
each retried with its own request ids across crashes, partitions and leader changes. Every run (one
client or several) also checks that no session's request is in the final committed log twice.

By default: 6 derandomized raft schedules; `-m deep` draws 1,000 raft ones and 200 of Kafka's.
"""

from __future__ import annotations

from collections import Counter

import pytest
from hypothesis import HealthCheck, given, settings

from hwm.bridge.dst import Schedule, run_schedule, schedules
from hwm.bridge.dst.kafka import kafka_schedules
from hwm.properties.protocol import KAFKA, RAFT


def run_with_clients(examples: int, derandomize: bool, protocol=RAFT, strategy=None) -> Counter:
    seen: Counter = Counter()

    @settings(max_examples=examples, derandomize=derandomize, deadline=None, database=None,
              suppress_health_check=list(HealthCheck))
    @given(schedule=strategy if strategy is not None else schedules())
    def keeps_every_promise(schedule: Schedule) -> None:
        outcome = run_schedule(schedule, protocol=protocol, clients=3)
        assert not outcome.violations, outcome.report(schedule)
        seen.update(outcome.witnesses)
        seen["schedules"] += 1
        seen["schedules with two clients acknowledged"] += outcome.witnesses["clients acknowledged"] >= 2

    keeps_every_promise()
    return seen


def test_three_clients_under_derandomized_raft_schedules():
    seen = run_with_clients(6, derandomize=True)
    assert seen["schedules with two clients acknowledged"] > 0, dict(seen)


@pytest.mark.deep
def test_three_clients_under_random_kafka_schedules():
    seen = run_with_clients(200, derandomize=False, protocol=KAFKA, strategy=kafka_schedules())
    assert seen["schedules with two clients acknowledged"] > 0, dict(seen)


@pytest.mark.deep
def test_three_clients_under_random_raft_schedules():
    seen = run_with_clients(1000, derandomize=False)
    assert seen["schedules with two clients acknowledged"] > 0, dict(seen)


def test_the_client_count_is_checked():
    with pytest.raises(ValueError, match="clients: expected an int in 1..8, got 0"):
        run_schedule(Schedule(1, ()), clients=0)
