"""BookKeeper's inductive invariant (proofs/bookkeeper.py, `BOOKKEEPER_INVARIANT`): crashes unbounded,
the default ledger and the striped one (E=3, WQ=2, AQ=2) on three bookies. It holds initially, every
action keeps it, and it implies every `always` property the encoding states; each conjunct holds on the
states the explorer reaches; and the preset whose recovery reads do not fence (apache/bookkeeper issue
2614) breaks it on `recovery_read` from a state the explorer reaches in two steps. Ledgers with spare
bookies (ensemble changes) have no invariant, and `hwm prove` says why. `-m deep`: logs of two entries
for the broken preset, and every reachable state at the default bounds, for both ledgers."""

from __future__ import annotations

import pytest

from hwm.checker.engine import CheckOptions, Sampler, Search
from hwm.model.registry import build_model
from hwm.model.state import Config
from hwm.proofs.bookkeeper import BOOKKEEPER_INVARIANT, induction_encoding, induction_proof
from hwm.proofs.induction import ConjunctEvaluator, check_induction
from hwm.proofs.symbolic import checked_properties
from hwm.properties.protocol import PRESETS
from tests.proofs.sampling import sample_states

SAFE, BROKEN = PRESETS["bookkeeper"].protocol, PRESETS["bookkeeper-recovery-without-fencing"].protocol
STRIPED = PRESETS["bookkeeper-striped"].protocol


def test_bookkeeper_invariant_is_inductive_and_implies_safety():
    result = check_induction(SAFE, 3, 1, BOOKKEEPER_INVARIANT, name="bookkeeper", enc=induction_encoding(SAFE, 3, 1))
    assert (result.init_failed, result.ctis, result.safety_failed, result.undecided) == ([], [], [], [])
    assert len(result.per_action_seconds) == 1 + 6 * 3  # add, then six actions per bookie


def test_without_fencing_recovery_reads_break_it_from_a_reachable_state():
    proof = induction_proof("bookkeeper-recovery-without-fencing", BROKEN, broken=True, servers=3, max_log=1)
    assert proof.ok and proof.data["reachable"], proof.detail
    assert proof.data["actions_with_cti"] == ["recovery_read(S1)", "recovery_read(S2)", "recovery_read(S3)"]
    assert "recovery_read(S3) breaks MissingIsFenced" in proof.detail
    assert "reaches this pre-state in 2 steps" in proof.detail and "fence(S1) fence(S2)" in proof.detail


def test_striped_invariant_is_inductive_and_implies_safety():
    # Write sets of two of three bookies, AQ = 2: fencing needs two answers, "no such entry" one.
    result = check_induction(STRIPED, 3, 2, BOOKKEEPER_INVARIANT, name="bookkeeper-striped",
                             enc=induction_encoding(STRIPED, 3, 2))
    assert (result.init_failed, result.ctis, result.safety_failed, result.undecided) == ([], [], [], [])
    assert "AckedWriteNeverLost" in checked_properties(STRIPED)


def test_ensemble_changes_have_no_invariant_and_say_why():
    for name in ("bookkeeper-ensemble-change", "bookkeeper-unblocked-adds"):
        proof = induction_proof(name, PRESETS[name].protocol, broken=False, servers=3, max_log=2)
        assert not proof.ok and proof.detail.startswith("no inductive invariant for ensemble changes "
                                                        "(ensemble_size=2 of 3 bookies)"), proof.detail
    # The striped ledger on four bookies has a spare too.
    assert "ensemble_size=3 of 4 bookies" in induction_proof("s", STRIPED, broken=False, servers=4).detail


def _conjuncts_on(states, max_log, protocol=SAFE):
    evaluator = ConjunctEvaluator(induction_encoding(protocol, 3, max_log), BOOKKEEPER_INVARIANT)
    return {name: state for state in states for name in evaluator.failed(state)}


@pytest.mark.parametrize("protocol", [SAFE, STRIPED])
def test_every_conjunct_holds_on_sampled_reachable_states(protocol):
    states = sample_states(protocol, Config(servers=3, max_log=2, max_crashes=1), 60, limit=6000, seed=2)
    assert any(s.servers[-1].role == "leader" for s in states)  # closed ledgers are in the sample
    assert _conjuncts_on(states, 2, protocol) == {}


@pytest.mark.deep
@pytest.mark.parametrize("protocol, states", [(SAFE, 2597), (STRIPED, 2459)])
def test_every_conjunct_holds_on_every_reachable_state(protocol, states):
    sampler = Sampler(10 ** 6)
    Search(build_model(protocol, Config(servers=3, max_log=1, max_crashes=1)), CheckOptions(properties=()),
           [sampler]).run()
    # The whole space (up to renaming bookies for the default ledger; tests/pinned.py).
    assert len(sampler.states) == states
    assert _conjuncts_on(sampler.states, 1, protocol) == {}


@pytest.mark.deep
def test_without_fencing_the_cti_is_reachable_with_two_entries():
    proof = induction_proof("bookkeeper-recovery-without-fencing", BROKEN, broken=True, servers=3, max_log=2)
    assert proof.ok and proof.data["reachable"], proof.detail


def test_the_invariant_is_not_vacuous():
    # A reachable state with entries, acknowledgements and a fenced bookie satisfies every conjunct.
    model = build_model(SAFE, Config(servers=3, max_log=1))
    state = model.initial_state()
    for action in [("add",), ("send_add", 0), ("send_add", 1), ("fence", 2)]:
        assert model.why_not(state, action) is None, action
        state = model.apply(state, action)
    assert state.acked and state.fenced
    assert _conjuncts_on([state], 1) == {}


@pytest.mark.deep
def test_on_four_bookies_the_invariant_implies_committed_on_quorum():
    # AQ = 3 of 4: an entry on an ack quorum and the two clients is on 5 of 6 servers only because
    # recovery writes what it read back to an ack quorum before it closes (ClosedLedgerOnAckQuorum).
    result = check_induction(SAFE, 4, 1, BOOKKEEPER_INVARIANT, name="bookkeeper", enc=induction_encoding(SAFE, 4, 1))
    assert (result.init_failed, result.ctis, result.safety_failed, result.undecided) == ([], [], [], [])
