"""The ZAB model as z3 formulas (proofs/zab.py): its guards and effects against `model/zab.py` on
sampled reachable states, and bounded model checking whose shortest violations equal the explorer's
pinned lengths (tests/pinned.py). Default run: a conformance sample of each ZAB preset and
zab-ack-before-persist's HwmNeverTruncated; `-m deep` adds every property and safe ZAB's clean run."""

from __future__ import annotations

import pytest

from hwm.model.registry import build_model
from hwm.model.state import Config
from hwm.proofs.bmc import bmc
from hwm.proofs.encodings import encoding_for
from hwm.proofs.symbolic import checked_properties
from hwm.properties.protocol import PRESETS
from tests.pinned import PINNED
from tests.proofs.sampling import sample_states

BROKEN = "zab-ack-before-persist"
PINNED_LENGTHS = PINNED[(BROKEN, 3, 4, 1, 1, "rpc", True)]["lengths"]


@pytest.mark.parametrize("name", ["zab", BROKEN])
def test_zab_encoding_agrees_with_the_model(name):
    protocol = PRESETS[name].protocol
    config = Config(max_generation=3, max_log=2, max_crashes=1)
    states = sample_states(protocol, config, 12)
    # Logs of two entries, memory ahead of disk, established leaders: the sample reaches ZAB's phases.
    assert any(max(len(s.log) for s in state.servers) == 2 for state in states)
    assert any(any(m & 0x80 for m in state.synced) for state in states)
    enc = encoding_for(protocol, 3, 2, max_generation=3, max_crashes=1, bitvectors=True)
    assert [a for a in enc.actions if a[0] in ("sync", "persist")] == (
        [("sync", l, f) for l in range(3) for f in range(3) if l != f] + [("persist", k) for k in range(3)])
    assert enc.disagreements(build_model(protocol, config), states) == []


def test_zab_bmc_shortest_violation_equals_the_explorers():
    found = bmc(PRESETS[BROKEN].protocol, Config(), ("HwmNeverTruncated",), max_depth=7)["HwmNeverTruncated"]
    assert found.length == PINNED_LENGTHS["HwmNeverTruncated"] == 6
    # Replayed on the explicit model by `bmc` itself; shown in the explorer's step notation.
    assert found.steps[0].startswith("elect(S1, {S1,") and "sync(S1, " in found.steps[1]


@pytest.mark.deep
def test_zab_bmc_every_property_equals_the_explorers():
    depth = 10
    found = bmc(PRESETS[BROKEN].protocol, Config(), checked_properties(PRESETS[BROKEN].protocol), max_depth=depth)
    for prop, result in found.items():
        theirs = PINNED_LENGTHS.get(prop)
        assert result.length == (theirs if theirs is not None and theirs <= depth else None), prop


@pytest.mark.deep
def test_safe_zab_shows_no_violation_within_eight_steps():
    protocol = PRESETS["zab"].protocol
    found = bmc(protocol, Config(), checked_properties(protocol), max_depth=8)
    assert {prop: r.length for prop, r in found.items()} == dict.fromkeys(checked_properties(protocol))
