"""The hwm-trace/1 format: what is written reads back identically."""

import json

from hypothesis import given, settings
from hypothesis import strategies as st

from hwm.properties.trace import ACTIONS, FORMAT, Step, Trace, load, parse

names = st.sampled_from(["S1", "S2", "S3"])


@st.composite
def steps(draw):
    action = draw(st.sampled_from([a for a in ACTIONS if a not in ("send", "deliver", "drop")]))
    args = {}
    for name, kind in ACTIONS[action]:
        if kind == "server":
            args[name] = draw(names)
        elif kind == "servers":
            args[name] = tuple(draw(st.lists(names, min_size=1, max_size=3, unique=True)))
        elif draw(st.booleans()):
            args[name] = draw(st.text(max_size=8) | st.integers(0, 99))
    return Step(action, args)


@settings(max_examples=100, deadline=None)
@given(st.lists(steps(), max_size=12), st.text(max_size=40), st.sampled_from(["holds", "blocked"]))
def test_saved_trace_reads_back_identically(tmp_path_factory, step_list, title, expect):
    trace = Trace(protocol={"preset": "raft", "flags": {"commit": "any-generation"}},
                  config={"servers": 3, "max_generation": 4, "max_log": 1, "max_crashes": 1, "network": "rpc",
                          "channel_capacity": 1},
                  property=None, expect=expect, steps=step_list, title=title, explanation="why")
    path = trace.save(tmp_path_factory.mktemp("t") / "t.json")
    again = load(path)
    assert again.to_json() == trace.to_json()
    assert json.loads(path.read_text())["format"] == FORMAT
    assert parse(json.loads(trace.dumps())).steps == step_list
