"""ZAB's inductive invariant (proofs/zab_induction.py, `ZAB_INVARIANT`): epochs and crashes unbounded, three
servers, logs of two entries. It holds initially, every action keeps it, and it implies every `always`
property the encoding states; without any one conjunct induction fails, naming an action that breaks it;
each conjunct holds on states the explorer reaches; and zab-ack-before-persist (ZOOKEEPER-3911) breaks it
on `sync` from a state the explorer reaches in three steps. `-m deep`: that CTI, each conjunct's need, `hwm
prove`'s run of it, every reachable state at the explorer's default bounds, and the proof on four and five servers."""

from __future__ import annotations

import random

import pytest
from click.testing import CliRunner

from hwm.model.registry import build_model
from hwm.model.state import Config
from hwm.proofs.induction import ConjunctEvaluator, check_induction
from hwm.proofs.zab_induction import (ZAB_INVARIANT, acked_by_after, induction_encoding, induction_proof,
                                      reachable_nodes)
from hwm.properties.protocol import PRESETS
from hwm.prove_cli import prove
from tests.proofs.sampling import what_fails

SAFE, BROKEN = PRESETS["zab"].protocol, PRESETS["zab-ack-before-persist"].protocol


def _induction(conjuncts, servers=3, max_log=2):
    return check_induction(SAFE, servers, max_log, conjuncts, name="zab", enc=induction_encoding(SAFE, servers, max_log))


def test_zab_invariant_is_inductive_and_implies_safety():
    result = _induction(ZAB_INVARIANT)
    assert (result.init_failed, result.ctis, result.safety_failed, result.undecided) == ([], [], [], [])
    # elect: three candidates with three voter sets each; four actions per server; six pairs each of
    # replicate and sync; persist per server.
    assert len(result.per_action_seconds) == 9 + 4 * 3 + 6 + 6 + 3


# Without each conjunct, what fails: "IndNext <action>" (some step of that action breaks the rest) or a
# property the rest no longer implies ("<property>", or "<property> on <action>" for a step property).
# These are z3's verdicts per obligation, not the CTIs it happens to pick.
NEEDED = {
    "WellFormed": "IndNext crash",
    "HwmWithinLog": "HwmWithinLog",
    "LoggedBeforeAcknowledged": "HwmNeverTruncated on crash",
    "ReadsAgree": "ReadsAgree",
    "AcksAgree": "AckedWriteNeverLost",
    "OneLeaderPerEpoch": "OneLeaderPerGeneration",
    "GenerationOnQuorum": "IndNext elect",
    "CurrentEpochWithinAccepted": "HwmNeverTruncated on replicate",
    "EntriesWithinEpoch": "IndNext write",
    "GenerationsAscend": "ReadNeverLost on elect",
    "LogMatching": "LogMatching",
    "SameEpochOneHistory": "ReadNeverLost on elect",
    "LeaderIsLongestOfItsEpoch": "IndNext write",
    "LeaderHasOwnEntries": "IndNext write",
    "MatchWithinLog": "IndNext write",
    "MatchMeansHeld": "IndNext replicate",  # on four servers: at three a commit counts only current followers
    "SyncedFollowers": "IndNext replicate",
    "HwmIsCurrent": "IndNext write",
    "HwmIsAcked": "HwmNeverTruncated on sync",
    "ReadsAreAcked": "ReadNeverLost on elect",
    "LaterEpochsHoldAcks": "IndNext sync",
    "AcksOnQuorum": "ReadNeverLost on elect",
    # From five servers on (a leader of an older epoch may count an entry after a later one acknowledged it):
    "AckingLeaderHoldsIt": "IndNext sync",
    "LaterEpochsHoldWhatALeaderMayCommit": "IndNext replicate",
}
# The servers each need shows at (three unless named).
NEEDED_AT = {"MatchMeansHeld": 4, "AckingLeaderHoldsIt": 5, "LaterEpochsHoldWhatALeaderMayCommit": 5}
# Each need costs about 8 s of z3: all are checked with -m deep. The default run checks the invariant
# itself and the sampled states; a wrong or missing conjunct fails those.


def test_needed_names_every_conjunct():
    assert list(NEEDED) == [c.name for c in ZAB_INVARIANT]


@pytest.mark.deep
@pytest.mark.parametrize("name", list(NEEDED))
def test_each_conjunct_is_needed(name):
    result = _induction(tuple(c for c in ZAB_INVARIANT if c.name != name), servers=NEEDED_AT.get(name, 3))
    assert NEEDED[name] in what_fails(result), sorted(what_fails(result))


