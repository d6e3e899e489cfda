"""Longer hunts (pytest -m deep): Hypothesis finds each naive mistake alone from scratch, shrinks it
to a short schedule, and the saved schedule replays to the same finding."""

import pytest

from hwm.bridge.maelstrom.cluster import run_schedule
from hwm.bridge.maelstrom.hunt import hunt, saved_schedule
from hwm.bridge.maelstrom.schedule import load
from tests.nodes.commands import log_node, naive_node

pytestmark = pytest.mark.deep


# Seed 0 catches each mistake within 20 schedules in bench/harness.py's runs; not every seed
# catches poll-above-hwm within 80 (the bench gives the rates).
@pytest.mark.parametrize("mistake, seed", [("ack-on-write", 0), ("poll-above-hwm", 0), ("truncate-to-own-hwm", 0)])
def test_the_hunt_catches_and_shrinks_each_mistake(mistake, seed, tmp_path):
    report = hunt(naive_node(mistake), workload="log", schedules=80, steps=30, seed=seed, shrink_seconds=120)
    assert report.failures, f"{mistake} not caught in {report.schedules} schedules"
    shortest = report.shortest
    assert shortest.protocol_error is None
    assert len(shortest.schedule.steps) <= 12, [s for s in shortest.schedule.steps]
    path = saved_schedule(shortest, naive_node(mistake), tmp_path / "shrunk.json")
    again = run_schedule(naive_node(mistake), load(path))
    assert {f.name for f in again.findings} & {f.name for f in shortest.findings}


def test_the_correct_node_passes_many_schedules_on_both_workloads():
    for workload in ("kafka", "log"):
        report = hunt(log_node(), workload=workload, schedules=100, steps=40, seed=None)
        assert report.failures == [], [str(f) for f in report.shortest.findings]
