"""The errors that say a file cannot be read share one shape (properties/errors.py): the file, the
place in it, the field, then why; each format names its own place (a step, a line, a state)."""

from __future__ import annotations

import pytest

from hwm.properties.errors import InputError
from hwm.properties.events import EventError
from hwm.properties.itf import ItfError
from hwm.properties.trace import TraceError

CASES = [
    (TraceError("unknown action", file="t.json", step=3, field="action"), "t.json, step 3, field 'action': unknown action"),
    (TraceError("no steps", file="t.json"), "t.json: no steps"),
    (TraceError("bad", step=0), "step 0: bad"),  # step 0 is a place (the first is 1, but 0 is named)
    (TraceError("bad", field=""), "bad"),  # an empty field names nothing
    (EventError("not JSON", file="run.jsonl", line=7), "run.jsonl, line 7: not JSON"),
    (EventError("bad role", line=2, field="role"), "line 2, field 'role': bad role"),
    (ItfError("not a number", file="a.itf.json", state=0, variable="hwm"),
     "a.itf.json, state 0, variable 'hwm': not a number"),
    (ItfError("no states"), "no states"),
]


@pytest.mark.parametrize("error, message", CASES, ids=lambda c: str(c)[:40] if isinstance(c, str) else None)
def test_each_error_names_its_file_place_and_field(error, message):
    assert str(error) == message
    assert isinstance(error, InputError) and isinstance(error, ValueError)
    assert error.reason == message.rsplit(": ", 1)[-1]


def test_the_place_and_field_stay_readable_by_name():
    error = TraceError("bad", file="t.json", step=2, field="server")
    assert (error.file, error.step, error.field) == ("t.json", 2, "server")
    assert EventError("bad", line=4).line == 4
    assert (ItfError("bad", state=1).state, ItfError("bad", variable="log").variable) == (1, "log")
