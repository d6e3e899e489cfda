"""Kafka's min.insync.replicas (`min_insync_replicas`): the flag's values, the acks=all rules that
follow from it on the model and the compiled backend, and its pinned spaces.

The preset `kafka-min-insync-1` is pinned in tests/pinned.py (every engine) and its smallest bounds
in tests/properties/test_mutant_table.py; here the flag's other values, which no preset names.
"""

import importlib.util
from dataclasses import replace

import pytest
from click.testing import CliRunner

from hwm.checker.run import CheckRequest, run
from hwm.cli import main
from hwm.model.kafka import KafkaModel
from hwm.model.registry import build_model
from hwm.model.state import Config
from hwm.properties.protocol import KAFKA, PRESETS, FLAG_VALUES, ProtocolError, model_only, resolve
from tests.pinned import check_against_pins

# The flag's values on three replicas at generation <= 2 (a second ~3 s each on the reference backend).
# A majority is pinned as the preset `kafka`: ('kafka', 3, 2, 1, 1, 'rpc', True), 5,124 states and 14,538
# transitions; 2 has the same states, fewer transitions: the leader whose ISR is itself refuses writes.
PINS = {
    2: {'states': 5124, 'transitions': 14516, 'depth': 12, 'bounds_hit': ['max_crashes', 'max_generation', 'max_log'],
        'lengths': {'EntryRead': 5, 'UncommittedTruncated': 4, 'LeaderChangeWithUncommitted': 3, 'CrashAndRejoin': 2,
                    'WriteAcknowledged': 4}},
    3: {'states': 3927, 'transitions': 11148, 'depth': 13, 'bounds_hit': ['max_crashes', 'max_generation', 'max_log'],
        'lengths': {'EntryRead': 5, 'UncommittedTruncated': 4, 'LeaderChangeWithUncommitted': 3, 'CrashAndRejoin': 2,
                    'WriteAcknowledged': 4}},
}
PIN_CONFIG = Config(servers=3, max_generation=2, max_log=1, max_crashes=1)
BACKENDS = ["reference"] + (["fast"] if importlib.util.find_spec("hwm.checker.fast") is not None else [])


def kafka(count, **config) -> KafkaModel:
    return build_model(replace(KAFKA, min_insync_replicas=count), Config(**config))


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("count", sorted(PINS))
def test_each_count_is_pinned_on_every_backend(count, backend):
    report = run(CheckRequest(f"kafka+min_insync_replicas={count}", successors=backend),
                 model=kafka(count, **PIN_CONFIG.__dict__))
    check_against_pins(report, PINS[count])
    assert not report.violated  # 2 and 3 of 3 replicas are at least a majority: safe


def test_the_flag_reads_counts_from_the_command_line_and_json():
    result = CliRunner().invoke(main, ["check", "--protocol", "kafka,min_insync_replicas=1", "--servers", "2",
                                       "--max-generation", "1", "--max-crashes", "0"])
    assert result.exit_code == 1 and "AckedWriteNeverLost" in result.output, result.output
    assert resolve({"preset": "kafka", "flags": {"min_insync_replicas": "1"}})[1].min_insync_replicas == 1
    assert resolve({"preset": "kafka", "flags": {"min_insync_replicas": 2}})[1].min_insync_replicas == 2
    assert KAFKA.min_insync_replicas == "majority" and FLAG_VALUES["min_insync_replicas"][0] == "majority"
    for bad in (0, 8, True, "all", "2.0"):
        with pytest.raises(ProtocolError, match="min_insync_replicas"):
            resolve({"preset": "kafka", "flags": {"min_insync_replicas": bad}})
    with pytest.raises(ProtocolError, match="does not apply to system 'raft'"):
        resolve({"preset": "raft", "flags": {"min_insync_replicas": 1}})
    assert PRESETS["kafka-min-insync-1"].protocol == replace(KAFKA, min_insync_replicas=1)


def test_a_count_above_the_replicas_is_refused_before_the_search():
    with pytest.raises(ValueError, match=r"min_insync_replicas=3 exceeds the 2 replicas \(servers=2\)"):
        kafka(3, servers=2)
    result = CliRunner().invoke(main, ["check", "--protocol", "kafka,min_insync_replicas=4"])
    assert result.exit_code == 2 and "min_insync_replicas=4 exceeds the 3 replicas" in result.output, result.output


def isr_of_one(model: KafkaModel):
    """S1 leads epoch 1, writes entry 1 with the full ISR, and removes S2 and S3, which never fetched it,
    from its ISR."""
    state = model.initial_state()
    for action in [("elect", 0, (0,)), ("write", 0), ("shrink_isr", 0, 1), ("shrink_isr", 0, 2)]:
        assert model.why_not(state, action) is None, (action, model.why_not(state, action))
        state = model.apply(state, action)
    return state


def test_a_leader_whose_isr_is_too_small_refuses_writes_and_acknowledges_nothing():
    # 2: the write went in with the full ISR; the ISR {S1} cannot move the HW, and a second write is refused.
    two = kafka(2, max_log=2)
    state = isr_of_one(two)
    assert state.servers[0].hwm == 0 and not state.acked
    assert "NOT_ENOUGH_REPLICAS" in two.why_not(state, ("write", 0))
    assert ("write", 0) not in list(two.actions(state))
    # 1: the leader alone is enough: its HW covers the entry, which is acknowledged on 1 of 3 replicas.
    one = kafka(1, max_log=2)
    state = isr_of_one(one)
    assert state.servers[0].hwm == 1 and state.acked == {(1, 1)}
    assert one.why_not(state, ("write", 0)) is None and ("write", 0) in list(one.actions(state))
    # The majority default keeps the model's abstraction: the write is appended, the HW waits.
    majority = kafka("majority", max_log=2)
    state = isr_of_one(majority)
    assert majority.why_not(state, ("write", 0)) is None and state.servers[0].hwm == 0


@pytest.mark.parametrize("count", ["majority", 1, 2, 3])
def test_guards_and_enumeration_agree(count):
    # Every action the model enumerates passes its guard and every other one has a reason, on every state
    # of a small space.
    model = kafka(count, servers=3, max_generation=2, max_log=2, max_crashes=0)
    table = model.action_table()
    seen, frontier = set(), [model.initial_state()]
    while frontier and len(seen) < 600:
        state = frontier.pop()
        if state in seen:
            continue
        seen.add(state)
        enabled = set(model.actions(state))
        for action in table:
            assert (model.why_not(state, action) is None) == (action in enabled), (count, action, state.describe())
        frontier += [model.apply(state, action) for action in enabled]


def test_named_counts_are_model_only_and_the_majority_runs_on_the_implementation():
    assert model_only(KAFKA) is None
    assert "min_insync_replicas=1 is model-only" in model_only(PRESETS["kafka-min-insync-1"].protocol)
