"""BookKeeper's inductive invariant (proofs/bookkeeper.py, `BOOKKEEPER_INVARIANT`): crashes unbounded,
the default ledger and the striped one (E=3, WQ=2, AQ=2) on three bookies, and ledgers with spare bookies,
whose ensemble changes are unbounded with the crashes (E=2 of 3; the striped ledger on four). It holds
initially, every action keeps it, and it implies every `always` property the encoding states; each
conjunct holds on the states the explorer reaches; the preset whose recovery reads do not fence
(apache/bookkeeper issue 2614) breaks it on `recovery_read` from a state the explorer reaches in two
steps, and the one whose writer does not block its add completions (issue 1591) on `change_ensemble`
in three. `-m deep`: logs of two entries for the broken preset, four bookies, and every reachable state
at the default bounds, for each ledger."""

from __future__ import annotations

import pytest
import z3

from hwm.checker.engine import CheckOptions, Sampler, Search
from hwm.model.registry import build_model
from hwm.model.state import Config
from hwm.proofs.bookkeeper import BOOKKEEPER_INVARIANT, BookKeeperEncoding, induction_encoding, induction_proof
from hwm.proofs.induction import ConjunctEvaluator, check_induction
from hwm.proofs.symbolic import checked_properties
from hwm.properties.protocol import PRESETS
from tests.proofs.sampling import sample_states, what_fails

SAFE, BROKEN = PRESETS["bookkeeper"].protocol, PRESETS["bookkeeper-recovery-without-fencing"].protocol
STRIPED = PRESETS["bookkeeper-striped"].protocol
CHANGES, UNBLOCKED = PRESETS["bookkeeper-ensemble-change"].protocol, PRESETS["bookkeeper-unblocked-adds"].protocol


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


def _proves(protocol, servers, max_log, conjuncts=BOOKKEEPER_INVARIANT):
    result = check_induction(protocol, servers, max_log, conjuncts, name="p",
                             enc=induction_encoding(protocol, servers, max_log))
    return result, (result.init_failed, result.ctis, result.safety_failed, result.undecided) == ([], [], [], [])


def test_ensemble_changes_are_inductive_with_crashes_unbounded():
    # E = 2 of 3 bookies: every crash may change the ensemble, so the fragments are unbounded.
    result, ok = _proves(CHANGES, 3, 2)
    assert ok, [c.describe() for c in result.ctis] + result.safety_failed
    assert len(result.per_action_seconds) == 1 + 7 * 3  # add, then seven actions per bookie (change_ensemble)


def test_striped_ledger_with_a_spare_is_inductive():
    # E = 3 of 4, WQ = AQ = 2: striping and ensemble changes together.
    assert _proves(STRIPED, 4, 1)[1]


def test_issue_1591_breaks_it_from_a_reachable_state():
    # Without blocking add completions the writer keeps a change the metadata refused (recovery began):
    # the writer and the metadata, hence recovery and every reader, name different ensembles.
    proof = induction_proof("bookkeeper-unblocked-adds", UNBLOCKED, broken=True, servers=3, max_log=2)
    assert proof.ok and proof.data["reachable"], proof.detail
    assert proof.data["actions_with_cti"] == ["change_ensemble(S1)", "change_ensemble(S2)", "change_ensemble(S3)"]
    assert "breaks MetadataIsWriters" in proof.detail
    assert "reaches this pre-state in 3 steps" in proof.detail and "add() fence(S1) crash(S1)" in proof.detail


@pytest.mark.parametrize("dropped, fails", [
    ("FencedInRecovery", {"IndNext change_ensemble"}),
    ("MetadataIsWriters", {"IndNext change_ensemble", "IndNext fence", "IndNext recovery_read", "IndNext send_add"}),
    ("FragmentsWithinLac", {"IndNext change_ensemble", "IndNext fence", "IndNext recovery_read",
                            "IndNext send_add"}),
    ("MembersNamed", {"IndNext recovery_read"})])
def test_each_conjunct_about_ensemble_changes_is_needed(dropped, fails):
    result, ok = _proves(CHANGES, 3, 2, tuple(c for c in BOOKKEEPER_INVARIANT if c.name != dropped))
    assert not ok and what_fails(result) == fails