@pytest.mark.deep  # 6 s of z3; raft's broken presets keep a reachable CTI in the default run (tests/proofs/test_proofs.py)
def test_ack_before_persist_breaks_it_from_a_reachable_state():
    proof = induction_proof("zab-ack-before-persist", BROKEN, broken=True)
    assert proof.ok and proof.data["reachable"], proof.detail
    assert proof.data["actions_with_cti"] == [f"sync({l}, {f})" for l, f in
                                              (("S1", "S2"), ("S1", "S3"), ("S2", "S1"), ("S2", "S3"),
                                               ("S3", "S1"), ("S3", "S2"))]
    assert "sync(S1, S3) breaks LoggedBeforeAcknowledged" in proof.detail
    assert "reaches this pre-state in 3 steps" in proof.detail
    assert "elect(S1, {S1,S2}) sync(S1, S2) write(S1, v1)" in proof.detail


def _failed_on(nodes, max_log=2):
    evaluator = ConjunctEvaluator(induction_encoding(SAFE, 3, max_log), ZAB_INVARIANT)
    return {name: node for node in nodes for name in evaluator.failed(node)}


def test_every_conjunct_holds_on_sampled_reachable_states():
    config = Config(servers=3, max_generation=3, max_log=2, max_crashes=1)
    nodes = [node for node, _, _ in reachable_nodes(SAFE, config, max_states=20_000)]
    sample = random.Random(3).sample(nodes, 300)
    # Established leaders, acknowledged entries of two generations and reads are in the sample.
    assert any(any(m & 0x80 for m in state.synced) for state, _ in sample)
    assert any(len({g for _, g in state.acked}) == 2 for state, _ in sample)
    assert any(state.reads for state, _ in sample)
    assert _failed_on(sample) == {}


@pytest.mark.deep
def test_every_conjunct_holds_on_every_reachable_state():
    config = Config(servers=3, max_generation=3, max_log=1, max_crashes=1)
    nodes = [node for node, _, _ in reachable_nodes(SAFE, config, max_states=10 ** 6)]
    assert len(nodes) == 24_410  # every state with its acked_by ghost, servers not renamed
    assert _failed_on(nodes, max_log=1) == {}


def test_the_invariant_is_not_vacuous():
    # A reachable state with an established leader, an acknowledged entry, a read and a later epoch.
    model = build_model(SAFE, Config(servers=3, max_log=2))
    state, by = model.initial_state(), (0, 0)
    for action in [("elect", 0, (0, 1)), ("sync", 0, 1), ("write", 0), ("replicate", 0, 1), ("read", 0),
                   ("crash", 0), ("elect", 1, (1, 2)), ("sync", 1, 2)]:
        assert model.why_not(state, action) is None, action
        state, by = model.apply(state, action), acked_by_after(by, state, model.apply(state, action))
    assert state.acked and state.reads and by == (1, 0) and state.synced[1] & 0x80
    assert _failed_on([(state, by)]) == {}


@pytest.mark.deep  # the same z3 work as the tests above, through the command
def test_hwm_prove_runs_zabs_induction():
    result = CliRunner().invoke(prove, ["--protocol", "zab", "--part", "induction"])
    assert result.exit_code == 0, result.output
    assert "✓" in result.stdout and "induction zab: Inv (24 conjuncts) holds initially" in result.stdout
    broken = CliRunner().invoke(prove, ["--protocol", "zab-ack-before-persist", "--part", "induction",
                                        "--expect-catalogue"])
    assert broken.exit_code == 0, broken.output
    assert "reachable: a real bug" in broken.stdout


@pytest.mark.deep
def test_on_four_servers_the_invariant_is_inductive():
    result = _induction(ZAB_INVARIANT, servers=4, max_log=2)
    assert (result.init_failed, result.ctis, result.safety_failed, result.undecided) == ([], [], [], [])


@pytest.mark.deep  # about 41 s of z3 at load 1
def test_on_five_servers_the_invariant_is_inductive():
    # A leader of an older epoch may count an entry after a later one acknowledged it, from servers that
    # acknowledged it and moved on: the acked_by slot keeps the lowest epoch, and the last two conjuncts hold.
    result = _induction(ZAB_INVARIANT, servers=5)
    assert (result.init_failed, result.ctis, result.safety_failed, result.undecided) == ([], [], [], [])
    assert len(result.per_action_seconds) == 5 * 11 + 4 * 5 + 20 + 20 + 5
