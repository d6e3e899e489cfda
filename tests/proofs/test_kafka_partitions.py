"""Kafka on a network that partitions, in z3 (`KafkaCut` in proofs/kafka.py): the cut and the controller's
fencing of a cut-off broker against `model/kafka_partition.py`; Kafka's invariant, which holds with
partitions unbounded under the fencing (its induction always runs on the partitioned network:
tests/proofs/test_kafka_induction.py); kafka-without-controller-fencing breaking it on a cut-off leader's
own ISR shrink from a state the explorer reaches in three steps (Jepsen's 2013 Kafka analysis); and bounded
model checking with a partition, equal to the explorer's pinned lengths."""

from __future__ import annotations

import random

import pytest
from click.testing import CliRunner

from hwm.model.registry import build_model
from hwm.model.state import Config
from hwm.proofs.bmc import bmc
from hwm.proofs.encodings import encoding_for
from hwm.proofs.kafka_induction import KAFKA_INVARIANT, induction_encoding, induction_proof, reachable_nodes
from hwm.proofs.plan import Plan
from hwm.properties.protocol import PRESETS
from hwm.prove_cli import prove
from tests.pinned import PINNED_PARTITIONS
from tests.proofs.sampling import failing_conjuncts, sample_states

FENCED, UNFENCED = PRESETS["kafka"].protocol, PRESETS["kafka-without-controller-fencing"].protocol
CUT = Config(servers=3, max_generation=3, max_log=2, max_crashes=1, max_partitions=2)
TOUR = Config(servers=3, max_generation=2, max_log=1, max_crashes=0, max_partitions=1)  # the preset's tour bounds


def _path(protocol, actions):
    model = build_model(protocol, CUT)
    states = [model.initial_state()]
    for action in actions:
        assert model.why_not(states[-1], action) is None, action
        states.append(model.apply(states[-1], action))
    return model, states


@pytest.mark.parametrize("protocol", [FENCED, UNFENCED], ids=["kafka", "kafka-without-controller-fencing"])
def test_the_cut_and_the_controllers_fencing_agree_with_the_model(protocol):
    # S1 leads epoch 1 with S2 in sync; the cut takes S1 (its session expires, with the fencing); S2 leads
    # epoch 2; the heal (S1 re-registers and follows S2, with the fencing).
    model, states = _path(protocol, [("elect", 0, (0, 1, 2)), ("write", 0), ("replicate", 0, 1), ("partition", 0),
                                     ("elect", 1, (1, 2)), ("heal",)])
    cut_off, healed = states[4], states[6]
    if protocol.controller_fencing:
        assert not cut_off.servers[0].in_isr and healed.servers[0].role == "follower"
    else:
        assert cut_off.servers[0].in_isr and healed.servers[0].role == "leader"  # a deposed leader, still leading
    # S1 alone in the ISR when the cut takes it: the controller keeps the last member.
    _, last = _path(protocol, [("elect", 0, (0, 1, 2)), ("write", 0), ("shrink_isr", 0, 1), ("shrink_isr", 0, 2),
                               ("partition", 0)])
    assert last[-1].servers[0].in_isr
    sample = last + sample_states(protocol, CUT, 60, limit=30000, seed=1)
    assert any(any(s.cut) for s in sample) and any(s.partitions and not any(s.cut) for s in sample)  # healed
    enc = encoding_for(protocol, 3, 2, max_generation=3, max_crashes=1, max_partitions=2)
    assert enc.disagreements(model, states + sample) == []


def test_without_the_fencing_a_cut_off_leader_breaks_it_from_a_reachable_state():
    proof = induction_proof("kafka-without-controller-fencing", UNFENCED, broken=True)
    assert proof.ok and proof.data["reachable"], proof.detail
    assert {a.split("(")[0] for a in proof.data["actions_with_cti"]} == {"shrink_isr"}
    assert "breaks IsrInLeadersCopy" in proof.detail
    assert "reaches this pre-state in 3 steps" in proof.detail
    assert "elect(S1, {S1}) write(S1, v1) partition(S1)" in proof.detail


def test_bmc_with_a_partition_equals_the_explorers_pinned_lengths():
    pinned = PINNED_PARTITIONS[("kafka-without-controller-fencing", 3, 2, 1, 0, 1, True)]["lengths"]
    properties = ("AcknowledgedWriteKept", "CommittedOnQuorum", "AckedWriteNeverLost", "ReadNeverLost",
                  "ReadNeverTruncated", "HwmNeverTruncated")
    found = bmc(UNFENCED, TOUR, properties, max_depth=8)
    assert {p: r.length for p, r in found.items()} == {p: pinned[p] for p in properties}
    # The cut-off leader S1 shrinks its own ISR copy and acknowledges; the controller elects another.
    steps = found["AcknowledgedWriteKept"].steps
    cut = steps.index("partition(S1)")
    assert steps[cut + 1].startswith("shrink_isr(S1, ") and steps[-1].startswith("elect(") and "S1" not in steps[-1]
    # With the fencing, no violation within as many steps.
    clean = bmc(FENCED, TOUR, ("CommittedOnQuorum", "AcknowledgedWriteKept"), max_depth=8)
    assert {p: r.length for p, r in clean.items()} == {"CommittedOnQuorum": None, "AcknowledgedWriteKept": None}


def test_every_conjunct_holds_on_sampled_reachable_states_with_cuts():
    config = Config(servers=3, max_generation=3, max_log=2, max_crashes=1, max_partitions=1)
    nodes = [node for node, _, _ in reachable_nodes(FENCED, config, max_states=20_000)]
    sample = random.Random(7).sample(nodes, 300)
    assert any(any(state.cut) for state, _ in sample)
    assert any(not s.in_isr and any(state.cut) for state, _ in sample for s in state.servers)  # expired sessions
    assert failing_conjuncts(induction_encoding(FENCED, 3, 2), KAFKA_INVARIANT, sample) == {}


def test_hwm_prove_checks_the_partitioned_presets():
    assert Plan("kafka-without-controller-fencing", UNFENCED).bmc_config.max_partitions == 1
    assert Plan("kafka", FENCED).bmc_config.max_partitions == 0
    result = CliRunner().invoke(prove, ["--protocol", "kafka-without-controller-fencing", "--part", "induction"])
    assert result.exit_code == 1 and "a reachable CTI" in result.stdout, result.output  # it finds the bug
    passed = CliRunner().invoke(prove, ["--protocol", "kafka-without-controller-fencing", "--part", "bmc", "--depth",
                                        "6", "--property", "AcknowledgedWriteKept", "--no-explorer",
                                        "--expect-catalogue"])
    assert passed.exit_code == 0 and "AcknowledgedWriteKept: 6 steps" in passed.stdout, passed.output


@pytest.mark.deep
def test_every_conjunct_holds_on_every_reachable_state_with_a_cut():
    config = Config(servers=3, max_generation=2, max_log=1, max_crashes=1, max_partitions=1)
    nodes = [node for node, _, _ in reachable_nodes(FENCED, config, max_states=10 ** 6)]
    assert len(nodes) == 182_902  # with the commit record, replicas not renamed; 77,892 of them cut
    assert failing_conjuncts(induction_encoding(FENCED, 3, 1), KAFKA_INVARIANT, nodes) == {}
