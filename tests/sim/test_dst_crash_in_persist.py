"""A crash step armed for the next disk write lands inside that write (bridge/dst/net.py's disk-job
hook): the simulated loop tells the simulation when each machine's disk job runs."""

from __future__ import annotations

from hwm.bridge.dst import Schedule, Step, run_schedule


def test_an_armed_crash_lands_inside_the_machines_next_persist():
    # arg 1: S1 crashes in the middle of its next disk write (the election or the put brings one
    # within the half second before the last step).
    outcome = run_schedule(Schedule(seed=1, steps=(Step(0, "crash", 0, 1), Step(0, "put", 0), Step(500, "get", 1))))
    assert outcome.violations == []
    assert outcome.witnesses["crashes during a persist"] == 1, outcome.events
    last_step = next(k for k, event in enumerate(outcome.events) if " step +500ms get" in event)
    assert any(" down S1 " in event for event in outcome.events[:last_step]), outcome.events
