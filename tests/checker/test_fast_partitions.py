"""The compiled backend on partitioned networks (model/partition.py, model/zab_partition.py): every pin of
tests/pinned.py's PINNED_PARTITIONS whose system's partitions the kernels compile, on the fast backend, with
the reference backend's whole report (counts, depth, bounds, verdicts, shortest traces step by step).

Kafka's partitioned model (model/kafka_partition.py) has no kernels: it is refused by name
(checker.fast.NOT_COMPILED_PARTITIONS; tests/model/test_partition_kafka_zab.py). The successor sets state
by state are compared in tests/checker/test_fast.py (its `cut` cases).
"""

import pytest

from hwm.checker.backend import BackendUnavailable
from hwm.checker.fast import NOT_COMPILED_PARTITIONS
from hwm.checker.run import CheckRequest, run
from hwm.properties.protocol import PRESETS
from tests.explored import explore
from tests.pinned import PINNED_PARTITIONS, check_against_pins, partition_config_of

COMPILED = [key for key in PINNED_PARTITIONS if PRESETS[key[0]].protocol.system not in NOT_COMPILED_PARTITIONS]
# The reference explores the pins marked deep only under -m deep; the fast backend meets their counts and
# lengths by default (about a second each), and the reference's whole report on them under deep.
SMALL = [key for key in COMPILED if not PINNED_PARTITIONS[key].get("deep")]


def outcome(report) -> dict:
    """Everything engines must agree on: the report without its timing and backend name."""
    data = report.to_json()
    for timing_or_name in ("seconds", "setup_seconds", "successors"):
        del data[timing_or_name]
    return data


def fast(key):
    preset, config, symmetry = partition_config_of(key)
    report = run(CheckRequest(preset, config, symmetry=symmetry, successors="fast"))
    assert report.successors == "fast"
    return report


@pytest.mark.parametrize("key", COMPILED, ids=lambda k: "-".join(map(str, k)))
def test_the_fast_backend_meets_the_pins(key):
    check_against_pins(fast(key), PINNED_PARTITIONS[key])


@pytest.mark.parametrize("key", [k if k in SMALL else pytest.param(k, marks=pytest.mark.deep) for k in COMPILED],
                         ids=lambda k: "-".join(map(str, k)))
def test_the_fast_backend_gives_the_reference_report(key):
    preset, config, symmetry = partition_config_of(key)
    assert outcome(fast(key)) == outcome(explore(preset, config, symmetry))


def test_every_partition_preset_of_a_compiled_system_is_pinned():
    """The partition presets and the systems with compiled partitions each have a pin checked above."""
    partitioned = {name for name, p in PRESETS.items()
                   if p.protocol.system not in NOT_COMPILED_PARTITIONS and p.protocol.system in ("raft", "zab")
                   and (p.protocol.check_quorum or p.protocol.lease_reads)}
    assert partitioned and partitioned <= {key[0] for key in SMALL}
    assert {"raft", "zab"} <= {PRESETS[key[0]].protocol.system for key in SMALL}


def test_kafka_partitions_are_refused_by_name():
    key = next(k for k in PINNED_PARTITIONS if PRESETS[k[0]].protocol.system == "kafka")
    with pytest.raises(BackendUnavailable, match="no compiled kafka partitions"):
        fast(key)
