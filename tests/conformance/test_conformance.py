"""Hypothesis drives the implementation against the model (bridge/conformance/).

The safe presets must conform on both networks: after every step the replicas' snapshot equals the
model's and every `always` property holds on the implementation's history. The run must also
reach what makes the check meaningful: crashes, truncations, leader changes, reads.

`pytest --hypothesis-show-statistics tests/conformance` lists how often each action and event fired.
"""

from __future__ import annotations

import json

import pytest
from click.testing import CliRunner
from hypothesis.stateful import run_state_machine_as_test

from hwm.cli import main
from hwm.checker.replay import judge, replay_on_model
from hwm.bridge.replay import replay_on_impl
from hwm.model.state import Config
from hwm.properties.trace import load
from hwm.bridge.conformance import (
    ASYNC,
    RPC,
    PropertyViolation,
    conformance_settings,
    hunt,
    machine_for,
)

# The run must show the events that make a passing check mean something (DESIGN: vacuity guards).
MUST_HAPPEN = {"crash", "restart", "truncation", "leader change", "read", "EntryRead",
               "UncommittedTruncated", "LeaderChangeWithUncommitted", "CrashAndRejoin"}


def shows_statistics(test):
    """Let `--hypothesis-show-statistics` report a test that runs a state machine itself (the
    same marker Hypothesis puts on a RuleBasedStateMachine.TestCase's runTest)."""
    test.is_hypothesis_test = True
    return test


def conforms(preset: str, config: Config, **overrides):
    """Run the machine; a failing run is saved under hwm-out/conformance/ (the message names the file)."""
    machine = machine_for(preset, config)
    run_state_machine_as_test(machine, settings=conformance_settings(**overrides))
    return machine


@shows_statistics
def test_raft_conforms_on_the_rpc_network():
    machine = conforms("raft", RPC)
    assert MUST_HAPPEN <= set(machine.witnessed), f"never happened: {MUST_HAPPEN - set(machine.witnessed)}"
    assert machine.witnessed["replicate"] and machine.witnessed["write"]


@shows_statistics
def test_raft_conforms_on_the_async_network():
    machine = conforms("raft", ASYNC)
    assert MUST_HAPPEN <= set(machine.witnessed), f"never happened: {MUST_HAPPEN - set(machine.witnessed)}"
    assert {"send", "deliver", "drop"} <= set(machine.witnessed)


@shows_statistics
def test_zab_conforms_on_the_rpc_network():
    # ZAB's machine adds sync and persist, and compares the ZAB state too (bridge/simcluster/zab.py's ZabView);
    # zab-ack-before-persist's run is tests/impl/test_zab.py's (it violates properties by design).
    machine = conforms("zab", RPC)
    assert MUST_HAPPEN <= set(machine.witnessed), f"never happened: {MUST_HAPPEN - set(machine.witnessed)}"
    assert machine.witnessed["sync"] and machine.witnessed["replicate"] and machine.witnessed["write"]


@pytest.mark.parametrize("preset", ["raft-durable-hwm", "raft-noop"])
@pytest.mark.parametrize("config", [RPC, ASYNC], ids=["rpc", "async"])
def test_the_other_safe_presets_conform(preset, config):
    conforms(preset, config, max_examples=30)


DEEP_CONFIGS = {
    "rpc": RPC,
    "async": ASYNC,
    "rpc-4": Config(servers=4, max_generation=6, max_log=3, max_crashes=3, network="rpc"),
    "async-5": Config(servers=5, max_generation=6, max_log=2, max_crashes=3, network="async", channel_capacity=2),
}


@pytest.mark.deep
@pytest.mark.parametrize("preset, config", [("raft", c) for c in DEEP_CONFIGS] + [
    (p, c) for p in ("raft-durable-hwm", "raft-noop") for c in ("rpc", "async")] + [("zab", "rpc"), ("zab", "rpc-4")])
def test_safe_presets_conform_deep(preset, config):
    conforms(preset, DEEP_CONFIGS[config], stateful_step_count=60)


# ------------------------------------------------------------------ failures become traces
def test_a_violation_is_written_as_a_trace_that_replays_as_is(tmp_path):
    # raft-seed-quorum on two servers: computeHighwaterMark's [N/2] counts S1 alone as a quorum.
    config = Config(servers=2, max_generation=2, max_log=1, max_crashes=0)
    found = hunt(machine_for("raft-seed-quorum", config, out_dir=tmp_path), budget=100, shrink=True)
    failure = found.failure
    assert isinstance(failure, PropertyViolation), "the conformance machine missed raft-seed-quorum"
    assert failure.property == "CommittedOnQuorum"
    assert str(failure.trace_path) in str(failure) and failure.trace_path.parent == tmp_path
    trace = load(failure.trace_path)
    assert (trace.protocol, trace.expect, trace.property) == ("raft-seed-quorum", "violation", "CommittedOnQuorum")
    assert trace.config == {"servers": 2, "max_generation": 2, "max_log": 1, "max_crashes": 0,
                            "network": "rpc", "channel_capacity": 1}
    # Shrunk: an election or two, then the write that S1 alone counts as committed (the explorer's
    # shortest is elect(S1, {S1,S2}) write(S1)).
    assert trace.steps[-1].action == "write" and len(trace.steps) <= 3
    for replay in (replay_on_model, replay_on_impl):
        outcome = replay(trace)
        assert judge(trace, outcome, overridden=False)[0] == 0, outcome.summary()
        assert outcome.step == len(trace.steps)
    result = CliRunner().invoke(main, ["replay", "--on", "both", str(failure.trace_path)])
    assert result.exit_code == 0, result.output
    assert "CommittedOnQuorum" in result.output and "(as expected)" in result.output
    # The file is the documented format, one step per line.
    assert json.loads(failure.trace_path.read_text())["format"] == "hwm-trace/1"
