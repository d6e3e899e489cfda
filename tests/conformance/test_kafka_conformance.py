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

from hwm.bridge.conformance import (RPC, Divergence, PropertyViolation, conformance_settings, hunt, machine_for,
                            protocol_spec)
from hwm.impl.kafka import KafkaReplica
from hwm.model.state import Config
from hwm.properties.protocol import FLAG_VALUES, KAFKA, model_only, preset_of, resolve
from hwm.bridge.replay import replay_on_impl
from hwm.checker.replay import replay_on_model
from hwm.properties.snapshot import snapshot_of
from hwm.properties.trace import load
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


@pytest.mark.deep
@pytest.mark.parametrize("config", [RPC, Config(servers=4, max_generation=6, max_log=3, max_crashes=3),
                                    Config(servers=5, max_generation=6, max_log=2, max_crashes=3)],
                         ids=["rpc", "rpc-4", "rpc-5"])
def test_kafka_conforms_deep(config):
    run_state_machine_as_test(machine_for("kafka", config), settings=conformance_settings(stateful_step_count=60))


def test_the_one_shot_truncation_finding_holds_once_the_fetcher_asks_again():
    """The machine's other finding: the model and the replicas truncated once where Kafka's fetcher
    asks again when it lacks the epoch the leader names (AbstractFetcherThread: truncationCompleted =
    false), and the safe preset broke CommittedOnQuorum in 19 steps. Both ask again now; the trace
    holds on both, snapshot for snapshot."""
    trace = load(Path(__file__).with_name("kafka-one-shot-truncation.json"))
    model, implementation = replay_on_model(trace), replay_on_impl(trace)
    assert (model.kind, implementation.kind) == ("holds", "holds"), (model.summary(), implementation.summary())
    assert [snapshot_of(v) for _, v in model.rows] == [snapshot_of(v) for _, v in implementation.rows]


def test_the_deposed_leader_isr_finding_holds_once_a_leader_counts_its_own_isr():
    """The machine's finding under the safe preset: a deposed leader that missed the LeaderAndIsr
    request counted the controller's latest ISR (which a newer leader had shrunk) and raised its HW
    over entry 1@g1 held by fewer than a majority: CommittedOnQuorum broke in 19 steps on both. A
    leader now counts its own copy of the ISR (Partition.inSyncReplicaIds), as Kafka's does; the
    trace holds on both, snapshot for snapshot."""
    trace = load(Path(__file__).with_name("kafka-deposed-leader-isr.json"))
    assert trace.protocol == "kafka" and len(trace.steps) == 19
    model, implementation = replay_on_model(trace), replay_on_impl(trace)
    assert (model.kind, implementation.kind) == ("holds", "holds"), (model.summary(), implementation.summary())
    assert [snapshot_of(v) for _, v in model.rows] == [snapshot_of(v) for _, v in implementation.rows]
