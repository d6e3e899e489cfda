"""ZAB on a network that partitions, in z3 (proofs/partition.py, `ZabCut` in proofs/zab.py): the cut's
guards and check-quorum's step down against `model/zab_partition.py`, ZAB's invariant with partitions
unbounded for zab-step-down (a cut or a crash takes a leader's quorum, and it goes back to LOOKING), and
bounded model checking with a partition, equal to the explorer's. The leader stepping down buys
availability, not safety, so the invariant is ZAB's own: what it must survive is the step down."""

from __future__ import annotations

import random

import pytest
from click.testing import CliRunner

from hwm.model.registry import build_model
from hwm.model.state import Config
from hwm.proofs.bmc import bmc
from hwm.proofs.encodings import encoding_for
from hwm.proofs.induction import check_induction
from hwm.proofs.plan import Plan, unencoded
from hwm.proofs.zab import ZabCut
from hwm.proofs.zab_induction import (ZAB_INVARIANT, PartitionedZabInductionEncoding, induction_encoding,
                                      reachable_nodes)
from hwm.properties.protocol import PRESETS
from hwm.prove_cli import prove
from tests.proofs.sampling import failing_conjuncts, sample_states

STEP_DOWN, ZAB = PRESETS["zab-step-down"].protocol, PRESETS["zab"].protocol
CUT = Config(servers=3, max_generation=3, max_log=2, max_crashes=1, max_partitions=2)


def _leader_cut_off():
    """elect(S1, {S1,S2}) sync(S1, S2) write(S1): an established leader, one step before partition(S1)."""
    model = build_model(STEP_DOWN, CUT)
    state = model.initial_state()
    for action in [("elect", 0, (0, 1)), ("sync", 0, 1), ("write", 0)]:
        assert model.why_not(state, action) is None, action
        state = model.apply(state, action)
    return model, state


def test_the_cut_and_the_step_down_agree_with_the_model():
    model, state = _leader_cut_off()
    after = model.apply(state, ("partition", 0))
    assert after.servers[0].role == "follower" and after.cut == (True, False, False)  # it stepped down
    states = sample_states(STEP_DOWN, CUT, 60, limit=20000, seed=1) + [state, after]
    assert any(any(s.cut) for s in states) and any(s.partitions == 2 for s in states)
    enc = encoding_for(STEP_DOWN, 3, 2, max_generation=3, max_crashes=1, max_partitions=2)
    assert [a for a in enc.actions if a[0] in ("partition", "heal")] == [("partition", k) for k in range(3)] + [("heal",)]
    assert enc.disagreements(model, states) == []


def test_without_check_quorum_the_cut_only_refuses_steps():
    # Plain ZAB: a partitioned encoding only when the bounds ask for partitions; a cut-off leader stays.
    assert not encoding_for(ZAB, 3, 1, max_generation=2, max_crashes=1).partitioned
    enc = encoding_for(ZAB, 3, 1, max_generation=2, max_crashes=1, max_partitions=1)
    config = Config(servers=3, max_generation=2, max_log=1, max_crashes=1, max_partitions=1)
    assert enc.partitioned and enc.disagreements(build_model(ZAB, config), sample_states(ZAB, config, 40)) == []
    assert type(induction_encoding(ZAB, 3, 2)) is not PartitionedZabInductionEncoding


def test_zab_step_down_is_inductive_with_partitions_unbounded():
    enc = induction_encoding(STEP_DOWN, 3, 2)
    assert isinstance(enc, PartitionedZabInductionEncoding) and enc.max_partitions is None
    result = check_induction(STEP_DOWN, 3, 2, ZAB_INVARIANT, name="zab-step-down", enc=enc)
    assert (result.init_failed, result.ctis, result.safety_failed, result.undecided) == ([], [], [], [])
    assert len(result.per_action_seconds) == 36 + 3 + 1  # ZAB's 36, a partition per server, heal


def test_a_leader_that_forgets_its_epoch_when_it_steps_down_breaks_it(monkeypatch):
    # Planted: stepping down, the leader goes back to the epoch of its last logged entry instead of keeping
    # its currentEpoch (ZooKeeper persists it), so a quorum of the acknowledging epoch may be lost.
    step_down = ZabCut.step_down

    def forgetting(self, t, k):
        u = step_down(self, t, k)
        u.extra["epochs"][k] = self.last_generation(u, k)
        return u

    monkeypatch.setattr(ZabCut, "step_down", forgetting)
    enc = induction_encoding(STEP_DOWN, 3, 2)
    result = check_induction(STEP_DOWN, 3, 2, ZAB_INVARIANT, name="planted", enc=enc)
    assert {c.action[0] for c in result.ctis} >= {"partition", "crash"}


def test_every_conjunct_holds_on_sampled_reachable_states_with_cuts():
    config = Config(servers=3, max_generation=3, max_log=2, max_crashes=1, max_partitions=2)
    nodes = [node for node, _, _ in reachable_nodes(STEP_DOWN, config, max_states=20_000)]
    sample = random.Random(5).sample(nodes, 300)
    assert any(any(state.cut) for state, _ in sample) and any(state.acked for state, _ in sample)
    assert failing_conjuncts(induction_encoding(STEP_DOWN, 3, 2), ZAB_INVARIANT, sample) == {}


def test_bmc_with_a_partition_equals_the_explorer():
    # The tour's bounds for zab-step-down: the explorer finds no violation, nor does BMC.
    config = Config(servers=3, max_generation=2, max_log=1, max_crashes=0, max_partitions=1)
    found = bmc(STEP_DOWN, config, ("ReadNeverTruncated", "CommittedOnQuorum", "AckedWriteNeverLost"), max_depth=7)
    assert {p: r.length for p, r in found.items()} == dict.fromkeys(found, None)


def test_hwm_prove_checks_zab_step_down_with_a_partition():
    assert unencoded(STEP_DOWN) is None
    assert Plan("zab-step-down", STEP_DOWN).bmc_config.max_partitions == 1  # one cut by default
    assert Plan("zab", ZAB).bmc_config.max_partitions == 0
    result = CliRunner().invoke(prove, ["--protocol", "zab-step-down", "--part", "induction"])
    assert result.exit_code == 0 and "epochs, crashes and partitions unbounded" in result.stdout, result.output


@pytest.mark.deep
def test_every_conjunct_holds_on_every_reachable_state_with_a_cut():
    config = Config(servers=3, max_generation=2, max_log=1, max_crashes=1, max_partitions=1)
    nodes = [node for node, _, _ in reachable_nodes(STEP_DOWN, config, max_states=10 ** 6)]
    assert len(nodes) == 33_555  # with the acked_by ghost, servers not renamed; 16,524 of them cut
    assert failing_conjuncts(induction_encoding(STEP_DOWN, 3, 1), ZAB_INVARIANT, nodes) == {}


@pytest.mark.deep
def test_zab_step_down_is_inductive_on_four_servers():
    enc = induction_encoding(STEP_DOWN, 4, 2)
    result = check_induction(STEP_DOWN, 4, 2, ZAB_INVARIANT, name="zab-step-down", enc=enc)
    assert (result.init_failed, result.ctis, result.safety_failed, result.undecided) == ([], [], [], [])
