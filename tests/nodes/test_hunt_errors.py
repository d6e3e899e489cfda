"""A Hypothesis error inside a hunt with no failing schedule behind it is raised, not reported as a
clean hunt (bridge/maelstrom/hunt.py)."""

from __future__ import annotations

import hypothesis
import pytest

from hwm.bridge.maelstrom.hunt import hunt
from tests.nodes.commands import log_node


def test_a_hypothesis_error_with_no_failure_recorded_escapes_the_hunt():
    def on_schedule(report, result):
        raise hypothesis.errors.InvalidArgument("raised by the test, after a passing schedule")

    with pytest.raises(hypothesis.errors.InvalidArgument, match="raised by the test"):
        hunt(log_node(), workload="log", nodes=1, schedules=1, steps=1, seed=1, shrink=False, on_schedule=on_schedule)
