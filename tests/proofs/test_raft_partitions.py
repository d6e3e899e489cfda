"""Raft on a network that partitions, in z3 (`RaftCut` in proofs/partition.py): the cut, check-quorum's step
down and refused votes, and the lease's election timer against `model/partition.py`, and bounded model
checking of the lease presets with `LeaseReadNeverStale` (properties/leases.py), equal to the explorer's
pinned lengths; raft's invariant with three conjuncts for check-quorum and the lease (`LEASE_INVARIANT`),
which proves raft-lease-reads with partitions unbounded and breaks, from a state the explorer reaches in
two steps, where check-quorum is missing."""

from __future__ import annotations

import random

import pytest
from click.testing import CliRunner

from hwm.model.partition import PartitionState
from hwm.model.registry import build_model
from hwm.model.state import Config, Server
from hwm.proofs.bmc import bmc
from hwm.proofs.encodings import encoding_for
from hwm.proofs.induction import advance_commit_record, check_induction, no_commits
from hwm.proofs.partition import LEASE_INVARIANT, PartitionedEncoding, induction_proof
from hwm.proofs.plan import Plan, unencoded
from hwm.proofs.system_induction import reachable_nodes
from hwm.proofs.symbolic import checked_properties
from hwm.properties.protocol import PRESETS
from hwm.prove_cli import prove
from tests.pinned import PINNED_PARTITIONS
from tests.proofs.sampling import failing_conjuncts, sample_states, what_fails

LEASES, UNCHECKED = PRESETS["raft-lease-reads"].protocol, PRESETS["raft-lease-reads-without-check-quorum"].protocol
RAFT = PRESETS["raft"].protocol
TOUR = Config(servers=3, max_generation=2, max_log=2, max_crashes=0, max_partitions=1)  # the lease presets' tour bounds


@pytest.mark.parametrize("name", ["raft-lease-reads", "raft-lease-reads-without-check-quorum", "raft"])
def test_the_cut_check_quorum_and_the_lease_agree_with_the_model(name):
    protocol = PRESETS[name].protocol
    config = Config(servers=3, max_generation=3, max_log=2, max_crashes=1, max_partitions=2)
    model = build_model(protocol, config)
    # S1 leads with S2's vote, then is cut off: with check_quorum it steps down at once.
    state = model.initial_state()
    path = [state]
    for action in [("elect", 0, (0, 1)), ("write", 0), ("replicate", 0, 1), ("partition", 0)]:
        assert model.why_not(state, action) is None, action
        state = model.apply(state, action)
        path.append(state)
    assert (state.servers[0].role == "leader") == (not protocol.check_quorum)
    # S2 hears leader S1 while S3, a generation ahead, does not: with check_quorum S2 refuses S3 its vote.
    heard = PartitionState((Server(1, "leader", (), 0, True, (0, 0, 0)), Server(1, "follower", (), 0, True, ()),
                            Server(2, "follower", (), 0, True, ())), frozenset(), 0, (), (False,) * 3, 0)
    assert (model.why_not(heard, ("elect", 2, (1, 2))) is None) == (not protocol.check_quorum)
    states = path + [heard] + sample_states(protocol, config, 50, limit=20000, seed=2)
    assert any(any(s.cut) for s in states)
    enc = encoding_for(protocol, 3, 2, max_generation=3, max_crashes=1, max_partitions=2)
    assert enc.partitioned and enc.disagreements(model, states) == []


def test_lease_read_never_stale_is_encoded_for_the_lease_presets():
    assert "LeaseReadNeverStale" in checked_properties(LEASES) and "LeaseReadNeverStale" not in checked_properties(RAFT)
    assert unencoded(LEASES) is None and unencoded(UNCHECKED) is None
    # BMC's default bounds are the preset's tour bounds: a partition and a second entry.
    assert Plan("raft-lease-reads", LEASES).bmc_config == TOUR
    assert Plan("raft-lease-reads", LEASES).bmc_properties[-1] == "LeaseReadNeverStale"


