"""hwm's own replica behind the node protocol (`hwm node --stdio --protocol P`) passes the harness."""

import dataclasses

import pytest

from hwm.bridge.maelstrom.cluster import run_schedule
from hwm.bridge.maelstrom.hunt import hunt
from hwm.bridge.maelstrom.schedule import load
from tests.nodes.commands import SCHEDULES, own_node


@pytest.mark.parametrize("mistake", ["ack-on-write", "poll-above-hwm", "truncate-to-own-hwm"])
def test_hwms_own_node_passes_each_naive_mistakes_schedule(mistake):
    # Each change it shows is stepped against raft's model too.
    result = run_schedule(own_node("raft"), dataclasses.replace(load(SCHEDULES / f"{mistake}.json"), protocol="raft"))
    assert result.protocol_error is None and result.findings == [], [str(f) for f in result.findings]


def test_hwms_own_node_passes_a_fixed_number_of_hypothesis_schedules():
    report = hunt(own_node("raft"), workload="kafka", schedules=3, steps=12, seed=1, protocol="raft")
    assert report.failures == [] and report.schedules == 3, [str(f) for r in report.failures for f in r.findings]


def test_a_hunt_of_hwms_zab_node_lets_its_leader_establish_and_serve():
    # A ZAB leader takes writes only once a quorum acknowledged its NEWLEADER: the first settle gives it
    # the rounds (with 6, as for the other systems, this hunt served no client and checked little).
    report = hunt(own_node("zab"), workload="log", schedules=4, steps=30, seed=11, protocol="zab", shrink=False)
    assert report.failures == [] and report.schedules == 4, [str(f) for r in report.failures for f in r.findings]
    assert report.answered_ok > 0, f"0 of {report.operations} operations succeeded"
