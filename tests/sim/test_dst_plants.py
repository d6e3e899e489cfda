"""Planted bugs: the simulation must find a schedule that catches each (bridge/dst/ PLANTS).

Each plant is the real runtime with one promise broken: `skip-fsync` (storage sync hands the
records to the OS but never fsyncs), `send-before-persist` (a batch's messages and answers go out
before it is durable), `ack-on-append` (a put is confirmed once the leader's own log holds it, not
once it is committed). The search draws the same derandomized schedules as the main test; the first
that fails is shrunk, printed, and shown to pass on the unplanted runtime.

Which schedules a derandomized search draws depends on the modules loaded in the process (Hypothesis
collects constants from them), so whether the search catches a plant could depend on how the suite
is split among xdist's workers. Each plant therefore also has a pinned schedule (`PINNED`, the
search's shrunk find) that catches it whatever the draw, and that the unplanted runtime passes; a
fresh process with another hash seed replays them the same.
"""

from __future__ import annotations

import os
import subprocess
import sys

import pytest

from hwm.bridge.dst import PLANTS, Schedule, Step, find_failing, run_schedule


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


# Each plant's schedule, as the search above found and shrank it (`find_failing(plant)`).
PINNED = {
    # The leader S2 acknowledges a put (entry 2) that no server fsynced; an outage drops the page
    # caches, and the acknowledged entry is left on one server's disk.
    "skip-fsync": Schedule(seed=27889017, steps=(Step(132, "put", 2, 0), Step(108, "outage", 2, 0))),
    # After an outage a disk fault keeps S1 down; S2's vote makes S3 leader of generation 1, but it
    # went out before it was durable and a disk fault stops S2 first; restarted, S2 votes again in
    # generation 1, for S1: two leaders of one generation.
    "send-before-persist": Schedule(seed=5363, steps=(Step(0, "outage", 0, 0), Step(0, "fault", 0, 0),
                                                      Step(167, "fault", 1, 0), Step(200, "put", 0, 0))),
    # After an outage, with S1 cut off, S3 leads generation 2 and confirms a put (entry 4) as soon
    # as its own log holds it: an acknowledged entry on one server of three.
    "ack-on-append": Schedule(seed=521921, steps=(Step(50, "put", 1, 0), Step(141, "outage", 2, 0),
                                                  Step(42, "isolate", 0, 0), Step(21, "put", 1, 0),
                                                  Step(16, "isolate", 0, 0), Step(183, "get", 1, 0))),
}


def test_every_plant_has_a_pinned_schedule():
    assert set(PINNED) == {name for name in PLANTS if name is not None}


@pytest.mark.parametrize("plant", sorted(PINNED))
def test_a_pinned_schedule_catches_the_plant_and_passes_the_real_runtime(plant):
    schedule = PINNED[plant]
    planted = run_schedule(schedule, plant)
    assert planted.violations, f"the pinned schedule no longer catches {plant}:\n{planted.report(schedule)}"
    correct = run_schedule(schedule)
    assert not correct.violations, correct.report(schedule)


def test_the_pinned_schedules_catch_their_plants_in_a_fresh_process():
    # Whether a plant is caught must not depend on how the suite is run (-n 0 or xdist's workers,
    # which tests ran before in the same process, the hash seed): a new process with another hash
    # seed replays each pinned schedule, planted and not, event for event.
    def runs(plant, schedule):
        return [(run.violations, run.events) for run in (run_schedule(schedule, plant), run_schedule(schedule))]

    script = ("from hwm.bridge.dst import Schedule, Step, run_schedule\n"
              f"pinned = {PINNED!r}\n"
              "print(repr({plant: [(run.violations, run.events) for run in "
              "(run_schedule(schedule, plant), run_schedule(schedule))] for plant, schedule in pinned.items()}))")
    fresh = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=120,
                           env=dict(os.environ, PYTHONHASHSEED="1"))
    assert fresh.returncode == 0, fresh.stderr
    here = {plant: runs(plant, schedule) for plant, schedule in PINNED.items()}
    assert fresh.stdout.strip() == repr(here)
    assert all(planted[0] and not correct[0] for planted, correct in here.values())
