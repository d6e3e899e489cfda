"""The settle waits for every client's request in flight before its final write and the checks
(bridge/dst): a put still retrying when the schedule ends is answered before the final write."""

from __future__ import annotations

from hwm.bridge.dst import Schedule, Step, run_schedule


def test_a_put_in_flight_at_the_end_of_the_schedule_is_answered_before_the_final_write():
    # The put goes to S1 just as it crashed: it retries until the settle restarts the cluster.
    outcome = run_schedule(Schedule(seed=1, steps=(Step(0, "crash", 0), Step(0, "put", 0))))
    assert outcome.violations == []
    acks = [event.split()[2] for event in outcome.events if event.split()[1] == "ack"]  # "t ack VALUE at ..."
    assert acks == ["b'v1'", "b'final'"], outcome.events
