"""Planted bugs: the simulation must find a schedule that catches each (bridge/dst/ PLANTS).

Each plant is the real runtime with one promise broken: `skip-fsync` (storage sync hands the
records to the OS but never fsyncs), `send-before-persist` (a batch's messages and answers go out
before it is durable), `ack-on-append` (a put is confirmed once the leader's own log holds it, not
once it is committed). The search draws the same derandomized schedules as the main test; the first
that fails is shrunk, printed, and shown to pass on the unplanted runtime.
"""

from __future__ import annotations

import pytest

from hwm.bridge.dst import PLANTS, find_failing, run_schedule


@pytest.mark.parametrize("plant", [name for name in PLANTS if name is not None])
def test_the_simulation_catches_a_planted_bug(plant, capsys):
    found = find_failing(plant, examples=1000)
    assert found is not None, f"no schedule of 1000 caught {plant}"
    outcome = run_schedule(found, plant)
    with capsys.disabled():
        print(f"\n{plant} caught by the shrunk schedule:\n{outcome.report(found)}")
    assert outcome.violations
    correct = run_schedule(found)
    assert not correct.violations, correct.report(found)
