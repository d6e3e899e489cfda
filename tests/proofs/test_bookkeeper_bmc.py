"""BookKeeper's ledgers as z3 formulas (proofs/bookkeeper.py): guards and effects against
`model/bookkeeper.py` on sampled reachable states, and bounded model checking whose shortest violations
equal the explorer's pinned lengths (tests/pinned.py), each trace replayed on `BookKeeperModel`.
Default run: conformance on every preset (striping, ensemble changes), recovery without fencing on two
bookies, safe BookKeeper clean, the striped and ensemble-change ledgers at the explorer's bounds, issue
1591 at its pinned lengths, and a weakened fencing rule planted in the encoding caught; `-m deep` adds the
default ledgers on three bookies and the ledger presets on four."""

from __future__ import annotations

import pytest

from hwm.model.registry import build_model
from hwm.model.state import Config
from hwm.proofs.bmc import EncodingMismatch, bmc
from hwm.proofs.bookkeeper import BookKeeperEncoding
from hwm.proofs.encodings import encoding_for
from hwm.proofs.plan import unencoded
from hwm.properties.protocol import PRESETS, presets_of
from tests.proofs.sampling import bmc_disagreements, sample_states

ENCODED = ["bookkeeper", "bookkeeper-recovery-without-fencing"]
LEDGERS = ["bookkeeper-striped", "bookkeeper-ensemble-change", "bookkeeper-unblocked-adds"]


def test_every_ledger_is_encoded():
    assert [name for name in presets_of("bookkeeper") if unencoded(PRESETS[name].protocol) is None] == ENCODED + LEDGERS


def test_ensemble_changes_take_a_slot_per_crash_or_per_first_entry():
    # A change replaces a bookie that is down: with crashes bounded, one fragment slot per change; with
    # them unbounded (induction), one per first entry, since a change replaces the fragments from there.
    protocol = PRESETS["bookkeeper-ensemble-change"].protocol
    bounded = BookKeeperEncoding(protocol, 3, 2, max_crashes=3)
    assert (bounded.changes, bounded.keyed) == (3, False) and len(bounded.fresh("s").extra["frag_first"]) == 3
    unbounded = BookKeeperEncoding(protocol, 3, 2)
    assert (unbounded.changes, unbounded.keyed) == (0, True)
    assert [len(unbounded.fresh("s").extra[k]) for k in ("slot_on", "meta_on", "member")] == [2, 2, 3]


@pytest.mark.parametrize("name, servers", [(name, 3) for name in ENCODED + LEDGERS] + [("bookkeeper-striped", 4)])
def test_bookkeeper_encoding_agrees_with_the_model(name, servers):
    protocol = PRESETS[name].protocol
    config = Config(servers=servers, max_log=2, max_crashes=1)
    states = sample_states(protocol, config, 24, limit=4000, seed=1)
    # Fenced bookies, recovery under way and a closed ledger are in the sample (and, with spares, changes).
    assert any(s.fenced for s in states) and any(s.negatives for s in states)
    assert any(s.ensembles for s in states) == (servers > protocol.ensemble_size if protocol.ensemble_size != "all"
                                                else False)
    enc = encoding_for(protocol, servers, 2, max_generation=config.max_generation, max_crashes=1, bitvectors=True)
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


# The ledger presets at the explorer's bounds (`hwm check --protocol ...`: three bookies, one entry, one
# crash; the striped ledger's space is 12 steps deep, so depth 12 covers it), every property.
@pytest.mark.parametrize("name, depth", [("bookkeeper-striped", 12), ("bookkeeper-ensemble-change", 10),
                                         ("bookkeeper-unblocked-adds", 10)])
def test_ledger_bmc_equals_the_explorers(name, depth):
    assert bmc_disagreements(name, Config(), depth) == {}


def test_unblocked_adds_shortest_violations_are_the_explorers():
    # Issue 1591: acknowledged on the writer's new ensemble at 6 steps, lost to recovery at 9 and 10.
    found = bmc(PRESETS["bookkeeper-unblocked-adds"].protocol, Config(),
                ("CommittedOnQuorum", "AckedWriteNeverLost", "HwmNeverTruncated", "ReadNeverTruncated"), 10)
    assert {p: r.length for p, r in found.items()} == {"CommittedOnQuorum": 6, "AckedWriteNeverLost": 6,
                                                       "HwmNeverTruncated": 9, "ReadNeverTruncated": 10}
    # Which bookie the writer replaces is z3's choice (S1 in one run, S2 in another): that it does is not.
    assert any(step.startswith("change_ensemble(") for step in found["AckedWriteNeverLost"].steps)


@pytest.mark.deep
@pytest.mark.parametrize("name", LEDGERS)
def test_ledger_bmc_on_four_bookies_equals_the_explorers(name):
    # Four bookies: the striped ledger gets a spare, so ensemble changes, as the other two have.
    assert bmc_disagreements(name, Config(servers=4), 10) == {}


def test_a_weakened_fencing_rule_is_caught(monkeypatch):
    # Planted in the encoding only: recovery reads after E - AQ fencing answers (one of three) and do
    # not fence. BMC then finds an acknowledged entry lost in 5 steps, and its replay on the model fails.
    # (E - AQ alone is not enough at these bounds: a recovery read fences the bookie that reports the
    # entry missing, and that bookie is in the entry's write set, so no ack quorum can form.)
    encoded = BookKeeperEncoding.__init__

    def weakened(self, *args, **kwargs):
        encoded(self, *args, **kwargs)
        self.fencing_needed -= 1
        self.reads_fence = False

    monkeypatch.setattr(BookKeeperEncoding, "__init__", weakened)
    protocol = PRESETS["bookkeeper-striped"].protocol
    found = bmc(protocol, Config(), ("AckedWriteNeverLost",), 6, check_replay=False)
    assert found["AckedWriteNeverLost"].length == 5
    with pytest.raises(EncodingMismatch, match="fencing has not completed"):
        bmc(protocol, Config(), ("AckedWriteNeverLost",), 6)


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
