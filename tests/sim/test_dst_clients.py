"""Several clients at once under the deterministic simulation (`run_schedule(..., clients=3)`): each
put step's `arg` picks one of three sessions, so puts of different sessions are in flight together,
each retried with its own request ids across crashes, partitions and leader changes. Every run (one
client or several) also checks that no session's request is in the final committed log twice; a
node that writes a retried put again (`plant="retry-written-again"`) is caught by a pinned schedule.

By default: 6 derandomized raft schedules; `-m deep` draws 1,000 raft ones and 200 of Kafka's.
"""

from __future__ import annotations

import os
import subprocess
import sys
from collections import Counter

import pytest
from hypothesis import HealthCheck, given, settings

from hwm.bridge.dst import Schedule, Step, run_schedule, schedules
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


# A put commits; both followers crash; the next put waits on the leader, its client retries it
# there; the followers come back and both copies commit if the leader writes the retry again.
RETRIED = Schedule(seed=3, steps=(Step(300, "put", 0, 0), Step(400, "crash", 1, 0), Step(0, "crash", 2, 0),
                                  Step(0, "put", 0, 0), Step(900, "restart", 1), Step(0, "restart", 2)))


def test_a_retry_written_again_is_caught_and_the_real_sessions_are_not():
    planted = run_schedule(RETRIED, plant="retry-written-again")
    assert any("in the committed log twice" in v for v in planted.violations), planted.report(RETRIED)
    real = run_schedule(RETRIED)
    assert not real.violations, real.report(RETRIED)


# Client 1's second put reaches the leader S1, which appends it at index 3 and is cut off at once;
# S3 leads generation 2, client 2 registers its session there (its entry takes index 3), and the
# cut heals: S1 commits S3's entry 3. S1's put waited on index 3, so it must be answered "not
# written", not confirmed because an entry now sits at its index. Pinned: derandomized draws that
# make such an overwrite while the client still waits on S1 are rare, and which the default run
# drew depended on how the suite was run.
OVERWRITTEN = Schedule(seed=0, steps=(Step(300, "put", 0, 0), Step(100, "put", 0, 0), Step(2, "isolate", 0, 0),
                                      Step(110, "put", 1, 1), Step(0, "heal", 0, 0)))


def test_a_put_whose_entry_another_leader_replaced_is_not_confirmed():
    outcome = run_schedule(OVERWRITTEN, clients=3)
    assert not outcome.violations, outcome.report(OVERWRITTEN)
    assert "put b'v1' not written: entry 3 was overwritten by the leader of generation 2" in " ".join(outcome.events)
    assert outcome.witnesses["UncommittedTruncated"] >= 1


def test_a_pinned_schedule_replays_the_same_events_in_a_fresh_process():
    # A kill must not depend on how the suite is run (-n 0 or xdist's workers, which tests ran before
    # in the same process, the hash seed): the pinned schedule's run is the same in a new process.
    script = ("from hwm.bridge.dst import Schedule, Step, run_schedule\n"
              f"schedule = {OVERWRITTEN!r}\n"
              "print(repr(run_schedule(schedule, clients=3).events))")
    fresh = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=120,
                           env=dict(os.environ, PYTHONHASHSEED="1"))
    assert fresh.returncode == 0, fresh.stderr
    assert fresh.stdout.strip() == repr(run_schedule(OVERWRITTEN, clients=3).events)


def test_the_client_count_is_checked():
    with pytest.raises(ValueError, match="clients: expected an int in 1..8, got 0"):
        run_schedule(Schedule(1, ()), clients=0)
