"""The simulation's check that a put is acknowledged at the index that holds it (bridge/dst), with
a node planted here that answers each put with the index before the one that holds it."""

from __future__ import annotations

from dataclasses import replace

from hwm.bridge import dst
from hwm.bridge.dst import Schedule, Step, run_schedule
from hwm.impl.runtime import Node
from hwm.impl.storage import DiskStorage


class _Shifted:
    """A client connection whose put answers name the index before the committed one."""

    def __init__(self, connection):
        self.connection = connection

    def answer(self, slot, message, *rest):
        if message.index is not None and message.index > 1:
            message = replace(message, index=message.index - 1)
        return self.connection.answer(slot, message, *rest)


class _AcksAnEarlierIndexNode(Node):
    def _confirm(self, entry):
        for pending in self._pending.get(entry.index, ()):
            pending.connection = _Shifted(pending.connection)
        super()._confirm(entry)


def test_a_put_acknowledged_at_an_index_holding_another_request_is_a_violation(monkeypatch):
    monkeypatch.setitem(dst.PLANTS, "acks-an-earlier-index", (_AcksAnEarlierIndexNode, DiskStorage))
    schedule = Schedule(seed=1, steps=(Step(0, "put", 0),))
    assert run_schedule(schedule).violations == []
    violations = run_schedule(schedule, plant="acks-an-earlier-index", first_violation=True).violations
    assert len(violations) == 1 and "acknowledged put b'v0' (request 1) at index 1, which holds b'' of request" \
        in violations[0], violations
