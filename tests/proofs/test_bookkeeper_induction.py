"""BookKeeper's inductive invariant (proofs/bookkeeper.py, `BOOKKEEPER_INVARIANT`): crashes unbounded,
the default ledger on three bookies. It holds initially, every action keeps it, and it implies every
`always` property the encoding states; each conjunct holds on the states the explorer reaches; and the
preset whose recovery reads do not fence (apache/bookkeeper issue 2614) breaks it on `recovery_read` from
a state the explorer reaches in two steps. `-m deep`: logs of two entries for the broken preset, and
every reachable state at the default bounds."""

from __future__ import annotations

import pytest

from hwm.checker.engine import CheckOptions, Sampler, Search
from hwm.model.registry import build_model
from hwm.model.state import Config
from hwm.proofs.bookkeeper import BOOKKEEPER_INVARIANT, induction_encoding, induction_proof
from hwm.proofs.induction import ConjunctEvaluator, check_induction
from hwm.properties.protocol import PRESETS
from tests.proofs.sampling import sample_states

SAFE, BROKEN = PRESETS["bookkeeper"].protocol, PRESETS["bookkeeper-recovery-without-fencing"].protocol


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


def _conjuncts_on(states, max_log):
    evaluator = ConjunctEvaluator(induction_encoding(SAFE, 3, max_log), BOOKKEEPER_INVARIANT)
    return {name: state for state in states for name in evaluator.failed(state)}


def test_every_conjunct_holds_on_sampled_reachable_states():
    states = sample_states(SAFE, Config(servers=3, max_log=2, max_crashes=1), 60, limit=6000, seed=2)
    assert any(s.servers[-1].role == "leader" for s in states)  # closed ledgers are in the sample
    assert _conjuncts_on(states, 2) == {}


@pytest.mark.deep
def test_every_conjunct_holds_on_every_reachable_state():
    sampler = Sampler(10 ** 6)
    Search(build_model(SAFE, Config(servers=3, max_log=1, max_crashes=1)), CheckOptions(properties=()),
           [sampler]).run()
    assert len(sampler.states) == 2597  # the whole space up to renaming bookies (tests/pinned.py)
    assert _conjuncts_on(sampler.states, 1) == {}


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