def test_bmc_finds_the_stale_lease_read_in_the_explorers_steps():
    # Without check_quorum a leader cut off from its majority keeps serving reads from its lease.
    pinned = PINNED_PARTITIONS[("raft-lease-reads-without-check-quorum", 3, 2, 2, 0, 1, False)]["lengths"]
    found = bmc(UNCHECKED, TOUR, ("LeaseReadNeverStale", "ReadNeverTruncated", "CommittedOnQuorum"), max_depth=8)
    assert {p: r.length for p, r in found.items()} == {"LeaseReadNeverStale": pinned["LeaseReadNeverStale"],
                                                       "ReadNeverTruncated": None, "CommittedOnQuorum": None}
    assert "partition(" in " ".join(found["LeaseReadNeverStale"].steps)
    clean = bmc(LEASES, TOUR, ("LeaseReadNeverStale",), max_depth=8)
    assert clean["LeaseReadNeverStale"].length is None


def _induction(protocol, conjuncts=LEASE_INVARIANT, max_log=2):
    enc = PartitionedEncoding(protocol, 3, max_log, ghost_commits=True)
    return check_induction(protocol, 3, max_log, conjuncts, name="p", enc=enc)


def test_raft_lease_reads_is_inductive_and_implies_lease_read_never_stale():
    result = _induction(LEASES)
    assert (result.init_failed, result.ctis, result.safety_failed, result.undecided) == ([], [], [], [])
    assert len(result.per_action_seconds) == 27 + 3 + 1  # raft's 27, a partition per server, heal


@pytest.mark.parametrize("dropped, fails", [
    ("LeadersReachAQuorum", {"IndNext elect"}),
    ("LiveLeaderIsNewest", {"LeaseReadNeverStale"}),
    ("LeaderHwmCoversItsCommits", {"LeaseReadNeverStale"})])
def test_each_conjunct_of_the_lease_is_needed(dropped, fails):
    result = _induction(LEASES, tuple(c for c in LEASE_INVARIANT if c.name != dropped))
    assert what_fails(result) == fails


def test_without_check_quorum_a_cut_off_leader_breaks_it_from_a_reachable_state():
    proof = induction_proof("raft-lease-reads-without-check-quorum", UNCHECKED, broken=True)
    assert proof.ok and proof.data["reachable"], proof.detail
    assert "breaks LiveLeaderIsNewest" in proof.detail
    assert "reaches this pre-state in 2 steps" in proof.detail and "partition(S1)" in proof.detail


def test_every_conjunct_holds_on_sampled_reachable_states_with_cuts():
    config = Config(servers=3, max_generation=3, max_log=2, max_crashes=1, max_partitions=1)
    nodes = [node for node, _, _ in reachable_nodes(LEASES, config, no_commits(2), advance_commit_record, 20_000)]
    sample = random.Random(4).sample(nodes, 300)
    assert any(any(state.cut) for state, _ in sample) and any(state.reads for state, _ in sample)
    enc = PartitionedEncoding(LEASES, 3, 2, ghost_commits=True)
    assert failing_conjuncts(enc, LEASE_INVARIANT, sample) == {}


def test_hwm_prove_checks_the_lease_presets():
    # BMC's run of the same (8 steps, the explorer's) is the test above, through `bmc`.
    result = CliRunner().invoke(prove, ["--protocol", "raft-lease-reads-without-check-quorum", "--part", "induction"])
    assert result.exit_code == 1 and "a reachable CTI" in result.stdout, result.output  # it finds the bug
    proved = CliRunner().invoke(prove, ["--protocol", "raft-lease-reads", "--part", "induction"])
    assert proved.exit_code == 0 and "LeaseReadNeverStale" in proved.stdout, proved.output


@pytest.mark.deep
def test_raft_lease_reads_is_inductive_on_four_servers_and_longer_logs():
    for servers, max_log in [(4, 2), (3, 3)]:
        enc = PartitionedEncoding(LEASES, servers, max_log, ghost_commits=True)
        result = check_induction(LEASES, servers, max_log, LEASE_INVARIANT, name="p", enc=enc)
        assert (result.init_failed, result.ctis, result.safety_failed, result.undecided) == ([], [], [], [])
