"""Kafka's model as z3 formulas (proofs/kafka.py): its guards and effects against `model/kafka.py` on
sampled reachable states of every preset the encoding takes, and bounded model checking whose shortest
violations equal the explorer's pinned lengths (tests/pinned.py), each trace replayed on `KafkaModel`.
Default run: conformance on two replicas, the two-replica broken presets, KIP-101's divergence and safe
Kafka clean; `-m deep` adds three replicas (KIP-279, KIP-320's first attempt, unclean election)."""

from __future__ import annotations

import pytest

from hwm.model.registry import build_model
from hwm.model.state import Config
from hwm.proofs.encodings import encoding_for
from hwm.proofs.plan import unencoded
from hwm.proofs.symbolic import checked_properties
from hwm.properties.protocol import PRESETS, presets_of
from tests.proofs.sampling import bmc_disagreements, sample_states

KAFKA = [name for name in presets_of("kafka") if unencoded(PRESETS[name].protocol) is None]


def test_every_kafka_preset_is_encoded():
    # kafka-without-controller-fencing too: its rule shows only on a network that partitions
    # (tests/proofs/test_kafka_partitions.py).
    assert set(presets_of("kafka")) == set(KAFKA)
    assert "AcknowledgedWriteKept" in checked_properties(PRESETS["kafka"].protocol)


def _disagreements(name: str, config: Config, count: int, limit: int) -> list[str]:
    protocol = PRESETS[name].protocol
    states = sample_states(protocol, config, count, limit=limit, seed=1)
    enc = encoding_for(protocol, config.servers, config.max_log, max_generation=config.max_generation,
                       max_crashes=config.max_crashes, bitvectors=True)
    assert enc.actions == build_model(protocol, config).action_table()
    return enc.disagreements(build_model(protocol, config), states)


@pytest.mark.parametrize("name", KAFKA)
def test_kafka_encoding_agrees_with_the_model(name):
    # Two entries and three epochs: divergent logs, truncating followers, KIP-279's second round trip.
    assert _disagreements(name, Config(servers=2, max_generation=3, max_log=2, max_crashes=1), 40, 3000) == []


@pytest.mark.deep
@pytest.mark.parametrize("name", KAFKA)
def test_kafka_encoding_agrees_with_the_model_on_three_replicas(name):
    assert _disagreements(name, Config(servers=3, max_generation=3, max_log=2, max_crashes=1), 40, 20000) == []


# (preset, its pinned bounds, depth, properties: None for every property the encoding states)
DEFAULT_RUNS = [
    ("kafka-truncate-to-hwm", Config(servers=2, max_generation=2, max_log=1, max_crashes=1), 8, None),
    ("kafka-min-insync-1", Config(servers=2, max_generation=2, max_log=1, max_crashes=1), 4, None),
    ("kafka-unflushed", Config(servers=2, max_generation=2, max_log=1, max_crashes=1), 6, None),
    ("kafka-kip101", Config(servers=2, max_generation=3, max_log=2, max_crashes=1), 7,
     ("CommittedOnQuorum", "LogMatching")),
    ("kafka", Config(servers=2, max_generation=3, max_log=2, max_crashes=1), 6, ("CommittedOnQuorum",)),
]
DEEP_RUNS = [
    ("kafka-kip279", Config(servers=3, max_generation=3, max_log=1, max_crashes=1), 10, None),
    ("kafka-kip320-first-try", Config(servers=3, max_generation=3, max_log=1, max_crashes=0), 10, None),
    ("kafka-unclean-election", Config(servers=3, max_generation=3, max_log=1, max_crashes=1), 10, None),
    ("kafka-truncate-to-hwm", Config(servers=3, max_generation=2, max_log=1, max_crashes=1), 11, None),
    ("kafka-kip101", Config(servers=2, max_generation=3, max_log=2, max_crashes=1), 10, None),
    ("kafka", Config(servers=3, max_generation=3, max_log=1, max_crashes=1), 8, None),
]


@pytest.mark.parametrize("name, config, depth, properties", DEFAULT_RUNS,
                         ids=[f"{r[0]}-{r[1].servers}" for r in DEFAULT_RUNS])
def test_kafka_bmc_shortest_violations_equal_the_explorers(name, config, depth, properties):
    assert bmc_disagreements(name, config, depth, properties) == {}


@pytest.mark.deep
@pytest.mark.parametrize("name, config, depth, properties", DEEP_RUNS,
                         ids=[f"{r[0]}-{r[1].servers}" for r in DEEP_RUNS])
def test_kafka_bmc_on_three_replicas_equals_the_explorers(name, config, depth, properties):
    assert bmc_disagreements(name, config, depth, properties) == {}
