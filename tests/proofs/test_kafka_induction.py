"""Kafka's inductive invariant (proofs/kafka_induction.py, `KAFKA_INVARIANT`): leader epochs and crashes unbounded,
three replicas, logs of two entries, the safe preset (KIP-320's fencing, every append on disk, min.insync.replicas a
majority, clean elections). It holds initially, every action keeps it, and it implies every `always` property the
encoding states and AcknowledgedWriteKept; without any one conjunct induction fails, naming what breaks; each
conjunct holds on states the explorer reaches; and the broken presets that keep the fencing break it from states the
explorer reaches: kafka-min-insync-1 on `shrink_isr`, kafka-unflushed on `crash`, kafka-unclean-election on `elect`.
The default run checks the invariant and the sampled states; `-m deep` the three broken presets, every conjunct's
need, `hwm prove`'s run of it and every reachable state at log ≤ 1."""

from __future__ import annotations

import random

import pytest
from click.testing import CliRunner

from hwm.model.state import Config
from hwm.proofs.induction import ConjunctEvaluator, check_induction
from hwm.proofs.kafka_induction import KAFKA_INVARIANT, induction_encoding, induction_proof, reachable_nodes
from hwm.properties.protocol import PRESETS
from hwm.prove_cli import prove
from tests.proofs.sampling import what_fails

SAFE = PRESETS["kafka"].protocol


def _induction(conjuncts, servers=3, max_log=2):
    return check_induction(SAFE, servers, max_log, conjuncts, name="kafka",
                           enc=induction_encoding(SAFE, servers, max_log))


def test_kafka_invariant_is_inductive_and_implies_safety():
    result = _induction(KAFKA_INVARIANT)
    assert (result.init_failed, result.ctis, result.safety_failed, result.undecided) == ([], [], [], [])
    # elect: three replicas with four LeaderAndIsr recipient sets each; four actions per replica; six
    # pairs each of shrink_isr and replicate; a partition per replica, and heal (partitions unbounded).
    assert len(result.per_action_seconds) == 12 + 4 * 3 + 6 + 6 + 3 + 1


# Without each conjunct, what fails: "IndNext <action>" (a step of that action breaks the rest) or a
# property the rest no longer implies ("<property>", or "<property> on <action>" for a step property).
NEEDED = {
    "WellFormed": "CommittedOnQuorum",
    "HwmWithinLog": "HwmWithinLog",
    "ReadsAgree": "ReadsAgree",
    "AcksAgree": "AckedWriteNeverLost",
    "EntriesWithinEpoch": "IndNext replicate",
    "EpochsAscend": "IndNext write",  # with logs of three entries: at two the rest imply it
    "LogMatching": "LogMatching",
    "EpochsStartAtOneOffset": "IndNext replicate",
    "LeaderHasOwnEntries": "IndNext write",
    "FetchersHoldPrefixes": "IndNext replicate",
    "FollowedLeadsNoOlderEpoch": "IndNext restart",
    "DeposedLeadersCopyMovedOn": "IndNext write",
    "MatchWithinLog": "IndNext write",
    "MatchMeansHeld": "OneLeaderPerGeneration",
    "HwmIsCurrent": "IndNext write",
    "HwmIsCommitted": "CommittedOnQuorum",
    "AcksAreCommitted": "AcknowledgedWriteKept on elect",
    "ReadsAreCommitted": "ReadNeverLost on elect",
    "IsrHoldsCommits": "AcknowledgedWriteKept on elect",
    "LeadersHoldCommits": "ReadNeverTruncated on replicate",
    "CommitsOnQuorum": "CommittedOnQuorum",
    "IsrInLeadersCopy": "IndNext elect",  # on four replicas: at three the rest imply it
    "LaterEpochsHoldWhatALeaderMayCommit": "IndNext replicate",
}
# Each need costs about 8 s of z3: all are checked with -m deep. The default run checks the invariant
# itself and the sampled states; a wrong or missing conjunct fails those.


