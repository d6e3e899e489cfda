"""The bug catalogue: every file is the explorer's shortest trace and replays as it says."""

from pathlib import Path

import pytest

from counterexamples.build import CATALOGUE, HERE
from hwm.check import trace_for
from hwm.replay import judge, replay_on_model
from model.state import Config
from properties.protocol import PRESETS
from properties.trace import load
from tests.explored import explore

FILES = sorted(HERE.glob("*.json"))


def test_every_broken_preset_has_an_entry_and_every_entry_a_preset():
    broken = {name for name, p in PRESETS.items() if p.broken}
    assert {f.stem for f in FILES} == broken == set(CATALOGUE)


@pytest.mark.parametrize("path", FILES, ids=lambda p: p.stem)
def test_entry_replays_as_expected_on_the_model(path):
    trace = load(path)
    assert trace.title and len(trace.explanation) > 200
    outcome = replay_on_model(trace)
    assert judge(trace, outcome, overridden=False)[0] == 0, outcome.summary()
    assert outcome.step == len(trace.steps)  # the violation is the last step: nothing is superfluous


@pytest.mark.parametrize("path", FILES, ids=lambda p: p.stem)
def test_entry_is_the_explorers_shortest_trace(path):
    trace = load(path)
    report = explore(trace.protocol, Config.from_mapping(trace.config))
    shortest = trace_for(report, trace.protocol, trace.property)
    assert [s.to_json() for s in trace.steps] == [s.to_json() for s in shortest.steps]


@pytest.mark.parametrize("path", FILES, ids=lambda p: p.stem)
def test_raft_holds_or_blocks_with_a_reason(path):
    outcome = replay_on_model(load(path), "raft")
    assert outcome.kind in ("holds", "blocked")
    if outcome.kind == "blocked":
        assert outcome.reason and ":" in outcome.reason