def test_a_metadata_write_that_ignores_recovery_breaks_it(monkeypatch):
    # Planted: the writer's conditional metadata write succeeds although recovery bumped the version, so
    # the writer moves to an ensemble recovery never fenced and goes on acknowledging.
    change = BookKeeperEncoding._effect_change_ensemble

    def planted(self, s, b):
        self.recovering = lambda s: z3.BoolVal(False)  # for this step only
        try:
            return change(self, s, b)
        finally:
            del self.recovering

    monkeypatch.setattr(BookKeeperEncoding, "_effect_change_ensemble", planted)
    result, ok = _proves(CHANGES, 3, 1)
    assert not ok and "change_ensemble" in {c.action[0] for c in result.ctis}


def test_the_keyed_fragments_agree_with_the_model():
    # One slot per first entry stands for the model's list of fragments: a later one from the same entry
    # replaces an earlier one, and the ledger's members keep the replaced ensembles' bookies.
    for protocol, servers in [(CHANGES, 3), (UNBLOCKED, 3), (STRIPED, 4)]:
        # Crashes are unbounded in the encoding.
        model = build_model(protocol, Config(servers=servers, max_log=2, max_crashes=99))
        # S2 is replaced by the spare from entry 1, comes back, and replaces the spare from entry 1 again.
        path = [model.initial_state()]
        for action in [("add",), ("crash", 1), ("change_ensemble", 1), ("restart", 1), ("crash", servers - 1),
                       ("change_ensemble", servers - 1), ("send_add", 0)]:
            assert model.why_not(path[-1], action) is None, action
            path.append(model.apply(path[-1], action))
        assert [first for first, _ in path[-1].ensembles] == [1, 1]
        states = path + sample_states(protocol, Config(servers=servers, max_log=2, max_crashes=3), 40, limit=6000,
                                      seed=3)
        if protocol is UNBLOCKED:
            assert any(s.stored < len(s.ensembles) for s in states)
        assert induction_encoding(protocol, servers, 2).disagreements(model, states) == []


def _conjuncts_on(states, max_log, protocol=SAFE, servers=3):
    evaluator = ConjunctEvaluator(induction_encoding(protocol, servers, max_log), BOOKKEEPER_INVARIANT)
    return {name: state for state in states for name in evaluator.failed(state)}


@pytest.mark.parametrize("protocol", [SAFE, STRIPED, CHANGES])
def test_every_conjunct_holds_on_sampled_reachable_states(protocol):
    states = sample_states(protocol, Config(servers=3, max_log=2, max_crashes=2), 60, limit=6000, seed=2)
    assert any(s.servers[-1].role == "leader" for s in states)  # closed ledgers are in the sample
    assert _conjuncts_on(states, 2, protocol) == {}


@pytest.mark.deep
@pytest.mark.parametrize("protocol, servers, crashes, states", [
    (SAFE, 3, 1, 2597), (STRIPED, 3, 1, 2459),
    # Two crashes: a fragment replaced by a later one from the same entry.
    (CHANGES, 3, 2, 8456), (CHANGES, 4, 1, 2184), (STRIPED, 4, 1, 4881)])
def test_every_conjunct_holds_on_every_reachable_state(protocol, servers, crashes, states):
    sampler = Sampler(10 ** 7)
    Search(build_model(protocol, Config(servers=servers, max_log=1, max_crashes=crashes)),
           CheckOptions(properties=()), [sampler]).run()
    # The whole space (up to renaming bookies for the default ledger; tests/pinned.py).
    assert len(sampler.states) == states
    assert _conjuncts_on(sampler.states, 1, protocol, servers) == {}


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


@pytest.mark.deep
@pytest.mark.parametrize("protocol, servers, max_log", [(CHANGES, 4, 2), (STRIPED, 4, 2), (CHANGES, 3, 3),
                                                        (CHANGES, 5, 2), (SAFE, 5, 2)])
def test_ledgers_with_spares_are_inductive_at_larger_bounds(protocol, servers, max_log):
    result, ok = _proves(protocol, servers, max_log)
    assert ok, [c.describe() for c in result.ctis] + result.safety_failed
