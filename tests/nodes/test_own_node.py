"""hwm's own replica behind the node protocol (`hwm node --stdio --protocol P`) passes the harness.

Skipped in a build whose `hwm node` has no `--stdio`."""

import dataclasses
import sys

import pytest

from hwm.bridge.maelstrom.cluster import run_schedule
from hwm.bridge.maelstrom.hunt import hunt
from hwm.bridge.maelstrom.schedule import load
from tests.nodes.commands import SCHEDULES


def _own_node(protocol: str) -> list[str]:
    return [sys.executable, "-m", "hwm.cli", "node", "--stdio", "--protocol", protocol]


@pytest.fixture(scope="module", autouse=True)
def has_stdio():
    import click

    from hwm.cli import main

    node = main.get_command(click.Context(main), "node")
    if node is None or "stdio" not in {p.name for p in node.params}:
        pytest.skip("this build's `hwm node` has no --stdio")


@pytest.mark.parametrize("mistake", ["ack-on-write", "poll-above-hwm", "truncate-to-own-hwm"])
def test_hwms_own_node_passes_each_naive_mistakes_schedule(mistake):
    # Each change it shows is stepped against raft's model too.
    result = run_schedule(_own_node("raft"), dataclasses.replace(load(SCHEDULES / f"{mistake}.json"), protocol="raft"))
    assert result.protocol_error is None and result.findings == [], [str(f) for f in result.findings]


def test_hwms_own_node_passes_a_fixed_number_of_hypothesis_schedules():
    report = hunt(_own_node("raft"), workload="kafka", schedules=3, steps=12, seed=1, protocol="raft")
    assert report.failures == [] and report.schedules == 3, [str(f) for r in report.failures for f in r.findings]