def test_needed_names_every_conjunct():
    assert list(NEEDED) == [c.name for c in KAFKA_INVARIANT]


@pytest.mark.deep
@pytest.mark.parametrize("name", list(NEEDED))
def test_each_conjunct_is_needed(name):
    servers = 4 if name == "IsrInLeadersCopy" else 3
    max_log = 3 if name == "EpochsAscend" else 2
    result = _induction(tuple(c for c in KAFKA_INVARIANT if c.name != name), servers=servers, max_log=max_log)
    assert NEEDED[name] in what_fails(result), sorted(what_fails(result))


@pytest.mark.parametrize("name, action, steps, path", [
    pytest.param("kafka-min-insync-1", "shrink_isr(S1, S3) breaks CommitsOnQuorum", 3,
                 "elect(S1, {S1}) write(S1, v1) shrink_isr(S1, S2)", marks=pytest.mark.deep),  # 8 s of z3
    pytest.param("kafka-unflushed", "crash(S1) breaks FetchersHoldPrefixes", 3,
                 "elect(S1, {S1,S2}) write(S1, v1) replicate(S1, S2)", marks=pytest.mark.deep),
    # The ISR's only replica is cut off from the controller, which elects outside the ISR (partitions are
    # in Kafka's induction; without them the path was 7 steps, through a crash of the ISR's last replica).
    pytest.param("kafka-unclean-election", "elect(S3, {S3}) breaks DeposedLeadersCopyMovedOn", 5,
                 "elect(S1, {S1}) write(S1, v1) crash(S2) shrink_isr(S1, S3) partition(S1)", marks=pytest.mark.deep),
])
def test_a_broken_preset_breaks_it_from_a_reachable_state(name, action, steps, path):
    proof = induction_proof(name, PRESETS[name].protocol, broken=True)
    assert proof.ok and proof.data["reachable"], proof.detail
    assert action in proof.detail and f"reaches this pre-state in {steps} steps" in proof.detail
    assert path in proof.detail


def _failed_on(nodes, max_log=2):
    evaluator = ConjunctEvaluator(induction_encoding(SAFE, 3, max_log), KAFKA_INVARIANT)
    return {name: node for node in nodes for name in evaluator.failed(node)}


def test_every_conjunct_holds_on_sampled_reachable_states():
    config = Config(servers=3, max_generation=3, max_log=2, max_crashes=1)
    nodes = [node for node, _, _ in reachable_nodes(SAFE, config, max_states=20_000)]
    sample = random.Random(3).sample(nodes, 300)
    # Deposed leaders, committed entries and reads are in the sample.
    assert any(sum(s.role == "leader" for s in state.servers) == 2 for state, _ in sample)
    assert any(ghost[0][0][0] for _, ghost in sample)
    assert any(state.reads for state, _ in sample)
    assert _failed_on(sample) == {}


@pytest.mark.deep
def test_every_conjunct_holds_on_every_reachable_state():
    config = Config(servers=3, max_generation=3, max_log=1, max_crashes=1)
    nodes = [node for node, _, _ in reachable_nodes(SAFE, config, max_states=10 ** 6)]
    assert len(nodes) == 181_204  # every state with its commit record, replicas not renamed
    assert _failed_on(nodes, max_log=1) == {}


@pytest.mark.deep  # the same z3 work as the first test, through the command
def test_hwm_prove_runs_kafkas_induction():
    result = CliRunner().invoke(prove, ["--protocol", "kafka", "--part", "induction"])
    assert result.exit_code == 0, result.output
    assert f"induction kafka: Inv ({len(KAFKA_INVARIANT)} conjuncts) holds initially" in result.stdout


@pytest.mark.deep
@pytest.mark.parametrize("servers, max_log", [(4, 2), (3, 3)])
def test_on_four_replicas_or_longer_logs_the_invariant_is_inductive(servers, max_log):
    result = _induction(KAFKA_INVARIANT, servers=servers, max_log=max_log)
    assert (result.init_failed, result.ctis, result.safety_failed, result.undecided) == ([], [], [], [])
