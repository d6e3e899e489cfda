"""Kafka's log flush (`log_flush`): with `never`, Kafka's default flush settings, a crash is a power
failure that keeps the flushed prefix of the log and the checkpointed HW bounded by it, and the
controller drops the broker from the ISR unless it is the last member.

The preset `kafka-unflushed` is pinned in tests/pinned.py (every engine), its smallest bounds in
tests/properties/test_mutant_table.py and its catalogue traces in counterexamples/; here the
rules themselves, step by step.
"""

import json
from dataclasses import replace

import pytest
from click.testing import CliRunner

from hwm.cli import main
from hwm.model.kafka import KafkaModel, decode, encode
from hwm.model.registry import build_model
from hwm.model.state import Config
from hwm.properties.protocol import KAFKA, PRESETS, ProtocolError, model_only, resolve

UNFLUSHED = replace(KAFKA, log_flush="never")


def kafka(log_flush="never", **config) -> KafkaModel:
    return build_model(replace(KAFKA, log_flush=log_flush), Config(**config))


def run(model: KafkaModel, actions, state=None):
    state = state or model.initial_state()
    for action in actions:
        assert model.why_not(state, action) is None, (action, model.why_not(state, action))
        state = model.apply(state, action)
    return state


# S1 leads epoch 1 with S2 and S3 as followers, writes entry 1, S2 and S3 fetch it: S1's HW is 1 and
# the entry is acknowledged; S2 and S3 learn the HW on their next fetch.
ACKED_ON_ALL = [("elect", 0, (0, 1, 2)), ("write", 0), ("replicate", 0, 1), ("replicate", 0, 2),
                ("replicate", 0, 1)]


def test_the_flag_is_kafkas_defaults_to_always_and_is_model_only():
    assert KAFKA.log_flush == "always" and PRESETS["kafka-unflushed"].protocol == UNFLUSHED
    assert resolve({"preset": "kafka", "flags": {"log_flush": "never"}})[1] == UNFLUSHED
    with pytest.raises(ProtocolError, match="'log_flush' does not apply to system 'raft'"):
        resolve({"preset": "raft", "flags": {"log_flush": "never"}})
    with pytest.raises(ProtocolError, match="log_flush"):
        resolve({"preset": "kafka", "flags": {"log_flush": "sometimes"}})
    assert model_only(KAFKA) is None
    assert "log_flush=never is model-only" in model_only(UNFLUSHED)


def test_a_power_failure_keeps_the_flushed_prefix_and_bounds_the_checkpointed_hw():
    model = kafka(max_log=2)
    state = run(model, ACKED_ON_ALL)
    assert state.servers[1].hwm == 1 and state.acked == {(1, 1)}
    assert [s.flushed for s in state.servers] == [0, 0, 0]  # nothing reached a disk
    # S2's page cache is written back, then S1 writes entry 2, which S2 fetches unflushed.
    state = run(model, [("flush", 1), ("write", 0), ("replicate", 0, 1)], state)
    assert state.servers[1].flushed == 1 and state.servers[1].log == (1, 1)
    # S2 loses power: it keeps entry 1, the flushed prefix, not entry 2; its HW 1 stays within it.
    after = run(model, [("crash", 1)], state)
    assert after.servers[1].log == (1,) and after.servers[1].hwm == 1 and not after.servers[1].alive
    # S1 loses power with nothing flushed: its log and its HW are gone.
    after = run(model, [("crash", 0)], state)
    assert after.servers[0].log == () and after.servers[0].hwm == 0
    # Under always the same crash keeps everything, and there is nothing to flush.
    durable = kafka("always", max_log=2)
    state = run(durable, ACKED_ON_ALL)
    assert run(durable, [("crash", 0)], state).servers[0].log == (1,)
    assert "log_flush=always" in durable.why_not(state, ("flush", 0))
    assert ("flush", 0) not in durable.action_table()


def test_the_controller_drops_a_failed_broker_from_the_isr_unless_it_is_the_last():
    model = kafka(max_log=2, max_crashes=3)
    state = run(model, ACKED_ON_ALL)
    # S3 loses power: the controller removes it from the ISR and S1's own copy; S1's HW still needs S2.
    state = run(model, [("crash", 2)], state)
    assert [s.in_isr for s in state.servers] == [True, True, False] and state.servers[0].isr == (True, True, False)
    # S1, the leader, loses power: S2 remains in the ISR, so S1 leaves it too.
    state = run(model, [("crash", 0)], state)
    assert [s.in_isr for s in state.servers] == [False, True, False]
    # S2 is the last ISR replica: it stays, lost what it held, and is the only one the controller may elect.
    state = run(model, [("crash", 1), ("restart", 1)], state)
    assert state.servers[1].in_isr and state.servers[1].log == ()
    assert model.why_not(state, ("elect", 1, (1,))) is None
    assert run(model, [("elect", 1, (1,))], state).servers[1].log == ()  # acknowledged entry 1 is gone


