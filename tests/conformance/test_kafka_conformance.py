"""Hypothesis drives Kafka's replicas (impl/kafka.py) against Kafka's model (model/kafka.py).

The safe preset `kafka` must conform: after every step the replicas' snapshot equals the model's and
every `always` property of Kafka's catalogue (the acks=all promises included) holds on the
implementation's history. Every value of every Kafka flag runs on the machine: the replicas never
diverge from the model, and only a broken combination may show a property violation.
tests/quality/test_kill_matrix.py hunts each broken preset down.
"""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

import pytest
from hypothesis.stateful import run_state_machine_as_test

from bridge.machine import (RPC, Divergence, PropertyViolation, conformance_settings, hunt, machine_for,
                            protocol_spec)
from impl.kafka import KafkaReplica
from model.state import Config
from properties.protocol import FLAG_VALUES, KAFKA, model_only, preset_of, resolve
from hwm.replay import replay_on_impl, replay_on_model
from properties.snapshot import snapshot_of
from properties.trace import load
from tests.conformance.test_conformance import MUST_HAPPEN, shows_statistics

KAFKA_MUST_HAPPEN = MUST_HAPPEN | {"shrink_isr"}


@shows_statistics
def test_kafka_conforms():
    machine = machine_for("kafka", RPC)
    run_state_machine_as_test(machine, settings=conformance_settings())
    assert KAFKA_MUST_HAPPEN <= set(machine.witnessed), \
        f"never happened: {KAFKA_MUST_HAPPEN - set(machine.witnessed)}"
    assert machine.witnessed["replicate"] and machine.witnessed["write"]


COMBINATIONS = [replace(KAFKA, follower_truncation=rule, unclean_election=unclean)
                for rule in FLAG_VALUES["follower_truncation"] for unclean in FLAG_VALUES["unclean_election"]
                if not model_only(replace(KAFKA, follower_truncation=rule))]


@pytest.mark.parametrize("protocol", COMBINATIONS,
                         ids=lambda p: f"{p.follower_truncation}-{'unclean' if p.unclean_election else 'clean'}")
def test_every_flag_value_runs_on_the_machine_without_diverging(protocol, tmp_path):
    found = hunt(machine_for(protocol, RPC, out_dir=tmp_path), 15)
    assert not isinstance(found.failure, Divergence), str(found.failure)
    if protocol == KAFKA:
        assert found.failure is None, str(found.failure)
    assert found.steps > 100


class FollowerIgnoresTheHwm(KafkaReplica):
    """A planted bug: a follower never takes the leader's high watermark."""

    def _set_high_water_mark(self, hwm: int) -> None:
        if self.role == "leader" or hwm < self.high_water_mark:
            super()._set_high_water_mark(hwm)


def test_the_machine_notices_a_replica_that_departs_from_the_model(tmp_path):
    machine = machine_for("kafka", RPC, replica_factory=FollowerIgnoresTheHwm, out_dir=tmp_path)
    found = hunt(machine, 200)
    assert isinstance(found.failure, Divergence), found.failure
    assert "snapshot differs" in str(found.failure)
    trace = load(found.failure.trace_path)
    assert trace.protocol == "kafka" and trace.expect == "holds" and trace.steps[-1].action == "replicate"


def test_a_custom_kafka_protocol_is_saved_as_the_kafka_preset_with_flags():
    protocol = replace(KAFKA, follower_truncation="own-hwm", unclean_election=True)
    assert preset_of(protocol) is None
    assert protocol_spec(protocol) == {"preset": "kafka", "flags": {"follower_truncation": "own-hwm",
                                                                    "unclean_election": True}}
    assert resolve(protocol_spec(protocol))[1] == protocol


MODEL_GAPS = pytest.mark.xfail(reason="beyond the tour's bounds the model's kafka preset violates CommittedOnQuorum "
                                      "(kafka-one-shot-truncation.json, kafka-deposed-leader-isr.json below)",
                               raises=PropertyViolation, strict=False)


@pytest.mark.deep
@pytest.mark.parametrize("config", [pytest.param(RPC, marks=MODEL_GAPS),
                                    pytest.param(Config(servers=4, max_generation=6, max_log=3, max_crashes=3),
                                                 marks=MODEL_GAPS),
                                    pytest.param(Config(servers=5, max_generation=6, max_log=2, max_crashes=3),
                                                 marks=MODEL_GAPS)],
                         ids=["rpc", "rpc-4", "rpc-5"])
def test_kafka_conforms_deep(config):
    run_state_machine_as_test(machine_for("kafka", config), settings=conformance_settings(stateful_step_count=60))


# A finding of the machine under the safe preset, beyond the tour's bounds, not fixed yet: a deposed
# leader counts the controller's latest ISR (the model, and so the implementation, which follows it).
# name -> (the violating step, S2's entry at offset 0 then, the entry the HW covers there)
FINDINGS = {"kafka-deposed-leader-isr": (19, 3, 1)}


def test_the_one_shot_truncation_finding_holds_once_the_fetcher_asks_again():
    """The machine's other finding: the model and the replicas truncated once where Kafka's fetcher
    asks again when it lacks the epoch the leader names (AbstractFetcherThread: truncationCompleted =
    false), and the safe preset broke CommittedOnQuorum in 19 steps. Both ask again now; the trace
    holds on both, snapshot for snapshot."""
    trace = load(Path(__file__).with_name("kafka-one-shot-truncation.json"))
    model, implementation = replay_on_model(trace), replay_on_impl(trace)
    assert (model.kind, implementation.kind) == ("holds", "holds"), (model.summary(), implementation.summary())
    assert [snapshot_of(v) for _, v in model.rows] == [snapshot_of(v) for _, v in implementation.rows]


@pytest.mark.parametrize("name", sorted(FINDINGS))
def test_a_finding_under_the_safe_preset_replays_on_both(name):
    step, kept, covered = FINDINGS[name]
    trace = load(Path(__file__).with_name(f"{name}.json"))
    assert trace.protocol == "kafka"
    model, implementation = replay_on_model(trace), replay_on_impl(trace)
    for outcome in (model, implementation):
        assert (outcome.kind, outcome.property, outcome.step) == ("violation", "CommittedOnQuorum", step), \
            outcome.summary()
    assert [snapshot_of(v) for _, v in model.rows] == [snapshot_of(v) for _, v in implementation.rows]
    assert snapshot_of(model.rows[-1][1]).servers[1].log[0] == kept != covered
    assert f"entry 1@g{covered} as committed" in model.finding
