"""A late append refused: hwm's own raft node, stepped against raft's model, takes the generation of a
leader that stepped down from the append it refuses (once a false `ModelStep`, found by
bench/false_findings_nodes.py; checker/observed.py's `_refused_appends`)."""

from pathlib import Path

from hwm.bridge.maelstrom.cluster import run_schedule
from hwm.bridge.maelstrom.schedule import load
from tests.nodes.commands import own_node

SCHEDULE = Path(__file__).with_name("late_refused_append.json")


def test_a_follower_refusing_a_late_append_of_a_leader_that_stepped_down_is_a_behaviour_of_raft():
    result = run_schedule(own_node("raft"), load(SCHEDULE))
    assert result.protocol_error is None and result.findings == [], [str(f) for f in result.findings]
    # The run still shows the step: n2 stops leading generation 2, then n1 shows generation 2 with
    # its own entry of generation 1, the previous entry n2 named missing.
    shown = [(o["node"], o["role"], o["generation"], [g for _, g in o["log"]]) for o in result.observations]
    stepped_down = shown.index(("n2", "follower", 2, [2]))
    assert ("n1", "follower", 2, [1]) in shown[stepped_down + 1:], shown
