"""The bug catalogue: every file is the explorer's shortest trace and replays as it says, on the
model and on the implementation (bridge.simcluster: real replicas, storage and codec)."""

import pytest
from click.testing import CliRunner

from counterexamples.build import CATALOGUE, HERE
from hwm.check import trace_for
from hwm.cli import main
from hwm.replay import judge, replay_on_impl, replay_on_model
from model.state import Config
from properties.protocol import PRESETS
from properties.snapshot import snapshot_of
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


@pytest.mark.parametrize("path", FILES, ids=lambda p: p.stem)
def test_entry_replays_as_expected_on_the_implementation(path):
    trace = load(path)
    outcome = replay_on_impl(trace)
    assert outcome.on == "impl"
    assert judge(trace, outcome, overridden=False)[0] == 0, outcome.summary()
    assert outcome.step == len(trace.steps)
    model = replay_on_model(trace)
    assert (outcome.property, outcome.finding) == (model.property, model.finding)
    # Step by step, the implementation's snapshots are the model's.
    assert [snapshot_of(view) for _, view in outcome.rows] == [snapshot_of(view) for _, view in model.rows]


@pytest.mark.parametrize("path", FILES, ids=lambda p: p.stem)
def test_raft_holds_or_blocks_with_a_reason_on_the_implementation(path):
    trace = load(path)
    outcome = replay_on_impl(trace, "raft")
    assert outcome.kind in ("holds", "blocked"), outcome.summary()
    if outcome.kind == "blocked":
        assert outcome.reason and ":" in outcome.reason
    model = replay_on_model(trace, "raft")
    # Where the model's guard forbids a step, the implementation refuses the same step (a lost
    # vote carries the same words); a read both refuse says why in each one's terms.
    assert (outcome.kind, outcome.step) == (model.kind, model.step)
    if outcome.kind == "blocked" and "vote" in model.reason:
        assert outcome.reason == model.reason


def test_the_whole_catalogue_replays_on_both_from_the_command_line():
    result = CliRunner().invoke(main, ["replay", "--on", "both", "-q"] + [str(p) for p in FILES])
    assert result.exit_code == 0, result.output
    assert result.output.count("[impl]: ") == len(FILES) and "(expected" not in result.output
    result = CliRunner().invoke(main, ["replay", "--on", "both", "-q", "--protocol", "raft"] + [str(p) for p in FILES])
    assert result.exit_code == 0, result.output