def test_a_truncation_lowers_the_flushed_length():
    # S1 leads epoch 1 and flushes entry 1; S2 leads epoch 2 with an empty log (the request misses S1's
    # fetch) and S1, its follower, truncates entry 1 away: its flushed length follows its log.
    model = kafka(servers=2, max_generation=2, max_log=2)
    state = run(model, [("elect", 0, (0,)), ("write", 0), ("flush", 0), ("elect", 1, (0, 1)), ("write", 1),
                        ("replicate", 1, 0)])
    assert state.servers[0].log == (2,) and state.servers[0].flushed == 0
    assert run(model, [("crash", 0)], state).servers[0].log == ()


def test_the_flushed_length_is_part_of_the_state_bytes_and_absent_under_always():
    model = kafka(max_log=2)
    state = run(model, ACKED_ON_ALL + [("flush", 1)])
    assert decode(encode(state)) == state and state.servers[1].flushed == 1
    unflushed = run(model, ACKED_ON_ALL)
    assert model.fingerprint(state) != model.fingerprint(unflushed)
    # Under always every flushed length is 0: a state's bytes are those of the model before the flag.
    durable = kafka("always", max_log=2)
    assert encode(run(durable, ACKED_ON_ALL))[3:10] == bytes([1, 1, 1, 1, 1, 0, 1])


def test_the_command_line_takes_the_flag_and_finds_the_lost_acknowledged_write():
    result = CliRunner().invoke(main, ["check", "--protocol", "kafka,log_flush=never", "--servers", "2",
                                       "--max-generation", "1"])
    assert result.exit_code == 1 and "AckedWriteNeverLost" in result.output, result.output
    result = CliRunner().invoke(main, ["check", "--protocol", "kafka", "--servers", "2", "--max-generation", "1"])
    assert result.exit_code == 0, result.output
    result = CliRunner().invoke(main, ["check", "--protocol", "raft,log_flush=never"])
    assert result.exit_code == 2 and "does not apply to system 'raft'" in result.output, result.output


def test_an_out_of_range_fetch_lowers_the_flushed_length_on_both_backends():
    # S2 flushes entry 1; S1 writes entry 2, removes S2 (behind it) from the ISR and loses power with
    # nothing flushed; the last ISR replica, it is elected again, and S2, whose leader is unchanged, skips
    # truncation (makeFollower returns early). S2's fetch is past S1's empty log: OFFSET_OUT_OF_RANGE
    # truncates S2 to 0, and its flushed entry with it.
    model = kafka(servers=2, max_generation=2, max_log=2, max_crashes=2)
    before = run(model, [("elect", 0, (0, 1)), ("write", 0), ("replicate", 0, 1), ("flush", 1), ("write", 0),
                         ("shrink_isr", 0, 1), ("crash", 0), ("restart", 0), ("elect", 0, (0, 1))])
    assert before.servers[1].log == (1,) and before.servers[1].flushed == 1 and not before.servers[1].truncating
    after = run(model, [("replicate", 0, 1)], before)
    assert after.servers[1].log == () and after.servers[1].flushed == 0
    later = run(model, [("write", 0), ("replicate", 0, 1), ("crash", 1)], after)
    assert later.servers[1].log == ()  # entry 1@g2 never reached S2's disk
    fast = pytest.importorskip("hwm.checker.fast")
    for state in (before, after):  # the compiled copy takes the same steps to the same states
        backend = fast.FastBackend(model, True)
        expansion = backend.expand(backend.batch_of([state]))
        got = list(zip((backend.action(int(a)) for a in expansion.actions), backend.states(expansion.successors)))
        assert got == list(model.successors(state))


def test_a_trace_with_a_flush_step_replays_and_is_explained(tmp_path):
    # The trace vocabulary has `flush`; what a flush saves, a power failure keeps; under `kafka` a flush
    # is not a step at all.
    trace = {"format": "hwm-trace/1", "title": "a flush saves entry 1", "protocol": "kafka-unflushed",
             "config": {"servers": 2, "max_generation": 1, "max_log": 1, "max_crashes": 1},
             "expect": "holds",
             "steps": [{"action": "elect", "server": "S1", "voters": ["S1", "S2"]},
                       {"action": "write", "server": "S1"}, {"action": "replicate", "leader": "S1", "follower": "S2"},
                       {"action": "flush", "server": "S1"}, {"action": "crash", "server": "S1"}]}
    path = tmp_path / "flush.json"
    path.write_text(json.dumps(trace))
    result = CliRunner().invoke(main, ["replay", str(path)])
    assert result.exit_code == 0, result.output
    assert "S1's log reaches its disk" in result.output and "comes back with its flushed prefix only, 1 of 1 entries" in result.output
    result = CliRunner().invoke(main, ["replay", "-q", "--protocol", "kafka", str(path)])
    assert "blocked" in result.output and "log_flush=always" in result.output, result.output
