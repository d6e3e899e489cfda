"""A dropped message is in the run's events, what `hwm replay` narrates (bridge/maelstrom/cluster.py)."""

from __future__ import annotations

from hwm.bridge.maelstrom.cluster import run_schedule
from hwm.bridge.maelstrom.schedule import Schedule
from tests.nodes.commands import log_node


def test_a_dropped_message_is_narrated_at_its_step():
    # Three ticks make n1 a candidate with a request_vote to n2 in flight; the fourth step drops it.
    steps = [{"op": "tick"}] * 3 + [{"op": "drop", "from": "n1", "to": "n2"}]
    result = run_schedule(log_node(), Schedule(nodes=2, workload="log", steps=steps))
    assert result.protocol_error is None
    assert "n1→n2 request_vote (in flight)" in result.events[3], result.events[:5]
    assert result.events[4] == ["dropped n1→n2 request_vote"], result.events[:5]
