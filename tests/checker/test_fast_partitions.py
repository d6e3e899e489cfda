"""The compiled backend on partitioned networks (model/partition.py, model/zab_partition.py,
model/kafka_partition.py): every pin of tests/pinned.py's PINNED_PARTITIONS whose system's partitions the
kernels compile (all of them; checker.fast.NOT_COMPILED_PARTITIONS would list a system without), on the fast
backend, with the reference backend's whole report (counts, depth, bounds, verdicts, shortest traces step by
step). The successor sets state by state are compared in tests/checker/test_fast.py (its `cut` cases).
"""

import pytest

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


def test_every_partition_preset_is_pinned_on_the_fast_backend():
    """Each preset whose rules act on a cut, and each system with compiled partitions, has a pin checked
    above; with none left uncompiled, the refusal stays for a system added without kernels."""
    on_a_cut = {name for name, p in PRESETS.items() if p.protocol.check_quorum or p.protocol.lease_reads
                or (p.protocol.system == "kafka" and not p.protocol.controller_fencing)}
    assert on_a_cut and on_a_cut <= {key[0] for key in COMPILED}
    assert {"raft", "zab", "kafka"} <= {PRESETS[key[0]].protocol.system for key in SMALL}
    assert not NOT_COMPILED_PARTITIONS, "a system whose partitions are refused: pin it here once compiled"
