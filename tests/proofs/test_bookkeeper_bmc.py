"""BookKeeper's default ledger as z3 formulas (proofs/bookkeeper.py): guards and effects against
`model/bookkeeper.py` on sampled reachable states, and bounded model checking whose shortest violations
equal the explorer's pinned lengths (tests/pinned.py), each trace replayed on `BookKeeperModel`.
Default run: conformance on both presets, recovery without fencing on two bookies, safe BookKeeper
clean; `-m deep` adds three bookies (every property) and the refusals of the ledgers not encoded."""

from __future__ import annotations

import pytest

from hwm.model.registry import build_model
from hwm.model.state import Config
from hwm.proofs.encodings import encoding_for
from hwm.proofs.plan import unencoded
from hwm.properties.protocol import PRESETS, presets_of
from tests.proofs.sampling import bmc_disagreements, sample_states

ENCODED = ["bookkeeper", "bookkeeper-recovery-without-fencing"]


def test_only_the_default_ledger_is_encoded():
    assert [name for name in presets_of("bookkeeper") if unencoded(PRESETS[name].protocol) is None] == ENCODED
    why = unencoded(PRESETS["bookkeeper-striped"].protocol)
    assert why.startswith("the z3 encoding has the default ledger only") and "write_quorum=2" in why


@pytest.mark.parametrize("name", ENCODED)
def test_bookkeeper_encoding_agrees_with_the_model(name):
    protocol = PRESETS[name].protocol
    config = Config(servers=3, max_log=2, max_crashes=1)
    states = sample_states(protocol, config, 12, limit=3000, seed=1)
    # Fenced bookies, recovery under way and a closed ledger are in the sample.
    assert any(s.fenced for s in states) and any(s.negatives for s in states)
    enc = encoding_for(protocol, 3, 2, max_generation=config.max_generation, max_crashes=1, bitvectors=True)
    assert enc.actions == build_model(protocol, config).action_table()
    assert enc.disagreements(build_model(protocol, config), states) == []


def test_recovery_without_fencing_bmc_equals_the_explorer_on_two_bookies():
    assert bmc_disagreements("bookkeeper-recovery-without-fencing",
                             Config(servers=2, max_generation=1, max_log=1, max_crashes=0), 7) == {}


def test_safe_bookkeeper_bmc_shows_nothing_on_two_bookies():
    assert bmc_disagreements("bookkeeper", Config(servers=2, max_generation=1, max_log=1, max_crashes=1), 9) == {}


@pytest.mark.deep
@pytest.mark.parametrize("name", ENCODED)
def test_bookkeeper_bmc_on_three_bookies_equals_the_explorers(name):
    assert bmc_disagreements(name, Config(), 10) == {}


def test_the_encoding_waits_for_the_write_back_as_the_model_does():
    # Four bookies (AQ = 3): the closing read refused while fewer than three are up, taken once two came
    # back, and taken at once when the LAC reported covers every entry recovery knows.
    from tests.model.test_bookkeeper_recovery import BEFORE_THE_CLOSE, run
    protocol, config = PRESETS["bookkeeper"].protocol, Config(servers=4, max_log=2, max_crashes=3)
    model = build_model(protocol, config)
    states = [run(model, BEFORE_THE_CLOSE), run(model, BEFORE_THE_CLOSE + [("restart", 1)]),
              run(model, BEFORE_THE_CLOSE + [("restart", 1), ("restart", 2)]),
              run(model, [("add",), ("send_add", 0), ("send_add", 1), ("send_add", 2), ("send_add", 0),
                          ("fence", 0), ("fence", 3), ("crash", 1), ("crash", 2), ("recovery_read", 0)])]
    closing = [("recovery_read", 0)] * 3 + [("recovery_read", 3)]
    assert [model.why_not(s, a) is None for s, a in zip(states, closing)] == [False, False, True, True]
    enc = encoding_for(protocol, 4, 2, max_generation=config.max_generation, max_crashes=3, bitvectors=True)
    assert enc.disagreements(model, states) == []
