"""Raft on a network that partitions, in z3 (`RaftCut` in proofs/partition.py): the cut, check-quorum's step
down and refused votes, and the lease's election timer against `model/partition.py`, and bounded model
checking of the lease presets with `LeaseReadNeverStale` (properties/leases.py), equal to the explorer's
pinned lengths. Raft's inductive invariant has no conjuncts for leases: `hwm prove` runs the other parts
and says so."""

from __future__ import annotations

import pytest
from click.testing import CliRunner

from hwm.model.partition import PartitionState
from hwm.model.registry import build_model
from hwm.model.state import Config, Server
from hwm.proofs.bmc import bmc
from hwm.proofs.encodings import encoding_for
from hwm.proofs.plan import Plan, no_induction, unencoded
from hwm.proofs.symbolic import checked_properties
from hwm.properties.protocol import PRESETS
from hwm.prove_cli import prove
from tests.pinned import PINNED_PARTITIONS
from tests.proofs.sampling import sample_states

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
    assert no_induction(LEASES) and no_induction(RAFT) is None
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


def test_hwm_prove_runs_the_other_parts_of_a_lease_preset():
    result = CliRunner().invoke(prove, ["--protocol", "raft-lease-reads-without-check-quorum", "--max-n", "3",
                                        "--depth", "8"])
    assert result.exit_code == 1, result.output  # it finds the stale read
    assert "no induction for raft-lease-reads-without-check-quorum" in result.stderr
    assert "LeaseReadNeverStale: 8 steps (explorer: 8)" in result.stdout
    refused = CliRunner().invoke(prove, ["--protocol", "raft-lease-reads", "--part", "induction"])
    assert refused.exit_code == 2 and "has no inductive invariant for raft-lease-reads" in refused.stderr
